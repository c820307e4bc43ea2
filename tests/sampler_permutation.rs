//! The Feistel permutation behind the cyclic mode is a bijection of `0..len`
//! for every length: checked exhaustively with a bitset, over the lengths
//! where cycle-walking and the halves' widths have edges (1, 2, primes,
//! `2^k - 1`, `2^k`, `2^k + 1`) and up to `2^24`.

use loaderx::sampler::Permutation;
use proptest::prelude::*;

/// Panics unless `p` maps `0..len` one-to-one onto `0..len`.
fn assert_bijection(p: &Permutation) {
    let len = p.len();
    let words = usize::try_from(len.div_ceil(64)).unwrap();
    let mut seen = vec![0u64; words];
    for i in 0..len {
        let image = p.get(i).unwrap();
        assert!(image < len, "len {len}: {i} -> {image} is out of range");
        let (word, bit) = ((image / 64) as usize, image % 64);
        assert!(seen[word] & (1 << bit) == 0, "len {len}: {image} is hit twice");
        seen[word] |= 1 << bit;
    }
    // `len` distinct images in `0..len`: onto as well.
    assert_eq!(p.get(len), None);
}

/// Lengths at the edges: tiny, primes, and around powers of two.
fn edge_lengths() -> Vec<u64> {
    let mut lengths = vec![1, 2, 3, 5, 7, 11, 13, 97, 251, 1021, 4093, 65_521, 99_991];
    for k in 2..=17 {
        lengths.extend([(1 << k) - 1, 1 << k, (1 << k) + 1]);
    }
    lengths
}

#[test]
fn bijection_at_every_edge_length() {
    for len in edge_lengths() {
        for key in [0, 1, 0xDEAD_BEEF] {
            assert_bijection(&Permutation::new(len, key).unwrap());
        }
    }
}

#[test]
fn bijection_at_two_to_the_24() {
    // The store's record limit; the bitset is 2 MiB.
    assert_bijection(&Permutation::new(1 << 24, 5).unwrap());
}

#[test]
fn bijection_just_below_and_above_two_to_the_24() {
    // Below: one walk in 2^24; above: a domain of 2^25, about two passes per index.
    assert_bijection(&Permutation::new((1 << 24) - 1, 6).unwrap());
    assert_bijection(&Permutation::new((1 << 24) + 1, 7).unwrap());
}

#[test]
fn domain_is_the_next_power_of_two() {
    let bits = |len| Permutation::new(len, 0).unwrap().domain_bits();
    assert_eq!(bits(1), 0);
    assert_eq!(bits(2), 1);
    assert_eq!(bits(3), 2);
    assert_eq!(bits(1 << 24), 24);
    assert_eq!(bits((1 << 24) + 1), 25);
    assert_eq!(bits(u64::MAX), 64);
}

#[test]
fn huge_lengths_stay_in_range_and_injective_on_a_sample() {
    for len in [(1u64 << 40) + 1, 1 << 41, (1 << 63) + 1, u64::MAX] {
        let p = Permutation::new(len, 3).unwrap();
        let sample: Vec<u64> = (0..4096).chain(len - 4096..len).collect();
        let mut images: Vec<u64> = sample.iter().map(|&i| p.get(i).unwrap()).collect();
        assert!(images.iter().all(|&x| x < len));
        images.sort_unstable();
        images.dedup();
        assert_eq!(images.len(), sample.len(), "len {len}");
        assert_eq!(p.get(len), None);
    }
}

#[test]
fn different_keys_give_different_permutations() {
    let a = Permutation::new(1000, 1).unwrap();
    let b = Permutation::new(1000, 2).unwrap();
    let differ = (0..1000).filter(|&i| a.get(i) != b.get(i)).count();
    assert!(differ > 900, "only {differ} of 1000 images differ");
    // Not the identity either.
    let fixed = (0..1000).filter(|&i| a.get(i) == Some(i)).count();
    assert!(fixed < 10, "{fixed} fixed points");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn bijection_at_edge_lengths_for_any_key(
        len in proptest::sample::select(edge_lengths()),
        key in any::<u64>(),
    ) {
        assert_bijection(&Permutation::new(len, key).unwrap());
    }

    #[test]
    fn bijection_at_any_length_for_any_key(len in 1u64..50_000, key in any::<u64>()) {
        assert_bijection(&Permutation::new(len, key).unwrap());
    }
}
