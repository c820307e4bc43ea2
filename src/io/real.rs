//! The real filesystem: `std::fs` and `memmap2`. The only file of the crate
//! that touches either, and the only one with `unsafe` mapping code.
//!
//! Batched reads run on io_uring (`uring.rs`) where it works, otherwise on a
//! pool of I/O threads; the choice is made once per process
//! ([`read_engine`]), and `LOADERX_READ_ENGINE=threads` forces the pool.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{Mmap, MmapMut, MmapOptions};

use super::{
    BatchError, BatchRead, FileKind, Handle, LockKind, Map, MapMode, OpenMode, ReadEngine, Residency, Stat, SyncKind,
    Then, Vfs, VfsFile,
};

/// Threads of the pool [`ReadEngine::Threads`] reads on: reads in flight.
const IO_THREADS: usize = 32;

/// The engine batched reads run on in this process: io_uring if it works
/// here and `LOADERX_READ_ENGINE` does not say `threads`.
pub fn read_engine() -> ReadEngine {
    static ENGINE: std::sync::OnceLock<ReadEngine> = std::sync::OnceLock::new();
    *ENGINE.get_or_init(|| {
        let forced = std::env::var("LOADERX_READ_ENGINE").is_ok_and(|v| v == "threads");
        #[cfg(target_os = "linux")]
        if !forced && super::uring::available() {
            return ReadEngine::IoUring;
        }
        let _ = forced;
        ReadEngine::Threads
    })
}

/// The pool of [`ReadEngine::Threads`].
fn io_pool() -> &'static rayon::ThreadPool {
    static POOL: std::sync::OnceLock<rayon::ThreadPool> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(IO_THREADS)
            .thread_name(|i| format!("loaderx-io-{i}"))
            .build()
            .expect("the I/O thread pool")
    })
}

/// Drops the page cache's copy of `path` (`posix_fadvise(DONTNEED)`), so
/// that the next reads come from the device: the cold-cache benchmarks and
/// tests. Dirty pages are written back first (`fdatasync`).
pub fn evict_page_cache(path: &Path) -> io::Result<()> {
    let file = open_regular(path, OpenOptions::new().read(true), 0, false)?;
    file.sync_data()?;
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: `posix_fadvise` takes a descriptor and integers and touches
        // no memory of this process; `file` is open for the call.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
    }
    Ok(())
}

/// How many of the pages holding `path`'s bytes are in the page cache, and
/// how many pages it has (`mincore` over a mapping of it): what `fincore`
/// reports.
pub fn resident_pages(path: &Path) -> io::Result<(u64, u64)> {
    let file = open_regular(path, OpenOptions::new().read(true), 0, false)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok((0, 0));
    }
    // SAFETY: a read-only mapping of the whole file, only passed to
    // `mincore`, which reads no byte of it.
    let map = unsafe { MmapOptions::new().len(len as usize).map(&file)? };
    let pages = len.div_ceil(page_size() as u64);
    Ok((count_resident(map.as_ptr(), len as usize), pages))
}

fn page_size() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `sysconf` reads a constant of the system.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if size > 0 {
            return size as usize;
        }
    }
    4096
}

/// Pages of `ptr..ptr + len` (inside one mapping) that are resident.
fn count_resident(ptr: *const u8, len: usize) -> u64 {
    let page = page_size();
    let start = ptr as usize & !(page - 1);
    let end = ptr as usize + len;
    let mut resident = 0;
    let mut at = start;
    let mut vec = [0u8; 256];
    #[cfg(not(target_os = "linux"))]
    vec.fill(1); // no probe: every page counts as resident
    while at < end {
        let span = (end - at).min(vec.len() * page);
        #[cfg(target_os = "linux")]
        {
            // SAFETY: `at` is page aligned and `at..at + span` lies inside
            // the caller's mapping; `vec` has a byte for each of its pages.
            let rc = unsafe { libc::mincore(at as *mut libc::c_void, span, vec.as_mut_ptr()) };
            if rc != 0 {
                return 0;
            }
        }
        resident += vec[..span.div_ceil(page)].iter().filter(|&&b| b & 1 == 1).count() as u64;
        at += span;
    }
    resident
}

/// [`Vfs`] over the operating system's filesystem.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

impl RealFs {
    /// Removes the directory at `path` and everything in it (a dataset an
    /// overwrite replaced, `dataset/mode.rs`). Not part of the `Vfs`: only
    /// the real filesystem replaces datasets.
    pub fn remove_dir_all(path: &Path) -> io::Result<()> {
        fs::remove_dir_all(path)
    }
}

impl Vfs for RealFs {
    fn kind(&self, path: &Path) -> io::Result<Option<FileKind>> {
        match fs::metadata(path) {
            Ok(m) if m.is_file() => Ok(Some(FileKind::File)),
            Ok(m) if m.is_dir() => Ok(Some(FileKind::Dir)),
            Ok(_) => Ok(Some(FileKind::Other)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::create_dir_all(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        os::sync_dir(path)
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn VfsFile>> {
        let mut options = OpenOptions::new();
        options.read(true);
        let flags = match mode {
            OpenMode::Read => 0,
            OpenMode::Write => {
                options.write(true);
                0
            }
            OpenMode::Create => {
                options.write(true).create(true).truncate(false);
                0
            }
            OpenMode::ReadDirect => direct_flag()?,
        };
        Ok(Box::new(RealFile { file: open_regular(path, &mut options, flags, mode == OpenMode::Create)? }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        match fs::symlink_metadata(path) {
            Ok(m) if m.is_dir() => fs::remove_dir(path),
            _ => fs::remove_file(path),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn read_engine(&self) -> ReadEngine {
        read_engine()
    }

    /// One io_uring submission over all the files (each named by its
    /// descriptor, its [`Handle`]), or the I/O thread pool across them.
    fn read_batch(
        &self,
        files: &[&dyn VfsFile],
        reads: &mut [BatchRead<'_>],
        then: Then<'_>,
    ) -> Result<(), BatchError> {
        #[cfg(target_os = "linux")]
        if read_engine() == ReadEngine::IoUring
            && super::uring::read_batch(&|k| files[k].handle().0 as i32, reads, then)?
        {
            return Ok(());
        }
        use rayon::prelude::*;
        io_pool().install(|| {
            reads
                .par_iter_mut()
                .zip(files.par_iter())
                .enumerate()
                .with_max_len(1)
                .try_for_each(|(index, (req, file))| pool_read(*file, index, req, then))
        })
    }
}

/// One read of a batch on the I/O thread pool, then its [`Then`] on the
/// same thread (the pool's threads decode while others wait on the device).
fn pool_read(file: &dyn VfsFile, index: usize, req: &mut BatchRead<'_>, then: Then<'_>) -> Result<(), BatchError> {
    super::read_exact_at(file, req.buf, req.offset).map_err(|error| BatchError { index, error })?;
    then(index, req);
    Ok(())
}

#[derive(Debug)]
struct RealFile {
    file: File,
}

impl VfsFile for RealFile {
    fn stat(&self) -> io::Result<Stat> {
        #[cfg(target_os = "linux")]
        if let Some(stat) = statx(&self.file) {
            return Ok(stat);
        }
        let metadata = self.file.metadata()?;
        let modified = metadata.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        let nanos = modified.map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        Ok(Stat { modified: nanos, ..Stat::of_len(metadata.len()) })
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        os::read_at(&self.file, buf, offset)
    }
    fn handle(&self) -> Handle {
        os::handle(&self.file)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        os::write_at(&self.file, buf, offset)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn sync(&self, kind: SyncKind) -> io::Result<()> {
        match kind {
            SyncKind::Data => os::sync_file(&self.file, false),
            SyncKind::All => os::sync_file(&self.file, true),
            SyncKind::StartWriteback { offset, len } => start_writeback(&self.file, offset, len),
        }
    }
    fn lock(&self, kind: LockKind, wait: bool) -> io::Result<bool> {
        if wait {
            match kind {
                LockKind::Shared => self.file.lock_shared()?,
                LockKind::Exclusive => self.file.lock()?,
            }
            return Ok(true);
        }
        let result = match kind {
            LockKind::Shared => self.file.try_lock_shared(),
            LockKind::Exclusive => self.file.try_lock(),
        };
        match result {
            Ok(()) => Ok(true),
            Err(fs::TryLockError::WouldBlock) => Ok(false),
            Err(fs::TryLockError::Error(e)) => Err(e),
        }
    }
    fn map(&self, len: usize, mode: MapMode) -> io::Result<Box<dyn Map>> {
        match mode {
            MapMode::Shared { writable } => self.map_shared(len, writable),
            MapMode::Read => self.map_read(len),
        }
    }
}

/// Starts writeback of `len` bytes at `offset` ([`SyncKind::StartWriteback`]).
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: u64) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    };
    // SAFETY: `sync_file_range` takes a descriptor and integers and
    // touches no memory of this process; the descriptor is owned by
    // `file`, open for the duration of the call.
    let rc = unsafe { libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _offset: u64, _len: u64) -> io::Result<()> {
    Ok(())
}

impl RealFile {
    /// [`MapMode::Shared`].
    fn map_shared(&self, len: usize, writable: bool) -> io::Result<Box<dyn Map>> {
        if self.stat()?.len < len as u64 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "mapping past the end of the file"));
        }
        // SAFETY (both blocks): the mapping covers only bytes inside the file
        // (checked just above; the store never shrinks `meta.zr` below the
        // table, see docs/ARCHITECTURE.md), so no access faults. Other
        // processes may change the bytes: every read of them copies through
        // `read` or loads atomically, and treats what it gets as untrusted.
        let (map, ptr) = if writable {
            let mut map = unsafe { MmapOptions::new().len(len).map_mut(&self.file)? };
            let ptr = map.as_mut_ptr();
            (Mapping::Writable(map), ptr)
        } else {
            let map = unsafe { MmapOptions::new().len(len).map(&self.file)? };
            let ptr = map.as_ptr().cast_mut();
            (Mapping::ReadOnly(map), ptr)
        };
        #[cfg(target_vendor = "apple")]
        let full_sync = if writable { Some(self.file.try_clone()?) } else { None };
        Ok(Box::new(RealMap {
            map,
            ptr,
            probe: None,
            #[cfg(target_vendor = "apple")]
            full_sync,
        }))
    }

    /// [`MapMode::Read`] on Windows: positional reads, so that no chunk
    /// file is ever mapped there. A section cannot reach past its file's
    /// end (a chunk's mapping covers the most it may grow to), and a file
    /// that is mapped can be neither truncated nor removed (compaction and
    /// delete do both to chunk files).
    #[cfg(windows)]
    fn map_read(&self, len: usize) -> io::Result<Box<dyn Map>> {
        let file = RealFile { file: self.file.try_clone()? };
        Ok(Box::new(crate::io::positional::PositionalMap::new(file, len)))
    }

    /// [`MapMode::Read`].
    #[cfg(not(windows))]
    fn map_read(&self, len: usize) -> io::Result<Box<dyn Map>> {
        // SAFETY: a read-only shared mapping may extend past the end of the
        // file; the store reads only ranges below the file's length (its
        // table entries are validated against the length before any read), so
        // no access faults as long as nothing truncates the file while it is
        // mapped: this crate's delete and compaction, the only code of it
        // that shrinks a chunk file below a live record, hold the readers'
        // lock exclusively, which every read-only store holds shared, and a
        // reader that could not take it reads no mapping
        // (`Access::reads_mapped`). Another program (a writer that ignores the
        // lock) is outside what the store can exclude (docs/format.md,
        // docs/ARCHITECTURE.md "Concurrency contract"). Changing bytes are
        // read as untrusted input.
        let map = unsafe { MmapOptions::new().len(len).map(&self.file)? };
        advise_random(&self.file);
        // No read-around on a fault either: a record the residency sample
        // missed costs its own pages, not megabytes around it that would
        // also make later samples find the store "in memory". A hint.
        #[cfg(unix)]
        let _ = map.advise(memmap2::Advice::Random);
        let ptr = map.as_ptr().cast_mut();
        Ok(Box::new(RealMap {
            map: Mapping::ReadOnly(map),
            ptr,
            probe: Some(self.file.try_clone()?),
            #[cfg(target_vendor = "apple")]
            full_sync: None,
        }))
    }
}

#[derive(Debug)]
enum Mapping {
    Writable(MmapMut),
    ReadOnly(Mmap),
}

/// A mapping: [`MapMode::Shared`] (read-only or writable) or
/// [`MapMode::Read`] (read-only, with `probe`).
#[derive(Debug)]
struct RealMap {
    map: Mapping,
    /// The mapping's base, taken once so that stores need no `&mut`; written
    /// through only for a `Mapping::Writable`.
    ptr: *mut u8,
    /// For [`MapMode::Read`]: the file, for residency probes that take no
    /// lock of the address space (`cachestat`; a `mincore` does, and waits
    /// behind every `mmap` and `munmap` of the process: milliseconds under
    /// an allocator's churn). A [`MapMode::Shared`] mapping is not probed.
    probe: Option<File>,
    /// Apple: the file of a writable mapping. `msync` there writes the pages
    /// but leaves them in the drive's cache; an `F_FULLFSYNC` of the file
    /// ([`os::sync_file`]) empties it, so each flush ends with one.
    #[cfg(target_vendor = "apple")]
    full_sync: Option<File>,
}

// SAFETY: the raw pointer points into the mapping owned by `map`, which lives
// as long as `self`; concurrent access is governed by the `unsafe` contracts
// of `read` and `write`.
unsafe impl Send for RealMap {}
// SAFETY: as for `Send`.
unsafe impl Sync for RealMap {}

impl RealMap {
    fn len(&self) -> usize {
        match &self.map {
            Mapping::Writable(map) => map.len(),
            Mapping::ReadOnly(map) => map.len(),
        }
    }

    fn check(&self, offset: usize, len: usize) {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len()), "mapping access out of bounds");
    }

    fn check_writable(&self, offset: usize, len: usize) {
        self.check(offset, len);
        assert!(matches!(self.map, Mapping::Writable(_)), "store into a read-only mapping");
    }
}

impl Map for RealMap {
    unsafe fn read(&self, offset: usize, dst: &mut [u8]) {
        self.check(offset, dst.len());
        // SAFETY: in bounds (checked); the caller guarantees no concurrent
        // store by this process; `dst` is a distinct Rust allocation.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), dst.as_mut_ptr(), dst.len()) }
    }
    unsafe fn write(&self, offset: usize, src: &[u8]) {
        self.check_writable(offset, src.len());
        // SAFETY: in bounds (checked); the caller guarantees exclusive access
        // to these bytes; `src` cannot alias the mapping's private bytes.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(offset), src.len()) }
    }
    unsafe fn store_word(&self, offset: usize, word: u64) {
        self.check_writable(offset, 8);
        assert_eq!(offset % 8, 0, "unaligned word store");
        // SAFETY: in bounds and 8-aligned (the mapping is page aligned); an
        // atomic store is one instruction, never observed half done.
        unsafe { AtomicU64::from_ptr(self.ptr.add(offset).cast::<u64>()) }.store(word, Ordering::Release);
    }
    fn load_word(&self, offset: usize) -> u64 {
        self.check(offset, 8);
        assert_eq!(offset % 8, 0, "unaligned word load");
        // SAFETY: in bounds and 8-aligned (the mapping is page aligned); this
        // process accesses header words only with 8-byte atomics, and an
        // atomic load is defined whatever another process stores.
        unsafe { AtomicU64::from_ptr(self.ptr.add(offset).cast::<u64>()) }.load(Ordering::Acquire)
    }
    fn flush_range(&self, offset: usize, len: usize) -> io::Result<()> {
        self.check(offset, len);
        match &self.map {
            Mapping::Writable(map) => {
                map.flush_range(offset, len)?;
                #[cfg(target_vendor = "apple")]
                if let Some(file) = &self.full_sync {
                    os::sync_file(file, false)?;
                }
                Ok(())
            }
            Mapping::ReadOnly(_) => Ok(()),
        }
    }
    fn bytes<'a>(&'a self, offset: u64, len: usize, _scratch: &'a mut Vec<u8>) -> io::Result<&'a [u8]> {
        let Mapping::ReadOnly(map) = &self.map else { panic!("bytes of a writable mapping") };
        usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(len)?))
            .and_then(|range| map.get(range))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "read past the chunk mapping"))
    }
    fn residency(&self, offset: u64, len: usize) -> Residency {
        let Some(file) = &self.probe else { return Residency::Memory };
        let Some(end) = usize::try_from(offset).ok().and_then(|o| o.checked_add(len)) else { return Residency::Device };
        if len == 0 || end > self.len() {
            return if len == 0 { Residency::Memory } else { Residency::Device };
        }
        let resident = |yes: bool| if yes { Residency::Memory } else { Residency::Device };
        #[cfg(target_os = "linux")]
        if let Some(cached) = probe_cached(file, offset, end as u64) {
            return resident(cached);
        }
        let _ = file;
        // SAFETY: in bounds of the mapping (checked just above).
        let ptr = unsafe { self.ptr.add(offset as usize) };
        let page = page_size();
        let pages = (ptr as usize + len).div_ceil(page) - ptr as usize / page;
        resident(count_resident(ptr, len) == pages as u64)
    }
    fn will_need(&self, offset: usize, len: usize) {
        let len = len.min(self.len().saturating_sub(offset));
        if len == 0 {
            return;
        }
        #[cfg(unix)]
        let _ = match &self.map {
            Mapping::Writable(map) => map.advise_range(memmap2::Advice::WillNeed, offset, len),
            Mapping::ReadOnly(map) => map.advise_range(memmap2::Advice::WillNeed, offset, len),
        };
    }
}

/// Whether every page of `offset..end` of `file` is in the page cache,
/// from `cachestat(2)` (Linux 6.5): it reads no byte, starts no I/O and
/// takes no lock of the address space. `None` where the kernel lacks it
/// (then remembered, and `mincore` answers).
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
fn probe_cached(file: &File, offset: u64, end: u64) -> Option<bool> {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::AtomicBool;
    /// `cachestat`'s number, the same on both architectures.
    const SYS_CACHESTAT: libc::c_long = 451;
    static MISSING: AtomicBool = AtomicBool::new(false);
    #[repr(C)]
    struct Range {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Stat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    if MISSING.load(Ordering::Relaxed) {
        return None;
    }
    let page = page_size() as u64;
    let start = offset / page * page;
    let range = Range { off: start, len: end - start };
    let mut stat = Stat::default();
    // SAFETY: `cachestat(fd, range, stat, 0)` reads one `Range` and writes
    // one `Stat`, both `#[repr(C)]` as the kernel defines them and live for
    // the call; the descriptor is `file`'s, open for the call.
    let rc =
        unsafe { libc::syscall(SYS_CACHESTAT, file.as_raw_fd(), &raw const range, &raw mut stat, 0 as libc::c_uint) };
    if rc != 0 {
        MISSING.store(true, Ordering::Relaxed);
        return None;
    }
    Some(stat.nr_cache >= (end - start).div_ceil(page))
}

#[cfg(all(target_os = "linux", not(any(target_arch = "x86_64", target_arch = "aarch64"))))]
fn probe_cached(_file: &File, _offset: u64, _end: u64) -> Option<bool> {
    None
}

/// The file's length, `O_DIRECT` alignment and modification time from one
/// `statx` (`STATX_SIZE | STATX_DIOALIGN | STATX_MTIME`). The alignment is the larger of the
/// offset and the memory alignment, at least 512, where the kernel says
/// (Linux 6.1 and later), [`Stat::DIRECT_ALIGNMENT_DEFAULT`] where it does
/// not. `None` where `statx` fails or gives no size (then `fstat` answers).
#[cfg(target_os = "linux")]
fn statx(file: &File) -> Option<Stat> {
    use std::os::fd::AsRawFd;
    // SAFETY: `statx` is plain old data, for which all zeroes is a value.
    let mut stx: libc::statx = unsafe { std::mem::zeroed() };
    let mask = libc::STATX_SIZE | libc::STATX_DIOALIGN | libc::STATX_MTIME;
    // The system call, not glibc's wrapper: the wrapper came in glibc 2.28,
    // and the wheels link against 2.17 (manylinux2014). A kernel without
    // statx (before 4.11) answers ENOSYS, and `fstat` answers instead.
    let (fd, path, flags) =
        (libc::c_long::from(file.as_raw_fd()), c"".as_ptr(), libc::c_long::from(libc::AT_EMPTY_PATH));
    // SAFETY: the descriptor is open for the call; the empty path with
    // AT_EMPTY_PATH names it; `stx` is a valid, writable statx buffer; the
    // arguments are statx(2)'s, in its order and widths.
    let rc = unsafe {
        libc::syscall(libc::SYS_statx, fd, path, flags, libc::c_long::from(mask), &mut stx as *mut libc::statx)
    };
    if rc != 0 || stx.stx_mask & libc::STATX_SIZE == 0 {
        return None;
    }
    let said = stx.stx_mask & libc::STATX_DIOALIGN != 0 && stx.stx_dio_offset_align != 0;
    let align = stx.stx_dio_offset_align.max(stx.stx_dio_mem_align).max(512) as usize;
    let direct_alignment = if said && align.is_power_of_two() { align } else { Stat::DIRECT_ALIGNMENT_DEFAULT };
    let modified = (stx.stx_mask & libc::STATX_MTIME != 0 && stx.stx_mtime.tv_sec >= 0).then(|| {
        let secs = stx.stx_mtime.tv_sec as u64;
        secs.saturating_mul(1_000_000_000).saturating_add(u64::from(stx.stx_mtime.tv_nsec))
    });
    Some(Stat { len: stx.stx_size, direct_alignment, modified, version: None })
}

/// Tells the kernel that the file is read at random (`POSIX_FADV_RANDOM`):
/// no read-ahead around the batched reads of a chunk file, so a record that
/// is not in memory costs the device its own bytes only. A hint: a failure
/// changes nothing but speed.
#[cfg(not(windows))]
fn advise_random(file: &File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: `posix_fadvise` takes a descriptor and integers and touches
        // no memory of this process; `file` is open for the call.
        let _ = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
    }
    let _ = file;
}

/// Opens the regular file `path` with `options` and the extra open
/// `flags`, never waiting: anything else (a FIFO, a socket, a device, a
/// directory) is refused before it is opened, as it may wait or do
/// something; the open is `O_NONBLOCK`, so that a FIFO put in place since
/// the look does not wait for a writer either (refused after it). `create`:
/// a missing file is no error.
fn open_regular(path: &Path, options: &mut OpenOptions, flags: i32, create: bool) -> io::Result<File> {
    match fs::metadata(path) {
        Ok(meta) => regular_only(path, &meta)?,
        Err(e) if e.kind() == io::ErrorKind::NotFound && create => {}
        Err(e) => return Err(e),
    }
    #[cfg(target_os = "linux")]
    let flags = flags | libc::O_NONBLOCK;
    os::custom_flags(options, flags);
    let file = options.open(path)?;
    regular_only(path, &file.metadata()?)?;
    blocking(&file)?;
    Ok(file)
}

/// The open flag of [`OpenMode::ReadDirect`]: `O_DIRECT`, Linux only.
fn direct_flag() -> io::Result<i32> {
    #[cfg(target_os = "linux")]
    return Ok(libc::O_DIRECT);
    #[cfg(not(target_os = "linux"))]
    Err(io::Error::new(io::ErrorKind::Unsupported, "O_DIRECT reads are Linux only"))
}

/// `Ok` for a regular file; for anything else, an `InvalidInput` error
/// naming `path` and saying what it is.
fn regular_only(path: &Path, meta: &fs::Metadata) -> io::Result<()> {
    let kind = meta.file_type();
    let what = if kind.is_file() {
        return Ok(());
    } else if let Some(what) = os::special_kind(&kind) {
        what
    } else if kind.is_dir() {
        "a directory"
    } else {
        "something else"
    };
    Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is not a regular file but {what}", path.display())))
}

/// Clears `O_NONBLOCK` from a regular file opened with it: io_uring honours
/// the flag on regular files too, and would fail a read that must wait for
/// the device with `EAGAIN`.
fn blocking(file: &File) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: `fcntl` with F_GETFL / F_SETFL takes a descriptor and an
        // integer and touches no memory of this process; `file` is open.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    let _ = file;
    Ok(())
}

/// What differs between the operating systems the crate builds for, one
/// function each (the platform sections of `docs/crash-safety.md`).
#[cfg(unix)]
mod os {
    use std::fs::{File, FileType, OpenOptions};
    use std::io;
    use std::os::unix::fs::{FileExt, FileTypeExt, OpenOptionsExt};
    use std::path::Path;

    use crate::io::Handle;

    pub(super) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        file.read_at(buf, offset)
    }
    pub(super) fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
        file.write_at(buf, offset)
    }
    pub(super) fn handle(file: &File) -> Handle {
        use std::os::fd::AsRawFd;
        Handle(file.as_raw_fd() as u64)
    }
    /// A directory's entries made durable: `fsync` of the directory
    /// (`F_FULLFSYNC` on Apple, as [`sync_file`]).
    pub(super) fn sync_dir(path: &Path) -> io::Result<()> {
        sync_file(&File::open(path)?, true)
    }
    /// A file's data (and with `all` its metadata) made durable: `fdatasync`
    /// or `fsync`. Apple's `fsync` leaves the data in the drive's cache, so
    /// there std's calls are `F_FULLFSYNC`, which empties it: every sync of
    /// the crash analysis. `LOADERX_SYNC=fsync` ([`weak_sync`]) makes them
    /// plain `fsync`, faster and weaker.
    pub(super) fn sync_file(file: &File, all: bool) -> io::Result<()> {
        #[cfg(target_vendor = "apple")]
        if weak_sync() {
            use std::os::fd::AsRawFd;
            // SAFETY: `fsync` takes a descriptor and touches no memory of
            // this process; `file` is open for the call.
            return match unsafe { libc::fsync(file.as_raw_fd()) } {
                0 => Ok(()),
                _ => Err(io::Error::last_os_error()),
            };
        }
        if all { file.sync_all() } else { file.sync_data() }
    }
    /// Apple: `LOADERX_SYNC=fsync`, read once. Every sync is then `fsync`,
    /// which a power loss can undo: the drive may lose or reorder what it
    /// cached, and the crash analysis no longer holds (docs/crash-safety.md,
    /// "Platforms"). For scratch stores that can be rebuilt.
    #[cfg(target_vendor = "apple")]
    fn weak_sync() -> bool {
        static WEAK: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *WEAK.get_or_init(|| std::env::var("LOADERX_SYNC").is_ok_and(|v| v == "fsync"))
    }
    pub(super) fn custom_flags(options: &mut OpenOptions, flags: i32) {
        options.custom_flags(flags);
    }
    /// What a file that is neither regular nor a directory is.
    pub(super) fn special_kind(kind: &FileType) -> Option<&'static str> {
        [
            (kind.is_fifo(), "a FIFO"),
            (kind.is_socket(), "a socket"),
            (kind.is_char_device(), "a character device"),
            (kind.is_block_device(), "a block device"),
        ]
        .into_iter()
        .find_map(|(is, what)| is.then_some(what))
    }
}

/// What differs between the operating systems the crate builds for, one
/// function each (the platform sections of `docs/crash-safety.md`).
#[cfg(windows)]
mod os {
    use std::fs::{File, FileType, OpenOptions};
    use std::io;
    use std::os::windows::fs::{FileExt, OpenOptionsExt};
    use std::path::Path;

    use crate::io::Handle;

    /// `FILE_FLAG_BACKUP_SEMANTICS`: the flag that lets `CreateFileW` open a
    /// directory.
    const BACKUP_SEMANTICS: u32 = 0x0200_0000;

    /// A positional read (`ReadFile` with an offset). It moves the file's
    /// cursor, which nothing of the store uses.
    pub(super) fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        file.seek_read(buf, offset)
    }
    pub(super) fn write_at(file: &File, buf: &[u8], offset: u64) -> io::Result<usize> {
        file.seek_write(buf, offset)
    }
    pub(super) fn handle(file: &File) -> Handle {
        use std::os::windows::io::AsRawHandle;
        Handle(file.as_raw_handle() as usize as u64)
    }
    /// A directory's entries made durable: `FlushFileBuffers` on a handle of
    /// the directory opened for writing with backup semantics, where the
    /// filesystem takes it. Where it refuses (access denied: some volumes,
    /// and wine), the entries are journaled metadata, which NTFS's log
    /// writes in order: the next flush of a file forces them with it
    /// (docs/crash-safety.md, "Platforms"). The directory must exist.
    pub(super) fn sync_dir(path: &Path) -> io::Result<()> {
        let flushed =
            OpenOptions::new().write(true).custom_flags(BACKUP_SEMANTICS).open(path).and_then(|d| d.sync_all());
        match flushed {
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => std::fs::metadata(path).map(drop),
            other => other,
        }
    }
    /// A file made durable: `FlushFileBuffers` (data and metadata alike).
    pub(super) fn sync_file(file: &File, _all: bool) -> io::Result<()> {
        file.sync_all()
    }
    /// Unix open flags (`O_DIRECT`, `O_NONBLOCK`) have no meaning here.
    pub(super) fn custom_flags(_options: &mut OpenOptions, _flags: i32) {}
    /// Windows names no file kinds beside files, directories and links.
    pub(super) fn special_kind(_kind: &FileType) -> Option<&'static str> {
        None
    }
}
