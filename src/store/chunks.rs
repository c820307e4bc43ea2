//! The chunk files `0.zr ..= {tail_chunk}.zr`, opened lazily and mapped
//! read-only for the gather path.
//!
//! Invariant: `Chunk::len` never exceeds the file's real length, so a read
//! validated against it never touches the mapping past the end of the file.
//! It grows after bytes are written and shrinks (under `&mut`) before a file
//! is truncated.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::sync::{AtomicU64, Ordering};

use crate::format::{CHUNK_BYTES_MAX, CHUNKS_MAX, chunk_file_name};
use crate::io::{OpenMode, ReadMap, Vfs, VfsFile};

/// One open chunk file.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub(crate) file: Box<dyn VfsFile>,
    pub(crate) map: Box<dyn ReadMap>,
    len: AtomicU64,
}

impl Chunk {
    /// Bytes of the file that may be read.
    pub(crate) fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }
    /// Records that bytes up to `end` now exist.
    pub(crate) fn grew_to(&self, end: u64) {
        self.len.fetch_max(end, Ordering::AcqRel);
    }
    /// Records a truncation to `len` (before it happens).
    pub(crate) fn shrink_to(&mut self, len: u64) {
        self.len.store(len, Ordering::Release);
    }
}

/// The set of chunk files.
pub(crate) struct Chunks {
    dir: PathBuf,
    writable: bool,
    slots: Box<[OnceLock<Chunk>]>,
}

impl std::fmt::Debug for Chunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open: Vec<usize> =
            self.slots.iter().enumerate().filter(|(_, s)| s.get().is_some()).map(|(i, _)| i).collect();
        f.debug_struct("Chunks").field("dir", &self.dir).field("open", &open).finish()
    }
}

impl Chunks {
    pub(crate) fn new(dir: &Path, writable: bool) -> Chunks {
        Chunks { dir: dir.to_path_buf(), writable, slots: (0..CHUNKS_MAX).map(|_| OnceLock::new()).collect() }
    }

    pub(crate) fn path(&self, id: u16) -> PathBuf {
        self.dir.join(chunk_file_name(id))
    }

    /// Chunk `id`, opened on first use; `Ok(None)` if the file does not exist.
    pub(crate) fn get(&self, vfs: &dyn Vfs, id: u16) -> io::Result<Option<&Chunk>> {
        let slot = &self.slots[usize::from(id)];
        if let Some(chunk) = slot.get() {
            return Ok(Some(chunk));
        }
        let mode = if self.writable { OpenMode::Write } else { OpenMode::Read };
        match vfs.open(&self.path(id), mode) {
            Ok(file) => Ok(Some(self.install(slot, file)?)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Chunk `id`, created if missing (writer only). The caller makes the
    /// creation durable with a directory sync before anything points into it.
    pub(crate) fn get_or_create(&self, vfs: &dyn Vfs, id: u16) -> io::Result<(&Chunk, bool)> {
        debug_assert!(self.writable);
        if let Some(chunk) = self.get(vfs, id)? {
            return Ok((chunk, false));
        }
        let file = vfs.open(&self.path(id), OpenMode::Create)?;
        Ok((self.install(&self.slots[usize::from(id)], file)?, true))
    }

    fn install<'a>(&self, slot: &'a OnceLock<Chunk>, file: Box<dyn VfsFile>) -> io::Result<&'a Chunk> {
        let len = file.len()?.min(CHUNK_BYTES_MAX);
        let map = file.map_read(CHUNK_BYTES_MAX as usize)?;
        // Another thread may have opened it meanwhile: either copy is fine.
        let _ = slot.set(Chunk { file, map, len: AtomicU64::new(len) });
        Ok(slot.get().expect("just set"))
    }

    /// The open chunk `id`, if it was opened.
    pub(crate) fn get_mut(&mut self, id: u16) -> Option<&mut Chunk> {
        self.slots[usize::from(id)].get_mut()
    }

    /// Forgets chunk `id` (its file was removed).
    pub(crate) fn forget(&mut self, id: u16) {
        self.slots[usize::from(id)].take();
    }
}
