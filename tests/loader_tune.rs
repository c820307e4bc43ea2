//! The tuned loader ([`LoaderBuilder::autotune`]): the same batches as a
//! fixed one whatever the tuner does; workers added when the consumer
//! waits on busy workers, retired when they idle, never over the cores
//! given; the window and the kept buffers within the memory budget; every
//! decision recorded with its reason.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
use loaderx::loader::{Autotune, Batch, DataLoader, LoaderBuilder, LoaderError, TransformError};
use loaderx::sampler::Mode;

const N: usize = 2000;
/// Bytes of one batch: 16 records of 64 f32.
const BATCH_BYTES: u64 = 16 * 64 * 4;

fn dataset() -> (tempfile::TempDir, Arc<Dataset>) {
    let dir = tempfile::tempdir().unwrap();
    let xs: Vec<f32> = (0..N * 64).map(|v| v as f32).collect();
    write_dataset(dir.path().join("x"), &xs, &[64], &WriteOptions::default()).unwrap();
    let d = Arc::new(Dataset::open(dir.path().join("x")).unwrap());
    (dir, d)
}

fn builder(x: &Arc<Dataset>) -> LoaderBuilder {
    DataLoader::builder().stream("x", x.clone()).batch_size(16).mode(Mode::Cyclic).seed(5)
}

/// A transform that sleeps `micros(step)` and keeps the batch.
fn sleeping(micros: fn(u64) -> u64) -> impl Fn(Batch) -> Result<Batch, TransformError> + Send + Sync + 'static {
    move |batch: Batch| {
        std::thread::sleep(Duration::from_micros(micros(batch.step())));
        Ok(batch)
    }
}

fn bytes(batch: &Batch) -> Vec<u8> {
    batch.dense("x").unwrap().as_bytes().to_vec()
}

#[test]
fn tuning_changes_nothing_in_the_batches() {
    let (_dir, x) = dataset();
    // The transform's cost changes during the run, so the tuner acts.
    let cost = |step: u64| if (40..120).contains(&step) { 1500 } else { 50 };
    let mut fixed = builder(&x).num_workers(3).transform(sleeping(cost)).build().unwrap();
    let limits = Autotune { memory_budget: 64 * BATCH_BYTES, max_workers: 4 };
    let mut tuned = builder(&x).autotune(limits).transform(sleeping(cost)).build().unwrap();
    for step in 0..200 {
        let (a, b) = (fixed.next_batch().unwrap(), tuned.next_batch().unwrap());
        assert_eq!((a.step(), b.step()), (step, step));
        assert_eq!(bytes(&a), bytes(&b), "step {step}");
    }
    let tuning = tuned.tuning().unwrap();
    assert!(tuning.decided > 0, "the tuner never acted: {tuning:?}");
    assert!(fixed.tuning().is_none());
}

#[test]
fn it_starts_at_the_cores_given_then_follows_the_cost() {
    let (_dir, x) = dataset();
    let limits = Autotune { memory_budget: 1 << 30, max_workers: 3 };
    // Cheap batches and a slow consumer, then batches that take 2 ms.
    let cost = |step: u64| if step < 300 { 0 } else { 2000 };
    let mut loader = builder(&x).autotune(limits).transform(sleeping(cost)).build().unwrap();
    let (mut least, mut most_after) = (usize::MAX, 0);
    for step in 0..500u64 {
        loader.next_batch().unwrap();
        let setting = loader.tuning().unwrap().setting.unwrap();
        assert!(setting.workers <= 3 && setting.workers <= setting.window, "{setting:?}");
        if step < 300 {
            std::thread::sleep(Duration::from_micros(500));
            least = least.min(setting.workers);
        } else {
            most_after = most_after.max(setting.workers);
        }
    }
    let tuning = loader.tuning().unwrap();
    let first = &tuning.decisions[0];
    assert!(first.reason.contains("start") && first.setting.workers == 3, "{tuning:#?}");
    assert_eq!(least, 1, "idle workers retired: {tuning:#?}");
    assert_eq!(most_after, 3, "workers added back: {tuning:#?}");
    assert!(tuning.decisions.iter().any(|d| d.reason.contains("more workers")), "{tuning:#?}");
    for d in &tuning.decisions[1..] {
        assert!(d.reason.contains('%') || d.reason.contains("budget"), "{d:?}");
    }
}

#[test]
fn idle_workers_are_retired() {
    let (_dir, x) = dataset();
    let limits = Autotune { memory_budget: 1 << 30, max_workers: 4 };
    // A slow phase grows the workers; then a slow consumer leaves them idle.
    let mut loader =
        builder(&x).autotune(limits).transform(sleeping(|s| if s < 100 { 2000 } else { 0 })).build().unwrap();
    let mut grown = 0;
    for step in 0..400u64 {
        loader.next_batch().unwrap();
        grown = grown.max(loader.tuning().unwrap().setting.unwrap().workers);
        if step >= 100 {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
    let tuning = loader.tuning().unwrap();
    assert!(grown >= 2, "{tuning:#?}");
    assert!(tuning.decisions.iter().any(|d| d.reason.contains("idles")), "{tuning:#?}");
    assert!(tuning.setting.unwrap().workers < grown, "{tuning:#?}");
}

#[test]
fn the_window_and_the_kept_buffers_stay_within_the_budget() {
    let (_dir, x) = dataset();
    // Room for four batches: a window of three and one kept buffer.
    let limits = Autotune { memory_budget: 4 * BATCH_BYTES, max_workers: 4 };
    let mut loader = builder(&x).autotune(limits).transform(sleeping(|_| 1000)).build().unwrap();
    let in_flight_max = AtomicU64::new(0);
    for _ in 0..200 {
        let _batch = loader.next_batch().unwrap();
        let tuning = loader.tuning().unwrap();
        if let Some(limit) = tuning.window_limit {
            assert_eq!(limit, 3);
            let setting = tuning.setting.unwrap();
            assert!(setting.window <= limit && setting.workers <= limit, "{tuning:#?}");
        }
        in_flight_max.fetch_max(loader.stats().in_flight_bytes, Relaxed);
    }
    assert!(in_flight_max.load(Relaxed) <= 4 * BATCH_BYTES);
    let tuning = loader.tuning().unwrap();
    assert!(tuning.decisions.iter().any(|d| d.setting.workers == 3), "{tuning:#?}");
}

#[test]
fn a_budget_below_one_batch_still_makes_progress() {
    let (_dir, x) = dataset();
    let limits = Autotune { memory_budget: BATCH_BYTES / 2, max_workers: 2 };
    let mut loader = builder(&x).autotune(limits).build().unwrap();
    for step in 0..100 {
        assert_eq!(loader.next_batch().unwrap().step(), step);
        std::thread::sleep(Duration::from_millis(1)); // periods pass: the tuner measures
    }
    let tuning = loader.tuning().unwrap();
    assert_eq!(tuning.window_limit, Some(1), "{tuning:#?}");
    assert_eq!(tuning.setting.unwrap().window, 1);
}

#[test]
fn zero_limits_are_refused() {
    let (_dir, x) = dataset();
    for limits in [Autotune { memory_budget: 0, max_workers: 2 }, Autotune { memory_budget: 1, max_workers: 0 }] {
        assert!(matches!(builder(&x).autotune(limits).build(), Err(LoaderError::InvalidArgument(_))));
    }
}

#[test]
fn the_decisions_are_in_the_trace_with_their_reasons() {
    let (dir, x) = dataset();
    let path = dir.path().join("trace.json");
    let limits = Autotune { memory_budget: 1 << 30, max_workers: 3 };
    let mut loader = builder(&x).autotune(limits).transform(sleeping(|_| 2000)).trace_path(&path).build().unwrap();
    for _ in 0..100 {
        loader.next_batch().unwrap();
    }
    let tuning = loader.tuning().unwrap();
    loader.close().unwrap();
    let trace: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let marks: Vec<&serde_json::Value> =
        trace["traceEvents"].as_array().unwrap().iter().filter(|e| e["name"] == "tune").collect();
    assert!(tuning.decided > 0);
    assert_eq!(marks.len() as u64, tuning.decided);
    for (mark, decision) in marks.iter().zip(&tuning.decisions) {
        assert_eq!(mark["ph"], "i");
        assert_eq!(mark["args"]["reason"], decision.reason.as_str());
        assert_eq!(mark["args"]["workers"], decision.setting.workers);
        assert_eq!(mark["args"]["step"], decision.step);
    }
}
