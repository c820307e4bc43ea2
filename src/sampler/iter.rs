//! The endless, seekable iterator over batches.

use super::Sampler;
use super::error::SamplerError;

/// An endless iterator over the batches of a [`Sampler`] (or one host's
/// slices of them, from a [`ShardedSampler`](super::ShardedSampler)), one
/// per step. [`seek`](Self::seek) jumps to any step in O(1); the batches after
/// it are exactly the ones iteration from step 0 would give there.
///
/// [`Iterator::next`] never returns `None`: after step `u64::MAX` comes step
/// 0 again (2^64 steps from now). [`next_into`](Self::next_into) is the
/// allocation-free form.
#[derive(Clone, Debug)]
pub struct Batches {
    sampler: Sampler,
    offset: usize,
    len: usize,
    step: u64,
}

impl Batches {
    pub(super) fn new(sampler: Sampler, offset: usize, len: usize) -> Self {
        Self { sampler, offset, len, step: 0 }
    }

    /// Makes `step` the step of the next batch.
    pub fn seek(&mut self, step: u64) {
        self.step = step;
    }

    /// The step of the next batch. A checkpoint saves this; resuming seeks
    /// to it.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The number of indices in each batch.
    pub fn batch_len(&self) -> usize {
        self.len
    }

    /// Writes the next batch into `out` (of length
    /// [`batch_len`](Self::batch_len)) and returns its step.
    pub fn next_into(&mut self, out: &mut [u64]) -> Result<u64, SamplerError> {
        if out.len() != self.len {
            return Err(SamplerError::OutputLength { expected: self.len, got: out.len() });
        }
        let step = self.step;
        self.sampler.fill_range(step, self.offset, out);
        self.step = step.wrapping_add(1);
        Ok(step)
    }
}

impl Iterator for Batches {
    type Item = Vec<u64>;

    fn next(&mut self) -> Option<Vec<u64>> {
        let mut out = vec![0; self.len];
        self.sampler.fill_range(self.step, self.offset, &mut out);
        self.step = self.step.wrapping_add(1);
        Some(out)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }

    /// Skips `n` batches in O(1), by seeking.
    fn nth(&mut self, n: usize) -> Option<Vec<u64>> {
        self.step = self.step.wrapping_add(n as u64);
        self.next()
    }
}

impl std::iter::FusedIterator for Batches {}
