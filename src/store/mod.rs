//! Zrecord, the record store: a dense index space `0..len` of byte records.
//!
//! The store is a state machine over three kinds of files (`meta.zr`, chunk
//! files, `dict.zr`); every mutation moves it from one durable state to the
//! next in the order `docs/crash-safety.md` writes down, with a sync at each
//! step that needs one. Code names the sync points as that document does
//! (`SYNC A1` and so on).
//!
//! Each invariant has one owner, a file of this module:
//! - `meta.rs`: `meta.zr` (header, table, intent area), the frontier and the
//!   published length, its creation and growth, every store into the
//!   mapping and every sync;
//! - `chunks.rs`: the chunk files (their creation, syncs and removal) and
//!   their known lengths;
//! - `access.rs`: what an open store may do, and where it is (held once);
//! - `entry.rs`: what makes a table entry valid, on the read and write side;
//! - `frontier.rs`: where a record is placed;
//! - `fail_stop.rs`: no write after a failed sync;
//! - `read.rs`: one record read, validated, into exactly its bytes;
//! - `batch.rs`: the batched read of records not in memory;
//! - `readers.rs`: the readers' lock (read-only opens against a delete or
//!   compaction in another process).
//!
//! The mutations orchestrate them: `open.rs` (creation, recovery, the
//! frontier check), `append.rs`, `delete.rs`, `compact.rs` (over the
//! moves it shares with `fill.rs` and `repack.rs`: `moves.rs`), `dict.rs`; the
//! read side is `gather.rs` and `verify.rs`.
//!
//! Concurrency: [`Zrecord::gather`], [`Zrecord::gather_var`],
//! [`Zrecord::lengths`], [`Zrecord::append`], [`Zrecord::append_var`] and
//! [`Zrecord::train_dict`] take `&self` and may run from many threads at
//! once; readers never block (the published length is an atomic; entries
//! below it are immutable while `&self` borrows exist). [`Zrecord::delete`]
//! and [`Zrecord::compact`] take `&mut self`.

mod access;
mod append;
mod batch;
mod chunks;
mod codec;
mod compact;
pub use compact::{CompactOptions, CompactPlan};
mod cover;
pub use cover::CoverReport;
mod delete;
mod dict;
mod entry;
mod fail_stop;
mod fill;
mod frontier;
mod gather;
mod intent;
mod invariants;
mod meta;
mod moves;
mod sums;
pub use moves::CompactReport;
mod open;
mod read;
mod read_stats;
pub use read_stats::ReadStats;
mod readers;
mod repack;
mod verify;
pub use verify::VerifyReport;

use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::io::Vfs;

use access::Home;
use chunks::ChunkSet;
use codec::Dictionary;
use fail_stop::FailStop;
use meta::Meta;

pub use dict::default_dict_size;

/// How to open a store.
#[derive(Clone, Debug)]
pub struct Options {
    /// Open without writing: no writer flock, no recovery, every mutation
    /// refused. A read-only open holds the readers' lock shared while it is
    /// open, so that no delete or compaction runs meanwhile.
    pub read_only: bool,
    /// Wait for the readers' lock instead of failing at once: a delete or
    /// compaction waits for every read-only open elsewhere to close (rather
    /// than [`Error::ReadersOpen`]), a read-only open for a running delete or
    /// compaction to end (rather than [`Error::MutationRunning`]). A reader
    /// that keeps reopening can make a waiting mutation wait for long: the
    /// lock favours no one.
    pub wait: bool,
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
    /// How gathers read records: through the chunk mappings, in batches
    /// with many reads in flight, or as each batch's residency says.
    pub read_mode: ReadMode,
    /// Which reads check each record against its checksum (`sums.zr`):
    /// by default those from the device. `verify` and compaction always
    /// check.
    pub verify_reads: VerifyReads,
    /// Stored bytes of appended records whose checksums may wait for their
    /// sync: an append writes its records' checksums before its commit but
    /// syncs them (one device flush) only once the appends since the last
    /// sync reach this many bytes or 65,536 records, before a delete or
    /// compaction, and when the store closes. After a power loss, the
    /// records past the last sync are unchecked until the next writer's
    /// open sums them again from their bytes (`docs/crash-safety.md`,
    /// "Checksums"). 0 syncs them with every append.
    pub checksum_lag_bytes: u64,
}

/// Which gathers check each record's stored bytes against its checksum
/// (`sums.zr`, `docs/format.md`, "Checksums"); a mismatch is
/// [`Corruption::Checksum`](crate::Corruption::Checksum) naming the record,
/// never its bytes. The default, from the figures of `docs/benchmarks.md`,
/// "Checksums": checking costs at most a few percent of a read from the
/// device, and far more of a copy from memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VerifyReads {
    /// No gather checks.
    Never,
    /// Reads from the device or the network: the batched and direct paths.
    #[default]
    Device,
    /// Every gather, copies from memory (the mapped path) too.
    Always,
}

impl VerifyReads {
    /// `never`, `device`, `always`.
    pub fn name(self) -> &'static str {
        match self {
            VerifyReads::Never => "never",
            VerifyReads::Device => "device",
            VerifyReads::Always => "always",
        }
    }

    /// The choice named `name`.
    pub fn from_name(name: &str) -> Option<VerifyReads> {
        [VerifyReads::Never, VerifyReads::Device, VerifyReads::Always].into_iter().find(|v| v.name() == name)
    }
}

/// The read half of [`Options`], which a dataset passes to each of its
/// stores: how gathers reach records, and which of them check checksums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// As [`Options::read_mode`].
    pub mode: ReadMode,
    /// As [`Options::verify_reads`].
    pub verify: VerifyReads,
}

impl From<ReadMode> for ReadOptions {
    fn from(mode: ReadMode) -> ReadOptions {
        ReadOptions { mode, verify: VerifyReads::default() }
    }
}

impl ReadOptions {
    /// [`Options`] for a read-only open with these reads.
    pub fn read_only(self) -> Options {
        Options { read_only: true, read_mode: self.mode, verify_reads: self.verify, ..Options::default() }
    }
}

/// How a gather reads its records (see `docs/ARCHITECTURE.md`, "The read
/// path").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadMode {
    /// `Mapped` when a sample of the batch's records is in memory (`mincore`),
    /// `Batched` otherwise.
    #[default]
    Auto,
    /// Copy (and decode) from the chunk mappings: no system call for data in
    /// memory, one page fault at a time (with the kernel's read-around) for
    /// data that is not.
    Mapped,
    /// Positional reads of exactly the records' bytes, many in flight
    /// ([`Zrecord::read_engine`]): for data that is not in memory.
    Batched,
    /// As `Batched`, but past the page cache (`O_DIRECT`): each record's
    /// bytes rounded out to the device's sector (512 bytes on most disks),
    /// read into an aligned buffer and copied or decoded into its output.
    /// For stores far larger than memory, read once an epoch: the reads
    /// evict nothing from the page cache and cost the device less than
    /// whole 4 KiB pages for small compressed records. The trade-off:
    /// nothing is ever served from memory, even a record just read, and
    /// raw records take one more copy. The filesystem must support
    /// `O_DIRECT` (tmpfs does not): [`Zrecord::open_with`] says so.
    Direct,
}

impl ReadMode {
    /// `auto`, `mapped`, `batched`, `direct`.
    pub fn name(self) -> &'static str {
        match self {
            ReadMode::Auto => "auto",
            ReadMode::Mapped => "mapped",
            ReadMode::Batched => "batched",
            ReadMode::Direct => "direct",
        }
    }

    /// The mode named `name`.
    pub fn from_name(name: &str) -> Option<ReadMode> {
        [ReadMode::Auto, ReadMode::Mapped, ReadMode::Batched, ReadMode::Direct].into_iter().find(|m| m.name() == name)
    }
}

/// The default [`Options::checksum_lag_bytes`]: 64 MiB.
pub const CHECKSUM_LAG_BYTES_DEFAULT: u64 = 64 << 20;

/// The default [`Options::append_segment_bytes`]: 2 MiB.
pub const APPEND_SEGMENT_BYTES_DEFAULT: usize = 2 << 20;

impl Default for Options {
    fn default() -> Options {
        Options {
            read_only: false,
            wait: false,
            zstd_level: 3,
            dict_level: 9,
            min_saving: 0.0,
            append_segment_bytes: APPEND_SEGMENT_BYTES_DEFAULT,
            read_mode: ReadMode::Auto,
            verify_reads: VerifyReads::Device,
            checksum_lag_bytes: CHECKSUM_LAG_BYTES_DEFAULT,
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
    /// Bytes the chunk files hold up to the frontier: how far they have
    /// grown.
    pub chunk_file_bytes: u64,
    /// The same as [`Stats::chunk_file_bytes`], by its former name (which
    /// is also the name of a write's bytes per append call,
    /// `WriteOptions::chunk_bytes`).
    #[deprecated(note = "renamed `chunk_file_bytes`")]
    pub chunk_bytes: u64,
    /// `chunk_file_bytes - live_bytes`: an upper bound on what `compact` frees
    /// (it includes the slack at chunk ends that no record fits in).
    pub reclaimable: u64,
    /// Number of chunk files (the frontier's chunk + 1).
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
    home: Arc<Home>,
    options: Options,
    meta: Meta,
    chunks: ChunkSet,
    dict: OnceLock<Dictionary>,
    fail_stop: FailStop,
    residency: batch::Residency,
    /// What gathers read, by path ([`Zrecord::read_stats`]).
    reads: read_stats::ReadCounters,
    /// Records this writer's open summed (`Zrecord::cover_tail`), which
    /// the first [`Zrecord::cover`] reports as its own.
    summed_at_open: u32,
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

    /// Opens the store published at `url` (`s3://bucket/prefix`, see
    /// `docs/remote.md`), read-only whatever `options` says; the client
    /// comes from the standard environment (`AWS_ENDPOINT_URL`,
    /// `AWS_ACCESS_KEY_ID`, ...), the request settings from
    /// [`RemoteOptions::from_env`](crate::io::remote::RemoteOptions::from_env).
    /// Reads the manifest, `meta.zr` (the header and the used table) and
    /// `dict.zr`; records are fetched by the gathers.
    #[cfg(feature = "remote")]
    pub fn open_url(url: &str, options: Options) -> Result<Zrecord> {
        use crate::io::remote::{RemoteFs, RemoteOptions};
        let fs = RemoteFs::connect(url, RemoteOptions::from_env()).map_err(|source| Error::Io {
            path: url.into(),
            op: "read manifest.json",
            source,
        })?;
        Zrecord::open_remote(Arc::new(fs), options)
    }

    /// Opens the published store `fs` reaches, read-only.
    #[cfg(feature = "remote")]
    pub fn open_remote(fs: Arc<crate::io::remote::RemoteFs>, options: Options) -> Result<Zrecord> {
        let root = std::path::PathBuf::from(fs.root());
        Zrecord::open_in(fs, &root, Options { read_only: true, ..options })
    }

    /// `meta.zr` as a reader of the records `0..len` needs it: the header
    /// (the frontier now, the published length) and the table's entries
    /// below that length, `16 + 16 x len` bytes, and the frontier. What a
    /// push publishes; no entry it holds ends past the frontier.
    pub fn meta_image(&self) -> (Vec<u8>, crate::format::Frontier) {
        use crate::format::{Entry, Header};
        let len = self.meta.len();
        // After the length, as a read's view: every entry below it ends at
        // or below this frontier.
        let frontier = self.meta.frontier();
        let mut entries = vec![<Entry as bytemuck::Zeroable>::zeroed(); len as usize];
        self.meta.raw_entries(0, &mut entries);
        let mut image = bytemuck::bytes_of(&Header::new(frontier, len)).to_vec();
        image.extend_from_slice(bytemuck::cast_slice(&entries));
        (image, frontier)
    }

    /// `sums.zr` as a reader of the [`meta_image`](Self::meta_image) of
    /// `len` records and `frontier` needs it: the header, sealed to that
    /// image's header if the seal holds now (else broken), and the slots of
    /// records `0..len`, `64 + 8 x len` bytes. `None` for a store without
    /// `sums.zr`. What a push publishes beside the `meta.zr` image.
    pub fn sums_image(&self, len: u32, frontier: crate::format::Frontier) -> Option<Vec<u8>> {
        let sums = self.meta.sums()?;
        let sealed = sums.sealed(|| self.meta.header());
        Some(sums.image(len, crate::format::Header::new(frontier, len), sealed))
    }

    /// The filesystem the store is on (the real one, a remote store's, the
    /// simulator's): to read the files beside it, `schema.json`.
    pub fn filesystem(&self) -> &dyn Vfs {
        self.home.vfs()
    }

    /// The store's directory.
    pub fn path(&self) -> &Path {
        self.home.path()
    }

    /// Number of live records.
    pub fn len(&self) -> u32 {
        self.meta.len()
    }

    /// True if the store holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets [`Options::wait`] for the deletes and compactions to come.
    pub fn set_wait(&mut self, wait: bool) {
        self.options.wait = wait;
    }

    /// True if the store was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.home.access().is_read_only()
    }

    /// What batched reads run on: io_uring, or a pool of I/O threads where
    /// io_uring is missing or blocked (chosen once per process).
    pub fn read_engine(&self) -> crate::io::ReadEngine {
        self.home.vfs().read_engine()
    }

    /// True if the store has a dictionary (`dict.zr`).
    pub fn has_dict(&self) -> bool {
        self.dict.get().is_some()
    }

    /// Makes everything durable. Every mutation is already durable when it
    /// returns, so this re-checks, and syncs the checksums appends left to
    /// sync later ([`Zrecord::sync_checksums`]).
    pub fn sync(&self) -> Result<()> {
        if self.is_read_only() {
            return Ok(());
        }
        self.check_writable()?;
        let writer = self.meta.lock_appends();
        let last = writer.frontier().chunk;
        self.chunks.sync_data(last..last + 1).map_err(|e| self.sync_failed(e))?;
        self.meta.flush_header().map_err(|e| self.sync_failed(e))?;
        drop(writer);
        self.sync_checksums()
    }

    /// Syncs the checksums of the appends since their last sync
    /// ([`Options::checksum_lag_bytes`]), so that every reader checks every
    /// record even after a power loss. Closing the store does it too (an
    /// error there is dropped: the next writer's open sums those records
    /// again); a table's commit and a shard's rollover do it first. Costs
    /// nothing when no append is waiting.
    pub fn sync_checksums(&self) -> Result<()> {
        if self.is_read_only() {
            return Ok(());
        }
        self.check_writable()?;
        let _writer = self.meta.lock_appends();
        self.meta.flush_lag().map_err(|e| self.sync_failed(e))
    }

    /// For a read-only store: picks up records another process appended
    /// since open (or the last refresh), and the chunk files' lengths as
    /// they are now, shorter ones included, and returns the new length. A
    /// writer sees its own appends at once; this returns its length
    /// unchanged. A reader that never refreshes keeps reading what it saw
    /// at open: no writer of this crate changes it while the reader holds
    /// the readers' lock ([`Zrecord::holds_readers_lock`]).
    pub fn refresh(&self) -> Result<u32> {
        if !self.is_read_only() {
            return Ok(self.len());
        }
        // The header's length is loaded before its chunk word (`Meta::header`)
        // and the chunk files are looked at after both, so no entry below the
        // new length names a chunk, or bytes of it, not yet known here.
        let header = self.meta.header();
        self.chunks.refresh(header.frontier().chunk).map_err(|e| self.io("stat chunk", e))?;
        self.meta.publish_refreshed(header.length());
        Ok(self.len())
    }

    /// Storage usage; reads the whole table (O(records)).
    pub fn stats(&self) -> Result<Stats> {
        let len = self.len();
        let mut stats = Stats { records: len, ..Stats::default() };
        // An unwritten entry (in a damaged table only) counts as a raw
        // record of 0 bytes, as its bytes say.
        let mut written = 0;
        let Ok(()) = self.meta.try_for_each_written_entry(len, |_, entry| {
            written += 1;
            stats.live_bytes += u64::from(entry.phys_length());
            stats.logical_bytes += u64::from(entry.logic_length());
            if let Some(count) = stats.codec_records.get_mut(usize::from(entry.codec)) {
                *count += 1;
            }
            Ok::<(), std::convert::Infallible>(())
        });
        stats.codec_records[0] += len - written;
        let frontier = self.meta.frontier();
        stats.chunk_file_bytes = self.chunks.bytes_below(frontier).map_err(|e| self.io("open chunk", e))?;
        #[allow(deprecated)]
        {
            stats.chunk_bytes = stats.chunk_file_bytes;
        }
        stats.reclaimable = stats.chunk_file_bytes.saturating_sub(stats.live_bytes);
        stats.chunks = u32::from(frontier.chunk) + 1;
        stats.dict_bytes = self.dict.get().map(|d| d.bytes().len() as u64);
        Ok(stats)
    }

    fn io(&self, op: &'static str, source: std::io::Error) -> Error {
        Error::Io { path: self.path().to_path_buf(), op, source }
    }

    /// `Ok` if writes are allowed: not read-only, no sync failed.
    fn check_writable(&self) -> Result<()> {
        self.home.check_writable()?;
        self.fail_stop.check(self.path())
    }

    /// A failed sync: the store refuses writes from now on (fail-stop).
    fn sync_failed(&self, source: std::io::Error) -> Error {
        self.fail_stop.sync_failed(self.path(), source)
    }
}

impl Drop for Zrecord {
    /// A writer's close: the appends' checksums synced (the lag's sync,
    /// `Sums::flush_lag`), so that readers check every record. Not after a
    /// failed sync (what the page cache holds need not be on disk: the next
    /// writer's open sums those records again), and an error is dropped
    /// with the store: the next writer's open does the same.
    fn drop(&mut self) {
        if self.home.check_writable().is_ok() && self.fail_stop.check(self.path()).is_ok() {
            let _ = self.meta.flush_lag();
        }
    }
}
