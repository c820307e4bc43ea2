//! The loader's trace (`LoaderBuilder::trace_path`): a Chrome Trace Event
//! Format file with one span per stage per step, worker tracks that never
//! overlap, the consumer's waits, named tracks, a cap that drops spans but
//! keeps the file valid, and an unwritable path that is an error from the
//! flush and nothing on drop.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
use loaderx::loader::{DataLoader, LoaderBuilder, TRACE_EVENTS_MAX};
use serde_json::Value;

const STEPS: u64 = 20;

fn fixture() -> (tempfile::TempDir, Arc<Dataset>) {
    let dir = tempfile::tempdir().unwrap();
    let xs: Vec<f32> = (0..200 * 4).map(|v| v as f32).collect();
    write_dataset(dir.path().join("x"), &xs, &[4], &WriteOptions::default()).unwrap();
    let x = Arc::new(Dataset::open(dir.path().join("x")).unwrap());
    (dir, x)
}

fn builder(x: &Arc<Dataset>, trace: &Path) -> LoaderBuilder {
    DataLoader::builder().stream("x", x.clone()).batch_size(8).num_workers(2).prefetch(4).seed(5).trace_path(trace)
}

fn read(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:.200}"))
}

fn events(trace: &Value) -> &Vec<Value> {
    trace["traceEvents"].as_array().expect("traceEvents")
}

/// The complete events named `name`: `(tid, step, ts, dur)`.
fn spans(trace: &Value, name: &str) -> Vec<(u64, u64, f64, f64)> {
    events(trace)
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == name)
        .map(|e| {
            assert_eq!(e["pid"], 1, "{e}");
            let dur = e["dur"].as_f64().unwrap();
            assert!(dur >= 0.0, "{e}");
            (e["tid"].as_u64().unwrap(), e["args"]["step"].as_u64().unwrap(), e["ts"].as_f64().unwrap(), dur)
        })
        .collect()
}

fn thread_names(trace: &Value) -> BTreeMap<u64, String> {
    events(trace)
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| (e["tid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn every_step_has_one_span_per_stage_and_a_wait() {
    let (dir, x) = fixture();
    let path = dir.path().join("trace.json");
    let mut loader = builder(&x, &path).build().unwrap();
    for _ in 0..STEPS {
        loader.next_batch().unwrap();
    }
    loader.close().unwrap();
    let trace = read(&path);
    assert!(!dir.path().join("trace.json.tmp").exists());
    for stage in ["sample", "gather", "transform"] {
        let spans = spans(&trace, stage);
        for step in 0..STEPS {
            let at: Vec<_> = spans.iter().filter(|s| s.1 == step).collect();
            assert_eq!(at.len(), 1, "{stage} of step {step}: {at:?}");
            assert!([1, 2].contains(&at[0].0), "a worker's track: {at:?}");
        }
        // Steps past the 20 taken were at most the window's 4.
        assert!(spans.iter().all(|s| s.1 < STEPS + 4), "{spans:?}");
    }
    // The stages of one step follow each other on one track.
    let (sample, gather, transform) = (spans(&trace, "sample"), spans(&trace, "gather"), spans(&trace, "transform"));
    for step in 0..STEPS {
        let find = |v: &[(u64, u64, f64, f64)]| *v.iter().find(|s| s.1 == step).unwrap();
        let (s, g, t) = (find(&sample), find(&gather), find(&transform));
        assert!(s.0 == g.0 && g.0 == t.0, "step {step}: {s:?} {g:?} {t:?}");
        assert!(s.2 + s.3 <= g.2 + 0.001 && g.2 + g.3 <= t.2 + 0.001, "step {step}: {s:?} {g:?} {t:?}");
    }
    let waits = spans(&trace, "wait");
    assert_eq!(waits.iter().map(|w| w.1).collect::<Vec<_>>(), (0..STEPS).collect::<Vec<_>>());
    assert!(waits.iter().all(|w| w.0 == 0), "the consumer's track");
    let names = thread_names(&trace);
    assert_eq!(names.get(&0).map(String::as_str), Some("consumer"));
    assert_eq!(names.get(&1).map(String::as_str), Some("worker 0"));
    assert_eq!(names.get(&2).map(String::as_str), Some("worker 1"));
    assert_eq!(trace["otherData"]["dropped_events"], 0);
    assert_eq!(trace["otherData"]["events_max"], TRACE_EVENTS_MAX as u64);
}

#[test]
fn the_spans_of_one_worker_do_not_overlap() {
    let (dir, x) = fixture();
    let path = dir.path().join("trace.json");
    let mut loader = builder(&x, &path).build().unwrap();
    for _ in 0..STEPS {
        loader.next_batch().unwrap();
    }
    drop(loader); // the drop writes it too
    let trace = read(&path);
    for tid in [0, 1, 2] {
        let mut track: Vec<_> = ["sample", "gather", "transform", "wait"]
            .iter()
            .flat_map(|n| spans(&trace, n))
            .filter(|s| s.0 == tid)
            .collect();
        if tid == 0 {
            assert_eq!(track.len(), STEPS as usize);
        }
        track.sort_by(|a, b| a.2.total_cmp(&b.2));
        for pair in track.windows(2) {
            // Timestamps are whole nanoseconds: 0.001 us of rounding.
            assert!(pair[0].2 + pair[0].3 <= pair[1].2 + 0.001, "track {tid}: {:?} overlaps {:?}", pair[0], pair[1]);
        }
    }
}

#[test]
fn the_cap_drops_spans_and_the_file_stays_valid() {
    let (dir, x) = fixture();
    let path = dir.path().join("trace.json");
    let mut loader = builder(&x, &path).trace_events_max(10).build().unwrap();
    for _ in 0..STEPS {
        loader.next_batch().unwrap();
    }
    loader.close().unwrap();
    let trace = read(&path);
    let kept = events(&trace).iter().filter(|e| e["ph"] == "X").count() as u64;
    assert_eq!(kept, 10);
    let dropped = trace["otherData"]["dropped_events"].as_u64().unwrap();
    // 20 waits and at least 20 steps of 3 spans were offered.
    assert!(dropped >= 20 + 3 * STEPS - 10, "dropped {dropped}");
    assert_eq!(thread_names(&trace).len(), 3);
}

#[test]
fn a_flush_writes_what_is_there_and_the_close_the_rest() {
    let (dir, x) = fixture();
    let path = dir.path().join("trace.json");
    let mut loader = builder(&x, &path).build().unwrap();
    for _ in 0..5 {
        loader.next_batch().unwrap();
    }
    loader.flush_trace().unwrap();
    assert_eq!(spans(&read(&path), "wait").len(), 5);
    for _ in 5..STEPS {
        loader.next_batch().unwrap();
    }
    loader.close().unwrap();
    assert_eq!(spans(&read(&path), "wait").len(), STEPS as usize);
}

#[test]
fn a_span_from_above_gets_a_track_after_the_workers() {
    let (dir, x) = fixture();
    let path = dir.path().join("trace.json");
    let mut loader = builder(&x, &path).build().unwrap();
    let start = std::time::Instant::now();
    loader.next_batch().unwrap();
    loader.trace_span("python transform", "python_transform", 0, start, std::time::Instant::now());
    loader.close().unwrap();
    let trace = read(&path);
    assert_eq!(thread_names(&trace).get(&3).map(String::as_str), Some("python transform"));
    let extra = spans(&trace, "python_transform");
    assert_eq!(extra.len(), 1);
    assert_eq!((extra[0].0, extra[0].1), (3, 0));
}

#[test]
fn an_unwritable_path_is_an_error_from_the_flush_and_nothing_on_drop() {
    let (dir, x) = fixture();
    let path = dir.path().join("missing").join("trace.json");
    let mut loader = builder(&x, &path).build().unwrap();
    loader.next_batch().unwrap();
    let err = loader.flush_trace().unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    loader.next_batch().unwrap();
    drop(loader); // no panic
    let mut loader = builder(&x, &path).build().unwrap();
    loader.next_batch().unwrap();
    assert!(loader.close().is_err());
    assert!(!dir.path().join("missing").exists());
}

#[test]
fn without_a_trace_path_nothing_is_written_and_the_batches_are_the_same() {
    let (dir, x) = fixture();
    let path = dir.path().join("trace.json");
    let mut traced = builder(&x, &path).build().unwrap();
    let mut plain = DataLoader::builder()
        .stream("x", x.clone())
        .batch_size(8)
        .num_workers(2)
        .prefetch(4)
        .seed(5)
        .statistics(false)
        .build()
        .unwrap();
    for _ in 0..5 {
        assert_eq!(traced.next_batch().unwrap().indices(), plain.next_batch().unwrap().indices());
    }
    plain.flush_trace().unwrap();
    plain.close().unwrap();
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the dataset");
    // Statistics off, the trace still has its spans.
    let mut loader = builder(&x, &path).statistics(false).build().unwrap();
    for _ in 0..3 {
        loader.next_batch().unwrap();
    }
    loader.close().unwrap();
    assert_eq!(spans(&read(&path), "wait").len(), 3);
    assert!(spans(&read(&path), "gather").len() >= 3);
}
