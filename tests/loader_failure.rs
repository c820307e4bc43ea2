//! A worker's failure (a gather error, a transform error, a transform
//! panic) reaches the consumer as the error of its step, never a hang; and
//! dropping the loader joins every thread promptly, also mid-way, with every
//! slot full, or while a transform is running. Every wait is bounded: a hang
//! fails the test instead of blocking CI.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use loaderx::dataset::{Dataset, DatasetError, WriteOptions, write_dataset};
use loaderx::loader::{Batch, DataLoader, LoaderBuilder, LoaderError};
use loaderx::sampler::Mode;
use loaderx::{Codec, Zrecord};

/// Runs `f` on a thread; fails if it does not finish within `secs`.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs)).expect("timed out: the loader hung")
}

fn labels(dir: &std::path::Path, n: i64) -> Arc<Dataset> {
    let labels: Vec<i64> = (0..n).collect();
    write_dataset(dir, &labels, &[], &WriteOptions::default()).unwrap();
    Arc::new(Dataset::open(dir).unwrap())
}

fn builder(ds: &Arc<Dataset>) -> LoaderBuilder {
    DataLoader::builder().stream("label", ds.clone()).batch_size(10).num_workers(4).mode(Mode::Sequential)
}

/// Pulls until the first error: the steps of the batches before it, the
/// error, and what the next two calls and the iterator return.
fn until_error(mut loader: DataLoader) -> (Vec<u64>, LoaderError, LoaderError, bool) {
    let mut steps = Vec::new();
    let err = loop {
        match loader.next_batch() {
            Ok(b) => steps.push(b.step()),
            Err(e) => break e,
        }
        assert!(steps.len() < 1000, "no error");
    };
    let again = loader.next_batch().unwrap_err();
    let _ = loader.next_batch().unwrap_err();
    let ended = loader.next().is_none();
    (steps, err, again, ended)
}

#[test]
fn a_transform_error_is_the_error_of_its_step() {
    let dir = tempfile::tempdir().unwrap();
    let ds = labels(dir.path(), 100);
    let loader =
        builder(&ds).transform(|b: Batch| if b.step() == 5 { Err("bad batch".into()) } else { Ok(b) }).build().unwrap();
    let (steps, err, again, ended) = within(30, move || until_error(loader));
    assert_eq!(steps, [0, 1, 2, 3, 4]);
    assert!(matches!(&err, LoaderError::Transform { step: 5, source } if source.to_string() == "bad batch"), "{err}");
    assert_eq!(err.step(), Some(5));
    assert!(matches!(again, LoaderError::Stopped));
    assert!(ended, "the iterator ends after an error");
}

#[test]
fn a_transform_panic_is_the_error_of_its_step() {
    let dir = tempfile::tempdir().unwrap();
    let ds = labels(dir.path(), 100);
    let loader = builder(&ds)
        .transform(|b: Batch| {
            if b.step() == 3 {
                panic!("transform exploded at {}", b.step());
            }
            Ok(b)
        })
        .build()
        .unwrap();
    let (steps, err, _, _) = within(30, move || until_error(loader));
    assert_eq!(steps, [0, 1, 2]);
    assert!(matches!(&err, LoaderError::Panic { step: 3, message } if message == "transform exploded at 3"), "{err}");
    // Every step panicking: the first is the one reported.
    let loader = builder(&ds).transform(|_: Batch| -> Result<Batch, _> { panic!("always") }).build().unwrap();
    let (steps, err, _, _) = within(30, move || until_error(loader));
    assert!(steps.is_empty());
    assert!(matches!(err, LoaderError::Panic { step: 0, .. }), "{err}");
}

#[test]
fn a_gather_error_is_the_error_of_its_step() {
    let dir = tempfile::tempdir().unwrap();
    labels(dir.path(), 100);
    // Record 100 has the wrong length for the schema's `<i8` scalars.
    Zrecord::open(dir.path()).unwrap().append(&[0u8; 4], 1, 4, Codec::Raw).unwrap();
    let ds = Arc::new(Dataset::open(dir.path()).unwrap());
    assert_eq!(ds.len(), 101);
    // Sequential, batch 10: step 10 is [100, 0, ..., 8].
    let loader = builder(&ds).build().unwrap();
    let (steps, err, _, _) = within(30, move || until_error(loader));
    assert_eq!(steps, (0..10).collect::<Vec<u64>>());
    match &err {
        LoaderError::Gather {
            step: 10,
            stream,
            source: DatasetError::Store(loaderx::Error::LengthMismatch { index: 100, .. }),
        } => {
            assert_eq!(stream, "label")
        }
        other => panic!("unexpected {other}"),
    }
    assert!(err.to_string().contains("step 10") && err.to_string().contains("label"), "{err}");
}

#[test]
fn dropping_with_every_slot_full_joins_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let ds = labels(dir.path(), 1000);
    let produced = Arc::new(AtomicUsize::new(0));
    let counter = produced.clone();
    let loader = builder(&ds)
        .prefetch(3)
        .transform(move |b: Batch| {
            counter.fetch_add(1, Ordering::SeqCst);
            Ok(b)
        })
        .build()
        .unwrap();
    // Nobody consumes: the workers fill the window and wait.
    let start = Instant::now();
    while produced.load(Ordering::SeqCst) < 3 && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(produced.load(Ordering::SeqCst), 3, "memory bound: at most `prefetch` batches are made ahead");
    let took = within(30, move || {
        let start = Instant::now();
        drop(loader);
        start.elapsed()
    });
    assert!(took < Duration::from_secs(2), "drop took {took:?}");
}

#[test]
fn dropping_mid_way_and_during_a_slow_transform_joins_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let ds = labels(dir.path(), 1000);
    let live = Arc::new(AtomicUsize::new(0));
    let (in_flight, left) = (live.clone(), live.clone());
    let mut loader = builder(&ds)
        .num_workers(3)
        .transform(move |b: Batch| {
            in_flight.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(100));
            in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok(b)
        })
        .build()
        .unwrap();
    for step in 0..3 {
        assert_eq!(loader.next_batch().unwrap().step(), step);
    }
    let took = within(30, move || {
        let start = Instant::now();
        loader.close().unwrap();
        start.elapsed()
    });
    // At most one transform per worker to finish.
    assert!(took < Duration::from_secs(2), "close took {took:?}");
    assert_eq!(left.load(Ordering::SeqCst), 0, "every worker was joined");
    // Dropped at once after build, before any batch; also with inline gathers.
    for inline in [false, true] {
        let quick = builder(&ds).inline_gathers(inline).build().unwrap();
        within(30, move || drop(quick));
    }
    // Dropped after an error.
    let failing = builder(&ds).transform(|_: Batch| Err("no".into())).build().unwrap();
    within(30, move || {
        let mut failing = failing;
        assert!(failing.next_batch().is_err());
        drop(failing);
    });
}

#[test]
fn many_loaders_built_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let ds = labels(dir.path(), 300);
    within(60, move || {
        for k in 0..50u64 {
            let mut loader = builder(&ds).seed(k).mode(Mode::Iid).inline_gathers(k % 4 < 2).build().unwrap();
            if k % 2 == 0 {
                loader.next_batch().unwrap();
            }
        }
    });
}
