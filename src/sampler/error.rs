//! The sampler's error type: every argument a caller can get wrong.
//!
//! The sampler never panics on an argument; it refuses it with one of these.

use std::fmt;

/// An invalid argument to the sampler.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SamplerError {
    /// The index space is empty (`len == 0`): there is nothing to sample.
    EmptyIndexSpace,
    /// The batch size is zero.
    ZeroBatch,
    /// A shard count of zero.
    ZeroShards,
    /// A shard index not below the shard count.
    ShardIndexOutOfRange {
        /// The shard index given.
        index: usize,
        /// The shard count given.
        count: usize,
    },
    /// The shard count does not divide the (effective) global batch, so the
    /// hosts would get batches of different sizes.
    ShardsDoNotDivideBatch {
        /// The global batch length, [`Sampler::batch_len`](super::Sampler::batch_len).
        batch_len: usize,
        /// The shard count given.
        count: usize,
    },
    /// An output buffer whose length is not the batch length.
    OutputLength {
        /// The batch length the buffer must have.
        expected: usize,
        /// The buffer's length.
        got: usize,
    },
}

impl fmt::Display for SamplerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::EmptyIndexSpace => write!(f, "cannot sample from an empty index space (len 0)"),
            Self::ZeroBatch => write!(f, "batch size must be at least 1"),
            Self::ZeroShards => write!(f, "shard count must be at least 1"),
            Self::ShardIndexOutOfRange { index, count } => {
                write!(f, "shard index {index} is out of range for {count} shards")
            }
            Self::ShardsDoNotDivideBatch { batch_len, count } => {
                write!(f, "{count} shards do not divide the global batch of {batch_len} indices evenly")
            }
            Self::OutputLength { expected, got } => {
                write!(f, "output buffer holds {got} indices but the batch has {expected}")
            }
        }
    }
}

impl std::error::Error for SamplerError {}
