//! loaderx: an embedded record store for ML training data, and a data loader
//! on top.
//!
//! [`Zrecord`] is the store: a dense index space of byte records, compressed
//! one by one (raw, zstd, zstd with a trained dictionary), appended in
//! batches, gathered in parallel straight into the caller's memory, deleted
//! by swap-with-last and compacted in place. Its files are byte-compatible
//! with the Python package loaderx 0.7.3 (format version 3, `docs/format.md`),
//! and every mutation is crash-ordered against power loss
//! (`docs/crash-safety.md`).
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]

pub mod dataset;
pub mod error;
mod first_fit;
pub mod format;
#[cfg(feature = "arrow")]
pub mod import;
pub mod io;
pub mod loader;
#[cfg(feature = "remote")]
pub mod publish;
pub mod sampler;
mod store;
mod sync;
pub mod table;

pub use error::{Corruption, Error, Result};
pub use format::Codec;
pub use store::{
    APPEND_SEGMENT_BYTES_DEFAULT, CHECKSUM_LAG_BYTES_DEFAULT, CompactOptions, CompactPlan, CompactReport, CoverReport,
    Options, ReadMode, ReadOptions, ReadStats, Stats, VerifyReads, VerifyReport, Zrecord, default_dict_size,
};
