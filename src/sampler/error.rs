//! The sampler's error type: every argument a caller can get wrong.
//!
//! The sampler never panics on an argument; it refuses it with one of these.

use std::fmt;

/// An invalid argument to the sampler.
#[derive(Clone, Debug, PartialEq)]
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
    /// A mixture with no source (an empty weight list).
    NoWeights,
    /// A mixture of more sources than [`MAX_SOURCES`](super::MAX_SOURCES).
    TooManySources {
        /// The number given.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A mixture weight that is not finite and positive (or so small beside
    /// the largest that it rounds to nothing, below 2^-40 of it).
    BadWeight {
        /// The weight segment ([`Schedule`](super::Schedule) order, 0 first).
        segment: usize,
        /// The source.
        source: usize,
        /// The weight given.
        weight: f64,
    },
    /// A weight list whose length is not the number of sources.
    WeightCount {
        /// The weight segment.
        segment: usize,
        /// The number of sources.
        expected: usize,
        /// The number of weights.
        got: usize,
    },
    /// A weight schedule whose segments do not start at step 0 and go up.
    ScheduleOrder {
        /// The segment.
        segment: usize,
        /// Its start step.
        start: u64,
        /// The step it must be past (for the first segment: it must be 0).
        after: Option<u64>,
    },
    /// The samples of this step lie past sample `u64::MAX` of the mixture.
    PositionOverflow {
        /// The step.
        step: u64,
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
            Self::NoWeights => write!(f, "a mixture needs at least one source"),
            Self::TooManySources { count, max } => write!(f, "a mixture of {count} sources (at most {max})"),
            Self::BadWeight { segment, source, weight } => write!(
                f,
                "weight {weight} of source {source} (weight segment {segment}) must be finite and positive, and at least 2^-40 of the largest"
            ),
            Self::WeightCount { segment, expected, got } => {
                write!(f, "weight segment {segment} has {got} weights for {expected} sources")
            }
            Self::ScheduleOrder { segment, start, after: None } => {
                write!(f, "the first weight segment must start at step 0, not {start} (segment {segment})")
            }
            Self::ScheduleOrder { segment, start, after: Some(after) } => {
                write!(f, "weight segment {segment} starts at step {start}, not after the previous one's {after}")
            }
            Self::PositionOverflow { step } => {
                write!(f, "step {step} of the mixture lies past sample 2^64 - 1")
            }
        }
    }
}

impl std::error::Error for SamplerError {}
