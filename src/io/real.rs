//! The real filesystem: `std::fs` and `memmap2`. The only file of the crate
//! that touches either, and the only one with `unsafe` mapping code.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use memmap2::{Mmap, MmapMut, MmapOptions};

use super::{FileKind, LockKind, OpenMode, ReadMap, SharedMap, Vfs, VfsFile};

/// [`Vfs`] over the operating system's filesystem.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

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
        File::open(path)?.sync_all()
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn VfsFile>> {
        let mut options = OpenOptions::new();
        options.read(true);
        match mode {
            OpenMode::Read => {}
            OpenMode::Write => {
                options.write(true);
            }
            OpenMode::Create => {
                options.write(true).create(true).truncate(false);
            }
        }
        Ok(Box::new(RealFile { file: options.open(path)? }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }
}

#[derive(Debug)]
struct RealFile {
    file: File,
}

impl VfsFile for RealFile {
    fn len(&self) -> io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.file.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.file.write_at(buf, offset)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.file.set_len(len)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }
    fn sync_all(&self) -> io::Result<()> {
        self.file.sync_all()
    }
    #[cfg(target_os = "linux")]
    fn start_writeback(&self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Err(io::Error::from(io::ErrorKind::InvalidInput));
        };
        // SAFETY: `sync_file_range` takes a descriptor and integers and
        // touches no memory of this process; the descriptor is owned by
        // `self.file`, open for the duration of the call.
        let rc = unsafe { libc::sync_file_range(self.file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE) };
        if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
    }
    fn try_lock(&self, kind: LockKind) -> io::Result<bool> {
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
    fn map_shared(&self, len: usize, writable: bool) -> io::Result<Box<dyn SharedMap>> {
        if self.len()? < len as u64 {
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
        Ok(Box::new(RealSharedMap { map, ptr }))
    }
    fn map_read(&self, len: usize) -> io::Result<Box<dyn ReadMap>> {
        // SAFETY: a read-only shared mapping may extend past the end of the
        // file; the store reads only ranges below the file's length (its
        // table entries are validated against the length before any read), so
        // no access faults as long as no other program truncates the file
        // while it is open (the assumption every mmap store makes, stated in
        // docs/format.md). Changing bytes are read as untrusted input.
        let map = unsafe { MmapOptions::new().len(len).map(&self.file)? };
        Ok(Box::new(RealReadMap { map }))
    }
}

#[derive(Debug)]
enum Mapping {
    Writable(MmapMut),
    ReadOnly(Mmap),
}

#[derive(Debug)]
struct RealSharedMap {
    map: Mapping,
    /// The mapping's base, taken once so that stores need no `&mut`; written
    /// through only for a `Mapping::Writable`.
    ptr: *mut u8,
}

// SAFETY: the raw pointer points into the mapping owned by `map`, which lives
// as long as `self`; concurrent access is governed by the `unsafe` contracts
// of `read` and `write`.
unsafe impl Send for RealSharedMap {}
// SAFETY: as for `Send`.
unsafe impl Sync for RealSharedMap {}

impl RealSharedMap {
    fn check(&self, offset: usize, len: usize) {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len()), "mapping access out of bounds");
    }

    fn check_writable(&self, offset: usize, len: usize) {
        self.check(offset, len);
        assert!(matches!(self.map, Mapping::Writable(_)), "store into a read-only mapping");
    }
}

impl SharedMap for RealSharedMap {
    fn len(&self) -> usize {
        match &self.map {
            Mapping::Writable(map) => map.len(),
            Mapping::ReadOnly(map) => map.len(),
        }
    }
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
            Mapping::Writable(map) => map.flush_range(offset, len),
            Mapping::ReadOnly(_) => Ok(()),
        }
    }
}

#[derive(Debug)]
struct RealReadMap {
    map: Mmap,
}

impl ReadMap for RealReadMap {
    fn bytes<'a>(&'a self, offset: u64, len: usize, _scratch: &'a mut Vec<u8>) -> io::Result<&'a [u8]> {
        usize::try_from(offset)
            .ok()
            .and_then(|start| Some(start..start.checked_add(len)?))
            .and_then(|range| self.map.get(range))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "read past the chunk mapping"))
    }
}
