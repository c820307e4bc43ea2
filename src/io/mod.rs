//! The I/O boundary: every file operation of the store goes through [`Vfs`].
//!
//! The store never touches `std::fs` or `memmap2` itself: only [`real`]
//! names them (`tests/architecture_io_boundary.rs` checks it).
//! [`real::RealFs`] is the implementation on the real filesystem; the crash
//! simulator substitutes a fault-injecting in-memory one without any change
//! to store code.
//!
//! The operations are the ones the crash-ordering in `docs/crash-safety.md` is
//! written in: positional reads and writes that may be short, syncs
//! ([`SyncKind`]: `fdatasync`, `fsync`), `set_len`, directory listing and
//! fsync, rename, advisory locks, mappings ([`MapMode`]: a shared writable
//! one of `meta.zr` with ranged flushes, read-only ones of chunk files),
//! and batched positional reads over several files ([`Vfs::read_batch`])
//! for records that are not in memory.
//!
//! Three traits, 25 methods: [`Vfs`] (9), [`VfsFile`] (8), [`Map`] (8).
//! One is a hint with a default that does nothing ([`Map::will_need`]:
//! only the real filesystem has a kernel to ask).
//! Methods that look alike stay apart where they do different things:
//! [`Map::write`] (a copy under exclusive access) and [`Map::store_word`]
//! (the atomic store that publishes, the ordering point of the crash
//! analysis); [`Map::read`] (a copy no store of this process may race) and
//! [`Map::load_word`] (an atomic load, safe against any store);
//! [`Map::read`] (a copy out of a shared mapping) and [`Map::bytes`] (a
//! borrow from a read-only one); [`Vfs::read_engine`] (what the store
//! reports and how it cuts a gather, which nothing else answers).
//! An implementation knows its own files in a batch by their [`Handle`],
//! never by their type.

#[cfg(any(windows, feature = "remote"))]
mod positional;
pub mod real;
#[cfg(feature = "remote")]
pub mod remote;
#[cfg(target_os = "linux")]
mod uring;

use std::fmt;
use std::io;
use std::path::Path;

/// What a path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// Anything else (a socket, a device, ...).
    Other,
}

/// How to open a file. Every mode opens regular files only: anything else
/// where a file is expected (a FIFO, a socket, a device, a directory) is
/// refused with `ErrorKind::InvalidInput`, and an open never waits (the
/// real filesystem looks before it opens and opens `O_NONBLOCK`, so a FIFO
/// swapped in between is refused too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    Write,
    /// Read and write, creating an empty file if it is missing (never truncating).
    Create,
    /// Read only, bypassing the page cache (Linux `O_DIRECT`): every read's
    /// offset, length and buffer address must be multiples of
    /// [`Stat::direct_alignment`]. A filesystem that cannot (tmpfs, for
    /// one) refuses the open.
    ReadDirect,
}

/// Kinds of advisory lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// Many holders.
    Shared,
    /// One holder.
    Exclusive,
}

/// What [`VfsFile::sync`] makes durable, or starts to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncKind {
    /// The written data (`fdatasync`).
    Data,
    /// The data and the metadata, the length included (`fsync`).
    All,
    /// Nothing: starts writing the bytes `offset..offset + len` back to the
    /// device without waiting for it (Linux
    /// `sync_file_range(SYNC_FILE_RANGE_WRITE)`), a hint that lets the disk
    /// work while the caller computes; [`SyncKind::Data`] still must
    /// follow. An implementation without it does nothing.
    StartWriteback {
        /// Where in the file.
        offset: u64,
        /// How many bytes.
        len: u64,
    },
}

/// How [`VfsFile::map`] maps a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapMode {
    /// The first `len` bytes, all inside the file, shared; writable if
    /// `writable` (the file must be open for writing): a file read and
    /// stored into through its mapping (`meta.zr`).
    Shared {
        /// Stores allowed.
        writable: bool,
    },
    /// Read-only, read at random; `len` may pass the file's end, but only
    /// bytes below it may be read: chunk files, `.npy` inputs.
    Read,
}

/// What reading a mapping's bytes costs ([`Map::residency`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Residency {
    /// They read as zeros, known without reading them: a hole the
    /// implementation tracks (the simulated filesystem's unwritten pages).
    Hole,
    /// They are in memory, so reading them waits for no device, or the
    /// implementation cannot tell (then the caller reads as if they were).
    Memory,
    /// At least one of them must come from the device.
    Device,
}

/// What [`Vfs::read_batch`] runs on, chosen at run time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadEngine {
    /// Linux io_uring: a batch's reads are submitted together, many in flight.
    IoUring,
    /// Positional reads from a pool of I/O threads (io_uring missing or
    /// blocked): as many in flight as the pool has threads.
    Threads,
    /// One positional read after another (the simulator; the default).
    Sequential,
    /// Ranged GETs to object storage, coalesced, many in flight (the
    /// remote backend, `src/io/remote/`).
    Remote,
}

impl ReadEngine {
    /// `io_uring`, `threads`, `sequential`, `remote`.
    pub fn name(self) -> &'static str {
        match self {
            ReadEngine::IoUring => "io_uring",
            ReadEngine::Threads => "threads",
            ReadEngine::Sequential => "sequential",
            ReadEngine::Remote => "remote",
        }
    }

    /// Whether a gather's reads are cut into parallel tasks. Not on
    /// object storage: there a gather is one batch, so that its records'
    /// ranges coalesce across the whole gather (its requests are in flight
    /// together anyway).
    pub fn splits_gathers(self) -> bool {
        self != ReadEngine::Remote
    }
}

/// What [`VfsFile::stat`] says of an open file: the attributes one `statx`
/// returns together on Linux (`STATX_SIZE | STATX_DIOALIGN | STATX_MTIME`),
/// so one call answers them all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The file's current length.
    pub len: u64,
    /// For a file opened [`OpenMode::ReadDirect`]: the alignment, a power
    /// of two, of every read's offset, length and buffer address.
    pub direct_alignment: usize,
    /// The file's modification time in nanoseconds since the Unix epoch,
    /// where the filesystem keeps one (the real filesystem); `None` from
    /// the simulator and the remote backend. An import's fingerprint of
    /// its input files takes it (`src/import/input.rs`).
    pub modified: Option<u64>,
    /// A stamp of the file's content that changes when it is replaced,
    /// where the filesystem keeps one beside its time: an object's entity
    /// tag, hashed (the bucket backend); `None` elsewhere. An import's
    /// fingerprint takes it too.
    pub version: Option<u64>,
}

impl Stat {
    /// The `O_DIRECT` alignment of a filesystem that does not say: 4096,
    /// which every Linux filesystem that supports `O_DIRECT` accepts.
    pub const DIRECT_ALIGNMENT_DEFAULT: usize = 4096;

    /// A file of `len` bytes with the default alignment and no
    /// modification time.
    pub fn of_len(len: u64) -> Stat {
        Stat { len, direct_alignment: Stat::DIRECT_ALIGNMENT_DEFAULT, modified: None, version: None }
    }
}

/// How the filesystem that opened a file names it in a batch of reads over
/// several files ([`Vfs::read_batch`]), which resolves it: the real
/// filesystem's is the file's descriptor, the remote backend's an index
/// into the objects it has opened. Meaningful to that filesystem only.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(pub u64);

/// One read of a batch: `buf.len()` bytes at `offset`.
#[derive(Debug)]
pub struct BatchRead<'a> {
    /// Where in the file.
    pub offset: u64,
    /// Where to; filled whole, or the batch fails.
    pub buf: &'a mut [u8],
    /// Where the batch's [`Then`] puts what it makes of `buf` (a decoded
    /// record); empty for a read that is its own result.
    pub out: &'a mut [u8],
}

impl<'a> BatchRead<'a> {
    /// A read of `buf.len()` bytes at `offset` into `buf`, with no `out`.
    pub fn new(offset: u64, buf: &'a mut [u8]) -> Self {
        BatchRead { offset, buf, out: &mut [] }
    }
}

/// What a batch does with each read once its bytes are in: `then(k, read)`
/// for read `k`, once per read that completed whole, on the calling thread
/// or an I/O thread, while other reads of the batch may still be in flight
/// (so decoding overlaps the device's work). Never called after the batch
/// returns; not called for reads that complete after one has failed.
pub type Then<'t> = &'t (dyn Fn(usize, &mut BatchRead<'_>) + Sync);

/// The [`Then`] that does nothing: the reads are the results.
pub const NOTHING: Then<'static> = &|_, _| {};

/// A failed batch: the first request that failed, and why.
#[derive(Debug)]
pub struct BatchError {
    /// Its index in the batch.
    pub index: usize,
    /// The error (`UnexpectedEof` for a read past the end of the file).
    pub error: io::Error,
}

/// A filesystem: the store's whole view of the outside world.
pub trait Vfs: Send + Sync + fmt::Debug {
    /// What `path` names, `None` if nothing.
    fn kind(&self, path: &Path) -> io::Result<Option<FileKind>>;
    /// Creates a directory and its missing parents.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    /// The names of the entries of directory `path`.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
    /// Makes the directory's entries (creations, removals, renames) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;
    /// Opens a file.
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn VfsFile>>;
    /// Removes a file, or an empty directory, as C's `remove` does
    /// (durable after [`Vfs::sync_dir`] of its directory).
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Atomically renames `from` to `to`, replacing `to` (durable after
    /// [`Vfs::sync_dir`]). A directory moves with everything under it.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// What [`Vfs::read_batch`] runs on.
    fn read_engine(&self) -> ReadEngine {
        ReadEngine::Sequential
    }
    /// Reads `reads[k]` from `files[k]` (files this filesystem opened, each
    /// named by its [`VfsFile::handle`]), every read whole (a short read
    /// continues where it stopped), with as many in flight as the
    /// implementation can, over all the files at once (a store's chunk
    /// files are 4 GiB each, so one gather's records span many). Returns
    /// once every read has completed, failed ones included: no read writes
    /// into a buffer after the call returns. `then` runs on each read as it
    /// completes ([`Then`]). A read past the end of its file fails with
    /// `UnexpectedEof`; `BatchError::index` is a position in `reads`. The
    /// default reads one after another.
    fn read_batch(
        &self,
        files: &[&dyn VfsFile],
        reads: &mut [BatchRead<'_>],
        then: Then<'_>,
    ) -> Result<(), BatchError> {
        for (index, (file, read)) in files.iter().zip(reads.iter_mut()).enumerate() {
            read_exact_at(*file, read.buf, read.offset).map_err(|error| BatchError { index, error })?;
            then(index, read);
        }
        Ok(())
    }
}

/// An open file.
#[allow(clippy::len_without_is_empty)] // a file's emptiness is never asked
pub trait VfsFile: Send + Sync + fmt::Debug {
    /// The file's current length and `O_DIRECT` alignment ([`Stat`]).
    fn stat(&self) -> io::Result<Stat>;
    /// Reads up to `buf.len()` bytes at `offset`; may read fewer, 0 at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes up to `buf.len()` bytes at `offset`; may write fewer.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Sets the length (durable after [`SyncKind::All`]). Shrinking a file
    /// that a process maps may be refused ([`is_shrink_refused`]: Windows).
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes what `kind` says durable, or starts to ([`SyncKind`]).
    fn sync(&self, kind: SyncKind) -> io::Result<()>;
    /// Takes an advisory lock (`flock`), released when the file is closed:
    /// `Ok(false)` if another open file holds a conflicting one and `wait`
    /// is off. With `wait`, waits until conflicting holders release theirs
    /// (`ErrorKind::Interrupted` if a signal interrupts the wait), and
    /// `Ok(false)` only where the wait could never end (the simulator runs
    /// one thread).
    fn lock(&self, kind: LockKind, wait: bool) -> io::Result<bool>;
    /// Maps the first `len` bytes as `mode` says.
    fn map(&self, len: usize, mode: MapMode) -> io::Result<Box<dyn Map>>;
    /// How the filesystem that opened the file names it in
    /// [`Vfs::read_batch`].
    fn handle(&self) -> Handle;
}

/// A mapping of a file ([`VfsFile::map`]).
///
/// Stores into a writable one change the file's page cache at once; they
/// become durable when a [`Map::flush_range`] covering them returns, or
/// earlier, at any time, by writeback.
///
/// Its length is the one its owner asked [`VfsFile::map`] for, which the
/// owner keeps: the mapping does not report it back.
pub trait Map: Send + Sync + fmt::Debug {
    /// Copies `dst.len()` bytes at `offset` out of the mapping.
    ///
    /// # Safety
    /// No thread of this process writes those bytes concurrently.
    unsafe fn read(&self, offset: usize, dst: &mut [u8]);
    /// The bytes `offset..offset + len` of a read-only mapping, borrowed
    /// from it when the implementation can, otherwise copied into
    /// `scratch`. Panics on a writable mapping (read it with
    /// [`Map::read`]).
    ///
    /// The caller guarantees the range lies below the file's length; `Err`
    /// for a range past the mapping.
    fn bytes<'a>(&'a self, offset: u64, len: usize, scratch: &'a mut Vec<u8>) -> io::Result<&'a [u8]>;
    /// Copies `src` into the mapping at `offset`. Panics on a read-only mapping.
    ///
    /// # Safety
    /// No other thread of this process reads or writes those bytes concurrently.
    unsafe fn write(&self, offset: usize, src: &[u8]);
    /// Stores one aligned 8-byte word (`offset % 8 == 0`) with a single
    /// atomic store, so a concurrent writeback, or a concurrent
    /// [`Map::load_word`], sees the old or the new word, never a mix.
    /// Panics on a read-only mapping.
    ///
    /// # Safety
    /// No other thread of this process writes those bytes concurrently, or
    /// reads them other than with [`Map::load_word`].
    unsafe fn store_word(&self, offset: usize, word: u64);
    /// Loads the aligned 8-byte word at `offset` (`offset % 8 == 0`) with one
    /// atomic load, the counterpart of [`Map::store_word`]; safe against
    /// concurrent stores, even by other processes.
    fn load_word(&self, offset: usize) -> u64;
    /// Makes the bytes `offset..offset + len` durable (`msync`); nothing to
    /// do on a read-only mapping.
    fn flush_range(&self, offset: usize, len: usize) -> io::Result<()>;
    /// What reading the bytes `offset..offset + len` costs now: a hint
    /// that lets a scan skip a [`Residency::Hole`], and a gather choose
    /// between the mapping and batched reads.
    fn residency(&self, offset: u64, len: usize) -> Residency;
    /// Asks the kernel to read the bytes `offset..offset + len` (clamped to
    /// the mapping) ahead, without waiting for them (`MADV_WILLNEED`). A
    /// hint, which may do nothing.
    fn will_need(&self, _offset: usize, _len: usize) {}
}

/// Whether `error`, from a [`VfsFile::set_len`] that shrinks, is the
/// platform's refusal to shrink a file that some process maps: Windows'
/// `ERROR_USER_MAPPED_FILE` (a reader's mapping of `meta.zr` is enough),
/// which the simulator's Windows model returns too. No Unix errno has that
/// number. The caller then leaves the length as it is.
pub fn is_shrink_refused(error: &io::Error) -> bool {
    error.raw_os_error() == Some(USER_MAPPED_FILE)
}

/// Windows' `ERROR_USER_MAPPED_FILE` ([`is_shrink_refused`]).
pub const USER_MAPPED_FILE: i32 = 1224;

/// Reads exactly `buf.len()` bytes at `offset`, looping over short reads.
pub fn read_exact_at<F: VfsFile + ?Sized>(file: &F, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.read_at(buf, offset) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file ends early")),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Writes all of `buf` at `offset`, looping over short writes.
pub fn write_all_at(file: &dyn VfsFile, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match file.write_at(buf, offset) {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "write made no progress")),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Puts `bytes` at `offset` of `file`, which `map` maps writable, for a
/// sync of the mapping's range ([`Map::flush_range`]) to make durable.
/// Where a write of the file shows in a shared mapping of it at once (one
/// page cache: Linux, Apple), a `pwrite`: a page dirtied by stores through
/// a shared mapping is write-protected again when it is written back, a
/// TLB flush of every thread of the process per page (an interrupt to
/// each other core: a VM exit under a hypervisor), and a store's table
/// entries and checksum slots are pages of them. Windows does not promise
/// that coherence (`CreateFileMapping`), so there the mapping's stores.
///
/// # Safety
/// As [`Map::write`]: no other thread or process reads or writes the range
/// meanwhile (the caller is the store's one writer, past what readers read).
pub unsafe fn write_mapped(file: &dyn VfsFile, map: &dyn Map, offset: u64, bytes: &[u8]) -> io::Result<()> {
    if cfg!(windows) {
        let at = usize::try_from(offset).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset"))?;
        // SAFETY: the forwarded contract.
        unsafe { map.write(at, bytes) };
        return Ok(());
    }
    write_all_at(file, bytes, offset)
}

/// Reads a whole small file, refusing one longer than `max` bytes (a length
/// read from disk never sizes an allocation unchecked).
pub fn read_file(vfs: &dyn Vfs, path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = vfs.open(path, OpenMode::Read)?;
    let len = file.stat()?.len;
    if len > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{len} bytes, more than the {max} expected")));
    }
    let mut buf = vec![0; len as usize];
    read_exact_at(&*file, &mut buf, 0)?;
    Ok(buf)
}

/// Removes `path` and everything under it (nothing if it is missing),
/// through `vfs`: files, then each directory once empty. Not atomic: a
/// crash part way leaves some of it, which a later call removes.
pub fn remove_tree(vfs: &dyn Vfs, path: &Path) -> io::Result<()> {
    match vfs.kind(path)? {
        None => Ok(()),
        Some(FileKind::Dir) => {
            for name in vfs.list_dir(path)? {
                remove_tree(vfs, &path.join(name))?;
            }
            vfs.remove_file(path)
        }
        Some(_) => vfs.remove_file(path),
    }
}
