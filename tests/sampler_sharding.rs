//! Multi-host sharding: each host's slice of the global batch, disjoint
//! slices whose concatenation is the global batch, and elastic resume (a run
//! checkpointed on 8 hosts continues on 4 with the same global order).

use loaderx::sampler::{Mode, Sampler, SamplerError, ShardedSampler};
use proptest::prelude::*;

const MODES: [Mode; 3] = [Mode::Sequential, Mode::Iid, Mode::Cyclic];

fn hosts(global: &Sampler, count: usize) -> Vec<ShardedSampler> {
    (0..count).map(|i| global.shard(i, count).unwrap()).collect()
}

/// The global batch of `step` as the concatenation of the hosts' slices.
fn joined(hosts: &[ShardedSampler], step: u64) -> Vec<u64> {
    hosts.iter().flat_map(|h| h.batch(step)).collect()
}

#[test]
fn eight_and_four_hosts_see_the_same_global_order() {
    for mode in MODES {
        let global = Sampler::new(10_000, 64, mode, 21).unwrap();
        let (eight, four) = (hosts(&global, 8), hosts(&global, 4));
        for step in [0, 1, 155, 156, 157, 1 << 40] {
            assert_eq!(joined(&eight, step), global.batch(step), "{mode:?} step {step}");
            assert_eq!(joined(&four, step), global.batch(step), "{mode:?} step {step}");
        }
    }
}

#[test]
fn a_run_checkpointed_on_eight_hosts_resumes_on_four() {
    const K: u64 = 37;
    for mode in MODES {
        let global = Sampler::new(1000, 48, mode, 8).unwrap();
        // The uninterrupted run on 8 hosts, one iterator each.
        let mut eight: Vec<_> = hosts(&global, 8).iter().map(|h| h.iter()).collect();
        let mut reference = Vec::new();
        for _ in 0..K + 25 {
            reference.push(eight.iter_mut().flat_map(|it| it.next().unwrap()).collect::<Vec<u64>>());
        }
        // Checkpoint at step K: the hosts agree on it; resume on 4.
        let mut interrupted: Vec<_> = hosts(&global, 8).iter().map(|h| h.iter()).collect();
        for it in &mut interrupted {
            it.nth(K as usize - 1);
        }
        let checkpoint = interrupted[0].step();
        assert!(interrupted.iter().all(|it| it.step() == checkpoint));
        assert_eq!(checkpoint, K);
        let mut four: Vec<_> = hosts(&global, 4)
            .iter()
            .map(|h| {
                let mut it = h.iter();
                it.seek(checkpoint);
                it
            })
            .collect();
        for (step, expected) in reference.iter().enumerate().skip(K as usize) {
            let got: Vec<u64> = four.iter_mut().flat_map(|it| it.next().unwrap()).collect();
            assert_eq!(&got, expected, "{mode:?} step {step}");
        }
    }
}

#[test]
fn each_host_gets_an_equal_contiguous_slice() {
    let global = Sampler::new(10, 4, Mode::Sequential, 0).unwrap();
    let two = hosts(&global, 2);
    assert_eq!(two[0].batch(2), [8, 9]);
    assert_eq!(two[1].batch(2), [0, 1]);
    assert_eq!(two[1].batch_len(), 2);
    assert_eq!((two[1].index(), two[1].count()), (1, 2));
    assert_eq!(two[1].global(), &global);
    let mut buf = [0; 2];
    two[1].fill(2, &mut buf).unwrap();
    assert_eq!(buf, [0, 1]);
    assert_eq!(two[1].fill(2, &mut [0; 4]), Err(SamplerError::OutputLength { expected: 2, got: 4 }));
    let mut it = two[1].iter();
    it.seek(2);
    assert_eq!(it.next().unwrap(), [0, 1]);
}

#[test]
fn one_host_is_the_whole_batch() {
    let global = Sampler::new(1000, 30, Mode::Cyclic, 2).unwrap();
    let solo = global.shard(0, 1).unwrap();
    assert_eq!(solo.batch(12), global.batch(12));
}

#[test]
fn invalid_shards_are_errors() {
    let global = Sampler::new(1000, 48, Mode::Iid, 0).unwrap();
    assert_eq!(global.shard(0, 0), Err(SamplerError::ZeroShards));
    assert_eq!(global.shard(4, 4), Err(SamplerError::ShardIndexOutOfRange { index: 4, count: 4 }));
    assert_eq!(global.shard(usize::MAX, 3), Err(SamplerError::ShardIndexOutOfRange { index: usize::MAX, count: 3 }));
    assert_eq!(global.shard(0, 5), Err(SamplerError::ShardsDoNotDivideBatch { batch_len: 48, count: 5 }));
    assert_eq!(global.shard(0, 96), Err(SamplerError::ShardsDoNotDivideBatch { batch_len: 48, count: 96 }));
    // The effective batch counts: 6 records, batch 8, so 6 per step.
    let small = Sampler::new(6, 8, Mode::Cyclic, 0).unwrap();
    assert_eq!(small.shard(0, 4), Err(SamplerError::ShardsDoNotDivideBatch { batch_len: 6, count: 4 }));
    assert!(small.shard(0, 3).is_ok());
}

fn mode() -> impl Strategy<Value = Mode> {
    proptest::sample::select(MODES.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn shards_are_disjoint_slices_whose_union_is_the_global_batch(
        mode in mode(),
        len in 1u64..5000,
        per_host in 1usize..20,
        count in 1usize..9,
        step in any::<u64>(),
        seed in any::<u64>(),
    ) {
        let global = Sampler::new(len, per_host * count, mode, seed).unwrap();
        let batch_len = global.batch_len();
        prop_assume!(batch_len.is_multiple_of(count));
        let hosts = hosts(&global, count);
        let slices: Vec<Vec<u64>> = hosts.iter().map(|h| h.batch(step)).collect();
        prop_assert!(slices.iter().all(|s| s.len() == batch_len / count));
        prop_assert_eq!(slices.concat(), global.batch(step));
        if mode != Mode::Iid || per_host * count > batch_len {
            // Without replacement, distinct positions hold distinct indices,
            // so the slices are disjoint as sets too.
            let mut all = slices.concat();
            all.sort_unstable();
            all.dedup();
            prop_assert_eq!(all.len(), batch_len);
        }
    }
}
