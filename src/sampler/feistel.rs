//! A keyed permutation of `0..len` in O(1) memory: a Feistel network over the
//! next power of two, brought into range by cycle-walking.
//!
//! The domain is `0..2^bits` with `2^bits` the smallest power of two `>= len`,
//! so it is less than `2 * len`. A value is split into a left half of
//! `bits / 2` bits and a right half of the rest; each round maps
//! `(L, R)` to `(R, L ^ F(k_i, R))`, truncating `F` to the width of `L`, so the
//! halves trade widths every round and an odd `bits` needs no padding. Every
//! round is invertible whatever `F` is, so the network is a bijection on the
//! domain. [`FEISTEL_ROUNDS`] is even, so the halves end at their starting
//! widths. `F` is a multiply-add-shift of `R` (the top bits of
//! `a_i * R + b_i mod 2^64`, a pairwise-independent family for halves of at
//! most 32 bits), with `a_i` (odd) and `b_i` hashed from the permutation's
//! key once per permutation, so a round costs one multiply, an add, a shift
//! and an xor.
//!
//! Cycle-walking: a value the network sends to `len..2^bits` is sent through
//! it again until it lands in `0..len`. The walk from an index stays on that
//! index's cycle of the domain permutation, which returns to the index itself,
//! so it ends; and the walks from all of `0..len` visit every domain element
//! exactly once between them, so they cost `2^bits` network evaluations in all,
//! fewer than `2` per index on average over the whole range. One index's walk
//! may be longer (at most `2^bits - len + 1` evaluations).

#[cfg(target_arch = "x86_64")]
mod avx512;

#[cfg(target_arch = "x86_64")]
use super::cpu::Cpu;
use super::error::SamplerError;
use super::hash::hash2;

/// Rounds of the Feistel network. Even, so the halves end at their starting
/// widths; at least four, the Luby–Rackoff bound for a strong pseudorandom
/// permutation. Six because the round function is cheap (one multiply) and
/// only pairwise independent: with four, the position-by-image table of
/// small lengths fails its chi-square test (`tests/sampler_uniformity.rs`).
pub const FEISTEL_ROUNDS: usize = 6;

const _: () = assert!(FEISTEL_ROUNDS >= 4 && FEISTEL_ROUNDS.is_multiple_of(2));

/// One round's function, `F(R) = (mul * R + add) mod 2^64 >> shift`: the top
/// `64 - shift` bits (the width of the half it is xored into) of a
/// multiply-add of the other half. For inputs of at most 32 bits and outputs
/// of at most 32, with `mul` and `add` uniform, this is Dietzfelbinger's
/// multiply-add-shift family: strongly universal (pairwise independent).
/// A half of width 0 gets `mul = add = 0`, so `F = 0` with no shift by 64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Round {
    mul: u64,
    add: u64,
    shift: u32,
}

impl Round {
    /// `shift < 64` ([`Permutation::keyed`] asserts it), so the unchecked
    /// shift is the plain one, without a check per round.
    #[inline(always)]
    fn apply(self, right: u64) -> u64 {
        self.mul.wrapping_mul(right).wrapping_add(self.add).wrapping_shr(self.shift)
    }
}

/// [`Round`] in 32-bit arithmetic, `F(R) = (mul * R + add) mod 2^32 >> shift`,
/// used when the domain has at most 32 bits: halves of at most 16 bits in
/// and out, so `32 >= 16 + 16 - 1` keeps the family strongly universal
/// (Dietzfelbinger's condition `w >= u + M - 1`), and eight lanes fit a
/// 256-bit vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Round32 {
    mul: u32,
    add: u32,
    shift: u32,
}

impl Round32 {
    /// `shift < 32` ([`Permutation::keyed`] asserts it), as in
    /// [`Round::apply`].
    #[inline(always)]
    fn apply(self, right: u32) -> u32 {
        self.mul.wrapping_mul(right).wrapping_add(self.add).wrapping_shr(self.shift)
    }
}

/// Largest domain (in bits) evaluated in 32-bit lanes.
const LANE32_BITS_MAX: u32 = 32;

/// Values per chunk of [`Permutation::fill`]: the out-of-range list's
/// positions fit a `u16`.
const CHUNK: usize = 256;

/// The widest vector [`Permutation::fill`] runs in, in 32-bit lanes.
const LANES: usize = 16;

const _: () = assert!(CHUNK.is_power_of_two() && CHUNK.is_multiple_of(LANES));

/// A keyed bijection of `0..len` onto itself, evaluated index by index in
/// O(1) memory: nothing the size of `len` is ever materialised.
///
/// The cyclic sampler draws a fresh one per cycle; it is public so that a
/// caller can shuffle anything else indexable the same way.
///
/// ```
/// use loaderx::sampler::Permutation;
///
/// let p = Permutation::new(10, 42).unwrap();
/// let mut seen: Vec<u64> = (0..10).map(|i| p.get(i).unwrap()).collect();
/// seen.sort_unstable();
/// assert_eq!(seen, (0..10).collect::<Vec<_>>());
/// assert_eq!(p.get(10), None);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Permutation {
    len: u64,
    left_bits: u32,
    right_bits: u32,
    right_mask: u64,
    rounds: [Round; FEISTEL_ROUNDS],
    /// The same rounds in 32-bit arithmetic, used (instead of `rounds`)
    /// when the domain has at most [`LANE32_BITS_MAX`] bits.
    rounds32: [Round32; FEISTEL_ROUNDS],
}

impl Permutation {
    /// The permutation of `0..len` selected by `key`. Errors only if `len`
    /// is 0. Any `len` up to `u64::MAX` works.
    pub fn new(len: u64, key: u64) -> Result<Self, SamplerError> {
        if len == 0 {
            return Err(SamplerError::EmptyIndexSpace);
        }
        Ok(Self::keyed(len, key))
    }

    /// [`Permutation::new`] for a `len` known to be at least 1.
    pub(crate) fn keyed(len: u64, key: u64) -> Self {
        assert!(len >= 1, "a permutation of an empty domain");
        let bits = u64::BITS - (len - 1).leading_zeros();
        let left_bits = bits / 2;
        let right_bits = bits - left_bits;
        let rounds = std::array::from_fn(|round| {
            // Even rounds xor into a half of `left_bits`, odd ones into one
            // of `right_bits` (the halves trade widths every round).
            let out_bits = if round % 2 == 0 { left_bits } else { right_bits };
            if out_bits == 0 {
                return Round { mul: 0, add: 0, shift: 63 };
            }
            let round = 2 * round as u64;
            Round { mul: hash2(key, round) | 1, add: hash2(key, round + 1), shift: 64 - out_bits }
        });
        let rounds32 = std::array::from_fn(|i| {
            let Round { mul, add, shift } = rounds[i];
            // `mul` stays odd; a width-0 half keeps `F = 0`.
            Round32 { mul: mul as u32, add: add as u32, shift: shift.saturating_sub(32) }
        });
        // The shifts of every pass are unchecked (`wrapping_shr`): each
        // is in range, checked here once per permutation.
        debug_assert!(right_bits <= 32 && rounds.iter().all(|r| r.shift < 64));
        debug_assert!(bits > LANE32_BITS_MAX || (right_bits <= 16 && rounds32.iter().all(|r| r.shift < 32)));
        Self { len, left_bits, right_bits, right_mask: (1u64 << right_bits) - 1, rounds, rounds32 }
    }

    /// The length of the permuted range.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: a permutation covers at least one index.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The number of bits of the Feistel domain: `2^domain_bits` is the
    /// smallest power of two `>= len`.
    pub fn domain_bits(&self) -> u32 {
        self.left_bits + self.right_bits
    }

    /// The image of `index`, or `None` if `index >= len`.
    pub fn get(&self, index: u64) -> Option<u64> {
        (index < self.len).then(|| self.walk_in_range(index))
    }

    /// The image of `index < len`, cycle-walking out of `len..2^bits`: what
    /// [`fill`](Self::fill) is checked against.
    #[cfg(test)]
    pub(crate) fn walk(&self, index: u64) -> u64 {
        assert!(index < self.len, "walk of an index past the domain");
        self.walk_in_range(index)
    }

    /// The image of an `index` the caller has checked is below `len`,
    /// cycle-walking out of `len..2^bits`. The width of the domain is looked
    /// at once per walk, not once per pass (a walk is 1 to `2^bits - len + 1`
    /// passes).
    #[inline(always)]
    fn walk_in_range(&self, index: u64) -> u64 {
        if self.domain_bits() > LANE32_BITS_MAX {
            let mut x = self.network64(index);
            while x >= self.len {
                x = self.network64(x);
            }
            return x;
        }
        // `len - 1` fits: the domain, hence `len`, is at most 2^32, and so
        // is `index < len`.
        let last = (self.len - 1) as u32;
        let mut x = self.network32(index as u32);
        while x > last {
            x = self.network32(x);
        }
        u64::from(x)
    }

    /// Positions `start .. start + out.len()` of the permutation (all below
    /// `len`), the same as [`get`](Self::get) of each, computed a chunk
    /// at a time without a branch per index (the walks' lengths vary
    /// unpredictably: at `len` just above a power of two most indices need
    /// a second pass, and a branch on them would mispredict each time).
    /// A domain of at most 32 bits runs in vectorized passes: on a CPU with
    /// AVX-512F and IFMA, the intrinsics of [`avx512::fill`] (the walk's
    /// late values packed with `vpcompressq`, each round one fused
    /// multiply-add); otherwise [`fill32`](Self::fill32), which the compiler
    /// vectorizes (AVX-512F or AVX2 when the CPU has them). A larger domain
    /// runs one network pass over the chunk, then passes over only the
    /// values still out of range, whose list is compacted without branches.
    pub(crate) fn fill(&self, start: u64, out: &mut [u64]) {
        assert!(start <= self.len && out.len() as u64 <= self.len - start, "fill past the domain");
        if self.domain_bits() > LANE32_BITS_MAX {
            return self.fill64(start, out);
        }
        #[cfg(target_arch = "x86_64")]
        {
            let cpu = Cpu::features();
            if cpu.avx512_ifma {
                // SAFETY: the CPU supports AVX-512F, AVX-512 IFMA and POPCNT
                // (`Cpu::features`, detected at run time), the features
                // `avx512::fill` is compiled for and its only requirement.
                return unsafe { avx512::fill(self, start, out) };
            }
            if cpu.avx512f {
                // SAFETY: the CPU supports AVX-512F (`Cpu::features`), the
                // only requirement of a `#[target_feature(enable =
                // "avx512f")]` function.
                return unsafe { self.fill32_avx512(start, out) };
            }
            if cpu.avx2 {
                // SAFETY: the CPU supports AVX2 (`Cpu::features`), the only
                // requirement of a `#[target_feature(enable = "avx2")]`
                // function.
                return unsafe { self.fill32_avx2(start, out) };
            }
        }
        self.fill32(start, out)
    }

    /// [`fill32`](Self::fill32) compiled for AVX2, where its passes run in
    /// eight 32-bit lanes.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn fill32_avx2(&self, start: u64, out: &mut [u64]) {
        self.fill32(start, out)
    }

    /// [`fill32`](Self::fill32) compiled for AVX-512F (a CPU without IFMA):
    /// sixteen lanes.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f")]
    fn fill32_avx512(&self, start: u64, out: &mut [u64]) {
        self.fill32(start, out)
    }

    /// `fill` for a domain of at most 32 bits, in passes the compiler
    /// vectorizes: the first evaluates the network on every position of a
    /// chunk; the values out of range are then packed, with their
    /// positions, into a list (a branch-free scalar loop), and each further
    /// pass walks the whole list one step (a vectorized pass over whole
    /// vectors) and packs what is still out of range, until nothing is.
    #[inline(always)]
    fn fill32(&self, start: u64, out: &mut [u64]) {
        // `len - 1` fits: the domain, hence `len`, is at most 2^32.
        let last = (self.len - 1) as u32;
        let mut buf = [0u32; CHUNK];
        let mut vals = [0u32; CHUNK];
        let mut pos = [0u32; CHUNK];
        let mut base = start as u32;
        for chunk in out.chunks_mut(CHUNK) {
            let n = chunk.len();
            for (x, offset) in buf[..n].iter_mut().zip(0u32..) {
                // Below `len`, so no wrap: `base + offset <= last`.
                *x = self.network32(base.wrapping_add(offset));
            }
            let mut count = 0;
            for (j, &x) in buf[..n].iter().enumerate() {
                // `count <= j < CHUNK`: the mask only spares a bounds check.
                vals[count & (CHUNK - 1)] = x;
                pos[count & (CHUNK - 1)] = j as u32;
                count += usize::from(x > last);
            }
            while count > 0 {
                // Whole vectors: the lanes past `count` compute garbage
                // that nothing reads, and no scalar tail loop runs.
                for v in vals[..count.next_multiple_of(LANES).min(CHUNK)].iter_mut() {
                    *v = self.network32(*v);
                }
                let mut still = 0;
                for t in 0..count {
                    let (v, p) = (vals[t], pos[t]);
                    buf[p as usize & (CHUNK - 1)] = v;
                    vals[still & (CHUNK - 1)] = v;
                    pos[still & (CHUNK - 1)] = p;
                    still += usize::from(v > last);
                }
                count = still;
            }
            for (slot, &x) in chunk.iter_mut().zip(buf.iter()) {
                *slot = u64::from(x);
            }
            base = base.wrapping_add(CHUNK as u32);
        }
    }

    /// `fill` for a domain of more than 32 bits.
    fn fill64(&self, start: u64, out: &mut [u64]) {
        let mut pending = [0u16; CHUNK];
        let mut position = start;
        for chunk in out.chunks_mut(CHUNK) {
            for slot in chunk.iter_mut() {
                *slot = self.network64(position);
                position += 1;
            }
            let mut count = 0;
            for (j, &x) in chunk.iter().enumerate() {
                pending[count] = j as u16;
                count += usize::from(x >= self.len);
            }
            while count > 0 {
                let mut still = 0;
                for t in 0..count {
                    let j = usize::from(pending[t]);
                    let x = self.network64(chunk[j]);
                    chunk[j] = x;
                    pending[still] = j as u16;
                    still += usize::from(x >= self.len);
                }
                count = still;
            }
        }
    }

    /// One pass through the Feistel network, a bijection on `0..2^bits`, in
    /// `u64`: each round one multiply, an add, a shift and an xor.
    #[inline(always)]
    fn network64(&self, x: u64) -> u64 {
        // `right_bits <= 32` ([`Permutation::keyed`]): unchecked shifts.
        let mut left = x.wrapping_shr(self.right_bits);
        let mut right = x & self.right_mask;
        for round in self.rounds {
            (left, right) = (right, left ^ round.apply(right));
        }
        left.wrapping_shl(self.right_bits) | right
    }

    /// The network in `u32`, for a domain of at most 32 bits.
    #[inline(always)]
    fn network32(&self, x: u32) -> u32 {
        // `right_bits` is at most 16 here ([`Permutation::keyed`]).
        let mut left = x.wrapping_shr(self.right_bits);
        let mut right = x & self.right_mask as u32;
        for round in self.rounds32 {
            (left, right) = (right, left ^ round.apply(right));
        }
        left.wrapping_shl(self.right_bits) | right
    }
}

#[cfg(test)]
mod tests {
    use super::Permutation;

    #[test]
    fn fill_agrees_with_walk() {
        let lens = [1u64, 2, 3, 13, 16, 17, 520, 1000, 20_000, (1 << 20) + 1, (1 << 32) - 1, 1 << 32];
        let wide = [(1u64 << 32) + 1, (1 << 40) + 3, u64::MAX];
        for len in lens.into_iter().chain(wide) {
            let p = Permutation::keyed(len, len ^ 0xABCD);
            // Long runs too: many rounds of the AVX-512 walk.
            let long = (len / 2, (len - len / 2).min(5000));
            for (start, count) in [(0, len.min(700)), (len / 3, (len - len / 3).min(600)), (len - 1, 1), long] {
                let mut out = vec![0; count as usize];
                p.fill(start, &mut out);
                let walked: Vec<u64> = (start..start + count).map(|i| p.walk(i)).collect();
                assert_eq!(out, walked, "len {len} start {start}");
                if p.domain_bits() <= super::LANE32_BITS_MAX {
                    // Every build of the 32-bit path this CPU runs, whatever
                    // `fill` picked.
                    let mut other = vec![0; count as usize];
                    p.fill32(start, &mut other);
                    assert_eq!(other, walked, "portable, len {len} start {start}");
                    #[cfg(target_arch = "x86_64")]
                    {
                        use std::arch::is_x86_feature_detected as has;
                        if has!("avx2") {
                            // SAFETY: the CPU supports AVX2 (checked just above).
                            unsafe { p.fill32_avx2(start, &mut other) };
                            assert_eq!(other, walked, "AVX2, len {len} start {start}");
                        }
                        if has!("avx512f") {
                            // SAFETY: the CPU supports AVX-512F (checked just above).
                            unsafe { p.fill32_avx512(start, &mut other) };
                            assert_eq!(other, walked, "AVX-512F, len {len} start {start}");
                        }
                    }
                }
            }
        }
    }
}
