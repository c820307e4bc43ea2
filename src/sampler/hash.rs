//! The counter-based hash behind every random choice of the sampler.
//!
//! There is no generator state: every random word is a hash of its
//! coordinates (seed, step or cycle, position, attempt), so any step can be
//! computed directly. The mixer is SplitMix64's finalizer (Stafford's "Mix13"
//! variant), a bijection on `u64` with full avalanche.

/// The golden-ratio increment of SplitMix64, an odd constant.
pub(crate) const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finalizer: a bijection on `u64`.
#[inline]
pub(crate) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A hash of two words. For every fixed `a` it is a bijection in `b`, so
/// distinct counters under one key never collide.
#[inline]
pub(crate) fn hash2(a: u64, b: u64) -> u64 {
    hash2_mixed(mix64(a), b)
}

/// `hash2(a, b)` given `mix64(a)`: a loop over `b` under one key mixes the
/// key once.
#[inline]
pub(crate) fn hash2_mixed(mixed_a: u64, b: u64) -> u64 {
    mix64(mixed_a ^ b.wrapping_add(1).wrapping_mul(GAMMA))
}

/// Word number `attempt` of the SplitMix64 stream that starts at `base`.
#[inline]
pub(crate) fn stream_word(base: u64, attempt: u64) -> u64 {
    mix64(base.wrapping_add(attempt.wrapping_add(1).wrapping_mul(GAMMA)))
}
