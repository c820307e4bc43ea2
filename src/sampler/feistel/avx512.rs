//! [`Permutation::fill`] for a domain of at most 32 bits, in AVX-512
//! intrinsics (AVX-512F and IFMA).
//!
//! Each index rides in a 64-bit lane (eight to a vector) so that a round's
//! multiply-add is one `vpmadd52luq` (the low 52 bits of `R * mul + add`),
//! with a latency of 4 cycles against 11 for `vpmulld` and an add in 32-bit
//! lanes: the walk is a chain of dependent rounds, and its latency, not the
//! number of instructions, is what the late passes wait on. Only the low 32
//! bits of each lane are meaningful inside the network (the rounds compute
//! modulo 2^32); the high half collects garbage, which reaches only product
//! bits at and above 32, and the result is masked back to 32 bits.
//!
//! The values a pass leaves out of range are packed together with
//! `vpcompressq`, with their positions, so each further pass walks only
//! those: on average `2^bits / len - 1` more network evaluations per index
//! in all, instead of a whole vector pass per walking step. Results are
//! written straight into the caller's slice, the late ones scattered.
//!
//! The portable [`Permutation::fill32`] computes the same values (the test
//! `fill_agrees_with_walk` checks both against `Permutation::walk`, the
//! scalar walk of [`Permutation::get`]).

use std::arch::x86_64::{
    __m128i, __m512i, _mm_cvtsi32_si128, _mm512_add_epi64, _mm512_and_si512, _mm512_cmpgt_epu64_mask,
    _mm512_loadu_si512, _mm512_madd52lo_epu64, _mm512_mask_i64scatter_epi64, _mm512_mask_mov_epi64,
    _mm512_mask_storeu_epi64, _mm512_maskz_compress_epi64, _mm512_or_si512, _mm512_set1_epi64, _mm512_setr_epi64,
    _mm512_setzero_si512, _mm512_sll_epi32, _mm512_srl_epi32, _mm512_srl_epi64, _mm512_storeu_si512, _mm512_xor_si512,
};

use std::mem::MaybeUninit;

use super::{FEISTEL_ROUNDS, Permutation};

/// 64-bit lanes in a vector.
const LANES: usize = 8;

/// The network's constants, broadcast to every lane once per call.
struct Network {
    mul: [__m512i; FEISTEL_ROUNDS],
    add: [__m512i; FEISTEL_ROUNDS],
    shift: [__m128i; FEISTEL_ROUNDS],
    right_bits: __m128i,
    right_mask: __m512i,
    low32: __m512i,
}

impl Network {
    #[target_feature(enable = "avx512f")]
    fn new(p: &Permutation) -> Self {
        let r = &p.rounds32;
        Network {
            mul: std::array::from_fn(|i| _mm512_set1_epi64(i64::from(r[i].mul))),
            add: std::array::from_fn(|i| _mm512_set1_epi64(i64::from(r[i].add))),
            shift: std::array::from_fn(|i| _mm_cvtsi32_si128(r[i].shift as i32)),
            right_bits: _mm_cvtsi32_si128(p.right_bits as i32),
            right_mask: _mm512_set1_epi64(p.right_mask as i64),
            low32: _mm512_set1_epi64(i64::from(u32::MAX)),
        }
    }

    /// [`Permutation::network32`] of each lane's low 32 bits, zero-extended.
    #[target_feature(enable = "avx512f,avx512ifma")]
    fn eval(&self, x: __m512i) -> __m512i {
        let mut left = _mm512_srl_epi64(_mm512_and_si512(x, self.low32), self.right_bits);
        let mut right = _mm512_and_si512(x, self.right_mask);
        for i in 0..FEISTEL_ROUNDS {
            // Low 32 bits: `(mul * R + add) mod 2^32 >> shift`, as in
            // `Round32::apply`. R's garbage bits 32..52 and the carries
            // reach only bits 32 and up of the product, which the 32-bit
            // shift drops from the low half.
            let product = _mm512_madd52lo_epu64(self.add[i], right, self.mul[i]);
            (left, right) = (right, _mm512_xor_si512(left, _mm512_srl_epi32(product, self.shift[i])));
        }
        _mm512_and_si512(_mm512_or_si512(_mm512_sll_epi32(left, self.right_bits), right), self.low32)
    }
}

/// The mask of the first `n` of eight lanes.
fn first_lanes(n: usize) -> u8 {
    if n >= LANES { u8::MAX } else { (1u8 << n) - 1 }
}

/// Fresh positions taken into each round.
const STEP: usize = 64;

/// The pending lists' capacity: a round takes fresh positions only while
/// the pending values leave room for all of them.
const PENDING_MAX: usize = 4 * STEP;

/// [`Permutation::fill`] for `p.domain_bits() <= 32`.
///
/// Rounds, until every position of `out` is in range: each round first
/// walks every pending value (one still out of range) one network step,
/// scatters those now in range to their positions in `out` and packs the
/// rest, with their positions, into the other pending list; then it sends
/// the next [`STEP`] fresh positions through the network, eight at a time,
/// straight into `out`, and packs the lanes out of range after them. The
/// fresh work of a round does not depend on the walk of the round before,
/// so the two overlap; only the last few walks run alone.
///
/// # Safety
/// Safe to call only on a CPU with AVX-512F, AVX-512 IFMA and POPCNT (the
/// caller detects them at run time): a `#[target_feature]` function is
/// `unsafe` to call from code not compiled with those features. Memory
/// safety does not depend on the caller: every load and store stays within
/// arrays this function sizes (see the comments at each).
#[target_feature(enable = "avx512f,avx512ifma,popcnt")]
pub(super) fn fill(p: &Permutation, start: u64, out: &mut [u64]) {
    assert!(p.domain_bits() <= super::LANE32_BITS_MAX, "a domain of at most 32 bits");
    let net = Network::new(p);
    let last = _mm512_set1_epi64((p.len - 1) as i64);
    let iota = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
    let base = _mm512_set1_epi64(start as i64);
    let n = out.len();
    // Two (values, positions) pending lists: each round reads one and packs
    // into the other, so no load waits on a packed store whose address
    // depends on a count the whole network computes. One vector of slack:
    // a packed store writes all eight lanes, at an offset of at most
    // `PENDING_MAX`. The lists are left uninitialized (no 8 KiB memset per
    // call): a round packs into a list with whole-vector stores at offsets
    // growing from 0 by at most a vector, then stores a zero vector at its
    // end, `count`, so entries `0..count + LANES` are written, and the next
    // round reads only those.
    let list = [MaybeUninit::<u64>::uninit(); PENDING_MAX + LANES];
    let mut pending = [(list, list); 2];
    let [first, second] = &mut pending;
    let (mut from, mut to) = (first, second);
    let mut count = 0usize;
    let mut fresh = 0usize;
    while count > 0 || fresh < n {
        if fresh == n && count <= LANES {
            // The last few walks: in a register, not through the lists.
            let lanes = first_lanes(count);
            // SAFETY: entries `0..LANES` are within the arrays and written
            // (`0..count + LANES` are, see `pending`); lanes past `count`
            // are masked out below.
            let (mut x, at) =
                unsafe { (_mm512_loadu_si512(from.0.as_ptr().cast()), _mm512_loadu_si512(from.1.as_ptr().cast())) };
            let mut walking = lanes;
            while walking != 0 {
                x = _mm512_mask_mov_epi64(x, walking, net.eval(x));
                walking &= _mm512_cmpgt_epu64_mask(x, last);
            }
            // SAFETY: as for the scatter below: positions under `lanes` are
            // below `n`.
            unsafe { _mm512_mask_i64scatter_epi64::<8>(out.as_mut_ptr().cast(), lanes, at, x) };
            break;
        }
        let mut still = 0usize;
        for t in (0..count).step_by(LANES) {
            let lanes = first_lanes(count - t);
            // SAFETY: entries `t..t + LANES`, with `t < count <=
            // PENDING_MAX`, are within the arrays and written (`0..count +
            // LANES` are, see `pending`); lanes past `count` are masked out
            // below.
            let (x, at) = unsafe {
                (_mm512_loadu_si512(from.0.as_ptr().add(t).cast()), _mm512_loadu_si512(from.1.as_ptr().add(t).cast()))
            };
            let y = net.eval(x);
            let out_of_range = _mm512_cmpgt_epu64_mask(y, last) & lanes;
            // SAFETY: every position in `at` under `lanes` was packed from a
            // lane below `n = out.len()`, so each scattered u64 lands inside
            // `out`; the scale 8 is the size of a u64.
            unsafe { _mm512_mask_i64scatter_epi64::<8>(out.as_mut_ptr().cast(), lanes & !out_of_range, at, y) };
            // SAFETY: `still <= t < PENDING_MAX` (at most one value kept per
            // value read), so the eight lanes stored at `still` fit the
            // arrays' `PENDING_MAX + LANES` u64.
            unsafe {
                _mm512_storeu_si512(to.0.as_mut_ptr().add(still).cast(), _mm512_maskz_compress_epi64(out_of_range, y));
                _mm512_storeu_si512(to.1.as_mut_ptr().add(still).cast(), _mm512_maskz_compress_epi64(out_of_range, at));
            }
            still += out_of_range.count_ones() as usize;
        }
        if still + STEP <= PENDING_MAX {
            let end = n.min(fresh + STEP);
            for j in (fresh..end).step_by(LANES) {
                let lanes = first_lanes(end - j);
                let at = _mm512_add_epi64(_mm512_set1_epi64(j as i64), iota);
                // Positions `start + j + lane` (lanes past `end` masked out).
                let x = net.eval(_mm512_add_epi64(base, at));
                // SAFETY: `j < end <= n`, and the store writes only the lanes
                // under `lanes`, `out[j..min(j + LANES, end)]`, in bounds.
                unsafe { _mm512_mask_storeu_epi64(out.as_mut_ptr().add(j).cast(), lanes, x) };
                let out_of_range = _mm512_cmpgt_epu64_mask(x, last) & lanes;
                // SAFETY: `still` grows by at most one per position of this
                // round, from at most `PENDING_MAX - STEP`, so it stays below
                // `PENDING_MAX` and the eight u64 stored there fit.
                unsafe {
                    _mm512_storeu_si512(
                        to.0.as_mut_ptr().add(still).cast(),
                        _mm512_maskz_compress_epi64(out_of_range, x),
                    );
                    _mm512_storeu_si512(
                        to.1.as_mut_ptr().add(still).cast(),
                        _mm512_maskz_compress_epi64(out_of_range, at),
                    );
                }
                still += out_of_range.count_ones() as usize;
            }
            fresh = end;
        }
        // SAFETY: `still <= PENDING_MAX` (the pending pass keeps at most
        // what it read, the fresh pass adds at most `STEP` to at most
        // `PENDING_MAX - STEP`), so the eight u64 at `still` fit.
        unsafe {
            _mm512_storeu_si512(to.0.as_mut_ptr().add(still).cast(), _mm512_setzero_si512());
            _mm512_storeu_si512(to.1.as_mut_ptr().add(still).cast(), _mm512_setzero_si512());
        }
        count = still;
        std::mem::swap(&mut from, &mut to);
    }
}
