//! The loader's order: batches in step order whatever the workers' timing,
//! equal across worker counts and prefetch depths, equal to an oracle
//! (the sampler's indices gathered directly), resumable at any step,
//! sharded; configuration errors.

use std::sync::Arc;
use std::time::Duration;

use loaderx::dataset::{Dataset, RaggedDataset, WriteOptions, write_dataset, write_ragged};
use loaderx::loader::{Batch, DataLoader, LoaderBuilder, LoaderError};
use loaderx::sampler::{Mode, Sampler};

const N: usize = 500;
const PER: usize = 6;

struct Fixture {
    _dir: tempfile::TempDir,
    data: Arc<Dataset>,
    label: Arc<Dataset>,
    tokens: Arc<RaggedDataset>,
    floats: Vec<f32>,
    seqs: Vec<Vec<i32>>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let floats: Vec<f32> = (0..N * PER).map(|i| (i as f32 * 0.37).sin()).collect();
    let labels: Vec<i64> = (0..N as i64).collect();
    let seqs: Vec<Vec<i32>> = (0..N).map(|k| (0..(k * 7 % 13) as i32).map(|t| t * 100 + k as i32).collect()).collect();
    let p = |n: &str| dir.path().join(n);
    write_dataset(p("data"), &floats, &[2, 3], &WriteOptions::default()).unwrap();
    write_dataset(p("label"), &labels, &[], &WriteOptions::default()).unwrap();
    write_ragged(p("tokens"), &[], &seqs, &WriteOptions::default()).unwrap();
    let open = |n: &str| Arc::new(Dataset::open(p(n)).unwrap());
    Fixture {
        data: open("data"),
        label: open("label"),
        tokens: Arc::new(RaggedDataset::open(p("tokens")).unwrap()),
        _dir: dir,
        floats,
        seqs,
    }
}

fn builder(f: &Fixture) -> LoaderBuilder {
    DataLoader::builder()
        .stream("data", f.data.clone())
        .stream("label", f.label.clone())
        .stream("tokens", f.tokens.clone())
}

/// The first `n` batches, with a bound on the wait (a hang fails the test).
fn take(mut loader: DataLoader, n: usize) -> Vec<Batch> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let batches: Vec<Batch> = (0..n).map(|_| loader.next_batch().unwrap()).collect();
        let _ = tx.send(batches);
    });
    rx.recv_timeout(Duration::from_secs(60)).expect("the loader hung")
}

/// Checks a batch against the data it claims: its indices' records.
fn check_against_data(f: &Fixture, b: &Batch) {
    let want: Vec<f32> = b.indices().iter().flat_map(|&i| f.floats[i as usize * PER..][..PER].to_vec()).collect();
    let data = b.dense("data").unwrap();
    assert_eq!(data.shape(), &[b.indices().len(), 2, 3]);
    assert_eq!(data.as_slice::<f32>().unwrap(), &want[..]);
    let labels: Vec<i64> = b.indices().iter().map(|&i| i as i64).collect();
    assert_eq!(b.dense("label").unwrap().as_slice::<i64>().unwrap(), &labels[..]);
    let tokens = b.ragged("tokens").unwrap();
    let want: Vec<i32> = b.indices().iter().flat_map(|&i| f.seqs[i as usize].clone()).collect();
    assert_eq!(tokens.values.as_slice::<i32>().unwrap(), &want[..]);
}

#[test]
fn order_is_the_same_for_any_worker_count() {
    let f = fixture();
    for mode in [Mode::Iid, Mode::Cyclic, Mode::Sequential] {
        let sampler = Sampler::new(N as u64, 32, mode, 5).unwrap();
        let reference =
            take(builder(&f).batch_size(32).mode(mode).seed(5).num_workers(1).prefetch(1).build().unwrap(), 40);
        for (k, b) in reference.iter().enumerate() {
            assert_eq!(b.step(), k as u64);
            assert_eq!(b.indices(), &sampler.batch(k as u64)[..], "{mode:?} step {k}");
            check_against_data(&f, b);
        }
        for (workers, prefetch) in [(2, 2), (4, 8), (4, 1), (3, 5)] {
            let got = take(
                builder(&f).batch_size(32).mode(mode).seed(5).num_workers(workers).prefetch(prefetch).build().unwrap(),
                40,
            );
            assert!(got == reference, "{mode:?} workers {workers} prefetch {prefetch}");
        }
        let no_reuse = take(builder(&f).batch_size(32).mode(mode).seed(5).reuse_buffers(false).build().unwrap(), 40);
        assert!(no_reuse == reference, "{mode:?} without buffer reuse");
        for workers in [1, 4] {
            let inline = builder(&f).batch_size(32).mode(mode).seed(5).num_workers(workers).inline_gathers(true);
            assert!(take(inline.build().unwrap(), 40) == reference, "{mode:?} inline gathers, {workers} workers");
        }
    }
}

#[test]
fn order_holds_when_workers_finish_out_of_order() {
    let f = fixture();
    // Even steps take longer: later steps finish first.
    let slow_evens = |b: Batch| {
        if b.step().is_multiple_of(2) {
            std::thread::sleep(Duration::from_millis(3 * (b.step() % 5)));
        }
        Ok(b)
    };
    let got = take(builder(&f).batch_size(16).num_workers(4).transform(slow_evens).build().unwrap(), 30);
    let want = take(builder(&f).batch_size(16).num_workers(1).build().unwrap(), 30);
    assert!(got == want);
}

#[test]
fn resuming_at_step_k_yields_what_iteration_reached() {
    let f = fixture();
    let all = take(builder(&f).batch_size(50).mode(Mode::Cyclic).seed(3).build().unwrap(), 30);
    for k in [0u64, 1, 9, 10, 11, 29] {
        let loader = builder(&f).batch_size(50).mode(Mode::Cyclic).seed(3).start_step(k).build().unwrap();
        assert_eq!(loader.step(), k);
        let resumed = take(loader, 30 - k as usize);
        assert!(resumed[..] == all[k as usize..], "resume at {k}");
    }
    // step() is the checkpoint: what the next call returns.
    let mut loader = builder(&f).batch_size(50).build().unwrap();
    for k in 0..5 {
        assert_eq!(loader.step(), k);
        assert_eq!(loader.next_batch().unwrap().step(), k);
    }
    assert_eq!(loader.step(), 5);
    // Near the end of the step space: steps wrap, nothing panics.
    let mut loader = builder(&f).batch_size(50).start_step(u64::MAX - 1).build().unwrap();
    let steps: Vec<u64> = (0..3).map(|_| loader.next_batch().unwrap().step()).collect();
    assert_eq!(steps, [u64::MAX - 1, u64::MAX, 0]);
}

#[test]
fn shards_split_every_global_batch() {
    let f = fixture();
    let global = take(builder(&f).batch_size(60).seed(9).build().unwrap(), 12);
    for count in [2usize, 3, 4] {
        let hosts: Vec<Vec<Batch>> =
            (0..count).map(|i| take(builder(&f).batch_size(60).seed(9).shard(i, count).build().unwrap(), 12)).collect();
        for (step, g) in global.iter().enumerate() {
            let joined: Vec<u64> = hosts.iter().flat_map(|h| h[step].indices().to_vec()).collect();
            assert_eq!(joined, g.indices(), "{count} hosts, step {step}");
            for h in &hosts {
                assert_eq!(h[step].indices().len(), 60 / count);
                check_against_data(&f, &h[step]);
            }
        }
    }
    // Elastic: a run on 4 hosts resumed at step 5 on 2 hosts sees the same global data.
    let two: Vec<Vec<Batch>> = (0..2)
        .map(|i| take(builder(&f).batch_size(60).seed(9).shard(i, 2).start_step(5).build().unwrap(), 7))
        .collect();
    for (k, g) in global[5..].iter().enumerate() {
        let joined: Vec<u64> = two.iter().flat_map(|h| h[k].indices().to_vec()).collect();
        assert_eq!(joined, g.indices());
    }
}

#[test]
fn a_collate_transform_pads_a_ragged_stream() {
    let f = fixture();
    let collate = |mut b: Batch| {
        let tokens = b.remove("tokens").ok_or("no tokens column")?;
        let padded = tokens.as_ragged().ok_or("tokens is not ragged")?.pad(Some(16), -1i32)?;
        b.insert("lengths", padded.lengths_tensor());
        b.insert("input_ids", padded.values);
        Ok(b)
    };
    let batches = take(builder(&f).batch_size(8).transform(collate).build().unwrap(), 5);
    for b in &batches {
        assert_eq!(b.names().collect::<Vec<_>>(), ["data", "label", "lengths", "input_ids"]);
        let ids = b.dense("input_ids").unwrap();
        assert_eq!(ids.shape(), &[8, 16]);
        for (k, &i) in b.indices().iter().enumerate() {
            let mut want = f.seqs[i as usize].clone();
            want.resize(16, -1);
            assert_eq!(&ids.as_slice::<i32>().unwrap()[k * 16..][..16], &want[..]);
            assert_eq!(b.dense("lengths").unwrap().as_slice::<i64>().unwrap()[k], f.seqs[i as usize].len() as i64);
        }
    }
}

#[test]
fn configuration_errors() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &[0i64; 499], &[], &WriteOptions::default()).unwrap();
    let short = Dataset::open(dir.path()).unwrap();
    let err = builder(&f).stream("short", short).build().unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, LoaderError::LengthMismatch(_)), "{err}");
    for name in ["\"data\": 500", "\"label\": 500", "\"tokens\": 500", "\"short\": 499"] {
        assert!(text.contains(name), "{text}");
    }
    assert!(matches!(DataLoader::builder().build(), Err(LoaderError::NoStreams)));
    assert!(matches!(builder(&f).stream("data", f.label.clone()).build(), Err(LoaderError::DuplicateStream(_))));
    assert!(matches!(builder(&f).batch_size(0).build(), Err(LoaderError::Sampler(_))));
    assert!(matches!(builder(&f).shard(2, 2).build(), Err(LoaderError::Sampler(_))));
    assert!(matches!(builder(&f).batch_size(30).shard(0, 4).build(), Err(LoaderError::Sampler(_))));
    assert!(matches!(builder(&f).num_workers(0).build(), Err(LoaderError::InvalidArgument(_))));
    assert!(matches!(builder(&f).prefetch(0).build(), Err(LoaderError::InvalidArgument(_))));
    let empty = tempfile::tempdir().unwrap();
    write_dataset(empty.path(), &[0f32; 0], &[2], &WriteOptions::default()).unwrap();
    let err = DataLoader::builder().stream("e", Dataset::open(empty.path()).unwrap()).build().unwrap_err();
    assert!(matches!(err, LoaderError::Sampler(_)), "{err}");
    // Fewer records than a batch: every batch holds every record once.
    let mut small = DataLoader::builder().stream("label", f.label.clone()).batch_size(1000).build().unwrap();
    let b = small.next_batch().unwrap();
    let mut seen = b.indices().to_vec();
    seen.sort_unstable();
    assert_eq!(seen, (0..N as u64).collect::<Vec<_>>());
}
