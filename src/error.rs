//! The store's error type, [`Error`] (with [`Corruption`], what is wrong
//! with a damaged store). The sampler, the datasets and the loader have
//! their own (`SamplerError`, `DatasetError`, `LoaderError`); a dataset's
//! wraps this one where a store operation failed.
//!
//! Every failure the caller can cause or the disk can present is a variant
//! here, with the store path and the record index where they apply. Bytes from
//! disk never cause a panic: a broken store is [`Error::Corrupt`].

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed.
    Io {
        /// The file or directory it was about.
        path: PathBuf,
        /// What the store was doing.
        op: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// The path exists but is not a directory.
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// The directory holds no store (read-only open of an empty directory).
    NoStore {
        /// The directory.
        path: PathBuf,
    },
    /// Nothing exists at the path (a read-only open, which creates nothing).
    NoDirectory {
        /// The path.
        path: PathBuf,
    },
    /// `meta.zr` is not a store's metadata: wrong magic or an unknown version.
    NotAStore {
        /// The store directory.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// Chunk files or a dictionary exist but `meta.zr` does not: the store
    /// lost its metadata; creating a new one would orphan the data.
    MetaMissing {
        /// The store directory.
        path: PathBuf,
    },
    /// `meta.zr` is too short to hold its header or the entries its header counts.
    MetaTruncated {
        /// The store directory.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The length the header requires.
        needed: u64,
    },
    /// Another writer holds the store's lock.
    Locked {
        /// The store directory.
        path: PathBuf,
    },
    /// A delete or compaction, and the store is open for reading elsewhere:
    /// a read-only open (in another process, or another handle of this
    /// one) holds the readers' lock. Retry once the readers have closed, or
    /// wait for them ([`crate::Options::wait`]).
    ReadersOpen {
        /// The store directory.
        path: PathBuf,
    },
    /// A read-only open while a delete or compaction runs on the store
    /// (it holds the readers' lock exclusively). Retry once it has ended,
    /// or wait for it ([`crate::Options::wait`]).
    MutationRunning {
        /// The store directory.
        path: PathBuf,
    },
    /// What a read-only store reads by no longer holds: its files changed
    /// under it in a way no writer of this crate makes while a reader is
    /// open (a chunk file shrank, an entry names bytes the reader has not
    /// seen, or an entry changed while its bytes were read, which may then
    /// be another record's): a delete or compaction by a process that takes no readers'
    /// lock (loaderx 0.7.3's writer, a store whose readers could not take
    /// the lock), or another program. Not corruption: open the store again.
    StoreChanged {
        /// The store directory.
        path: PathBuf,
        /// The record, when one read found it.
        index: Option<u64>,
        /// What was found.
        what: String,
    },
    /// A write on a store opened read-only.
    ReadOnly {
        /// The store directory.
        path: PathBuf,
    },
    /// An earlier sync failed; the store refuses writes until it is reopened.
    Poisoned {
        /// The store directory.
        path: PathBuf,
    },
    /// An interrupted delete or compaction must be finished by opening the
    /// store for writing once.
    RecoveryNeeded {
        /// The store directory.
        path: PathBuf,
    },
    /// A record index at or past the store's length.
    IndexOutOfRange {
        /// The store directory.
        path: PathBuf,
        /// The index asked for.
        index: u64,
        /// The store's length.
        len: u32,
    },
    /// A record longer than [`crate::format::RECORD_BYTES_MAX`].
    RecordTooLarge {
        /// Its position in the call's input.
        position: usize,
        /// Its length.
        len: u64,
    },
    /// The append would exceed [`crate::format::RECORDS_MAX`] records or the
    /// chunk files' capacity.
    StoreFull {
        /// The store directory.
        path: PathBuf,
    },
    /// The caller's arguments do not fit together (buffer sizes, offsets).
    InvalidArgument(String),
    /// A stored record's length is not the one the caller's layout expects.
    LengthMismatch {
        /// The store directory.
        path: PathBuf,
        /// The record.
        index: u64,
        /// Its stored logical length.
        stored: u32,
        /// The length the caller's stride or lengths give.
        expected: u64,
    },
    /// A `zstd_dict` record, or a `zstd_dict` append, and the store has no dictionary.
    NoDictionary {
        /// The store directory.
        path: PathBuf,
        /// The record, for a read.
        index: Option<u64>,
    },
    /// `train_dict` on a store that already has a dictionary (replacing it
    /// would make every `zstd_dict` record unreadable).
    DictionaryExists {
        /// The store directory.
        path: PathBuf,
    },
    /// zstd could not train a dictionary from the samples.
    DictionaryTraining {
        /// zstd's reason.
        reason: String,
    },
    /// The store's bytes contradict its own invariants.
    Corrupt {
        /// The store directory.
        path: PathBuf,
        /// The record, when the problem is one record's.
        index: Option<u64>,
        /// What is wrong.
        what: Corruption,
    },
}

/// The ways a store's bytes can be inconsistent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Corruption {
    /// The table entry was never written (all zero): the header counts more
    /// records than the table holds.
    UnwrittenEntry,
    /// An unknown codec tag.
    UnknownCodec(u8),
    /// The entry names a chunk past the last one.
    ChunkPastLast {
        /// The chunk named.
        chunk: u16,
        /// The last chunk.
        last_chunk: u16,
    },
    /// The chunk file the entry names does not exist.
    ChunkMissing {
        /// The chunk.
        chunk: u16,
    },
    /// The stored bytes run past the end of the chunk file.
    PastChunkEnd {
        /// The chunk.
        chunk: u16,
        /// Where the stored bytes end.
        end: u64,
        /// The chunk file's length.
        chunk_len: u64,
    },
    /// A logical length over the record limit.
    LogicTooLarge(u32),
    /// A compressed record stored in more bytes than zstd can ever need for
    /// its logical length (`ZSTD_compressBound`).
    PhysTooLarge {
        /// Stored length.
        phys: u32,
        /// The most a frame of that many bytes takes.
        bound: u64,
    },
    /// A raw record whose stored and logical lengths differ.
    RawLengthMismatch {
        /// Stored length.
        phys: u32,
        /// Logical length.
        logic: u32,
    },
    /// zstd refused the stored bytes (bad frame or content checksum).
    Decode(String),
    /// The stored bytes decoded to a different length than the entry says.
    DecodedLength {
        /// Bytes produced.
        got: usize,
        /// Logical length.
        want: u32,
    },
    /// The header is inconsistent with itself or with the files.
    Header(String),
    /// An intent record (see `docs/crash-safety.md`) contradicts the header.
    Intent(String),
    /// Two entries claim overlapping bytes.
    Overlap {
        /// The other record.
        other: u64,
    },
    /// `dict.zr` is not a usable dictionary.
    Dictionary(String),
    /// The stored bytes do not match the record's checksum (`sums.zr`).
    Checksum {
        /// The chunk the entry names.
        chunk: u16,
        /// The offset the entry names.
        offset: u32,
        /// The checksum was taken for this very entry: the stored bytes
        /// changed (or their checksum did). Otherwise the entry changed: it
        /// points at bytes that are not the record's, or says other lengths
        /// or another codec.
        entry_matches: bool,
    },
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Corruption::UnwrittenEntry => {
                write!(f, "table entry was never written (header length past the written table)")
            }
            Corruption::UnknownCodec(tag) => write!(f, "unknown codec tag {tag}"),
            Corruption::ChunkPastLast { chunk, last_chunk } => {
                write!(f, "entry names chunk {chunk}, past the last chunk {last_chunk}")
            }
            Corruption::ChunkMissing { chunk } => write!(f, "chunk file {chunk}.zr is missing"),
            Corruption::PastChunkEnd { chunk, end, chunk_len } => {
                write!(f, "stored bytes end at {end}, past the end of {chunk}.zr ({chunk_len} bytes)")
            }
            Corruption::LogicTooLarge(len) => write!(f, "logical length {len} exceeds the record limit"),
            Corruption::PhysTooLarge { phys, bound } => {
                write!(f, "compressed record stores {phys} bytes, more than any zstd frame of its length ({bound})")
            }
            Corruption::RawLengthMismatch { phys, logic } => {
                write!(f, "raw record stores {phys} bytes but claims {logic}")
            }
            Corruption::Decode(reason) => write!(f, "stored record failed to decode: {reason}"),
            Corruption::DecodedLength { got, want } => write!(f, "record decoded to {got} bytes, entry says {want}"),
            Corruption::Header(what) => write!(f, "header: {what}"),
            Corruption::Intent(what) => write!(f, "interrupted-operation record: {what}"),
            Corruption::Overlap { other } => write!(f, "stored bytes overlap those of record {other}"),
            Corruption::Checksum { chunk, offset, entry_matches: true } => write!(
                f,
                "stored bytes at {chunk}.zr offset {offset} do not match the record's checksum: the bytes changed"
            ),
            Corruption::Checksum { chunk, offset, entry_matches: false } => write!(
                f,
                "the table entry (at {chunk}.zr offset {offset}) is not the one the record's checksum was taken for, \
                 and its bytes do not match it: the entry changed"
            ),
            Corruption::Dictionary(what) => write!(f, "dict.zr: {what}"),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, op, source } => write!(f, "{}: {op} failed: {source}", path.display()),
            Error::NotADirectory { path } => {
                write!(f, "{}: exists and is not a directory (a store or dataset is a directory)", path.display())
            }
            Error::NoStore { path } => write!(f, "{}: no store here (meta.zr is missing)", path.display()),
            Error::NoDirectory { path } => write!(f, "{}: no such directory", path.display()),
            Error::NotAStore { path, reason } => {
                write!(f, "{}: not a zrecord store, or written by a newer version: {reason}", path.display())
            }
            Error::MetaMissing { path } => write!(
                f,
                "{}: meta.zr is missing but chunk files are present; refusing to create a new store over them",
                path.display()
            ),
            Error::MetaTruncated { path, len, needed } => {
                write!(f, "{}: meta.zr is {len} bytes, its header needs {needed}", path.display())
            }
            Error::Locked { path } => write!(f, "{}: another writer has the store open", path.display()),
            Error::ReadersOpen { path } => write!(
                f,
                "{}: the store is open for reading elsewhere (a read-only open holds the readers' lock); \
                 close the readers first, or wait for them (--wait)",
                path.display()
            ),
            Error::MutationRunning { path } => write!(
                f,
                "{}: a delete or compaction is running on the store; open it once that has ended, or wait for it",
                path.display()
            ),
            Error::StoreChanged { path, index, what } => {
                let record = index.map(|i| format!("record {i}: ")).unwrap_or_default();
                write!(
                    f,
                    "{}: {record}the store changed under this reader ({what}), as a delete or compaction by a \
                     process that takes no readers' lock does; open it again",
                    path.display()
                )
            }
            Error::ReadOnly { path } => write!(f, "{}: the store is open read-only", path.display()),
            Error::Poisoned { path } => write!(
                f,
                "{}: an earlier sync failed, so the store refuses writes; reopen it to recover from what is on disk",
                path.display()
            ),
            Error::RecoveryNeeded { path } => write!(
                f,
                "{}: a delete or compaction was interrupted; open the store for writing once to finish it",
                path.display()
            ),
            Error::IndexOutOfRange { path, index, len } => {
                write!(f, "{}: index {index} out of range (store holds {len} records)", path.display())
            }
            Error::RecordTooLarge { position, len } => write!(
                f,
                "record {position} of the call is {len} bytes, over the {} byte limit",
                crate::format::RECORD_BYTES_MAX
            ),
            Error::StoreFull { path } => write!(f, "{}: store is full", path.display()),
            Error::InvalidArgument(what) => write!(f, "invalid argument: {what}"),
            Error::LengthMismatch { path, index, stored, expected } => write!(
                f,
                "{}: record {index} is {stored} bytes, the caller's layout expects {expected}",
                path.display()
            ),
            Error::NoDictionary { path, index: Some(index) } => {
                write!(f, "{}: record {index} needs the dictionary, and dict.zr is missing", path.display())
            }
            Error::NoDictionary { path, index: None } => {
                write!(f, "{}: zstd_dict needs a dictionary: call train_dict first", path.display())
            }
            Error::DictionaryExists { path } => write!(f, "{}: the store already has a dictionary", path.display()),
            Error::DictionaryTraining { reason } => {
                write!(f, "zstd dictionary training failed (too few or too small samples?): {reason}")
            }
            Error::Corrupt { path, index: Some(index), what } => {
                write!(f, "{}: record {index}: {what}", path.display())
            }
            Error::Corrupt { path, index: None, what } => write!(f, "{}: {what}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
