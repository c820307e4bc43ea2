//! Unbiased bounded draws: Lemire's multiply-shift with rejection.
//!
//! A 64-bit word `w` maps to `(w * len) >> 64`, which is in `0..len`. The map
//! gives some outputs one more preimage than others; rejecting words whose
//! low product half falls below `2^64 mod len` removes exactly the surplus, so
//! every output has the same number of accepted preimages (Lemire, "Fast
//! Random Integer Generation in an Interval", 2019). The threshold costs a
//! division only when the low half is below `len`, and a word is rejected
//! with probability `(2^64 mod len) / 2^64 < len / 2^64`: for any real index
//! space, practically never.

use super::hash::{hash2, stream_word};

/// A uniform draw from `0..len` (`len >= 1`), taking words from `word(0)`,
/// `word(1)`, ... until one is accepted.
#[inline]
pub(crate) fn bounded(len: u64, mut word: impl FnMut(u64) -> u64) -> u64 {
    let mut attempt = 0;
    let mut product = u128::from(word(attempt)) * u128::from(len);
    if (product as u64) < len {
        let threshold = len.wrapping_neg() % len;
        while (product as u64) < threshold {
            attempt += 1;
            product = u128::from(word(attempt)) * u128::from(len);
        }
    }
    (product >> 64) as u64
}

/// The IID index at `position` of the batch whose key is `step_key`.
#[inline]
pub(crate) fn draw(len: u64, step_key: u64, position: u64) -> u64 {
    let base = hash2(step_key, position);
    bounded(len, |attempt| stream_word(base, attempt))
}
