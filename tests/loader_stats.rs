//! The loader's statistics: counts that must add up (batches, bytes), a
//! slow transform seen as transform time and a slow consumer as a full
//! queue, a window as the difference of two snapshots, wait quantiles.

use std::sync::Arc;
use std::time::Duration;

use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
use loaderx::loader::{DataLoader, LoaderBuilder, LoaderStats};

const N: usize = 300;

fn fixture() -> (tempfile::TempDir, Arc<Dataset>) {
    let dir = tempfile::tempdir().unwrap();
    let xs: Vec<f32> = (0..N * 4).map(|v| v as f32).collect();
    write_dataset(dir.path().join("x"), &xs, &[4], &WriteOptions::default()).unwrap();
    let x = Arc::new(Dataset::open(dir.path().join("x")).unwrap());
    (dir, x)
}

fn builder(x: &Arc<Dataset>) -> LoaderBuilder {
    DataLoader::builder().stream("x", x.clone()).batch_size(10).seed(3)
}

#[test]
fn counts_add_up_over_workers_and_batches() {
    let (_dir, x) = fixture();
    let mut loader = builder(&x).num_workers(3).prefetch(4).build().unwrap();
    for _ in 0..20 {
        loader.next_batch().unwrap();
    }
    // Read once the workers are joined: a running worker's batch may be
    // counted in one figure and not yet in another.
    let handle = loader.stats_handle();
    drop(loader);
    let s = handle.stats();
    assert_eq!(s.workers.len(), 3);
    assert_eq!(s.taken, 20);
    assert_eq!(s.waits.iter().sum::<u64>(), 20);
    let produced: u64 = s.workers.iter().map(|w| w.batches).sum();
    // The 20 taken, and at most `prefetch` more in the window.
    assert!((20..=24).contains(&produced), "produced {produced}");
    // Each batch: 10 records of 4 f32.
    assert_eq!(s.bytes(), produced * 10 * 4 * 4);
    assert_eq!(s.in_flight_bytes, (produced - 20) * 160);
    assert!(s.ready <= 4);
    assert!(s.wait <= s.elapsed, "{s:?}");
    for k in 0..3 {
        assert!((0.0..=1.0).contains(&s.busy_fraction(k)));
    }
    assert_eq!(s.busy_fraction(3), 0.0);
}

#[test]
fn a_slow_transform_is_transform_time_and_exposed_wait() {
    let (_dir, x) = fixture();
    let mut loader = builder(&x).num_workers(1).prefetch(1).transform(|b| {
        std::thread::sleep(Duration::from_millis(20));
        Ok(b)
    });
    loader = loader.reuse_buffers(false);
    let mut loader = loader.build().unwrap();
    for _ in 0..5 {
        loader.next_batch().unwrap();
    }
    let s = loader.stats();
    let w = &s.workers[0];
    assert!(w.transform >= Duration::from_millis(20 * 5), "{w:?}");
    assert!(w.transform > w.gather, "{w:?}");
    // One worker, one slot: the consumer waits for nearly every transform.
    assert!(s.wait >= Duration::from_millis(20 * 4), "{s:?}");
    assert!(s.wait_quantile(0.5) >= Duration::from_millis(10), "{:?}", s.wait_quantile(0.5));
    assert!(s.wait_quantile(0.99) >= s.wait_quantile(0.5));
}

#[test]
fn a_slow_consumer_sees_a_full_queue_and_no_wait() {
    let (_dir, x) = fixture();
    let mut loader = builder(&x).num_workers(2).prefetch(3).build().unwrap();
    loader.next_batch().unwrap();
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(50));
        loader.next_batch().unwrap();
    }
    std::thread::sleep(Duration::from_millis(50));
    let s = loader.stats();
    assert_eq!(s.ready, 3, "{s:?}");
    assert!(s.mean_ready() > 2.0, "{}", s.mean_ready());
    let window = s.since(&first_of(&s));
    assert_eq!(window, s, "a window since zero is the whole run");
    // The last five batches were ready when asked for: each waited well under the sleep.
    assert!(s.wait_quantile(0.5) < Duration::from_millis(25), "{:?}", s.wait_quantile(0.5));
}

/// A snapshot of nothing: every counter zero, the gauges `s`'s.
fn first_of(s: &LoaderStats) -> LoaderStats {
    LoaderStats {
        elapsed: Duration::ZERO,
        workers: Vec::new(),
        wait: Duration::ZERO,
        waits: [0; loaderx::loader::WAIT_BUCKETS],
        taken: 0,
        skipped: 0,
        depth_sum: 0,
        ready: s.ready,
        in_flight_bytes: s.in_flight_bytes,
        reads: Default::default(),
    }
}

#[test]
fn a_window_counts_only_its_own_batches() {
    let (_dir, x) = fixture();
    let mut loader = builder(&x).num_workers(2).build().unwrap();
    for _ in 0..7 {
        loader.next_batch().unwrap();
    }
    let before = loader.stats();
    for _ in 0..5 {
        loader.next_batch().unwrap();
    }
    let window = loader.stats().since(&before);
    assert_eq!(window.taken, 5);
    assert_eq!(window.waits.iter().sum::<u64>(), 5);
    assert!(window.elapsed <= loader.stats().elapsed);
}

#[test]
fn wait_quantiles_are_bucket_bounds() {
    let mut waits = [0u64; loaderx::loader::WAIT_BUCKETS];
    waits[0] = 50; // 50 zero waits
    waits[11] = 49; // 1024..2047 ns
    waits[21] = 1; // 1 ms and a bit
    let s = LoaderStats {
        elapsed: Duration::from_secs(1),
        workers: Vec::new(),
        wait: Duration::ZERO,
        waits,
        taken: 100,
        skipped: 0,
        depth_sum: 150,
        ready: 0,
        in_flight_bytes: 0,
        reads: Default::default(),
    };
    assert_eq!(s.wait_quantile(0.5), Duration::ZERO);
    assert_eq!(s.wait_quantile(0.51), Duration::from_nanos(2047));
    assert_eq!(s.wait_quantile(0.99), Duration::from_nanos(2047));
    assert_eq!(s.wait_quantile(1.0), Duration::from_nanos((1 << 21) - 1));
    assert_eq!(s.mean_ready(), 1.5);
}

/// Parses Prometheus text: every sample `(name, labels, value)`, checking
/// each sample's name was declared by a `# TYPE` line before it.
fn parse_prometheus(text: &str) -> Vec<(String, String, f64)> {
    let mut declared: Vec<String> = Vec::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            declared.push(parts.next().unwrap().to_string());
            assert!(matches!(parts.next(), Some("counter" | "gauge" | "histogram")), "{line}");
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("no value: {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((n, l)) => (n, l.strip_suffix('}').unwrap_or_else(|| panic!("labels: {line}"))),
            None => (series, ""),
        };
        assert!(name.starts_with("loaderx_"), "{line}");
        let base = ["_bucket", "_sum", "_count"].iter().fold(name, |n, s| n.strip_suffix(s).unwrap_or(n));
        assert!(declared.iter().any(|d| d == name || d == base), "undeclared: {line}");
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("value: {line}"));
        samples.push((name.to_string(), labels.to_string(), value));
    }
    samples
}

#[test]
fn prometheus_text_parses_and_agrees_with_the_snapshot() {
    let (_dir, x) = fixture();
    let mut loader = builder(&x).num_workers(2).build().unwrap();
    for _ in 0..9 {
        loader.next_batch().unwrap();
    }
    let s = loader.stats();
    assert!(s.workers.iter().map(|w| w.sample).sum::<Duration>() > Duration::ZERO);
    let samples = parse_prometheus(&s.prometheus());
    let one = |name: &str, labels: &str| {
        let found: Vec<f64> = samples.iter().filter(|(n, l, _)| n == name && l == labels).map(|s| s.2).collect();
        assert_eq!(found.len(), 1, "{name}{{{labels}}}");
        found[0]
    };
    assert_eq!(one("loaderx_batches_taken_total", ""), 9.0);
    assert_eq!(one("loaderx_wait_seconds_count", ""), 9.0);
    assert_eq!(one("loaderx_wait_seconds_bucket", "le=\"+Inf\""), 9.0);
    assert_eq!(one("loaderx_read_bytes_total", ""), s.bytes() as f64);
    assert_eq!(one("loaderx_worker_batches_total", "worker=\"1\""), s.workers[1].batches as f64);
    let stage = one("loaderx_stage_seconds_total", "stage=\"transform\"");
    assert!(stage >= 0.0);
    let buckets: Vec<f64> =
        samples.iter().filter(|(n, _, _)| n == "loaderx_wait_seconds_bucket").map(|s| s.2).collect();
    assert_eq!(buckets.len(), loaderx::loader::WAIT_BUCKETS);
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "cumulative buckets: {buckets:?}");
}

#[test]
fn statistics_off_count_nothing_and_change_no_batch() {
    let (_dir, x) = fixture();
    let mut on = builder(&x).num_workers(2).build().unwrap();
    let mut off = builder(&x).num_workers(2).statistics(false).build().unwrap();
    for _ in 0..6 {
        assert_eq!(on.next_batch().unwrap(), off.next_batch().unwrap());
    }
    let s = off.stats();
    assert_eq!((s.taken, s.bytes(), s.wait), (0, 0, Duration::ZERO));
    assert!(s.workers.iter().all(|w| w.batches == 0 && w.busy() == Duration::ZERO));
    assert_eq!(on.stats().taken, 6);
}

#[test]
fn reads_are_split_by_where_the_bytes_came_from() {
    let (dir, x) = fixture();
    // A store read through its mappings (its pages are in memory: just written).
    let mapped = Arc::new(Dataset::open_with(dir.path().join("x"), loaderx::ReadMode::Mapped).unwrap());
    let batched = Arc::new(Dataset::open_with(dir.path().join("x"), loaderx::ReadMode::Batched).unwrap());
    for (data, from_memory) in [(mapped, true), (batched, false)] {
        // Reads before the loader are not its own.
        data.gather(&[0, 1, 2]).unwrap();
        let mut loader = builder(&data).num_workers(2).build().unwrap();
        for _ in 0..12 {
            loader.next_batch().unwrap();
        }
        drop(loader.next_batch().unwrap());
        // Counted once the workers are joined: a worker between its gather
        // and its count is none.
        let handle = loader.stats_handle();
        let running = loader.stats();
        drop(loader);
        let s = handle.stats();
        let produced: u64 = s.workers.iter().map(|w| w.batches).sum();
        let (memory, device) = (s.reads.memory_bytes, s.reads.device_bytes);
        let read = if from_memory { memory } else { device };
        assert_eq!(read, produced * 10 * 4 * 4, "{:?}", s.reads);
        assert_eq!(if from_memory { device } else { memory }, 0, "{:?}", s.reads);
        let gathers = if from_memory { s.reads.memory_gathers } else { s.reads.device_gathers };
        assert_eq!(gathers, produced);
        // A window subtracts reads too.
        let window = s.since(&running).reads;
        assert!(window.memory_bytes + window.device_bytes <= read);
        assert!(s.prometheus().contains("loaderx_store_read_bytes_total{from=\"memory\"}"));
    }
    let _ = x;
}
