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

#[cfg(target_arch = "x86_64")]
use super::cpu::Cpu;
use super::hash::{hash2, hash2_mixed, mix64, stream_word};

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

/// The IID index at `position` of the batch whose key is `step_key`: the
/// position's hash is the first word (a SplitMix64 output: full avalanche),
/// the rare rejected word is followed by the SplitMix64 stream from it.
#[inline]
pub(crate) fn draw(len: u64, step_key: u64, position: u64) -> u64 {
    let base = hash2(step_key, position);
    bounded(len, |attempt| if attempt == 0 { base } else { stream_word(base, attempt) })
}

/// `draw` for positions `offset..offset + out.len()`. An index space below
/// 2^32 takes a branch-free pass that the compiler vectorizes (AVX-512 or
/// AVX2, detected at run time), the product split into 32-bit halves; the
/// few words that might be rejected are redrawn one by one.
pub(crate) fn fill(len: u64, step_key: u64, offset: u64, out: &mut [u64]) {
    if len > u64::from(u32::MAX) {
        for (k, slot) in out.iter_mut().enumerate() {
            *slot = draw(len, step_key, offset.wrapping_add(k as u64));
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    {
        let cpu = Cpu::features();
        if cpu.avx512dq {
            // SAFETY: the CPU supports AVX-512F and DQ (`Cpu::features`,
            // detected at run time), the only requirement of this
            // `#[target_feature]` function.
            return unsafe { fill32_avx512(len, step_key, offset, out) };
        }
        if cpu.avx2 {
            // SAFETY: the CPU supports AVX2 (`Cpu::features`), the only
            // requirement of this `#[target_feature]` function.
            return unsafe { fill32_avx2(len, step_key, offset, out) };
        }
    }
    fill32(len, step_key, offset, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq")]
fn fill32_avx512(len: u64, step_key: u64, offset: u64, out: &mut [u64]) {
    fill32(len, step_key, offset, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn fill32_avx2(len: u64, step_key: u64, offset: u64, out: &mut [u64]) {
    fill32(len, step_key, offset, out)
}

/// `fill` for `len < 2^32`. `w * len` is `(hi(w) * len) * 2^32 + lo(w) *
/// len`, both products below 2^64, so its high and low words need no
/// 128-bit multiply. A word whose low product word is below `len` might
/// be rejected ([`bounded`]): its slot is marked `u64::MAX` (never an
/// index: they are below 2^32) and redrawn by [`draw`] in a second pass,
/// which runs only if a slot was marked.
#[inline(always)]
fn fill32(len: u64, step_key: u64, offset: u64, out: &mut [u64]) {
    assert!(len <= u64::from(u32::MAX), "fill32 of a length past 32 bits");
    let key = mix64(step_key);
    let mut marked = false;
    for (k, slot) in out.iter_mut().enumerate() {
        let position = offset.wrapping_add(k as u64);
        let w = hash2_mixed(key, position);
        // Both factors below 2^32, and `mid <= (2^32 - 1)^2 + 2^32 - 1 <
        // 2^64`: the wrapping arithmetic is exact.
        let low_product = (w & 0xFFFF_FFFF).wrapping_mul(len);
        let mid = (w >> 32).wrapping_mul(len).wrapping_add(low_product >> 32);
        let (high, low) = (mid >> 32, (mid << 32) | (low_product & 0xFFFF_FFFF));
        *slot = if low >= len { high } else { u64::MAX };
        marked |= low < len;
    }
    if !marked {
        return;
    }
    for (k, slot) in out.iter_mut().enumerate() {
        if *slot == u64::MAX {
            *slot = draw(len, step_key, offset.wrapping_add(k as u64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_agrees_with_draw() {
        for len in [1u64, 2, 3, 1000, 20_000, 1 << 20, (1 << 31) + 5, u64::from(u32::MAX), 1 << 32, u64::MAX] {
            for step_key in [0u64, 7, 0xDEAD_BEEF_F00D] {
                let offset = step_key % 17;
                let mut out = vec![0; 300];
                fill(len, step_key, offset, &mut out);
                let want: Vec<u64> = (0..300).map(|k| draw(len, step_key, offset + k)).collect();
                assert_eq!(out, want, "len {len} key {step_key}");
                if len <= u64::from(u32::MAX) {
                    let mut portable = vec![0; 300];
                    fill32(len, step_key, offset, &mut portable);
                    assert_eq!(portable, want, "len {len} key {step_key}");
                }
            }
        }
    }
}
