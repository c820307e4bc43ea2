//! One host's share of a multi-host sampler.

use super::Sampler;
use super::error::SamplerError;
use super::iter::Batches;

/// Host `index` of `count`: the `index`-th contiguous slice of every global
/// batch of a [`Sampler`]. The slices of hosts `0..count` are disjoint and
/// concatenate, in host order, to the global batch. Made by
/// [`Sampler::shard`].
///
/// ```
/// use loaderx::sampler::{Mode, Sampler};
///
/// let global = Sampler::new(1000, 8, Mode::Cyclic, 7).unwrap();
/// let hosts: Vec<_> = (0..4).map(|i| global.shard(i, 4).unwrap()).collect();
/// let joined: Vec<u64> = hosts.iter().flat_map(|h| h.batch(5)).collect();
/// assert_eq!(joined, global.batch(5));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardedSampler {
    global: Sampler,
    index: usize,
    count: usize,
    shard_len: usize,
}

impl ShardedSampler {
    pub(super) fn new(global: Sampler, index: usize, count: usize) -> Result<Self, SamplerError> {
        if count == 0 {
            return Err(SamplerError::ZeroShards);
        }
        if index >= count {
            return Err(SamplerError::ShardIndexOutOfRange { index, count });
        }
        let batch_len = global.batch_len();
        if !batch_len.is_multiple_of(count) {
            return Err(SamplerError::ShardsDoNotDivideBatch { batch_len, count });
        }
        Ok(Self { global, index, count, shard_len: batch_len / count })
    }

    /// The sampler of the global batches.
    pub fn global(&self) -> &Sampler {
        &self.global
    }

    /// This host's index.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The number of hosts.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The number of indices this host gets each step: the global
    /// [`batch_len`](Sampler::batch_len) divided by the host count.
    pub fn batch_len(&self) -> usize {
        self.shard_len
    }

    /// Writes this host's slice of the batch of `step` into `out`, whose
    /// length must be [`batch_len`](Self::batch_len). O(`batch_len`).
    pub fn fill(&self, step: u64, out: &mut [u64]) -> Result<(), SamplerError> {
        if out.len() != self.shard_len {
            return Err(SamplerError::OutputLength { expected: self.shard_len, got: out.len() });
        }
        self.global.fill_range(step, self.offset(), out);
        Ok(())
    }

    /// This host's slice of the batch of `step`, in a new vector.
    pub fn batch(&self, step: u64) -> Vec<u64> {
        let mut out = vec![0; self.shard_len];
        self.global.fill_range(step, self.offset(), &mut out);
        out
    }

    /// An endless iterator over this host's slices, from step 0.
    pub fn iter(&self) -> Batches {
        Batches::new(self.global, self.offset(), self.shard_len)
    }

    fn offset(&self) -> usize {
        self.index * self.shard_len
    }
}
