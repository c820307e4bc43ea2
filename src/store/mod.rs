//! Zrecord, the record store: a dense index space `0..len` of byte records.
//!
//! The store is a state machine over three kinds of files (`meta.zr`, chunk
//! files, `dict.zr`); every mutation moves it from one durable state to the
//! next in the order `docs/crash-safety.md` writes down, with a sync at each
//! step that needs one. Code names the sync points as that document does
//! (`SYNC A1` and so on).
//!
//! Concurrency: [`Zrecord::gather`], [`Zrecord::gather_var`],
//! [`Zrecord::lengths`], [`Zrecord::append`], [`Zrecord::append_var`] and
//! [`Zrecord::train_dict`] take `&self` and may run from many threads at
//! once; readers never block (the published length is an atomic; entries
//! below it are immutable while `&self` borrows exist). [`Zrecord::delete`]
//! and [`Zrecord::compact`] take `&mut self`.

mod append;
mod chunks;
mod codec;
mod compact;
pub use compact::CompactReport;
mod delete;
mod dict;
mod gather;
mod intent;
mod open;
mod table;
mod verify;
pub use verify::VerifyReport;

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use crate::sync::{AtomicBool, AtomicU32, Mutex, MutexGuard, Ordering};

use crate::error::{Corruption, Error, Result};
use crate::format::{CHUNK_BYTES_MAX, Codec, Entry, RECORD_BYTES_MAX, Tail};
use crate::io::Vfs;

use chunks::Chunks;
use codec::Dictionary;
use table::Table;

pub use dict::default_dict_size;

/// How to open a store.
#[derive(Clone, Debug)]
pub struct Options {
    /// Open without writing: no lock, no recovery, every mutation refused.
    pub read_only: bool,
    /// zstd level of codec `zstd` (the reference's: 3).
    pub zstd_level: i32,
    /// zstd level of codec `zstd_dict` (the reference uses 19; the level is
    /// not part of the format). See `docs/benchmarks.md` for the trade-off.
    pub dict_level: i32,
    /// Store a record raw unless compression saves at least this fraction of
    /// it (0.0: raw only when it does not shrink, as the reference). Raw
    /// records read at memory speed; see `docs/benchmarks.md`.
    pub min_saving: f64,
    /// Input bytes per segment of an append (at least one record each):
    /// a segment is encoded while the previous one is written, and its
    /// writeback starts at once. Smaller segments overlap more finely and
    /// hold less encoded data at a time; the crash simulator uses small ones
    /// so that its appends span several.
    pub append_segment_bytes: usize,
}

/// The default [`Options::append_segment_bytes`]: 2 MiB.
pub const APPEND_SEGMENT_BYTES_DEFAULT: usize = 2 << 20;

impl Default for Options {
    fn default() -> Options {
        Options {
            read_only: false,
            zstd_level: 3,
            dict_level: 9,
            min_saving: 0.0,
            append_segment_bytes: APPEND_SEGMENT_BYTES_DEFAULT,
        }
    }
}

/// Storage usage, as [`Zrecord::stats`] reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Live records.
    pub records: u32,
    /// Bytes the live records occupy in the chunk files.
    pub live_bytes: u64,
    /// Bytes the live records hold once decoded.
    pub logical_bytes: u64,
    /// How far the chunk files have grown.
    pub chunk_bytes: u64,
    /// `chunk_bytes - live_bytes`: an upper bound on what `compact` frees
    /// (it includes the slack at chunk ends that no record fits in).
    pub reclaimable: u64,
    /// Number of chunk files (`tail_chunk + 1`).
    pub chunks: u32,
    /// Live records per codec tag: raw, zstd, zstd_dict.
    pub codec_records: [u32; 3],
    /// Size of `dict.zr`, if the store has a dictionary.
    pub dict_bytes: Option<u64>,
}

/// A record store.
///
/// ```
/// use loaderx::{Codec, Zrecord};
/// let dir = tempfile::tempdir()?;
/// let store = Zrecord::open(dir.path())?;
/// let first = store.append(b"hello world!", 3, 4, Codec::Zstd)?;
/// assert_eq!((first, store.len()), (0, 3));
/// let mut out = [0u8; 8];
/// store.gather(&[2, 0], &mut out, 4)?;
/// assert_eq!(&out, b"rld!hell");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Zrecord {
    path: PathBuf,
    vfs: Arc<dyn Vfs>,
    options: Options,
    /// `meta.zr`, open for as long as the store (it holds the writer's lock).
    meta: Box<dyn crate::io::VfsFile>,
    table: Table,
    chunks: Chunks,
    dict: OnceLock<Dictionary>,
    /// The published length: readers see records `0..len`.
    len: AtomicU32,
    /// The published last chunk (entries naming a later one are corrupt).
    tail_chunk: AtomicU32,
    /// Set when a sync failed: the store refuses writes (fail-stop).
    poisoned: AtomicBool,
    /// The writer's state; appends and dictionary installation hold it.
    writer: Mutex<Writer>,
}

/// What only the writer touches.
#[derive(Debug)]
struct Writer {
    /// The committed write frontier.
    tail: Tail,
}

impl Zrecord {
    /// Opens the store at `path` for writing, creating it if the directory is
    /// missing or empty.
    pub fn open(path: impl AsRef<Path>) -> Result<Zrecord> {
        Zrecord::open_with(path, Options::default())
    }

    /// Opens the store at `path` read-only.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Zrecord> {
        Zrecord::open_with(path, Options { read_only: true, ..Options::default() })
    }

    /// Opens with explicit options on the real filesystem.
    pub fn open_with(path: impl AsRef<Path>, options: Options) -> Result<Zrecord> {
        Zrecord::open_in(Arc::new(crate::io::real::RealFs), path.as_ref(), options)
    }

    /// Opens on any filesystem implementation (the simulator's, in tests).
    pub fn open_in(vfs: Arc<dyn Vfs>, path: &Path, options: Options) -> Result<Zrecord> {
        open::open(vfs, path, options)
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of live records.
    pub fn len(&self) -> u32 {
        self.len.load(Ordering::Acquire)
    }

    /// True if the store holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True if the store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.options.read_only
    }

    /// True if the store has a dictionary (`dict.zr`).
    pub fn has_dict(&self) -> bool {
        self.dict.get().is_some()
    }

    /// Makes everything durable. Every mutation is already durable when it
    /// returns, so this only re-checks (it exists for the reference's API).
    pub fn sync(&self) -> Result<()> {
        if self.options.read_only {
            return Ok(());
        }
        self.check_writable()?;
        let tail = self.lock_writer().tail;
        if let Some(chunk) = self.chunks.get(&*self.vfs, tail.chunk).map_err(|e| self.io("open chunk", e))? {
            chunk.file.sync_data().map_err(|e| self.sync_failed(e))?;
        }
        self.table.flush_header().map_err(|e| self.sync_failed(e))
    }

    /// For a read-only store: picks up records another process appended
    /// since open (or the last refresh) and returns the new length. A writer
    /// sees its own appends at once; this returns its length unchanged.
    pub fn refresh(&self) -> Result<u32> {
        if !self.options.read_only {
            return Ok(self.len());
        }
        // The writer stores the tail chunk before the length (docs/crash-safety.md),
        // so loading the length first never finds an entry past the tail chunk.
        let length = self.table.header_length().min(self.table.capacity());
        let tail_chunk = self.table.header().tail().chunk.min(crate::format::CHUNKS_MAX as u16 - 1);
        for id in 0..=tail_chunk {
            if let Some(chunk) = self.chunks.get(&*self.vfs, id).map_err(|e| self.io("open chunk", e))? {
                chunk.grew_to(chunk.file.len().map_err(|e| self.io("stat chunk", e))?.min(CHUNK_BYTES_MAX));
            }
        }
        self.tail_chunk.store(u32::from(tail_chunk), Ordering::Release);
        self.len.store(length, Ordering::Release);
        Ok(length)
    }

    /// Storage usage; reads the whole table (O(records)).
    pub fn stats(&self) -> Result<Stats> {
        let len = self.len();
        let mut stats = Stats { records: len, ..Stats::default() };
        for index in 0..len {
            let entry = self.table.entry(index);
            stats.live_bytes += u64::from(entry.phys_length());
            stats.logical_bytes += u64::from(entry.logic_length());
            if let Some(slot) = stats.codec_records.get_mut(usize::from(entry.codec)) {
                *slot += 1;
            }
        }
        let tail = self.lock_writer().tail;
        for id in 0..tail.chunk {
            let chunk = self.chunks.get(&*self.vfs, id).map_err(|e| self.io("open chunk", e))?;
            stats.chunk_bytes += chunk.map_or(0, |c| c.len()).min(CHUNK_BYTES_MAX);
        }
        stats.chunk_bytes += u64::from(tail.offset);
        stats.reclaimable = stats.chunk_bytes.saturating_sub(stats.live_bytes);
        stats.chunks = u32::from(tail.chunk) + 1;
        stats.dict_bytes = self.dict.get().map(|d| d.bytes.len() as u64);
        Ok(stats)
    }

    /// The validated table entry of record `index`: every field checked
    /// against the files before anything trusts it.
    fn entry(&self, index: u64, len: u32) -> Result<(Entry, Codec)> {
        if index >= u64::from(len) {
            return Err(Error::IndexOutOfRange { path: self.path.clone(), index, len });
        }
        let entry = self.table.entry(index as u32);
        let corrupt = |what| Error::Corrupt { path: self.path.clone(), index: Some(index), what };
        if entry.is_unwritten() {
            return Err(corrupt(Corruption::UnwrittenEntry));
        }
        let codec = Codec::from_tag(entry.codec).ok_or(corrupt(Corruption::UnknownCodec(entry.codec)))?;
        let (phys, logic) = (entry.phys_length(), entry.logic_length());
        if logic > RECORD_BYTES_MAX {
            return Err(corrupt(Corruption::LogicTooLarge(logic)));
        }
        if codec == Codec::Raw && phys != logic {
            return Err(corrupt(Corruption::RawLengthMismatch { phys, logic }));
        }
        // A lying stored length must not make one read touch gigabytes.
        let bound = codec::frame_bytes_max(logic);
        if codec != Codec::Raw && u64::from(phys) > bound {
            return Err(corrupt(Corruption::PhysTooLarge { phys, bound }));
        }
        if codec == Codec::ZstdDict && self.dict.get().is_none() {
            return Err(Error::NoDictionary { path: self.path.clone(), index: Some(index) });
        }
        let loc = entry.loc();
        let tail_chunk = self.tail_chunk.load(Ordering::Acquire);
        if u32::from(loc.chunk) > tail_chunk {
            return Err(corrupt(Corruption::ChunkPastTail { chunk: loc.chunk, tail_chunk: tail_chunk as u16 }));
        }
        Ok((entry, codec))
    }

    /// The stored bytes of a validated entry, borrowed from the chunk mapping
    /// where possible.
    fn stored<'a>(&'a self, index: u64, entry: &Entry, scratch: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        let loc = entry.loc();
        let corrupt = |what| Error::Corrupt { path: self.path.clone(), index: Some(index), what };
        let chunk = self
            .chunks
            .get(&*self.vfs, loc.chunk)
            .map_err(|e| self.io("open chunk", e))?
            .ok_or(corrupt(Corruption::ChunkMissing { chunk: loc.chunk }))?;
        let end = u64::from(loc.offset) + u64::from(entry.phys_length());
        if end > chunk.len() {
            return Err(corrupt(Corruption::PastChunkEnd { chunk: loc.chunk, end, chunk_len: chunk.len() }));
        }
        chunk
            .map
            .bytes(u64::from(loc.offset), entry.phys_length() as usize, scratch)
            .map_err(|e| self.io("read chunk", e))
    }

    fn io(&self, op: &'static str, source: std::io::Error) -> Error {
        Error::Io { path: self.path.clone(), op, source }
    }

    /// A failed sync: poison the store (fail-stop) and report it.
    fn sync_failed(&self, source: std::io::Error) -> Error {
        self.poisoned.store(true, Ordering::Release);
        Error::Io { path: self.path.clone(), op: "sync (the store now refuses writes until reopened)", source }
    }

    fn check_writable(&self) -> Result<()> {
        if self.options.read_only {
            return Err(Error::ReadOnly { path: self.path.clone() });
        }
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned { path: self.path.clone() });
        }
        Ok(())
    }

    fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        // A panic while holding the lock leaves `Writer` consistent: the tail
        // only changes after a commit.
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }
}
