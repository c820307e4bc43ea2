//! The sampler on u64 index spaces: lengths around 2^24 (one store's
//! limit), 2^32 and 2^40 (a sharded dataset's), in all three modes, with
//! sharding across hosts, exact resume (seek) and elastic resume (8 hosts
//! to 4). Memory stays O(1) in the length: a sampler of 2^40 + 7 records is
//! built and walked here without a table.

use std::collections::HashSet;

use loaderx::sampler::{Mode, Permutation, Sampler};

const LENS: [u64; 6] = [(1 << 24) + 1000, (1 << 24) - 3, (1 << 32) + 5, (1 << 32) - 1, (1 << 40) + 7, 1 << 40];
const MODES: [Mode; 3] = [Mode::Sequential, Mode::Iid, Mode::Cyclic];

#[test]
fn every_mode_stays_in_range_and_shards_and_resumes_at_every_length() {
    for len in LENS {
        for mode in MODES {
            let global = Sampler::new(len, 256, mode, 11).unwrap();
            for step in [0u64, 1, 7, 1 << 20, (len / 256).saturating_sub(1), len / 256, 1 << 40] {
                let batch = global.batch(step);
                assert_eq!(batch.len(), 256);
                assert!(batch.iter().all(|&i| i < len), "{mode:?} len {len} step {step}");
                if mode != Mode::Iid {
                    let distinct: HashSet<u64> = batch.iter().copied().collect();
                    assert_eq!(distinct.len(), 256, "{mode:?} len {len} step {step}: no repeat in a batch");
                }
                // Host slices of 8 and of 4 concatenate to the global batch.
                for hosts in [8, 4] {
                    let joined: Vec<u64> =
                        (0..hosts).flat_map(|h| global.shard(h, hosts).unwrap().batch(step)).collect();
                    assert_eq!(joined, batch, "{mode:?} len {len} step {step} on {hosts} hosts");
                }
                // Exact resume: an iterator sought to the step gives it.
                let mut it = global.iter();
                it.seek(step);
                assert_eq!(it.next().unwrap(), batch);
                assert_eq!(it.step(), step + 1);
            }
        }
    }
}

#[test]
fn sequential_is_the_circular_window_at_every_length() {
    for len in LENS {
        let s = Sampler::new(len, 100, Mode::Sequential, 0).unwrap();
        for step in [0u64, 3, len / 100, 1 << 38] {
            let start = (u128::from(step) * 100 % u128::from(len)) as u64;
            let want: Vec<u64> = (0..100).map(|j| (start + j) % len).collect();
            assert_eq!(s.batch(step), want, "len {len} step {step}");
        }
    }
}

#[test]
fn cyclic_steps_of_one_cycle_are_disjoint_at_every_length() {
    for len in LENS {
        let s = Sampler::new(len, 512, Mode::Cyclic, 5).unwrap();
        let mut seen = HashSet::new();
        for step in 0..64 {
            for i in s.batch(step) {
                assert!(seen.insert(i), "len {len}: index {i} twice within a cycle");
            }
        }
    }
}

#[test]
fn the_permutation_is_a_bijection_on_samples_at_every_length() {
    // Distinct positions map to distinct indices below len, and the
    // positions near both ends of the domain are reached.
    for len in LENS {
        let p = Permutation::new(len, 3).unwrap();
        let positions: Vec<u64> = (0..4096u64).map(|k| k * (len / 4096)).chain(len - 64..len).collect();
        let images: HashSet<u64> = positions.iter().map(|&x| p.get(x).unwrap()).collect();
        assert_eq!(images.len(), positions.len(), "len {len}");
        assert!(images.iter().all(|&i| i < len));
    }
}

#[test]
fn iid_draws_cover_the_space_evenly_at_every_length() {
    // The mean of uniform draws over 0..len is (len - 1) / 2; over 64 Ki
    // draws its standard error is len / sqrt(12 * 65536) = len / 887.
    for len in LENS {
        let s = Sampler::new(len, 1024, Mode::Iid, 9).unwrap();
        let draws: Vec<u64> = (0..64).flat_map(|step| s.batch(step)).collect();
        let mean = draws.iter().map(|&i| i as f64).sum::<f64>() / draws.len() as f64;
        let expected = (len - 1) as f64 / 2.0;
        assert!((mean - expected).abs() < 5.0 * len as f64 / 887.0, "len {len}: mean {mean}, expected {expected}");
        let top = draws.iter().filter(|&&i| i >= len - len / 16).count();
        assert!((3000..5300).contains(&top), "len {len}: {top} of 65536 draws in the top sixteenth");
    }
}
