//! Infallible decoding of the fuzzer's bytes into choices: an exhausted
//! input reads as zeros (the "default" choice everywhere), so every byte
//! string is a valid input and short inputs mean simple cases.

use arbitrary::Unstructured;

pub(crate) struct In<'a>(Unstructured<'a>);

impl<'a> In<'a> {
    pub(crate) fn new(data: &'a [u8]) -> In<'a> {
        In(Unstructured::new(data))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn u8(&mut self) -> u8 {
        self.0.arbitrary().unwrap_or(0)
    }

    pub(crate) fn u16(&mut self) -> u16 {
        self.0.arbitrary().unwrap_or(0)
    }

    pub(crate) fn u32(&mut self) -> u32 {
        self.0.arbitrary().unwrap_or(0)
    }

    pub(crate) fn u64(&mut self) -> u64 {
        self.0.arbitrary().unwrap_or(0)
    }

    pub(crate) fn bool(&mut self) -> bool {
        self.u8() & 1 == 1
    }

    /// Uniform-ish in `0..n` (`n > 0`); 0 once the input is exhausted.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        self.0.int_in_range(0..=n - 1).unwrap_or(0)
    }

    /// `below` for sizes.
    pub(crate) fn upto(&mut self, max: usize) -> usize {
        self.below(max as u64 + 1) as usize
    }

    /// A length up to `max`, then that many input bytes (fewer if the input
    /// runs out).
    pub(crate) fn bytes(&mut self, max: usize) -> Vec<u8> {
        let n = self.upto(max).min(self.0.len());
        self.0.bytes(n).map(<[u8]>::to_vec).unwrap_or_default()
    }

    /// Exactly `n` bytes: input bytes, then zeros once the input runs out.
    pub(crate) fn fill(&mut self, n: usize) -> Vec<u8> {
        let take = n.min(self.0.len());
        let mut out = self.0.bytes(take).map(<[u8]>::to_vec).unwrap_or_default();
        out.resize(n, 0);
        out
    }

    /// Record content of `len` bytes: from the input (exhausted: zeros), or
    /// generated (compressible, as the simulator's records; cut from a tape
    /// made once).
    pub(crate) fn content(&mut self, len: usize) -> Vec<u8> {
        if self.bool() { self.fill(len) } else { crate::frames::generated(self.u64(), len) }
    }
}
