//! Statistical tests of the random modes at fixed seeds: the IID draw is
//! uniform and free of modulo bias (chi-square against the critical value at
//! p = 0.001), and the cyclic permutation sends an index anywhere alike.
//!
//! Each statistic is compared with a fixed critical value, and the seeds are
//! fixed, so a test either always passes or always fails. Control tests run
//! the same statistic over deliberately biased generators to show it would
//! catch the bias.

use loaderx::sampler::{Mode, Permutation, Sampler};

/// Pearson's chi-square statistic of `counts` against a uniform expectation.
fn chi_square(counts: &[u64]) -> f64 {
    let total: u64 = counts.iter().sum();
    let expected = total as f64 / counts.len() as f64;
    counts.iter().map(|&c| (c as f64 - expected).powi(2) / expected).sum()
}

/// Critical values of chi-square at p = 0.001 by degrees of freedom.
const CRITICAL_1DF: f64 = 10.828;
const CRITICAL_2DF: f64 = 13.816;
const CRITICAL_9DF: f64 = 27.877;
const CRITICAL_31DF: f64 = 61.098;
const CRITICAL_99DF: f64 = 148.230;

/// The bin of `x` in `0..len` for 16 equal ranges times its parity: 32 bins.
/// Plain modulo over-weights the low ranges; multiply-shift without
/// rejection, at `len` near `2^64 * 2/3`, over-weights one parity.
fn range_parity_bin(x: u64, len: u64) -> usize {
    let range = (u128::from(x) * 16 / u128::from(len)) as usize;
    2 * range + (x % 2) as usize
}

/// A non-power-of-two length near `2^64 * 2/3`, where both biases are huge.
const BIASED_LEN: u64 = 0xAAAA_AAAA_AAAA_AAAB;

/// The draws of the IID sampler: `steps` batches of `batch`.
fn iid_draws(len: u64, batch: usize, steps: u64, seed: u64) -> impl Iterator<Item = u64> {
    let s = Sampler::new(len, batch, Mode::Iid, seed).unwrap();
    (0..steps).flat_map(move |step| s.batch(step))
}

#[test]
fn iid_is_uniform_over_100() {
    for seed in [0, 1, 0x5EED] {
        let mut counts = [0u64; 100];
        for x in iid_draws(100, 1000, 200, seed) {
            counts[x as usize] += 1;
        }
        let stat = chi_square(&counts);
        assert!(stat < CRITICAL_99DF, "seed {seed}: chi-square {stat:.1} >= {CRITICAL_99DF}");
    }
}

#[test]
fn iid_is_uniform_over_3() {
    for seed in [0, 1, 2] {
        let mut counts = [0u64; 3];
        for x in iid_draws(3, 300, 300, seed) {
            counts[x as usize] += 1;
        }
        let stat = chi_square(&counts);
        assert!(stat < CRITICAL_2DF, "seed {seed}: chi-square {stat:.1}");
    }
}

#[test]
fn iid_has_no_modulo_bias_at_a_huge_odd_length() {
    for seed in [0, 1] {
        let mut counts = [0u64; 32];
        for x in iid_draws(BIASED_LEN, 1000, 200, seed) {
            assert!(x < BIASED_LEN);
            counts[range_parity_bin(x, BIASED_LEN)] += 1;
        }
        let stat = chi_square(&counts);
        assert!(stat < CRITICAL_31DF, "seed {seed}: chi-square {stat:.1}");
        // Parity alone, the one multiply-shift without rejection would skew.
        let even: u64 = counts.iter().step_by(2).sum();
        let odd: u64 = counts.iter().skip(1).step_by(2).sum();
        let stat = chi_square(&[even, odd]);
        assert!(stat < CRITICAL_1DF, "seed {seed}: parity chi-square {stat:.1}");
    }
}

/// SplitMix64, the stand-in word source of the controls.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn control_the_statistic_catches_plain_modulo() {
    let mut state = 0;
    let mut counts = [0u64; 32];
    for _ in 0..200_000 {
        counts[range_parity_bin(splitmix(&mut state) % BIASED_LEN, BIASED_LEN)] += 1;
    }
    assert!(chi_square(&counts) > 10.0 * CRITICAL_31DF);
}

#[test]
fn control_the_statistic_catches_multiply_shift_without_rejection() {
    let mut state = 0;
    let mut counts = [0u64; 32];
    for _ in 0..200_000 {
        let x = ((u128::from(splitmix(&mut state)) * u128::from(BIASED_LEN)) >> 64) as u64;
        counts[range_parity_bin(x, BIASED_LEN)] += 1;
    }
    assert!(chi_square(&counts) > 10.0 * CRITICAL_31DF);
}

#[test]
fn cyclic_sends_an_index_anywhere_alike() {
    // Where index 0 lands, over 10 000 keys, in 10 equal ranges of 0..1000.
    let mut counts = [0u64; 10];
    for key in 0..10_000 {
        let image = Permutation::new(1000, key).unwrap().get(0).unwrap();
        counts[(image / 100) as usize] += 1;
    }
    let stat = chi_square(&counts);
    assert!(stat < CRITICAL_9DF, "chi-square {stat:.1}");
}

#[test]
fn cyclic_first_batches_are_uniform_over_cycles() {
    // The first index of each cycle, in 10 bins of 52, at a length whose
    // domain (2^10) makes cycle-walking do real work.
    let s = Sampler::new(520, 1, Mode::Cyclic, 3).unwrap();
    let mut counts = [0u64; 10];
    for cycle in 0..10_000u64 {
        let first = s.batch(cycle * 520)[0];
        counts[(first / 52) as usize] += 1;
    }
    let stat = chi_square(&counts);
    assert!(stat < CRITICAL_9DF, "chi-square {stat:.1}");
}

/// Critical values of chi-square at p = 0.001 (Wilson–Hilferty).
const CRITICAL_81DF: f64 = 126.14;
const CRITICAL_144DF: f64 = 202.23;
const CRITICAL_225DF: f64 = 296.32;

/// Pearson's chi-square of a `rows` x `cols` table of counts against
/// independence (expected cell = row total * column total / total).
fn chi_square_table(counts: &[u64], cols: usize) -> f64 {
    let rows = counts.len() / cols;
    let total: u64 = counts.iter().sum();
    let row_sums: Vec<u64> = counts.chunks(cols).map(|r| r.iter().sum()).collect();
    let col_sums: Vec<u64> = (0..cols).map(|c| (0..rows).map(|r| counts[r * cols + c]).sum()).collect();
    let mut stat = 0.0;
    for r in 0..rows {
        for c in 0..cols {
            let expected = row_sums[r] as f64 * col_sums[c] as f64 / total as f64;
            stat += (counts[r * cols + c] as f64 - expected).powi(2) / expected;
        }
    }
    stat
}

#[test]
fn cyclic_every_position_goes_everywhere_alike() {
    // The whole position x image table over 16 000 keys: at 16 (a domain
    // of its own, no walking) and 13 (walking in a domain of 16), where a
    // weak network's structure would show most.
    for (len, critical) in [(16u64, CRITICAL_225DF), (13, CRITICAL_144DF)] {
        let n = len as usize;
        let mut counts = vec![0u64; n * n];
        for key in 0..16_000 {
            let p = Permutation::new(len, key).unwrap();
            for i in 0..len {
                counts[i as usize * n + p.get(i).unwrap() as usize] += 1;
            }
        }
        let stat = chi_square_table(&counts, n);
        assert!(stat < critical, "len {len}: chi-square {stat:.1} >= {critical}");
    }
}

#[test]
fn cyclic_images_are_independent_of_positions_and_of_each_other() {
    // One permutation of a million (in a domain of 2^20) and one of 20 000
    // (2^15, much walking), through the sampler: 10 x 10 tables of
    // (position, image) and of (image, next image), and the gaps between
    // consecutive images in 100 bins.
    for (len, seed) in [(1_000_000u64, 9), (20_000, 10)] {
        let s = Sampler::new(len, len as usize, Mode::Cyclic, seed).unwrap();
        let images = s.batch(0);
        let bin = |x: u64| (x * 10 / len) as usize;
        let mut by_position = vec![0u64; 100];
        let mut by_previous = vec![0u64; 100];
        let mut gaps = [0u64; 100];
        for (i, pair) in images.windows(2).enumerate() {
            by_position[bin(i as u64) * 10 + bin(pair[0])] += 1;
            by_previous[bin(pair[0]) * 10 + bin(pair[1])] += 1;
            let gap = (pair[1] + len - pair[0]) % len;
            gaps[(gap * 100 / len) as usize] += 1;
        }
        let stat = chi_square_table(&by_position, 10);
        assert!(stat < CRITICAL_81DF, "len {len}: position/image chi-square {stat:.1}");
        let stat = chi_square_table(&by_previous, 10);
        assert!(stat < CRITICAL_81DF, "len {len}: image/next chi-square {stat:.1}");
        let stat = chi_square(&gaps);
        assert!(stat < CRITICAL_99DF, "len {len}: gap chi-square {stat:.1}");
    }
}
