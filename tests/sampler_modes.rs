//! The sampler's modes on concrete cases: the reference's observed
//! behaviour, the edges (`len < batch`, huge `len` and steps), and the
//! errors.

use std::collections::HashSet;

use loaderx::sampler::{Mode, Permutation, Sampler, SamplerError};

const MODES: [Mode; 3] = [Mode::Sequential, Mode::Iid, Mode::Cyclic];

fn distinct(indices: &[u64]) -> bool {
    indices.iter().collect::<HashSet<_>>().len() == indices.len()
}

#[test]
fn sequential_wraps_like_the_reference() {
    let s = Sampler::new(10, 4, Mode::Sequential, 0).unwrap();
    assert_eq!(s.batch(0), [0, 1, 2, 3]);
    assert_eq!(s.batch(1), [4, 5, 6, 7]);
    assert_eq!(s.batch(2), [8, 9, 0, 1]);
    assert_eq!(s.batch(3), [2, 3, 4, 5]);
    let first: Vec<Vec<u64>> = s.iter().take(3).collect();
    assert_eq!(first, [vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9, 0, 1]]);
}

#[test]
fn sequential_ignores_the_seed() {
    let a = Sampler::new(10, 4, Mode::Sequential, 1).unwrap();
    let b = Sampler::new(10, 4, Mode::Sequential, 2).unwrap();
    for step in 0..20 {
        assert_eq!(a.batch(step), b.batch(step));
    }
}

#[test]
fn sequential_at_huge_len_and_step_does_not_overflow() {
    let len = (1u64 << 40) + 3;
    let s = Sampler::new(len, 7, Mode::Sequential, 0).unwrap();
    for step in [u64::MAX, u64::MAX - 1, 1 << 50, 12345] {
        let start = (u128::from(step) * 7) % u128::from(len);
        let expected: Vec<u64> = (0..7).map(|i| ((start + i) % u128::from(len)) as u64).collect();
        assert_eq!(s.batch(step), expected, "step {step}");
    }
}

#[test]
fn cyclic_1000_by_300_drops_a_different_100_each_cycle() {
    let s = Sampler::new(1000, 300, Mode::Cyclic, 0).unwrap();
    assert_eq!(s.steps_per_cycle(), Some(3));
    let mut dropped_sets = Vec::new();
    let mut reached = HashSet::new();
    for cycle in 0..10u64 {
        let taken: Vec<u64> = (3 * cycle..3 * cycle + 3).flat_map(|step| s.batch(step)).collect();
        assert_eq!(taken.len(), 900);
        assert!(distinct(&taken), "cycle {cycle} repeats an index");
        assert!(taken.iter().all(|&i| i < 1000));
        reached.extend(taken.iter().copied());
        let taken: HashSet<u64> = taken.into_iter().collect();
        let dropped: Vec<u64> = (0..1000).filter(|i| !taken.contains(i)).collect();
        assert_eq!(dropped.len(), 100);
        dropped_sets.push(dropped);
    }
    assert_ne!(dropped_sets[0], dropped_sets[1], "cycles 0 and 1 dropped the same records");
    for (a, da) in dropped_sets.iter().enumerate() {
        for db in &dropped_sets[a + 1..] {
            assert_ne!(da, db);
        }
    }
    assert_eq!(reached.len(), 1000, "ten cycles should reach every record");
}

#[test]
fn cyclic_covers_every_index_once_per_cycle_when_batch_divides_len() {
    let s = Sampler::new(1200, 100, Mode::Cyclic, 9).unwrap();
    assert_eq!(s.steps_per_cycle(), Some(12));
    for cycle in 0..4u64 {
        let mut taken: Vec<u64> = (12 * cycle..12 * cycle + 12).flat_map(|step| s.batch(step)).collect();
        taken.sort_unstable();
        assert_eq!(taken, (0..1200).collect::<Vec<_>>(), "cycle {cycle}");
    }
    assert_ne!(s.batch(0), s.batch(12), "each cycle must be a fresh permutation");
}

#[test]
fn fewer_records_than_a_batch_gives_every_record_once() {
    for mode in MODES {
        let s = Sampler::new(5, 8, mode, 3).unwrap();
        assert_eq!(s.batch_len(), 5, "{mode:?}");
        for step in 0..50 {
            let mut batch = s.batch(step);
            batch.sort_unstable();
            assert_eq!(batch, [0, 1, 2, 3, 4], "{mode:?} step {step}");
        }
    }
    assert_eq!(Sampler::new(5, 8, Mode::Sequential, 3).unwrap().batch(7), [0, 1, 2, 3, 4]);
    // Shuffled modes shuffle afresh each step.
    for mode in [Mode::Iid, Mode::Cyclic] {
        let s = Sampler::new(5, 8, mode, 3).unwrap();
        let orders: HashSet<Vec<u64>> = (0..50).map(|step| s.batch(step)).collect();
        assert!(orders.len() > 10, "{mode:?} gave only {} orders", orders.len());
    }
}

#[test]
fn a_batch_of_exactly_len_is_not_clamped() {
    let s = Sampler::new(6, 6, Mode::Cyclic, 1).unwrap();
    assert_eq!(s.batch_len(), 6);
    assert_eq!(s.steps_per_cycle(), Some(1));
    let mut batch = s.batch(4);
    batch.sort_unstable();
    assert_eq!(batch, [0, 1, 2, 3, 4, 5]);
}

#[test]
fn a_batch_larger_than_any_len_is_clamped() {
    for mode in MODES {
        let s = Sampler::new(3, usize::MAX, mode, 0).unwrap();
        assert_eq!(s.batch_len(), 3);
        let mut batch = s.batch(u64::MAX);
        batch.sort_unstable();
        assert_eq!(batch, [0, 1, 2]);
    }
}

#[test]
fn a_single_record_is_always_index_zero() {
    for mode in MODES {
        for batch in [1, 4] {
            let s = Sampler::new(1, batch, mode, 5).unwrap();
            assert_eq!(s.batch_len(), 1);
            for step in [0, 1, 99, u64::MAX] {
                assert_eq!(s.batch(step), [0], "{mode:?}");
            }
        }
    }
}

#[test]
fn huge_index_spaces_stay_in_range() {
    for len in [1u64 << 40, (1 << 40) + 1, u64::MAX, (1 << 63) + 1] {
        for mode in MODES {
            let s = Sampler::new(len, 256, mode, 77).unwrap();
            for step in [0, 1, 1 << 20, u64::MAX] {
                let batch = s.batch(step);
                assert_eq!(batch.len(), 256);
                assert!(batch.iter().all(|&i| i < len), "{mode:?} len {len}");
                if mode != Mode::Iid {
                    assert!(distinct(&batch), "{mode:?} len {len} repeats");
                }
            }
        }
    }
}

#[test]
fn different_seeds_give_different_streams() {
    for mode in [Mode::Iid, Mode::Cyclic] {
        let a = Sampler::new(100_000, 64, mode, 1).unwrap();
        let b = Sampler::new(100_000, 64, mode, 2).unwrap();
        for step in [0, 1, 1000] {
            assert_ne!(a.batch(step), b.batch(step), "{mode:?} step {step}");
        }
        let same = Sampler::new(100_000, 64, mode, 1).unwrap();
        assert_eq!(a.batch(17), same.batch(17));
    }
    // Modes sharing a seed share no randomness.
    let iid = Sampler::new(100_000, 64, Mode::Iid, 1).unwrap();
    let cyclic = Sampler::new(100_000, 64, Mode::Cyclic, 1).unwrap();
    assert_ne!(iid.batch(0), cyclic.batch(0));
}

#[test]
fn seek_reproduces_iteration_in_every_mode() {
    for mode in MODES {
        let s = Sampler::new(1000, 300, mode, 11).unwrap();
        let run: Vec<Vec<u64>> = s.iter().take(20).collect();
        for k in [0usize, 1, 2, 3, 7, 19] {
            let mut it = s.iter();
            it.seek(k as u64);
            assert_eq!(it.step(), k as u64);
            let resumed: Vec<Vec<u64>> = it.take(20 - k).collect();
            assert_eq!(resumed, run[k..], "{mode:?} seek {k}");
        }
        let mut it = s.iter();
        assert_eq!(it.nth(5).unwrap(), run[5], "{mode:?} nth");
        assert_eq!(it.step(), 6);
    }
}

#[test]
fn next_into_fills_and_advances() {
    let s = Sampler::new(10, 4, Mode::Sequential, 0).unwrap();
    let mut it = s.iter();
    let mut buf = [0u64; 4];
    assert_eq!(it.next_into(&mut buf), Ok(0));
    assert_eq!(buf, [0, 1, 2, 3]);
    it.seek(2);
    assert_eq!(it.next_into(&mut buf), Ok(2));
    assert_eq!(buf, [8, 9, 0, 1]);
    assert_eq!(it.step(), 3);
    assert_eq!(it.next_into(&mut [0; 3]), Err(SamplerError::OutputLength { expected: 4, got: 3 }));
    assert_eq!(it.step(), 3, "a refused call must not advance");
}

#[test]
fn the_step_after_the_last_wraps_to_zero() {
    let s = Sampler::new(10, 4, Mode::Cyclic, 0).unwrap();
    let mut it = s.iter();
    it.seek(u64::MAX);
    assert_eq!(it.next().unwrap(), s.batch(u64::MAX));
    assert_eq!(it.step(), 0);
    assert_eq!(it.next().unwrap(), s.batch(0));
}

#[test]
fn fill_equals_batch() {
    for mode in MODES {
        let s = Sampler::new(777, 32, mode, 4).unwrap();
        let mut buf = vec![0; 32];
        s.fill(9, &mut buf).unwrap();
        assert_eq!(buf, s.batch(9));
    }
}

#[test]
fn invalid_arguments_are_errors() {
    for mode in MODES {
        assert_eq!(Sampler::new(0, 4, mode, 0), Err(SamplerError::EmptyIndexSpace));
        assert_eq!(Sampler::new(10, 0, mode, 0), Err(SamplerError::ZeroBatch));
        assert_eq!(Sampler::new(0, 0, mode, 0), Err(SamplerError::EmptyIndexSpace));
        let s = Sampler::new(10, 4, mode, 0).unwrap();
        assert_eq!(s.fill(0, &mut [0; 5]), Err(SamplerError::OutputLength { expected: 4, got: 5 }));
        assert_eq!(s.fill(0, &mut []), Err(SamplerError::OutputLength { expected: 4, got: 0 }));
    }
    assert_eq!(Permutation::new(0, 1), Err(SamplerError::EmptyIndexSpace));
    let message = SamplerError::ShardsDoNotDivideBatch { batch_len: 6, count: 4 }.to_string();
    assert!(message.contains('6') && message.contains('4'), "{message}");
}

#[test]
fn accessors_report_the_configuration() {
    let s = Sampler::new(1000, 300, Mode::Cyclic, 42).unwrap();
    assert_eq!((s.len(), s.batch_len(), s.mode(), s.seed()), (1000, 300, Mode::Cyclic, 42));
    assert!(!s.is_empty());
    assert_eq!(Sampler::new(1000, 300, Mode::Iid, 0).unwrap().steps_per_cycle(), None);
    assert_eq!(Sampler::new(1000, 300, Mode::Sequential, 0).unwrap().steps_per_cycle(), None);
    assert_eq!(s.iter().batch_len(), 300);
}
