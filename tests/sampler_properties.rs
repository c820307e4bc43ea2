//! Properties of every mode over random configurations: batches are pure
//! functions of `(seed, step)` (seeking equals iterating), indices stay in
//! range, sequential matches its arithmetic oracle, and the cyclic mode never
//! repeats an index within a cycle.

use std::collections::HashSet;

use loaderx::sampler::{Mode, Permutation, Sampler};
use proptest::prelude::*;

fn mode() -> impl Strategy<Value = Mode> {
    proptest::sample::select(vec![Mode::Sequential, Mode::Iid, Mode::Cyclic])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn seek_equals_iteration(
        mode in mode(),
        len in 1u64..3000,
        batch in 1usize..200,
        seed in any::<u64>(),
        k in 0u64..40,
        n in 1usize..10,
    ) {
        let s = Sampler::new(len, batch, mode, seed).unwrap();
        let from_zero: Vec<Vec<u64>> = s.iter().skip(k as usize).take(n).collect();
        let mut it = s.iter();
        it.seek(k);
        let seeked: Vec<Vec<u64>> = it.by_ref().take(n).collect();
        prop_assert_eq!(&seeked, &from_zero);
        prop_assert_eq!(it.step(), k + n as u64);
        let direct: Vec<Vec<u64>> = (k..k + n as u64).map(|step| s.batch(step)).collect();
        prop_assert_eq!(&direct, &from_zero);
        // A second sampler built from the same arguments agrees.
        let again = Sampler::new(len, batch, mode, seed).unwrap();
        prop_assert_eq!(again.batch(k), s.batch(k));
    }

    #[test]
    fn seek_anywhere_equals_the_direct_batch(
        mode in mode(),
        len in 1u64..=u64::MAX,
        batch in 1usize..64,
        seed in any::<u64>(),
        step in any::<u64>(),
    ) {
        let s = Sampler::new(len, batch, mode, seed).unwrap();
        let mut it = s.iter();
        it.seek(step);
        let mut buf = vec![0; s.batch_len()];
        prop_assert_eq!(it.next_into(&mut buf), Ok(step));
        prop_assert_eq!(&buf, &s.batch(step));
        prop_assert!(buf.iter().all(|&i| i < len));
        prop_assert_eq!(buf.len(), batch.min(len as usize));
    }

    #[test]
    fn sequential_matches_its_oracle(
        len in 1u64..=u64::MAX,
        batch in 1usize..64,
        step in any::<u64>(),
    ) {
        let s = Sampler::new(len, batch, Mode::Sequential, 0).unwrap();
        let b = s.batch_len() as u128;
        let oracle: Vec<u64> = (0..b)
            .map(|i| ((u128::from(step) * b + i) % u128::from(len)) as u64)
            .collect();
        prop_assert_eq!(s.batch(step), oracle);
    }

    #[test]
    fn cyclic_never_repeats_within_a_cycle(
        len in 1u64..2000,
        batch in 1usize..300,
        seed in any::<u64>(),
        cycle in 0u64..1_000_000,
    ) {
        let s = Sampler::new(len, batch, Mode::Cyclic, seed).unwrap();
        let per_cycle = s.steps_per_cycle().unwrap();
        prop_assert_eq!(per_cycle, len / s.batch_len() as u64);
        let first = cycle * per_cycle;
        let taken: Vec<u64> = (first..first + per_cycle).flat_map(|step| s.batch(step)).collect();
        let distinct: HashSet<u64> = taken.iter().copied().collect();
        prop_assert_eq!(distinct.len(), taken.len(), "an index repeats in the cycle");
        prop_assert!(taken.iter().all(|&i| i < len));
        // The dropped remainder is exactly len % batch_len.
        prop_assert_eq!(len - taken.len() as u64, len % s.batch_len() as u64);
        if len.is_multiple_of(s.batch_len() as u64) {
            prop_assert_eq!(distinct.len() as u64, len, "a cycle misses an index");
        }
    }

    #[test]
    fn cyclic_batches_slice_one_permutation_per_cycle(
        len in 1u64..1500,
        batch in 1usize..100,
        seed in any::<u64>(),
        cycle in 0u64..1000,
    ) {
        // Oracle: with batch 1, cycle `c` lists its whole permutation, one
        // index per step. Any other batch size reads a prefix of the same
        // permutation, in order, `batch_len` positions per step.
        let one = Sampler::new(len, 1, Mode::Cyclic, seed).unwrap();
        let permutation: Vec<u64> =
            (cycle * len..(cycle + 1) * len).map(|step| one.batch(step)[0]).collect();
        let mut sorted = permutation.clone();
        sorted.sort_unstable();
        prop_assert_eq!(sorted, (0..len).collect::<Vec<_>>());
        let s = Sampler::new(len, batch, Mode::Cyclic, seed).unwrap();
        let per_cycle = s.steps_per_cycle().unwrap();
        let first = cycle * per_cycle;
        let taken: Vec<u64> = (first..first + per_cycle).flat_map(|step| s.batch(step)).collect();
        prop_assert_eq!(&taken[..], &permutation[..taken.len()]);
        // The next cycle is a different permutation unless there are few.
        if len >= 8 {
            let next: Vec<u64> = ((cycle + 1) * len..(cycle + 2) * len)
                .map(|step| one.batch(step)[0])
                .collect();
            prop_assert_ne!(next, permutation);
        }
    }

    #[test]
    fn permutation_get_is_in_range_and_none_outside(
        len in 1u64..=u64::MAX,
        key in any::<u64>(),
        index in any::<u64>(),
    ) {
        let p = Permutation::new(len, key).unwrap();
        match p.get(index) {
            Some(image) => prop_assert!(index < len && image < len),
            None => prop_assert!(index >= len),
        }
    }
}
