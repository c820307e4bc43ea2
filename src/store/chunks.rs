//! The chunk files `0.zr ..= {last}.zr`: [`ChunkSet`] owns the filesystem
//! handle, opens chunk files lazily (mapped read-only for the gather path),
//! and is the only code that writes, extends, syncs, trims or removes them.
//!
//! Invariant: [`Chunk::len`] never exceeds the file's real length, so a read
//! validated against it never touches the mapping past the end of the file.
//! It grows after bytes are written or the file extended, and shrinks (under
//! `&mut`) before the file is truncated. In a read-only store it is the
//! file's length when the chunk was opened or the store last refreshed
//! (shorter or longer than before); no writer of this crate shrinks a file
//! below it while a reader holds the readers' lock (`readers.rs`). A read
//! that finds a file changed under a read-only store (shorter than this
//! length, or bytes past it named) is `Error::StoreChanged`, not
//! corruption.

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::access::Home;
use super::entry::ValidEntry;
use crate::error::{Corruption, Error, Result};
use crate::format::{CHUNK_BYTES_MAX, CHUNKS_MAX, Frontier, chunk_file_name, chunk_id_of};
use crate::io::{BatchRead, Map, MapMode, NOTHING, OpenMode, Residency, SyncKind, Then, Vfs, VfsFile};
use crate::sync::{AtomicU64, Ordering};

/// One open chunk file.
#[derive(Debug)]
pub(crate) struct Chunk {
    file: Box<dyn VfsFile>,
    map: Box<dyn Map>,
    len: AtomicU64,
    /// The file opened again `O_DIRECT`, with its direct alignment (asked
    /// once: `statx`), on the first direct read
    /// ([`ReadMode::Direct`](super::ReadMode::Direct)).
    direct: OnceLock<(Box<dyn VfsFile>, usize)>,
}

impl Chunk {
    /// Bytes of the file that may be read.
    pub(crate) fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    /// The file's real length.
    pub(crate) fn file_len(&self) -> io::Result<u64> {
        Ok(self.file.stat()?.len)
    }

    /// Records that bytes up to `end` now exist.
    fn grew_to(&self, end: u64) {
        self.len.fetch_max(end, Ordering::AcqRel);
    }

    /// Writes `data` at `offset` (not durable until [`ChunkSet::sync_data`]).
    pub(crate) fn write(&self, data: &[u8], offset: u64) -> io::Result<()> {
        crate::io::write_all_at(&*self.file, data, offset)?;
        self.grew_to(offset + data.len() as u64);
        Ok(())
    }

    /// Extends the file to `end` if it is shorter (an empty record at a
    /// frontier past the file's end).
    pub(crate) fn extend_to(&self, end: u64) -> io::Result<()> {
        if self.file.stat()?.len < end {
            self.file.set_len(end)?;
        }
        self.grew_to(end);
        Ok(())
    }

    /// `fdatasync`.
    pub(crate) fn sync_data(&self) -> io::Result<()> {
        self.file.sync(SyncKind::Data)
    }

    /// Starts writeback of `offset..end` (a hint; see
    /// [`SyncKind::StartWriteback`]): a failure is ignored, the sync that
    /// follows reports real errors.
    pub(crate) fn start_writeback(&self, offset: u64, end: u64) {
        if end > offset {
            let _ = self.file.sync(SyncKind::StartWriteback { offset, len: end - offset });
        }
    }
}

/// How a read reaches a chunk file's bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Via {
    /// Through the page cache.
    Cache,
    /// Past it (`O_DIRECT`), at the chunk's direct alignment.
    Direct,
}

/// The set of chunk files of one store.
pub(crate) struct ChunkSet {
    /// The filesystem, the directory, and what the store may do (writes,
    /// reads through the mappings).
    home: Arc<Home>,
    /// Chunk `id`'s cell is `cells[id / CELL_GROUP][id % CELL_GROUP]`, a
    /// group allocated on first use: an open costs the group table, not
    /// [`CHUNKS_MAX`] cells (192 KiB, written at every open).
    cells: Box<[OnceLock<CellGroup>]>,
}

/// Chunk cells allocated together.
const CELL_GROUP: usize = 64;

/// [`CELL_GROUP`] chunk cells.
type CellGroup = Box<[OnceLock<Chunk>]>;
const _: () = assert!((CHUNKS_MAX as usize).is_multiple_of(CELL_GROUP));

impl std::fmt::Debug for ChunkSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open: Vec<usize> = (0..CHUNKS_MAX as usize).filter(|&id| self.opened(id as u16).is_some()).collect();
        f.debug_struct("ChunkSet").field("dir", &self.dir()).field("open", &open).finish()
    }
}

impl ChunkSet {
    pub(crate) fn new(home: Arc<Home>) -> ChunkSet {
        let cells = (0..CHUNKS_MAX as usize / CELL_GROUP).map(|_| OnceLock::new()).collect();
        ChunkSet { home, cells }
    }

    /// The store's directory.
    fn dir(&self) -> &Path {
        self.home.path()
    }

    /// The filesystem the store lives on.
    fn vfs(&self) -> &dyn Vfs {
        self.home.vfs()
    }

    /// True for a writer's store.
    fn writable(&self) -> bool {
        !self.home.access().is_read_only()
    }

    /// A read-only store's error for a file found changed under it.
    fn changed(&self, index: Option<u64>, what: String) -> Error {
        Error::StoreChanged { path: self.dir().to_path_buf(), index, what }
    }

    /// Chunk `id`'s cell, its group allocated if it was not; `None` past the chunk limit.
    fn cell(&self, id: u16) -> Option<&OnceLock<Chunk>> {
        let id = usize::from(id);
        let group = self.cells.get(id / CELL_GROUP)?.get_or_init(|| (0..CELL_GROUP).map(|_| OnceLock::new()).collect());
        Some(&group[id % CELL_GROUP])
    }

    /// Chunk `id`'s cell if its group was allocated.
    fn cell_mut(&mut self, id: u16) -> Option<&mut OnceLock<Chunk>> {
        let id = usize::from(id);
        self.cells.get_mut(id / CELL_GROUP)?.get_mut()?.get_mut(id % CELL_GROUP)
    }

    /// Chunk `id`, opened on first use; `Ok(None)` if the file does not exist.
    /// Ids past the chunk limit name no file (`Ok(None)`).
    pub(crate) fn get(&self, id: u16) -> io::Result<Option<&Chunk>> {
        let Some(cell) = self.cell(id) else { return Ok(None) };
        if let Some(chunk) = cell.get() {
            return Ok(Some(chunk));
        }
        let mode = if self.writable() { OpenMode::Write } else { OpenMode::Read };
        match self.vfs().open(&self.dir().join(chunk_file_name(id)), mode) {
            Ok(file) => Ok(Some(Self::install(cell, file)?)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates the empty chunk file `0.zr` of a new store in `dir`, durably
    /// (its directory entry is the caller's to sync: "Store creation").
    pub(crate) fn create_first(vfs: &dyn Vfs, dir: &Path) -> io::Result<()> {
        vfs.open(&dir.join(chunk_file_name(0)), OpenMode::Create)?.sync(SyncKind::All)
    }

    /// Chunk `id` if it is open already (no I/O).
    pub(crate) fn opened(&self, id: u16) -> Option<&Chunk> {
        let id = usize::from(id);
        self.cells.get(id / CELL_GROUP)?.get()?[id % CELL_GROUP].get()
    }

    /// Chunk `id`, created if missing (writer only), and whether it was
    /// created: then [`ChunkSet::sync_dir`] must make it durable before
    /// anything points into it.
    pub(crate) fn create(&self, id: u16) -> io::Result<(&Chunk, bool)> {
        assert!(self.writable(), "a read-only store creates no chunk");
        if let Some(chunk) = self.get(id)? {
            return Ok((chunk, false));
        }
        let file = self.vfs().open(&self.dir().join(chunk_file_name(id)), OpenMode::Create)?;
        Ok((Self::install(self.cell(id).expect("a chunk id below CHUNKS_MAX"), file)?, true))
    }

    fn install(cell: &OnceLock<Chunk>, file: Box<dyn VfsFile>) -> io::Result<&Chunk> {
        let len = file.stat()?.len.min(CHUNK_BYTES_MAX);
        let map = file.map(CHUNK_BYTES_MAX as usize, MapMode::Read)?;
        // Another thread may have opened it meanwhile: either copy is fine.
        let _ = cell.set(Chunk { file, map, len: AtomicU64::new(len), direct: OnceLock::new() });
        Ok(cell.get().expect("just set"))
    }

    /// The chunk holding a validated entry's bytes; an error if they do
    /// not lie inside the file.
    pub(crate) fn locate(&self, valid: &ValidEntry) -> Result<&Chunk> {
        let (loc, index) = (valid.loc(), Some(valid.index()));
        let corrupt = |what| Error::Corrupt { path: self.dir().to_path_buf(), index, what };
        let chunk = self
            .get(loc.chunk)
            .map_err(|source| Error::Io {
                path: self.dir().join(chunk_file_name(loc.chunk)),
                op: "open chunk",
                source,
            })?
            .ok_or(corrupt(Corruption::ChunkMissing { chunk: loc.chunk }))?;
        let (end, known) = (u64::from(loc.offset) + u64::from(valid.phys()), chunk.len());
        if end <= known {
            return Ok(chunk);
        }
        // No writer of this crate points an entry a reader sees past the
        // length it knows; a file changed since the reader looked is a
        // change under it (a delete or compaction that took no readers'
        // lock), the same file is a damaged entry.
        match chunk.file_len() {
            Ok(now) if !self.writable() && now.min(CHUNK_BYTES_MAX) != known => Err(self.changed(
                index,
                format!(
                    "its bytes end at {end}, past the {known} bytes of {}.zr it knew; the file has {now}",
                    loc.chunk
                ),
            )),
            _ => Err(corrupt(Corruption::PastChunkEnd { chunk: loc.chunk, end, chunk_len: known })),
        }
    }

    /// The stored bytes of a validated entry, borrowed from the chunk
    /// mapping where possible (read into `scratch` for an
    /// store that reads no mapping (`Access::reads_mapped`)); an error if they do not lie
    /// inside the file.
    pub(crate) fn stored<'a>(&'a self, valid: &ValidEntry, scratch: &'a mut Vec<u8>) -> Result<&'a [u8]> {
        let chunk = self.locate(valid)?;
        let (offset, len) = (u64::from(valid.loc().offset), valid.phys() as usize);
        let io = |source| Error::Io { path: self.dir().to_path_buf(), op: "read chunk", source };
        if self.home.access().reads_mapped() {
            return chunk.map.bytes(offset, len, scratch).map_err(io);
        }
        scratch.resize(len, 0);
        match crate::io::read_exact_at(&*chunk.file, scratch, offset) {
            Ok(()) => Ok(&scratch[..]),
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && !self.writable() => {
                Err(self.changed(Some(valid.index()), format!("{}.zr ends before its bytes", valid.loc().chunk)))
            }
            Err(e) => Err(io(e)),
        }
    }

    /// Runs positional reads of chunk bytes (chunk id, read), all of whose
    /// chunks are open (the entries were located), through the page cache.
    pub(crate) fn read_many(&self, reads: Vec<(u16, BatchRead<'_>)>) -> Result<()> {
        self.read_via(reads.into_iter().map(|(chunk, read)| (chunk, Via::Cache, read)).collect(), NOTHING)
    }

    /// Runs positional reads of chunk bytes (chunk id, how, read), all of
    /// whose chunks are open (the entries were located), in (chunk, via,
    /// offset) order and all in flight together ([`Vfs::read_batch`]),
    /// with `then(k, read)` for read `k` of `reads` as it completes. A
    /// [`Via::Direct`] read must be aligned to its chunk's
    /// [`ChunkSet::direct_alignment`].
    pub(crate) fn read_via(&self, reads: Vec<(u16, Via, BatchRead<'_>)>, then: Then<'_>) -> Result<()> {
        let mut reads: Vec<(usize, (u16, Via, BatchRead<'_>))> = reads.into_iter().enumerate().collect();
        reads.sort_unstable_by_key(|(_, (chunk, via, read))| (*chunk, *via == Via::Direct, read.offset));
        let io = |op, source| Error::Io { path: self.dir().to_path_buf(), op, source };
        let mut files: Vec<&dyn VfsFile> = Vec::with_capacity(reads.len());
        for &(_, (id, via, _)) in &reads {
            let chunk = self.opened(id).expect("located chunks are open");
            files.push(match via {
                Via::Cache => &*chunk.file,
                Via::Direct => &*self.direct(id, chunk).map_err(|e| io("open chunk O_DIRECT", e))?.0,
            });
        }
        let (order, ids): (Vec<usize>, Vec<u16>) = reads.iter().map(|(k, (id, _, _))| (*k, *id)).unzip();
        let mut reads: Vec<BatchRead<'_>> = reads.into_iter().map(|(_, (_, _, read))| read).collect();
        let then: Then<'_> = &|k, read| then(order[k], read);
        self.vfs().read_batch(&files, &mut reads, then).map_err(|e| match e.error.kind() {
            // Every read was validated against the length it knew.
            io::ErrorKind::UnexpectedEof if !self.writable() => {
                self.changed(None, format!("{}.zr is shorter than it knew", ids[e.index]))
            }
            _ => io("read chunk", e.error),
        })
    }

    /// Chunk `id`'s `O_DIRECT` handle, opened on first use.
    fn direct<'a>(&self, id: u16, chunk: &'a Chunk) -> io::Result<&'a (Box<dyn VfsFile>, usize)> {
        if let Some(direct) = chunk.direct.get() {
            return Ok(direct);
        }
        let file = self.vfs().open(&self.dir().join(chunk_file_name(id)), OpenMode::ReadDirect)?;
        let align = file.stat()?.direct_alignment;
        // Another thread may have opened it meanwhile: either handle is fine.
        let _ = chunk.direct.set((file, align));
        Ok(chunk.direct.get().expect("just set"))
    }

    /// The alignment of a [`Via::Direct`] read of chunk `id` (open).
    pub(crate) fn direct_alignment(&self, id: u16) -> Result<usize> {
        let chunk = self.opened(id).expect("located chunks are open");
        let (_, align) = self.direct(id, chunk).map_err(|source| Error::Io {
            path: self.dir().to_path_buf(),
            op: "open chunk O_DIRECT",
            source,
        })?;
        Ok(*align)
    }

    /// Whether a validated entry's bytes are in memory (a chunk that cannot
    /// be opened counts as resident: the read reports its error).
    pub(crate) fn resident(&self, valid: &ValidEntry) -> bool {
        match self.get(valid.loc().chunk) {
            Ok(Some(chunk)) => {
                chunk.map.residency(u64::from(valid.loc().offset), valid.phys() as usize) != Residency::Device
            }
            _ => true,
        }
    }

    /// `fdatasync` of the chunks `ids` that exist.
    pub(crate) fn sync_data(&self, ids: Range<u16>) -> io::Result<()> {
        self.for_each_present(ids, Chunk::sync_data)
    }

    /// Makes the directory's entries (created or removed chunk files) durable.
    pub(crate) fn sync_dir(&self) -> io::Result<()> {
        self.vfs().sync_dir(self.dir())
    }

    /// Sets the known lengths of chunks `0..=last` to the files' (a
    /// read-only store, after another process appended, or shrank a file:
    /// the length goes down as well as up).
    pub(crate) fn refresh(&self, last: u16) -> io::Result<()> {
        assert!(!self.writable(), "a writer's known lengths are its own");
        self.for_each_present(0..last.min(CHUNKS_MAX as u16 - 1) + 1, |chunk| {
            chunk.len.store(chunk.file.stat()?.len.min(CHUNK_BYTES_MAX), Ordering::Release);
            Ok(())
        })
    }

    /// Bytes the chunk files hold up to `frontier`: every chunk before its
    /// chunk, whole, and its offset.
    pub(crate) fn bytes_below(&self, frontier: Frontier) -> io::Result<u64> {
        let mut bytes = u64::from(frontier.offset);
        self.for_each_present(0..frontier.chunk, |chunk| {
            bytes += chunk.len().min(CHUNK_BYTES_MAX);
            Ok(())
        })?;
        Ok(bytes)
    }

    /// Calls `f` on each chunk of `ids` whose file exists, in order, opened.
    /// A chunk not open yet is looked up in one listing of the directory,
    /// made at the first such chunk: a damaged header's far frontier costs
    /// one listing, not a failed open per missing file.
    fn for_each_present(&self, ids: Range<u16>, mut f: impl FnMut(&Chunk) -> io::Result<()>) -> io::Result<()> {
        let mut listed: Option<Vec<bool>> = None;
        for id in ids.clone() {
            let chunk = match self.opened(id) {
                Some(chunk) => Some(chunk),
                None => {
                    let present = match &listed {
                        Some(present) => present,
                        None => listed.insert(self.present_below(ids.end)?),
                    };
                    if present[usize::from(id)] { self.get(id)? } else { None }
                }
            };
            if let Some(chunk) = chunk {
                f(chunk)?;
            }
        }
        Ok(())
    }

    /// Which chunk files below `end` the directory holds.
    fn present_below(&self, end: u16) -> io::Result<Vec<bool>> {
        let mut present = vec![false; usize::from(end)];
        for id in self.vfs().list_dir(self.dir())?.iter().filter_map(|name| chunk_id_of(name)) {
            if let Some(cell) = present.get_mut(usize::from(id)) {
                *cell = true;
            }
        }
        Ok(present)
    }

    /// Truncates chunk `id` to `len` if it is longer, durably.
    pub(crate) fn trim(&mut self, id: u16, len: u64) -> io::Result<()> {
        let Some(chunk) = self.get(id)? else { return Ok(()) };
        if chunk.file.stat()?.len <= len {
            return Ok(());
        }
        let chunk = self.cell_mut(id).and_then(OnceLock::get_mut).expect("opened above");
        chunk.len.store(len, Ordering::Release); // before the file shrinks
        chunk.file.set_len(len)?;
        chunk.file.sync(SyncKind::All)
    }

    /// How many chunk files lie past chunk `last` (what
    /// [`ChunkSet::remove_past`] would remove).
    pub(crate) fn count_past(&self, last: u16) -> io::Result<u32> {
        let names = self.vfs().list_dir(self.dir())?;
        Ok(names.iter().filter(|name| chunk_id_of(name).is_some_and(|id| id > last)).count() as u32)
    }

    /// Removes the chunk files past chunk `last` (not yet durable: see
    /// [`ChunkSet::sync_dir`]); returns how many.
    pub(crate) fn remove_past(&mut self, last: u16) -> io::Result<u32> {
        let mut removed = 0;
        for name in self.vfs().list_dir(self.dir())? {
            let Some(id) = chunk_id_of(&name) else { continue };
            if id > last {
                if let Some(cell) = self.cell_mut(id) {
                    cell.take();
                }
                self.vfs().remove_file(&self.dir().join(&name))?;
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// Starts writeback of the bytes `from..to` of the chunks (a hint).
    pub(crate) fn start_writeback(&self, from: Frontier, to: Frontier) {
        for id in from.chunk..=to.chunk {
            let start = if id == from.chunk { u64::from(from.offset) } else { 0 };
            let end = if id == to.chunk { u64::from(to.offset) } else { CHUNK_BYTES_MAX };
            if let Ok(Some(chunk)) = self.get(id) {
                chunk.start_writeback(start, end);
            }
        }
    }
}
