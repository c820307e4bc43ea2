//! The I/O boundary: every file operation of the store goes through [`Vfs`].
//!
//! The store never touches `std::fs` or `memmap2` itself: only [`real`]
//! names them (`tests/architecture_io_boundary.rs` checks it).
//! [`real::RealFs`] is the implementation on the real filesystem; the crash
//! simulator substitutes a fault-injecting in-memory one without any change
//! to store code.
//!
//! The operations are the ones the crash-ordering in `docs/crash-safety.md` is
//! written in: positional reads and writes that may be short, `sync_data`,
//! `sync_all`, `set_len`, directory listing and fsync, rename, advisory locks,
//! a shared writable mapping of `meta.zr` with ranged flushes, read-only
//! mappings of chunk files, and batched positional reads
//! ([`VfsFile::read_batch`]) for records that are not in memory.

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
    /// [`VfsFile::direct_alignment`]. A filesystem that cannot (tmpfs, for
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

/// What [`VfsFile::read_batch`] runs on, chosen at run time.
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
    /// remote backend, `src/io/remote/`): a gather is one batch, so that
    /// neighbouring records share requests.
    Remote,
}

impl ReadEngine {
    /// `io_uring`, `threads`, `sequential`.
    pub fn name(self) -> &'static str {
        match self {
            ReadEngine::IoUring => "io_uring",
            ReadEngine::Threads => "threads",
            ReadEngine::Sequential => "sequential",
            ReadEngine::Remote => "remote",
        }
    }
}

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
    /// Removes a file (durable after [`Vfs::sync_dir`] of its directory).
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Atomically renames `from` to `to`, replacing `to` (durable after
    /// [`Vfs::sync_dir`]).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// What [`VfsFile::read_batch`] of this filesystem's files runs on.
    fn read_engine(&self) -> ReadEngine {
        ReadEngine::Sequential
    }
    /// [`VfsFile::read_batch`] over several files at once: read `k` from
    /// `files[k]`, all in flight together where the implementation can (a
    /// store's chunk files are 4 GiB each, so one gather's records span
    /// many), `then` run on each as it completes. The default runs each run
    /// of consecutive reads of one file as one batch; `BatchError::index` is
    /// a position in `reads`.
    fn read_batch_files(
        &self,
        files: &[&dyn VfsFile],
        reads: &mut [BatchRead<'_>],
        then: Then<'_>,
    ) -> Result<(), BatchError> {
        let mut start = 0;
        while start < reads.len() {
            let same = |k: &usize| std::ptr::addr_eq(files[*k], files[start]);
            let end = (start..reads.len()).find(|k| !same(k)).unwrap_or(reads.len());
            files[start]
                .read_batch(&mut reads[start..end], &|k, read| then(start + k, read))
                .map_err(|e| BatchError { index: start + e.index, error: e.error })?;
            start = end;
        }
        Ok(())
    }
}

/// An open file.
#[allow(clippy::len_without_is_empty)] // a file's emptiness is never asked
pub trait VfsFile: Send + Sync + fmt::Debug {
    /// The file's current length.
    fn len(&self) -> io::Result<u64>;
    /// Reads up to `buf.len()` bytes at `offset`; may read fewer, 0 at the end.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Writes up to `buf.len()` bytes at `offset`; may write fewer.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// Sets the length (durable after [`VfsFile::sync_all`]).
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the written data durable (`fdatasync`).
    fn sync_data(&self) -> io::Result<()>;
    /// Makes the data and the metadata, the length included, durable (`fsync`).
    fn sync_all(&self) -> io::Result<()>;
    /// Starts writing `len` bytes at `offset` back to the device without
    /// waiting for it (Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)`): a
    /// hint that lets the disk work while the caller computes. It makes
    /// nothing durable; [`sync_data`](Self::sync_data) still must. The
    /// default does nothing.
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }
    /// Reads every request of `reqs` whole (a short read continues where it
    /// stopped), with as many in flight as the implementation can, and
    /// returns once every read has completed, failed ones included: no read
    /// writes into a buffer after the call returns. `then` runs on each read
    /// as it completes ([`Then`]). Reads past the end of the file fail with
    /// `UnexpectedEof`. The default reads one after another.
    fn read_batch(&self, reqs: &mut [BatchRead<'_>], then: Then<'_>) -> Result<(), BatchError> {
        for (index, req) in reqs.iter_mut().enumerate() {
            read_exact_at(self, req.buf, req.offset).map_err(|error| BatchError { index, error })?;
            then(index, req);
        }
        Ok(())
    }
    /// The operating system's descriptor of the file, where there is one
    /// (the real filesystem: so that reads of several files can go in one
    /// submission, [`Vfs::read_batch_files`]).
    fn raw_fd(&self) -> Option<i32> {
        None
    }
    /// The implementation's own type, where its filesystem's
    /// [`Vfs::read_batch_files`] needs more of its files than a descriptor
    /// (the remote backend: the object behind each).
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
    /// For a file opened [`OpenMode::ReadDirect`]: the alignment, a power
    /// of two, of every read's offset, length and buffer address. The
    /// default is 4096, which every Linux filesystem that supports
    /// `O_DIRECT` accepts.
    fn direct_alignment(&self) -> usize {
        4096
    }
    /// Takes an advisory lock (`flock`) without waiting: `Ok(false)` if
    /// another open file holds a conflicting one. Released when the file is
    /// closed.
    fn try_lock(&self, kind: LockKind) -> io::Result<bool>;
    /// Takes an advisory lock as [`VfsFile::try_lock`] does, waiting until
    /// conflicting holders release theirs. `ErrorKind::Interrupted` if a
    /// signal interrupts the wait; `ErrorKind::WouldBlock` where waiting can
    /// never end (the simulator runs one thread).
    fn lock(&self, kind: LockKind) -> io::Result<()>;
    /// Maps the first `len` bytes shared (the file must be at least that
    /// long), writable if `writable` (the file must be open for writing).
    fn map_shared(&self, len: usize, writable: bool) -> io::Result<Box<dyn SharedMap>>;
    /// Maps the first `len` bytes read-only; `len` may exceed the file's
    /// length, but only bytes below the length may be read.
    fn map_read(&self, len: usize) -> io::Result<Box<dyn ReadMap>>;
}

/// A shared writable mapping of a file (the metadata file).
///
/// Stores into it change the file's page cache at once; they become durable
/// when a [`SharedMap::flush_range`] covering them returns, or earlier, at any
/// time, by writeback.
#[allow(clippy::len_without_is_empty)] // a mapping is never empty
pub trait SharedMap: Send + Sync + fmt::Debug {
    /// Length of the mapping.
    fn len(&self) -> usize;
    /// Copies `dst.len()` bytes at `offset` out of the mapping.
    ///
    /// # Safety
    /// No thread of this process writes those bytes concurrently.
    unsafe fn read(&self, offset: usize, dst: &mut [u8]);
    /// Copies `src` into the mapping at `offset`. Panics on a read-only mapping.
    ///
    /// # Safety
    /// No other thread of this process reads or writes those bytes concurrently.
    unsafe fn write(&self, offset: usize, src: &[u8]);
    /// Stores one aligned 8-byte word (`offset % 8 == 0`) with a single
    /// atomic store, so a concurrent writeback, or a concurrent
    /// [`SharedMap::load_word`], sees the old or the new word, never a mix.
    ///
    /// # Safety
    /// No other thread of this process writes those bytes concurrently, or
    /// reads them other than with [`SharedMap::load_word`].
    unsafe fn store_word(&self, offset: usize, word: u64);
    /// Loads the aligned 8-byte word at `offset` (`offset % 8 == 0`) with one
    /// atomic load, the counterpart of [`SharedMap::store_word`]; safe against
    /// concurrent stores, even by other processes.
    fn load_word(&self, offset: usize) -> u64;
    /// Makes the bytes `offset..offset + len` durable (`msync`).
    fn flush_range(&self, offset: usize, len: usize) -> io::Result<()>;
    /// True only when the bytes `offset..offset + len` are known to read as
    /// zeros without reading them: a hole the implementation tracks (the
    /// simulated filesystem's unwritten pages). A hint that lets a scan skip
    /// them; the default, for an implementation that cannot tell cheaply, is
    /// `false`, and then the caller reads them.
    fn reads_zero(&self, _offset: usize, _len: usize) -> bool {
        false
    }
}

/// A read-only mapping of a chunk file.
pub trait ReadMap: Send + Sync + fmt::Debug {
    /// The bytes `offset..offset + len`, borrowed from the mapping when it can
    /// (the real filesystem), otherwise copied into `scratch`.
    ///
    /// The caller guarantees the range lies below the file's length; `Err`
    /// for a range past the mapping.
    fn bytes<'a>(&'a self, offset: u64, len: usize, scratch: &'a mut Vec<u8>) -> io::Result<&'a [u8]>;
    /// Whether the bytes `offset..offset + len` are in memory now, so that
    /// reading them through the mapping waits for no device (`mincore`).
    /// The default, for an implementation that cannot tell: `true`.
    fn resident(&self, offset: u64, len: usize) -> bool {
        let _ = (offset, len);
        true
    }
}

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

/// Reads a whole small file, refusing one longer than `max` bytes (a length
/// read from disk never sizes an allocation unchecked).
pub fn read_file(vfs: &dyn Vfs, path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let file = vfs.open(path, OpenMode::Read)?;
    let len = file.len()?;
    if len > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{len} bytes, more than the {max} expected")));
    }
    let mut buf = vec![0; len as usize];
    read_exact_at(&*file, &mut buf, 0)?;
    Ok(buf)
}
