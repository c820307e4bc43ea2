//! The dataset layer's error type.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Everything that can go wrong opening, reading or writing a dataset.
#[derive(Debug)]
#[non_exhaustive]
pub enum DatasetError {
    /// The record store beneath failed.
    Store(crate::Error),
    /// A file outside the store (`schema.json`, a `.npy` file) could not be
    /// read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// The dataset's directory does not exist.
    NoDataset {
        /// The dataset directory.
        path: PathBuf,
    },
    /// A write with [`WriteMode::Error`](super::WriteMode::Error) found a
    /// dataset that already holds records.
    Exists {
        /// The dataset directory.
        path: PathBuf,
        /// Records it holds.
        records: u64,
    },
    /// The directory has no `schema.json`: it is not a loaderx dataset.
    NoSchema {
        /// The dataset directory.
        path: PathBuf,
    },
    /// `schema.json` is not valid JSON, or a field is missing or of the wrong type.
    Schema {
        /// The schema file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// `schema.json`'s `format` is not `"loaderx-zrecord"`.
    UnknownFormat {
        /// The schema file.
        path: PathBuf,
        /// The format it names.
        found: String,
    },
    /// `schema.json`'s `version` is not 1.
    UnsupportedVersion {
        /// The schema file.
        path: PathBuf,
        /// The version it names.
        found: String,
    },
    /// A dtype string that is not one of NumPy's `dtype.str` forms this crate reads.
    UnknownDtype {
        /// The string.
        dtype: String,
        /// Why it is refused.
        reason: String,
    },
    /// A codec name other than `"zstd"`, `"raw"`, `"zstd_dict"`.
    UnknownCodec {
        /// The name.
        found: String,
    },
    /// A ragged dataset opened as a fixed-shape one, or the reverse.
    WrongKind {
        /// The dataset directory.
        path: PathBuf,
        /// True if the dataset is ragged.
        ragged: bool,
    },
    /// A typed access whose element type is not the dataset's.
    DtypeMismatch {
        /// The dataset's dtype.
        stored: String,
        /// The dtype of the Rust type asked for.
        requested: String,
    },
    /// Appending records of another dtype or shape to an existing dataset.
    Incompatible {
        /// The dataset directory.
        path: PathBuf,
        /// What the dataset holds, e.g. `<f4(64,)`.
        holds: String,
        /// What the call tried to append.
        given: String,
    },
    /// A buffer, slice or shape that does not fit the layout.
    ShapeMismatch(String),
    /// A record (one sample) over the store's 1 MiB limit.
    RecordTooLarge {
        /// The file the record comes from (a `.npy` file) or the dataset
        /// it was written to, where known.
        path: Option<PathBuf>,
        /// Its size in bytes.
        bytes: u64,
    },
    /// A `.npy` file this crate cannot convert.
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A stored ragged record whose length is not a whole number of rows.
    PartialRow {
        /// The record.
        index: u64,
        /// Its length in bytes.
        bytes: u32,
        /// Bytes per row.
        row_bytes: usize,
    },
    /// A record with more rows than an explicit `max_len` when padding.
    TooLong {
        /// Its position in the batch.
        position: usize,
        /// Its rows.
        rows: u64,
        /// The `max_len` asked for.
        max_len: usize,
    },
    /// A `zstd_dict` dictionary could not be trained on the write's first
    /// records (too few, or too small). Nothing of a new dataset was
    /// created.
    DictionaryTraining {
        /// The dataset directory.
        path: PathBuf,
        /// The non-empty records of the sample.
        records: usize,
        /// Their bytes.
        bytes: usize,
        /// zstd's reason.
        reason: String,
    },
    /// Another argument that does not fit.
    InvalidArgument(String),
    /// `shards.json` is not a valid shard table (untrusted input: every count,
    /// name and key is checked).
    ShardTable {
        /// The `shards.json` file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A shard the shard table names has no directory, store or `schema.json`.
    ShardMissing {
        /// The shard's directory.
        path: PathBuf,
        /// The shard.
        shard: usize,
    },
    /// A shard's `schema.json` is not the shard table's schema.
    ShardSchema {
        /// The shard's directory.
        path: PathBuf,
        /// The shard.
        shard: usize,
        /// What the shard holds.
        holds: String,
        /// What the shard table says.
        shard_table: String,
    },
    /// A sealed shard whose store does not hold the count the shard table records.
    ShardLength {
        /// The shard's directory.
        path: PathBuf,
        /// The shard.
        shard: usize,
        /// Records the store holds.
        holds: u64,
        /// Records the shard table records for it.
        shard_table: u64,
    },
    /// A shard directory the shard table does not name yet (left by a
    /// rollover that crashed) holds records: it is not this writer's to reuse.
    ShardNotEmpty {
        /// The shard's directory.
        path: PathBuf,
        /// Records it holds.
        holds: u64,
    },
    /// A global record index at or past the dataset's length.
    IndexOutOfRange {
        /// The dataset directory.
        path: PathBuf,
        /// The index asked for.
        index: u64,
        /// The dataset's length.
        len: u64,
    },
}

impl From<crate::Error> for DatasetError {
    fn from(e: crate::Error) -> DatasetError {
        DatasetError::Store(e)
    }
}

impl fmt::Display for DatasetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DatasetError::Store(e) => e.fmt(f),
            DatasetError::Io { path, op, source } => write!(f, "{}: {op} failed: {source}", path.display()),
            DatasetError::NoDataset { path } => write!(
                f,
                "{}: no such directory, so no dataset there (check the path; write one with write_dataset or write_ragged)",
                path.display()
            ),
            DatasetError::Exists { path, records } => write!(
                f,
                "{}: a dataset of {records} records exists and the write mode is \"error\"; pass mode \"append\" to add to it or \"overwrite\" to replace it",
                path.display()
            ),
            DatasetError::NoSchema { path } => {
                write!(f, "{}: no schema.json, so not a loaderx dataset", path.display())
            }
            DatasetError::Schema { path, reason } => write!(f, "{}: {reason}", path.display()),
            DatasetError::UnknownFormat { path, found } => {
                write!(f, "{}: format is {found}, not \"loaderx-zrecord\"", path.display())
            }
            DatasetError::UnsupportedVersion { path, found } => {
                write!(f, "{}: schema version {found} is not supported (this crate reads version 1)", path.display())
            }
            DatasetError::UnknownDtype { dtype, reason } => write!(f, "dtype {dtype:?} not supported: {reason}"),
            DatasetError::UnknownCodec { found } => {
                write!(f, "unknown codec {found:?}, expected one of \"raw\", \"zstd\", \"zstd_dict\"")
            }
            DatasetError::WrongKind { path, ragged: true } => {
                write!(f, "{} is a ragged dataset; open it with RaggedDataset", path.display())
            }
            DatasetError::WrongKind { path, ragged: false } => {
                write!(f, "{} is a fixed-shape dataset; open it with Dataset", path.display())
            }
            DatasetError::DtypeMismatch { stored, requested } => {
                write!(f, "the dataset holds {stored} elements, the caller asked for {requested}")
            }
            DatasetError::Incompatible { path, holds, given } => {
                write!(f, "{} holds {holds} records, cannot append {given}", path.display())
            }
            DatasetError::ShapeMismatch(what) => write!(f, "shape mismatch: {what}"),
            DatasetError::RecordTooLarge { path, bytes } => {
                if let Some(path) = path {
                    write!(f, "{}: ", path.display())?;
                }
                write!(f, "a sample of {bytes} bytes exceeds the {} byte record limit", crate::format::RECORD_BYTES_MAX)
            }
            DatasetError::Npy { path, reason } => write!(f, "{}: {reason}", path.display()),
            DatasetError::PartialRow { index, bytes, row_bytes } => {
                write!(f, "record {index} is {bytes} bytes, not a whole number of {row_bytes}-byte rows")
            }
            DatasetError::TooLong { position, rows, max_len } => {
                write!(
                    f,
                    "record {position} of the batch has {rows} rows, over max_len={max_len}: raise max_len, or ask for truncation (pad_truncated; truncate=True in Python)"
                )
            }
            DatasetError::DictionaryTraining { path, records, bytes, reason } => write!(
                f,
                "{}: cannot train a zstd_dict dictionary on {records} records ({bytes} bytes): {reason}; \
                 nothing was written (write more records, or use codec \"zstd\")",
                path.display()
            ),
            DatasetError::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            DatasetError::ShardTable { path, reason } => write!(f, "{}: bad shard table: {reason}", path.display()),
            DatasetError::ShardMissing { path, shard } => {
                write!(
                    f,
                    "{}: shard {shard} named by the shard table is missing (no store or schema.json)",
                    path.display()
                )
            }
            DatasetError::ShardSchema { path, shard, holds, shard_table } => {
                write!(f, "{}: shard {shard} holds {holds} records, the shard table says {shard_table}", path.display())
            }
            DatasetError::ShardLength { path, shard, holds, shard_table } => {
                write!(
                    f,
                    "{}: shard {shard} holds {holds} records, the shard table records {shard_table}",
                    path.display()
                )
            }
            DatasetError::ShardNotEmpty { path, holds } => write!(
                f,
                "{}: a shard directory the shard table does not name holds {holds} records; move it away",
                path.display()
            ),
            DatasetError::IndexOutOfRange { path, index, len } => {
                write!(f, "{}: index {index} out of range for a dataset of {len} records", path.display())
            }
        }
    }
}

impl DatasetError {
    /// The error with `path` named where it names no file yet (a record
    /// over the limit).
    pub(crate) fn at(self, path: &std::path::Path) -> DatasetError {
        match self {
            DatasetError::RecordTooLarge { path: None, bytes } => {
                DatasetError::RecordTooLarge { path: Some(path.to_path_buf()), bytes }
            }
            e => e,
        }
    }
}

impl std::error::Error for DatasetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            DatasetError::Store(e) => Some(e),
            DatasetError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
