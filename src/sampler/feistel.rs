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
//! widths. `F` is SplitMix64's mixer applied to `R ^ k_i`, with round keys
//! hashed from the permutation's key.
//!
//! Cycle-walking: a value the network sends to `len..2^bits` is sent through
//! it again until it lands in `0..len`. The walk from an index stays on that
//! index's cycle of the domain permutation, which returns to the index itself,
//! so it ends; and the walks from all of `0..len` visit every domain element
//! exactly once between them, so they cost `2^bits` network evaluations in all,
//! fewer than `2` per index on average over the whole range. One index's walk
//! may be longer (at most `2^bits - len + 1` evaluations).

use super::error::SamplerError;
use super::hash::{hash2, mix64};

/// Rounds of the Feistel network. Even, so the halves end at their starting
/// widths; at least four, the Luby–Rackoff bound for a strong pseudorandom
/// permutation.
pub const FEISTEL_ROUNDS: usize = 6;

const _: () = assert!(FEISTEL_ROUNDS >= 4 && FEISTEL_ROUNDS.is_multiple_of(2));

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
    keys: [u64; FEISTEL_ROUNDS],
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
        debug_assert!(len >= 1);
        let bits = u64::BITS - (len - 1).leading_zeros();
        let left_bits = bits / 2;
        Self {
            len,
            left_bits,
            right_bits: bits - left_bits,
            keys: std::array::from_fn(|round| hash2(key, round as u64)),
        }
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
        (index < self.len).then(|| self.walk(index))
    }

    /// The image of `index < len`, cycle-walking out of `len..2^bits`.
    #[inline]
    pub(crate) fn walk(&self, index: u64) -> u64 {
        debug_assert!(index < self.len);
        let mut x = self.network(index);
        while x >= self.len {
            x = self.network(x);
        }
        x
    }

    /// One pass through the Feistel network: a bijection on `0..2^bits`.
    #[inline]
    fn network(&self, x: u64) -> u64 {
        let (mut left_bits, mut right_bits) = (self.left_bits, self.right_bits);
        let mut left = x >> right_bits;
        let mut right = x & low_mask(right_bits);
        for &key in &self.keys {
            let f = mix64(right ^ key) & low_mask(left_bits);
            (left, right) = (right, left ^ f);
            (left_bits, right_bits) = (right_bits, left_bits);
        }
        (left << right_bits) | right
    }
}

/// A mask of the low `bits` bits; `bits <= 32` here (each half of at most 64).
#[inline]
fn low_mask(bits: u32) -> u64 {
    debug_assert!(bits <= 32);
    (1u64 << bits) - 1
}
