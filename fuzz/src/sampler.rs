//! `sampler`: arbitrary (length, batch, mode, seed, step, shard index and
//! count). No panic; every index in range; the documented shape of each mode
//! (sequential: the sliding window; fewer records than a batch: each record
//! once; cyclic: no index twice within a cycle, every index once when the
//! batch divides the length); `fill`, `batch`, iteration, `seek` and `nth`
//! agree (seek equals iteration); shards are exactly the slices of the global
//! batch; the permutation is a bijection. Then, from the bytes left, a
//! mixture: arbitrary weights (refused unless finite and positive), sample
//! numbers and steps; counts that sum to `n` and grow by one source a
//! sample, draws whose hosts' shares make the global one, indices in range.

use std::collections::BTreeSet;

use loaderx::sampler::{Allocation, MixedSampler, Mode, Permutation, Sampler, SamplerError};

use crate::input::In;

/// Lengths up to this are checked exhaustively (bijections, whole cycles).
const SMALL: u64 = 4096;
/// The largest batch asked for when the length is not small (the batch is
/// the caller's allocation, not the sampler's).
const BATCH_MAX: u64 = 4096;

/// The `sampler` target.
pub fn sampler(data: &[u8]) {
    let mut u = In::new(data);
    let len = match u.below(6) {
        0 | 1 => u.below(65),
        2 => u.below(SMALL + 1),
        3 => u.u64(),
        4 => u64::MAX - u.below(1000),
        _ => (1u64 << u.below(64)) + u.below(3) - 1,
    };
    let batch = match u.below(6) {
        0 | 1 => u.below(17) as usize,
        2 => u.below(BATCH_MAX + 1) as usize,
        3 if len <= SMALL => usize::MAX - u.below(3) as usize,
        4 if len <= SMALL => u.u64() as usize,
        _ => u.below(len.min(BATCH_MAX) + 2) as usize,
    };
    let mode = [Mode::Sequential, Mode::Iid, Mode::Cyclic][u.below(3) as usize];
    let seed = u.u64();
    let step = match u.below(4) {
        0 => u.below(64),
        1 => u64::MAX - u.below(64),
        _ => u.u64(),
    };
    let count = match u.below(4) {
        0 => u.below(10) as usize,
        1 => u.u64() as usize,
        _ => 1 + u.below(8) as usize,
    };
    let index = match u.below(4) {
        0 => u.u64() as usize,
        _ => u.below((count as u64).saturating_add(2)) as usize,
    };
    let back = u.below(9);
    if std::env::var_os("LOADERX_FUZZ_VERBOSE").is_some() {
        eprintln!("len {len} batch {batch} {mode:?} seed {seed} step {step} shard {index}/{count} back {back}");
    }
    check(len, batch, mode, seed, step, count, index, back);
    check_permutation(len, seed, step);
    check_mixture(&mut u, seed);
}

/// A mixture from the input's remaining bytes.
fn check_mixture(u: &mut In<'_>, seed: u64) {
    let sources = 1 + u.below(6) as usize;
    let weights: Vec<f64> = (0..sources)
        .map(|_| match u.below(4) {
            0 => f64::from_bits(u.u64()),
            1 => u.below(1000) as f64,
            _ => 1.0 + u.below(1 << 20) as f64 / 1024.0,
        })
        .collect();
    let allocation = match Allocation::new(&weights) {
        Ok(a) => a,
        Err(SamplerError::BadWeight { source, weight, .. }) => {
            assert_eq!(weight.to_bits(), weights[source].to_bits());
            assert!(
                !(weight.is_finite() && weight > 0.0) || weight < 1e-12 * weights.iter().copied().fold(0.0, f64::max)
            );
            return;
        }
        Err(e) => panic!("{weights:?}: {e}"),
    };
    let n = match u.below(3) {
        0 => u.below(1 << 16),
        1 => u64::MAX - u.below(1 << 16),
        _ => u.u64() & (u64::MAX >> 1),
    };
    let (mut before, mut after) = (vec![0; sources], vec![0; sources]);
    allocation.counts(n, &mut before).expect("one slot per source");
    assert_eq!(before.iter().sum::<u64>(), n);
    if n < u64::MAX {
        allocation.counts(n + 1, &mut after).expect("one slot per source");
        let grew: Vec<usize> = (0..sources).filter(|&i| after[i] != before[i]).collect();
        assert_eq!(grew.len(), 1, "{weights:?} at {n}");
        assert_eq!(after[grew[0]], before[grew[0]] + 1);
    }
    let lens: Vec<u64> = (0..sources).map(|_| 1 + u.below(5000)).collect();
    let modes: Vec<Mode> =
        (0..sources).map(|_| [Mode::Sequential, Mode::Iid, Mode::Cyclic][u.below(3) as usize]).collect();
    let batch = 1 + u.below(64) as usize;
    let global = MixedSampler::new(&lens, &modes, seed, batch, &[(0, weights)]).expect("checked weights");
    let step = if u.bool() { u.below(1 << 20) } else { u.u64() };
    let Ok(whole) = global.draw(step) else {
        assert!(u128::from(step) * batch as u128 + batch as u128 > u128::from(u64::MAX));
        return;
    };
    assert_eq!(whole.indices.len(), batch);
    assert!(whole.sources.iter().zip(&whole.indices).all(|(&s, &i)| i < lens[s as usize]));
    let hosts = (1..=batch).filter(|&h| batch.is_multiple_of(h)).nth(u.below(4) as usize).unwrap_or(1);
    let mut joined = vec![Vec::new(); sources];
    for h in 0..hosts {
        let part = global.shard(h, hosts).expect("a divisor").draw(step).expect("inside the global batch");
        for (&s, &i) in part.sources.iter().zip(&part.indices) {
            joined[s as usize].push(i);
        }
    }
    for (s, joined) in joined.iter().enumerate() {
        let of: Vec<u64> =
            whole.sources.iter().zip(&whole.indices).filter(|(x, _)| **x as usize == s).map(|(_, i)| *i).collect();
        assert_eq!(*joined, of, "source {s} over {hosts} hosts");
    }
}

#[allow(clippy::too_many_arguments)]
fn check(len: u64, batch: usize, mode: Mode, seed: u64, step: u64, count: usize, index: usize, back: u64) {
    let s = match Sampler::new(len, batch, mode, seed) {
        Ok(s) => s,
        Err(e) => {
            let want = if len == 0 { SamplerError::EmptyIndexSpace } else { SamplerError::ZeroBatch };
            assert!(len == 0 || batch == 0, "Sampler::new({len}, {batch}) refused: {e}");
            assert_eq!(e, want);
            return;
        }
    };
    assert!(len > 0 && batch > 0, "Sampler::new({len}, {batch}) accepted");
    let clamped = u64::try_from(batch).map_or(true, |b| b > len);
    let bl = if clamped { len as usize } else { batch };
    assert_eq!(s.batch_len(), bl);
    assert_eq!((s.len(), s.mode(), s.seed()), (len, mode, seed));

    let b = s.batch(step);
    assert_eq!(b.len(), bl);
    assert!(all_below(&b, len), "an index out of 0..{len}: {b:?}");
    let mut filled = vec![u64::MAX; bl];
    s.fill(step, &mut filled).expect("the right length");
    assert_eq!(filled, b, "fill and batch differ");
    assert!(s.fill(step, &mut vec![0; bl + 1]).is_err(), "fill into a wrong-sized buffer");
    assert_eq!(Sampler::new(len, batch, mode, seed).expect("ok").batch(step), b, "not a pure function of (seed, step)");

    // Seek equals iteration: `back` steps before, iterated forward.
    let mut it = s.iter();
    it.seek(step.wrapping_sub(back));
    for _ in 0..back {
        it.next();
    }
    assert_eq!(it.step(), step);
    assert_eq!(it.next().expect("endless"), b, "iteration from step - {back} differs from the batch of {step}");
    assert_eq!(it.step(), step.wrapping_add(1));
    let mut it = s.iter();
    it.seek(step.wrapping_sub(back));
    assert_eq!(it.nth(back as usize).expect("endless"), b, "nth");
    let mut it = s.iter();
    it.seek(step);
    let mut buf = vec![0; bl];
    assert_eq!(it.next_into(&mut buf), Ok(step));
    assert_eq!(buf, b, "next_into");

    // The shape of each mode.
    if clamped {
        // `len` indices, none twice, all below `len`: each record once.
        let mut seen = Seen::new();
        seen.add(&b);
        assert!(seen.distinct_below(len), "len {len} < batch {batch}: a record twice: {b:?}");
        if mode == Mode::Sequential {
            assert!(b.iter().copied().eq(0..len));
        }
    } else if mode == Mode::Sequential {
        // Position `k` is `(step * bl + k) mod len`: from `start = step * bl
        // mod len`, `start + k`, less `len` once it reaches `len` (`k < bl <=
        // len`). Built whole and compared in one go: a 128-bit remainder per
        // position cost more than the sampler it checks.
        let start = (u128::from(step) * bl as u128 % u128::from(len)) as u64;
        let mut want: Vec<u64> = (0..bl as u64).map(|k| start.wrapping_add(k)).collect();
        let wraps = (len - start).min(bl as u64) as usize;
        want[wraps..].iter_mut().for_each(|w| *w = w.wrapping_sub(len));
        if b != want {
            let k = b.iter().zip(&want).position(|(x, y)| x != y).expect("a position differs");
            panic!("sequential position {k} of step {step}: {} instead of {}", b[k], want[k]);
        }
    }
    if mode == Mode::Cyclic {
        let n = len / bl as u64;
        assert_eq!(s.steps_per_cycle(), Some(n));
        let first = step - step % n;
        if len <= SMALL && first.checked_add(n - 1).is_some() {
            // The whole cycle of `step`: no index twice, every index once
            // when the batch divides the length.
            let mut seen = Seen::new();
            let mut cycle = Vec::with_capacity((n * bl as u64) as usize);
            let mut buf = vec![0; bl];
            for t in first..=first + (n - 1) {
                s.fill(t, &mut buf).expect("the right length");
                seen.add(&buf);
                cycle.extend_from_slice(&buf);
            }
            // No index twice, none out of range: `n * bl` distinct indices
            // below `len`, so every index once when the batch divides the
            // length.
            if !seen.distinct_below(len) {
                panic!("cyclic, the cycle of step {step}: {}", Seen::first_fault(&cycle, len));
            }
        }
    } else {
        assert_eq!(s.steps_per_cycle(), None);
    }

    // Shards: exactly the slices of the global batch.
    match s.shard(index, count) {
        Ok(sh) => {
            assert!(count > 0 && index < count && bl % count == 0, "shard({index}, {count}) of {bl} accepted");
            let sl = bl / count;
            assert_eq!((sh.batch_len(), sh.index(), sh.count()), (sl, index, count));
            let part = sh.batch(step);
            assert_eq!(part, b[index * sl..(index + 1) * sl], "shard {index} of {count}");
            let mut buf = vec![0; sl];
            sh.fill(step, &mut buf).expect("the right length");
            assert_eq!(buf, part);
            let mut it = sh.iter();
            it.seek(step.wrapping_sub(back));
            assert_eq!(it.nth(back as usize).expect("endless"), part, "shard iteration");
            if count <= 64 {
                let joined: Vec<u64> = (0..count).flat_map(|i| s.shard(i, count).expect("valid").batch(step)).collect();
                assert_eq!(joined, b, "the shards do not make up the batch");
            }
        }
        Err(e) => {
            let want = if count == 0 {
                SamplerError::ZeroShards
            } else if index >= count {
                SamplerError::ShardIndexOutOfRange { index, count }
            } else {
                SamplerError::ShardsDoNotDivideBatch { batch_len: bl, count }
            };
            assert_eq!(e, want, "shard({index}, {count}) of {bl}");
        }
    }
}

fn check_permutation(len: u64, key: u64, probe: u64) {
    let p = match Permutation::new(len, key) {
        Ok(p) => p,
        Err(e) => {
            assert_eq!((len, e), (0, SamplerError::EmptyIndexSpace));
            return;
        }
    };
    assert_eq!(p.len(), len);
    assert_eq!(p.get(len), None);
    if len <= SMALL {
        // `len` distinct images below `len`: a bijection of 0..len.
        let images: Vec<u64> = (0..len).map(|i| p.get(i).unwrap_or(u64::MAX)).collect();
        let mut seen = Seen::new();
        seen.add(&images);
        if !seen.distinct_below(len) {
            panic!("not a bijection of 0..{len}: {}", Seen::first_fault(&images, len));
        }
    } else {
        // Injective on a sample.
        let mut seen = BTreeSet::new();
        for k in 0..32u64 {
            let i = probe.wrapping_add(k.wrapping_mul(0x9E37_79B9_7F4A_7C15)) % len;
            let image = p.get(i).expect("in range");
            assert!(image < len);
            seen.insert((i, image));
        }
        let images: BTreeSet<u64> = seen.iter().map(|x| x.1).collect();
        let sources: BTreeSet<u64> = seen.iter().map(|x| x.0).collect();
        assert_eq!(images.len(), sources.len(), "two indices with one image");
    }
}

/// Whether every index of `xs` is below `len`, without a branch per index:
/// `x - len` in 128 bits borrows (its top bit is set) exactly when `x < len`.
/// Under the fuzzer's compare tracing a compare per index costs more than the
/// sampler computing it.
fn all_below(xs: &[u64], len: u64) -> bool {
    xs.iter().fold(1u128, |all, &x| all & (u128::from(x).wrapping_sub(u128::from(len)) >> 127)) == 1
}

/// Indices below [`SMALL`] added to a bitmap on the stack. The exhaustive
/// checks run on every input, so adding is without a branch or a compare per
/// index (a compare is a call under the fuzzer's compare tracing, and a sort
/// or a tree per input cost more than the sampler they check): the bitmap
/// counts what it was given and ORs the values together, and
/// [`distinct_below`](Self::distinct_below) decides once at the end.
struct Seen {
    bits: [u64; WORDS],
    /// The OR of every index added: below [`SMALL`] exactly when every index
    /// is ([`SMALL`] is a power of two).
    or: u64,
    added: u64,
}

const WORDS: usize = SMALL as usize / 64;
const _: () = assert!(SMALL.is_power_of_two() && SMALL >= 64);

impl Seen {
    fn new() -> Seen {
        Seen { bits: [0; WORDS], or: 0, added: 0 }
    }

    fn add(&mut self, xs: &[u64]) {
        for &x in xs {
            self.or |= x;
            // In range whatever `x` is; exact once `or < SMALL`.
            self.bits[(x / 64) as usize % WORDS] |= 1 << (x % 64);
        }
        self.added += xs.len() as u64;
    }

    /// Whether the indices added were all below `len` (at most [`SMALL`]),
    /// none of them twice.
    fn distinct_below(&self, len: u64) -> bool {
        assert!(len <= SMALL);
        if self.or >= SMALL {
            return false;
        }
        // Every index is below `SMALL`, so the bitmap holds each exactly.
        let distinct: u64 = self.bits.iter().map(|w| u64::from(w.count_ones())).sum();
        let (word, bit) = ((len / 64) as usize, len % 64);
        let past = self.bits.get(word).map_or(0, |w| w >> bit) | self.bits.iter().skip(word + 1).fold(0, |a, w| a | w);
        distinct == self.added && past == 0
    }

    /// What [`distinct_below`](Self::distinct_below) refused in `xs`, for the
    /// message: the first index out of range or seen twice.
    fn first_fault(xs: &[u64], len: u64) -> String {
        let mut seen = BTreeSet::new();
        for (k, &x) in xs.iter().enumerate() {
            if x >= len {
                return format!("position {k} is {x}, out of 0..{len}");
            }
            if !seen.insert(x) {
                return format!("position {k} is {x}, twice");
            }
        }
        "no fault".into()
    }
}

#[cfg(test)]
mod tests {
    use super::{Seen, all_below};

    #[test]
    fn all_below_is_the_range_test() {
        assert!(all_below(&[], 0));
        assert!(all_below(&[0, 4, 9], 10));
        assert!(!all_below(&[0, 10, 9], 10));
        assert!(!all_below(&[u64::MAX], u64::MAX));
        assert!(all_below(&[u64::MAX - 1, 0], u64::MAX));
        assert!(!all_below(&[3], 0));
    }

    #[test]
    fn seen_refuses_a_repeat_and_an_index_out_of_range() {
        let check = |xs: &[u64], len: u64| {
            let mut seen = Seen::new();
            seen.add(xs);
            seen.distinct_below(len)
        };
        assert!(check(&[2, 0, 1], 3));
        assert!(check(&[], 0));
        assert!(check(&(0..4096).rev().collect::<Vec<_>>(), 4096));
        assert!(check(&[4095, 64, 63], 4096));
        assert!(!check(&[2, 0, 2], 3), "a repeat");
        assert!(!check(&[3, 0, 1], 3), "past len");
        assert!(!check(&[64, 0], 64), "past len at a word's start");
        assert!(!check(&[4096], 4096), "past SMALL");
        assert!(!check(&[4096 + 5, 5], 4096), "aliases 5 in the bitmap");
        assert!(!check(&[u64::MAX], 4096));
        assert!(Seen::first_fault(&[2, 0, 2], 3).contains("position 2 is 2, twice"));
        assert!(Seen::first_fault(&[7], 3).contains("out of 0..3"));
    }
}
