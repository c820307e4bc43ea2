//! A loader over a mixture: the `source` column against the values
//! returned (sources of disjoint value ranges), proportions over every
//! window of steps, purity, exact resume, elastic resume from 8 hosts to 4,
//! a change of weights at a step, cyclic coverage per source, bad input.

use std::collections::BTreeMap;
use std::sync::Arc;

use loaderx::dataset::{Dataset, RaggedDataset, WriteOptions, write_dataset, write_ragged};
use loaderx::loader::{Batch, DataLoader, LoaderBuilder, LoaderError, Mixture};
use loaderx::sampler::{Allocation, Mode, SamplerError};

/// Source `s`'s record `i` holds `s * BASE + i` (stream "v") and the tokens
/// `s * BASE + i` repeated `i % 5` times (stream "t").
const BASE: i64 = 1_000_000;
const LENS: [usize; 3] = [500, 37, 2000];

struct Fixture {
    _dir: tempfile::TempDir,
    v: Vec<Arc<Dataset>>,
    t: Vec<Arc<RaggedDataset>>,
    /// A dataset of f32 records, of i64 records of shape [2], of ragged
    /// i32 tokens: the wrong kinds for stream "v".
    f32s: Arc<Dataset>,
    pairs: Arc<Dataset>,
    i64_ragged: Arc<RaggedDataset>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let opts = WriteOptions::default();
    let mut v = Vec::new();
    let mut t = Vec::new();
    for (s, &len) in LENS.iter().enumerate() {
        let values: Vec<i64> = (0..len as i64).map(|i| s as i64 * BASE + i).collect();
        let tokens: Vec<Vec<i64>> = values.iter().map(|&x| vec![x; (x % BASE % 5) as usize]).collect();
        let (pv, pt) = (dir.path().join(format!("v{s}")), dir.path().join(format!("t{s}")));
        write_dataset(&pv, &values, &[], &opts).unwrap();
        write_ragged(&pt, &[], &tokens, &opts).unwrap();
        v.push(Arc::new(Dataset::open(&pv).unwrap()));
        t.push(Arc::new(RaggedDataset::open(&pt).unwrap()));
    }
    let p = |n: &str| dir.path().join(n);
    write_dataset(p("f32"), &vec![0f32; 500], &[], &opts).unwrap();
    write_dataset(p("pairs"), &vec![0i64; 1000], &[2], &opts).unwrap();
    write_ragged(p("ragged"), &[], vec![vec![1i64]; 500], &opts).unwrap();
    Fixture {
        f32s: Arc::new(Dataset::open(p("f32")).unwrap()),
        pairs: Arc::new(Dataset::open(p("pairs")).unwrap()),
        i64_ragged: Arc::new(RaggedDataset::open(p("ragged")).unwrap()),
        _dir: dir,
        v,
        t,
    }
}

fn mixture(f: &Fixture, weights: &[f64]) -> Mixture {
    let mut m = Mixture::new(weights.to_vec());
    for s in 0..weights.len() {
        m = m.source([("v", loaderx::loader::Stream::from(f.v[s].clone())), ("t", f.t[s].clone().into())]);
    }
    m
}

fn loader(m: Mixture, batch: usize) -> LoaderBuilder {
    DataLoader::builder().mixture(m).batch_size(batch).num_workers(2).mode(Mode::Cyclic).seed(5)
}

fn take(mut l: DataLoader, steps: usize) -> Vec<Batch> {
    (0..steps).map(|_| l.next_batch().unwrap()).collect()
}

/// The `(source, index)` of each record of a batch.
fn samples(b: &Batch) -> Vec<(u32, u64)> {
    b.source().unwrap().iter().copied().zip(b.indices().iter().copied()).collect()
}

fn per_source_counts(b: &Batch, sources: usize) -> Vec<u64> {
    let mut c = vec![0; sources];
    for &s in b.source().unwrap() {
        c[s as usize] += 1;
    }
    c
}

#[test]
fn the_source_column_names_the_dataset_each_value_came_from() {
    let f = fixture();
    for hosts in [1usize, 4] {
        for host in 0..hosts {
            let l = loader(mixture(&f, &[3.0, 1.0, 2.0]), 48).shard(host, hosts).build().unwrap();
            for b in take(l, 30) {
                let v = b.dense("v").unwrap().as_slice::<i64>().unwrap().to_vec();
                let t = b.ragged("t").unwrap();
                let tokens = t.values.as_slice::<i64>().unwrap();
                assert_eq!(v.len(), 48 / hosts);
                for (k, (s, index)) in samples(&b).into_iter().enumerate() {
                    let want = s as i64 * BASE + index as i64;
                    assert_eq!(v[k], want, "step {} record {k}", b.step());
                    let rows = t.rows(k).unwrap();
                    assert_eq!(tokens[rows.clone()], vec![want; (index % 5) as usize], "tokens of record {k}");
                }
            }
        }
    }
}

#[test]
fn every_window_of_steps_keeps_the_proportions() {
    let f = fixture();
    let weights = [3.0, 1.0, 2.0];
    let bounds: Vec<f64> = {
        let a = Allocation::new(&weights).unwrap();
        (0..3).map(|i| a.bound(i).unwrap()).collect()
    };
    assert!(bounds.iter().all(|&b| b < 2.0), "three sources: below 2, {bounds:?}");
    let batch = 40u64;
    let batches = take(loader(mixture(&f, &weights), batch as usize).build().unwrap(), 150);
    let mut prefix = vec![vec![0u64; 3]];
    for b in &batches {
        let c = per_source_counts(b, 3);
        let last = prefix.last().unwrap();
        prefix.push((0..3).map(|i| last[i] + c[i]).collect());
    }
    for from in 0..batches.len() {
        for to in from + 1..=batches.len() {
            for i in 0..3 {
                let got = (prefix[to][i] - prefix[from][i]) as f64;
                let exact = ((to - from) as u64 * batch) as f64 * weights[i] / 6.0;
                assert!((got - exact).abs() < bounds[i], "steps {from}..{to} source {i}: {got} vs {exact}");
            }
        }
    }
}

#[test]
fn the_same_seed_step_and_weights_give_the_same_batches() {
    let f = fixture();
    let a = take(loader(mixture(&f, &[1.0, 2.0, 1.0]), 32).num_workers(1).build().unwrap(), 25);
    let b = take(loader(mixture(&f, &[1.0, 2.0, 1.0]), 32).num_workers(3).prefetch(2).build().unwrap(), 25);
    assert_eq!(a, b);
    let c = take(loader(mixture(&f, &[1.0, 2.0, 1.0]), 32).seed(6).build().unwrap(), 25);
    for (x, y) in a.iter().zip(&c) {
        assert_eq!(x.source(), y.source(), "which source: (step, weights) alone");
    }
    assert_ne!(a.iter().map(Batch::indices).collect::<Vec<_>>(), c.iter().map(Batch::indices).collect::<Vec<_>>());
}

#[test]
fn a_loader_started_at_a_step_resumes_exactly() {
    let f = fixture();
    let full = take(loader(mixture(&f, &[3.0, 1.0, 2.0]), 24).build().unwrap(), 70);
    for k in [1u64, 33, 69] {
        let resumed = take(loader(mixture(&f, &[3.0, 1.0, 2.0]), 24).start_step(k).build().unwrap(), 70 - k as usize);
        assert_eq!(resumed[..], full[k as usize..], "from step {k}");
    }
}

/// The multiset of `(source, index, value)` of step `step` over `hosts`
/// loaders' batches.
fn union(batches: &[&Batch]) -> BTreeMap<(u32, u64, i64), usize> {
    let mut out = BTreeMap::new();
    for b in batches {
        let v = b.dense("v").unwrap().as_slice::<i64>().unwrap();
        for (k, (s, i)) in samples(b).into_iter().enumerate() {
            *out.entry((s, i, v[k])).or_default() += 1;
        }
    }
    out
}

#[test]
fn a_run_on_eight_hosts_resumes_on_four_with_the_same_samples() {
    let f = fixture();
    let (batch, k, total) = (64usize, 20u64, 35usize);
    let m = || mixture(&f, &[3.0, 1.0, 2.0]);
    let global = take(loader(m(), batch).build().unwrap(), total);
    let run = |hosts: usize, start: u64, steps: usize| -> Vec<Vec<Batch>> {
        (0..hosts).map(|h| take(loader(m(), batch).shard(h, hosts).start_step(start).build().unwrap(), steps)).collect()
    };
    let eight = run(8, 0, k as usize);
    let four = run(4, k, total - k as usize);
    for step in 0..total {
        let hosts: Vec<&Batch> = if (step as u64) < k {
            eight.iter().map(|h| &h[step]).collect()
        } else {
            four.iter().map(|h| &h[step - k as usize]).collect()
        };
        assert!(hosts.iter().all(|b| b.step() == step as u64));
        assert_eq!(union(&hosts), union(&[&global[step]]), "step {step}");
    }
}

#[test]
fn a_change_of_weights_at_a_step_keeps_the_batches_before_it() {
    let f = fixture();
    let (batch, k) = (40usize, 30u64);
    let before = take(loader(mixture(&f, &[3.0, 1.0, 2.0]), batch).build().unwrap(), 100);
    let changed = mixture(&f, &[3.0, 1.0, 2.0]).weights_from(k, [1.0, 1.0, 8.0]);
    let after = take(loader(changed, batch).build().unwrap(), 100);
    assert_eq!(before[..k as usize], after[..k as usize]);
    assert_ne!(before[k as usize], after[k as usize]);
    // From k on: the new weights, over every window.
    let a = Allocation::new(&[1.0, 1.0, 8.0]).unwrap();
    let counts: Vec<Vec<u64>> = after[k as usize..].iter().map(|b| per_source_counts(b, 3)).collect();
    for from in 0..counts.len() {
        let mut got = [0u64; 3];
        for (len, c) in counts[from..].iter().enumerate() {
            for i in 0..3 {
                got[i] += c[i];
                let exact = ((len + 1) * batch) as f64 * [1.0, 1.0, 8.0][i] / 10.0;
                assert!((got[i] as f64 - exact).abs() < a.bound(i).unwrap(), "source {i} from {from}");
            }
        }
    }
    // A run resumed at k with the new schedule is the changed run.
    let changed = mixture(&f, &[3.0, 1.0, 2.0]).weights_from(k, [1.0, 1.0, 8.0]);
    let resumed = take(loader(changed, batch).start_step(k).build().unwrap(), 10);
    assert_eq!(resumed[..], after[k as usize..k as usize + 10]);
}

#[test]
fn each_cyclic_source_covers_its_records_once_a_cycle() {
    let f = fixture();
    let batches = take(loader(mixture(&f, &[1.0, 1.0, 1.0]), 30).build().unwrap(), 120);
    for (source, &len) in LENS.iter().enumerate().take(2) {
        let seen: Vec<u64> =
            batches.iter().flat_map(samples).filter(|(s, _)| *s as usize == source).map(|(_, i)| i).collect();
        assert!(seen.len() >= 2 * len, "source {source}: {} samples", seen.len());
        for cycle in seen.chunks_exact(len) {
            let mut sorted = cycle.to_vec();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..len as u64).collect::<Vec<_>>(), "source {source}");
        }
    }
}

#[test]
fn a_source_may_sample_in_its_own_mode() {
    let f = fixture();
    let m = Mixture::new([1.0, 1.0])
        .source_in_mode([("v", f.v[0].clone())], Mode::Sequential)
        .source([("v", f.v[2].clone())]);
    let batches = take(DataLoader::builder().mixture(m).batch_size(16).mode(Mode::Iid).build().unwrap(), 20);
    let seq: Vec<u64> = batches.iter().flat_map(samples).filter(|(s, _)| *s == 0).map(|(_, i)| i).collect();
    assert_eq!(seq, (0..seq.len() as u64).collect::<Vec<_>>());
    assert_eq!(seq.len(), 160);
}

fn build_err(b: LoaderBuilder) -> LoaderError {
    b.build().unwrap_err()
}

#[test]
fn bad_mixtures_are_refused() {
    let f = fixture();
    let one = |ds: Arc<Dataset>| Mixture::new([1.0, 1.0]).source([("v", f.v[0].clone())]).source([("v", ds)]);
    match build_err(loader(one(f.f32s.clone()), 8)) {
        LoaderError::SourceSchema { source: 1, stream, .. } => assert_eq!(stream, "v"),
        e => panic!("{e}"),
    }
    assert!(matches!(build_err(loader(one(f.pairs.clone()), 8)), LoaderError::SourceSchema { source: 1, .. }));
    let kinds = Mixture::new([1.0, 1.0]).source([("v", f.v[0].clone())]).source([("v", f.i64_ragged.clone())]);
    assert!(matches!(build_err(loader(kinds, 8)), LoaderError::SourceSchema { source: 1, .. }));
    let names = Mixture::new([1.0, 1.0]).source([("v", f.v[0].clone())]).source([("w", f.v[1].clone())]);
    match build_err(loader(names, 8)) {
        LoaderError::SourceStreams { source: 1, expected, got } => {
            assert_eq!((expected, got), (vec!["v".into()], vec!["w".into()]))
        }
        e => panic!("{e}"),
    }
    let extra = Mixture::new([1.0, 1.0])
        .source([("v", f.v[0].clone())])
        .source([("v", loaderx::loader::Stream::from(f.v[1].clone())), ("t", f.t[1].clone().into())]);
    assert!(matches!(build_err(loader(extra, 8)), LoaderError::SourceStreams { source: 1, .. }));
    let uneven = Mixture::new([1.0])
        .source([("v", loaderx::loader::Stream::from(f.v[0].clone())), ("t", f.t[1].clone().into())]);
    assert!(matches!(build_err(loader(uneven, 8)), LoaderError::LengthMismatch(_)));
    assert!(matches!(build_err(loader(Mixture::new([1.0]), 8)), LoaderError::NoSources));
    for w in [0.0, -2.0, f64::NAN, f64::INFINITY] {
        match build_err(loader(mixture(&f, &[1.0, w]), 8)) {
            LoaderError::Sampler(SamplerError::BadWeight { segment: 0, source: 1, .. }) => {}
            e => panic!("{w}: {e}"),
        }
    }
    let short = mixture(&f, &[1.0, 1.0, 1.0]).weights_from(5, [1.0, 1.0]);
    assert!(matches!(
        build_err(loader(short, 8)),
        LoaderError::Sampler(SamplerError::WeightCount { segment: 1, expected: 3, got: 2 })
    ));
    let long = Mixture::new([1.0, 1.0, 1.0]).source([("v", f.v[0].clone())]).source([("v", f.v[1].clone())]);
    assert!(matches!(build_err(loader(long, 8)), LoaderError::Sampler(SamplerError::WeightCount { .. })));
    let back = mixture(&f, &[1.0, 1.0]).weights_from(5, [1.0, 2.0]).weights_from(5, [2.0, 1.0]);
    assert!(matches!(build_err(loader(back, 8)), LoaderError::Sampler(SamplerError::ScheduleOrder { segment: 2, .. })));
    let both = loader(mixture(&f, &[1.0, 1.0]), 8).stream("v", f.v[0].clone());
    assert!(matches!(build_err(both), LoaderError::InvalidArgument(_)));
    let uneven_hosts = loader(mixture(&f, &[1.0, 1.0]), 8).shard(0, 3);
    assert!(matches!(build_err(uneven_hosts), LoaderError::Sampler(SamplerError::ShardsDoNotDivideBatch { .. })));
    // A step past the mixture's sample space is that step's error, not a panic.
    let mut far = loader(mixture(&f, &[1.0, 1.0]), 8).start_step(u64::MAX).build().unwrap();
    assert!(matches!(far.next_batch().unwrap_err(), LoaderError::Sampler(SamplerError::PositionOverflow { .. })));
}

#[test]
fn a_bad_record_of_one_source_is_the_error_of_its_step_naming_the_source() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<i64> = (0..10).collect();
    write_dataset(dir.path(), &values, &[], &WriteOptions::default()).unwrap();
    // Record 10 has the wrong length for the schema's `<i8` scalars.
    loaderx::Zrecord::open(dir.path()).unwrap().append(&[0u8; 4], 1, 4, loaderx::Codec::Raw).unwrap();
    let bad = Arc::new(Dataset::open(dir.path()).unwrap());
    let m = Mixture::new([1.0, 1.0]).source([("v", f.v[0].clone())]).source_in_mode([("v", bad)], Mode::Sequential);
    // Batch 4, two per source: source 1's records 0, 1 | 2, 3 | ... | 10 at step 5.
    let mut l = DataLoader::builder().mixture(m).batch_size(4).num_workers(2).build().unwrap();
    for step in 0..5 {
        assert_eq!(l.next_batch().unwrap().step(), step);
    }
    match l.next_batch().unwrap_err() {
        LoaderError::Gather { step: 5, stream, source: loaderx::dataset::DatasetError::Store(e) } => {
            assert_eq!(stream, "v (source 1)");
            assert!(matches!(e, loaderx::Error::LengthMismatch { index: 10, .. }), "{e}");
        }
        e => panic!("{e}"),
    }
    assert!(matches!(l.next_batch().unwrap_err(), LoaderError::Stopped));
}

#[test]
fn a_transform_sees_the_source_and_packing_works_on_a_mixture() {
    let f = fixture();
    let m = Mixture::new([1.0, 1.0]).source([("t", f.t[0].clone())]).source([("t", f.t[2].clone())]);
    let l = DataLoader::builder()
        .mixture(m)
        .batch_size(32)
        .transform(|b: Batch| {
            assert_eq!(b.source().map(<[u32]>::len), Some(32));
            loaderx::loader::pack_transform("t", 16, false)(b)
        })
        .build()
        .unwrap();
    for b in take(l, 5) {
        assert_eq!(b.source().unwrap().len(), 32, "the source survives the transform");
        let tokens = b.dense("t").unwrap();
        assert_eq!(tokens.shape()[1], 16);
        assert!(b.dense("t_segment_ids").is_some());
    }
}

/// A sharded source (shards of 64 records, fixed and ragged streams) beside
/// a single store: each value is its source's record, and the sharded
/// source covers every record once a cycle, across its shard boundaries.
#[test]
fn a_sharded_source_mixes_with_a_single_store() {
    let f = fixture();
    let dir = tempfile::tempdir().unwrap();
    let opts = WriteOptions { shard_records: Some(64), ..WriteOptions::default() };
    let len = 300usize;
    let values: Vec<i64> = (0..len as i64).map(|i| 9 * BASE + i).collect();
    let tokens: Vec<Vec<i64>> = values.iter().map(|&x| vec![x; (x % BASE % 5) as usize]).collect();
    let (pv, pt) = (dir.path().join("v"), dir.path().join("t"));
    write_dataset(&pv, &values, &[], &opts).unwrap();
    write_ragged(&pt, &[], &tokens, &opts).unwrap();
    let (v, t) = (Arc::new(Dataset::open(&pv).unwrap()), Arc::new(RaggedDataset::open(&pt).unwrap()));
    assert!(v.shards() > 4 && t.shards() > 4, "sharded: {} and {} shards", v.shards(), t.shards());
    let m = Mixture::new(vec![1.0, 1.0])
        .source([("v", loaderx::loader::Stream::from(v)), ("t", t.into())])
        .source([("v", loaderx::loader::Stream::from(f.v[0].clone())), ("t", f.t[0].clone().into())]);
    let batches = take(loader(m, 40).build().unwrap(), 40);
    let base = [9 * BASE, 0];
    for b in &batches {
        let v = b.dense("v").unwrap().as_slice::<i64>().unwrap().to_vec();
        let t = b.ragged("t").unwrap();
        let tokens = t.values.as_slice::<i64>().unwrap();
        for (k, (s, index)) in samples(b).into_iter().enumerate() {
            let want = base[s as usize] + index as i64;
            assert_eq!(v[k], want, "step {} record {k}", b.step());
            assert_eq!(tokens[t.rows(k).unwrap()], vec![want; (index % 5) as usize], "tokens of record {k}");
        }
    }
    let seen: Vec<u64> = batches.iter().flat_map(samples).filter(|(s, _)| *s == 0).map(|(_, i)| i).collect();
    assert!(seen.len() >= 2 * len, "{} samples of the sharded source", seen.len());
    for cycle in seen.chunks_exact(len) {
        let mut sorted = cycle.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..len as u64).collect::<Vec<_>>());
    }
}
