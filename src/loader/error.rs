//! The loader's error type.

use std::fmt;

use crate::dataset::DatasetError;
use crate::sampler::SamplerError;

/// The error a transform returns.
pub type TransformError = Box<dyn std::error::Error + Send + Sync>;

/// Everything that can go wrong building or running a [`DataLoader`](super::DataLoader).
#[derive(Debug)]
#[non_exhaustive]
pub enum LoaderError {
    /// A loader needs at least one stream.
    NoStreams,
    /// Two streams share a name.
    DuplicateStream(String),
    /// The streams differ in length; every stream with its length.
    LengthMismatch(Vec<(String, u64)>),
    /// A mixture needs at least one source.
    NoSources,
    /// A mixture's source whose stream names are not source 0's.
    SourceStreams {
        /// The source.
        source: usize,
        /// Source 0's names, sorted.
        expected: Vec<String>,
        /// This source's names, sorted.
        got: Vec<String>,
    },
    /// A mixture's source whose stream holds other records (kind, dtype,
    /// shape) than source 0's stream of that name.
    SourceSchema {
        /// The source.
        source: usize,
        /// The stream.
        stream: String,
        /// Source 0's records.
        expected: String,
        /// This source's records.
        got: String,
    },
    /// The sampler refused the configuration (empty streams, batch size 0,
    /// a shard count that does not divide the batch, ...).
    Sampler(SamplerError),
    /// Another setting that does not fit.
    InvalidArgument(String),
    /// A worker thread could not be started.
    Spawn(std::io::Error),
    /// Gathering stream `stream` for the batch of `step` failed.
    Gather {
        /// The step.
        step: u64,
        /// The stream.
        stream: String,
        /// Why.
        source: DatasetError,
    },
    /// The transform returned an error for the batch of `step`.
    Transform {
        /// The step.
        step: u64,
        /// The transform's error.
        source: TransformError,
    },
    /// The transform (or a gather) panicked on the batch of `step`.
    Panic {
        /// The step.
        step: u64,
        /// The panic's message.
        message: String,
    },
    /// The loader stopped after returning an earlier error.
    Stopped,
    /// A saved [`LoaderState`](super::LoaderState) that is malformed, or
    /// does not fit the loader it is loaded into; why.
    State(String),
}

impl From<SamplerError> for LoaderError {
    fn from(e: SamplerError) -> LoaderError {
        LoaderError::Sampler(e)
    }
}

impl LoaderError {
    /// The step a worker failure happened at, if this is one.
    pub fn step(&self) -> Option<u64> {
        match self {
            LoaderError::Gather { step, .. }
            | LoaderError::Transform { step, .. }
            | LoaderError::Panic { step, .. } => Some(*step),
            _ => None,
        }
    }
}

impl fmt::Display for LoaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoaderError::NoStreams => write!(f, "a loader needs at least one stream"),
            LoaderError::DuplicateStream(name) => write!(f, "two streams are named {name:?}"),
            LoaderError::LengthMismatch(lengths) => {
                let list: Vec<String> = lengths.iter().map(|(n, l)| format!("{n:?}: {l}")).collect();
                write!(f, "all streams must have the same length, got {{{}}}", list.join(", "))
            }
            LoaderError::NoSources => write!(f, "a mixture needs at least one source"),
            LoaderError::SourceStreams { source, expected, got } => {
                write!(f, "mixture source {source} has streams {got:?}, source 0 has {expected:?}")
            }
            LoaderError::SourceSchema { source, stream, expected, got } => {
                write!(f, "mixture source {source}'s stream {stream:?} holds {got}, source 0's holds {expected}")
            }
            LoaderError::Sampler(e) => write!(f, "sampler: {e}"),
            LoaderError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            LoaderError::Spawn(e) => write!(f, "could not start a loader thread: {e}"),
            LoaderError::Gather { step, stream, source } => {
                write!(f, "step {step}: gathering stream {stream:?} failed: {source}")
            }
            LoaderError::Transform { step, source } => write!(f, "step {step}: the transform failed: {source}"),
            LoaderError::Panic { step, message } => write!(f, "step {step}: a loader worker panicked: {message}"),
            LoaderError::Stopped => write!(f, "the loader stopped after an earlier error"),
            LoaderError::State(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for LoaderError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LoaderError::Sampler(e) => Some(e),
            LoaderError::Spawn(e) => Some(e),
            LoaderError::Gather { source, .. } => Some(source),
            LoaderError::Transform { source, .. } => Some(&**source),
            _ => None,
        }
    }
}
