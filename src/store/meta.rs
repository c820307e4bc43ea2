//! `meta.zr`: the header, the record table and the intent area. [`Meta`] is
//! the only code that creates, grows, writes, stores into or syncs them, in the order
//! `docs/crash-safety.md` gives, and the only holder of the frontier and the
//! length: their one source is the header's two words, read back with
//! atomic word loads ([`Meta::header`]); the published length that readers
//! go by is derived from them, after the commit that makes them durable.
//!
//! Invariant (the lock-free read path rests on it): an entry below the
//! published length is written only through `&mut Meta` (delete,
//! compaction, recovery); an append writes entries at and past it, holding
//! the append mutex ([`AppendGuard`]), and readers never read those. So the
//! `unsafe` table reads never race with a write within this process, and the
//! header is only ever stored by the one writer.

use std::io;
use std::path::Path;

use bytemuck::Zeroable;

use super::intent::Intent;
use super::sums::{Sum, Sums};
use crate::error::{Corruption, Error, Result};
use crate::format::{
    CHUNKS_MAX, ENTRY_BYTES, Entry, Frontier, HEADER_BYTES, HEADER_WORD1_OFFSET, Header, MAGIC, META_BYTES, META_FILE,
    META_TMP_FILE, RECORDS_MAX, VERSION, entry_offset,
};
use crate::io::{
    LockKind, Map, MapMode, OpenMode, Residency, SyncKind, Vfs, VfsFile, read_exact_at, write_all_at, write_mapped,
};
use crate::sync::{AtomicU32, Mutex, MutexGuard, Ordering};

/// Entries a table scan reads at once (64 KiB): [`Meta::try_for_each_written_entry`].
const SCAN_BLOCK_ENTRIES: usize = 4096;

/// `meta.zr`, open and mapped for as long as the store is.
#[derive(Debug)]
pub(crate) struct Meta {
    /// The open file: a writer's holds the writer flock (an exclusive
    /// `flock`, against writers in other processes).
    file: Box<dyn VfsFile>,
    map: Box<dyn Map>,
    /// Entries the mapping covers (fewer than `RECORDS_MAX` for a short
    /// read-only `meta.zr`).
    capacity: u32,
    /// The published length: readers see records `0..len`.
    len: AtomicU32,
    /// The append mutex: held by an append or a dictionary installation
    /// from start to end (against the other threads of this process).
    appends: Mutex<()>,
    /// `sums.zr`, if the store has one: kept in the table's crash order.
    sums: Option<Sums>,
}

/// The append mutex, held: the right to write entries at and past the
/// published length and to commit them.
pub(crate) struct AppendGuard<'a> {
    meta: &'a Meta,
    _lock: MutexGuard<'a, ()>,
}

impl Meta {
    /// Opens, checks, locks (a writer: the writer flock) and maps
    /// `meta.zr` in the store directory `path`, growing a short one back to
    /// its full size first (a writer); returns it with the file's length at
    /// open.
    pub(crate) fn open(vfs: &dyn Vfs, path: &Path, read_only: bool) -> Result<(Meta, u64)> {
        let io_err = |op: &'static str| move |source| Error::Io { path: path.to_path_buf(), op, source };
        let mode = if read_only { OpenMode::Read } else { OpenMode::Write };
        let meta = vfs.open(&path.join(META_FILE), mode).map_err(io_err("open meta.zr"))?;
        if !read_only && !meta.lock(LockKind::Exclusive, false).map_err(io_err("lock meta.zr"))? {
            return Err(Error::Locked { path: path.to_path_buf() });
        }
        let meta_len = meta.stat().map_err(io_err("stat meta.zr"))?.len;
        if meta_len < HEADER_BYTES {
            return Err(Error::MetaTruncated { path: path.to_path_buf(), len: meta_len, needed: HEADER_BYTES });
        }
        let mut header = Header::zeroed();
        read_exact_at(&*meta, bytemuck::bytes_of_mut(&mut header), 0).map_err(io_err("read meta.zr"))?;
        Meta::check_header(path, &header)?;
        let needed = entry_offset(header.length());
        if meta_len < needed {
            return Err(Error::MetaTruncated { path: path.to_path_buf(), len: meta_len, needed });
        }
        if !read_only && meta_len < META_BYTES {
            // The reference grows a short meta.zr back too; entries past the old
            // end read as zeros, which no written entry is. (No intent can be
            // present: one lies past the full table.)
            meta.set_len(META_BYTES).map_err(io_err("grow meta.zr"))?;
            meta.sync(SyncKind::All).map_err(io_err("sync meta.zr"))?;
        }
        let map_len = meta_len.clamp(HEADER_BYTES, META_BYTES).max(if read_only { 0 } else { META_BYTES });
        let map =
            meta.map(map_len as usize, MapMode::Shared { writable: !read_only }).map_err(io_err("map meta.zr"))?;
        let sums = Sums::open(vfs, path, read_only).map_err(io_err("open sums.zr"))?;
        Ok((Meta::new(meta, map, map_len, sums), meta_len))
    }

    /// Creates `meta.zr` in `dir` (which holds none): whole, by rename, or
    /// not at all (`docs/crash-safety.md`, "Store creation", steps 1, S1
    /// and 2). `names` is the directory's listing.
    pub(crate) fn create(vfs: &dyn Vfs, dir: &Path, names: &[String]) -> io::Result<()> {
        if names.iter().any(|n| n == META_TMP_FILE) {
            vfs.remove_file(&dir.join(META_TMP_FILE))?;
        }
        // Before meta.zr: a store never exists without its sums (SYNC K0).
        Sums::create(vfs, dir, Header::new(Frontier::default(), 0))?;
        let tmp = dir.join(META_TMP_FILE);
        let meta = vfs.open(&tmp, OpenMode::Create)?;
        meta.set_len(META_BYTES)?;
        write_all_at(&*meta, bytemuck::bytes_of(&Header::new(Frontier::default(), 0)), 0)?;
        meta.sync(SyncKind::All)?; // SYNC S1
        vfs.rename(&tmp, &dir.join(META_FILE))
    }

    /// The header's magic, version and limits.
    fn check_header(path: &Path, header: &Header) -> Result<()> {
        let not_a_store = |reason: String| Error::NotAStore { path: path.to_path_buf(), reason };
        if header.magic != MAGIC {
            return Err(not_a_store(format!("magic is {:02x?}, not \"ZREC\"", header.magic)));
        }
        if header.version() != VERSION {
            return Err(not_a_store(format!("format version {}, this build reads {VERSION}", header.version())));
        }
        let corrupt =
            |what: String| Error::Corrupt { path: path.to_path_buf(), index: None, what: Corruption::Header(what) };
        if header.length() > RECORDS_MAX {
            return Err(corrupt(format!("length {} exceeds the {RECORDS_MAX} record limit", header.length())));
        }
        if u32::from(header.frontier().chunk) >= CHUNKS_MAX {
            return Err(corrupt(format!(
                "last chunk {} exceeds the {CHUNKS_MAX} chunk limit",
                header.frontier().chunk
            )));
        }
        Ok(())
    }

    /// `file` mapped as `map`, `map_len` bytes, with the header's length
    /// published.
    fn new(file: Box<dyn VfsFile>, map: Box<dyn Map>, map_len: u64, sums: Option<Sums>) -> Meta {
        let capacity = (map_len.saturating_sub(HEADER_BYTES) / ENTRY_BYTES).min(u64::from(u32::MAX)) as u32;
        let meta = Meta { file, map, capacity, len: AtomicU32::new(0), appends: Mutex::new(()), sums };
        meta.len.store(meta.header().length().min(capacity), Ordering::Release);
        meta
    }

    /// Entries the mapping covers.
    pub(crate) fn capacity(&self) -> u32 {
        self.capacity
    }

    /// `sums.zr`, if the store has one.
    pub(crate) fn sums(&self) -> Option<&Sums> {
        self.sums.as_ref()
    }

    /// Keeps `sums` from now on: a `sums.zr` written for a store that had
    /// none.
    pub(crate) fn install_sums(&mut self, sums: Sums) {
        assert!(self.sums.is_none(), "a store has one sums.zr");
        self.sums = Some(sums);
    }

    /// The published length.
    pub(crate) fn len(&self) -> u32 {
        self.len.load(Ordering::Acquire)
    }

    /// The header as the mapping holds it now. Word 1 (`tail_offset`,
    /// `length`) is loaded before word 0 (`tail_chunk`): a writer moving the
    /// frontier forward stores word 0 first, so a header read during a
    /// commit is the old one, the new one, or (new chunk, old offset), which
    /// is past every live record too.
    pub(crate) fn header(&self) -> Header {
        let word1 = self.map.load_word(HEADER_WORD1_OFFSET as usize);
        let word0 = self.map.load_word(0);
        let mut header = Header::zeroed();
        let bytes = bytemuck::bytes_of_mut(&mut header);
        bytes[..8].copy_from_slice(&word0.to_ne_bytes());
        bytes[8..].copy_from_slice(&word1.to_ne_bytes());
        header
    }

    /// The frontier, from the header.
    pub(crate) fn frontier(&self) -> Frontier {
        self.header().frontier()
    }

    /// Entry `index` (below `capacity`) as the table holds it: not
    /// validated (that is [`super::entry::ValidEntry::check`]'s job).
    pub(crate) fn raw_entry(&self, index: u32) -> Entry {
        assert!(index < self.capacity, "entry {index} past the table's {} entries", self.capacity);
        let mut entry = Entry::zeroed();
        // SAFETY: see the module invariant: no thread of this process writes
        // an entry while another may read it.
        unsafe { self.map.read(entry_offset(index) as usize, bytemuck::bytes_of_mut(&mut entry)) };
        entry
    }

    /// Calls `f(index, entry)` for the written entries among `0..len` (at
    /// most the capacity), in order, as the table holds them (not
    /// validated); unwritten (all-zero) ones are skipped, a block of them at
    /// a time. The table is read in blocks of [`SCAN_BLOCK_ENTRIES`], one
    /// mapping read each (on the simulated filesystem a read is a copy
    /// under a lock), so a sparse table claiming millions of entries costs
    /// one pass over its bytes, and none over a block the mapping knows to
    /// be a hole ([`Residency::Hole`]). Stops at `f`'s first error.
    pub(crate) fn try_for_each_written_entry<E>(
        &self,
        len: u32,
        mut f: impl FnMut(u32, Entry) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut block = vec![Entry::zeroed(); SCAN_BLOCK_ENTRIES.min(len as usize)];
        for first in (0..len).step_by(SCAN_BLOCK_ENTRIES) {
            let n = SCAN_BLOCK_ENTRIES.min((len - first) as usize);
            if self.map.residency(entry_offset(first), n * ENTRY_BYTES as usize) == Residency::Hole {
                continue; // a hole: unwritten entries, known without a read
            }
            self.raw_entries(first, &mut block[..n]);
            // One OR over the block's bytes, no branch per entry.
            if bytemuck::cast_slice::<Entry, u8>(&block[..n]).iter().fold(0, |a, &b| a | b) == 0 {
                continue;
            }
            for (k, &entry) in block[..n].iter().enumerate() {
                if !entry.is_unwritten() {
                    f(first + k as u32, entry)?;
                }
            }
        }
        Ok(())
    }

    /// Entries `first..first + out.len()`, in one read of the mapping.
    pub(crate) fn raw_entries(&self, first: u32, out: &mut [Entry]) {
        let end = u64::from(first) + out.len() as u64;
        assert!(end <= u64::from(self.capacity), "entries up to {end} past the table's {} entries", self.capacity);
        // SAFETY: as `raw_entry`: no thread of this process writes an entry
        // while another may read it.
        unsafe { self.map.read(entry_offset(first) as usize, bytemuck::cast_slice_mut(out)) };
    }

    /// Takes the append mutex.
    pub(crate) fn lock_appends(&self) -> AppendGuard<'_> {
        // A panic while holding it leaves nothing half done in memory: the
        // header and the published length change only in a commit.
        AppendGuard { meta: self, _lock: self.appends.lock().unwrap_or_else(|e| e.into_inner()) }
    }

    /// For a read-only store: publishes `len`, which the caller read from
    /// [`Meta::header`] (after bringing what it reads by up to date).
    pub(crate) fn publish_refreshed(&self, len: u32) {
        self.len.store(len.min(self.capacity), Ordering::Release);
    }
}

impl AppendGuard<'_> {
    /// Stores slot `index` of `sums.zr` (not durable until flushed): the
    /// append mutex makes the caller this process's one writer of it (the
    /// writer flock, of any process's); readers load slots as words.
    pub(crate) fn put_sum(&self, index: u32, sum: Sum) {
        let sums = self.meta.sums.as_ref().expect("a store with sums.zr");
        // SAFETY: the one writer, as above.
        unsafe { sums.put(index, sum) };
    }

    /// The frontier the next append places from.
    pub(crate) fn frontier(&self) -> Frontier {
        self.meta.frontier()
    }

    /// Commits an append whose records are durable: the entries `first..`
    /// (at the published length), then the header with the new frontier and
    /// length, then publishes the length (`docs/crash-safety.md`, "Append",
    /// steps 3 and 4). Every error is a failed sync.
    pub(crate) fn commit_append(
        &mut self,
        first: u32,
        entries: &[Entry],
        sums: &[Sum],
        frontier: Frontier,
        lag_bytes: u64,
    ) -> io::Result<()> {
        let meta = self.meta;
        assert_eq!(first, meta.len(), "an append commits at the published length");
        assert_eq!(sums.len(), entries.len(), "an append sums every record");
        let end = first + entries.len() as u32;
        assert!(end <= meta.capacity, "an append past the table");
        // SAFETY: entries at and past the published length, which readers
        // never read; the append mutex excludes other appenders.
        unsafe { write_mapped(&*meta.file, &*meta.map, entry_offset(first), bytemuck::cast_slice(entries))? };
        if let Some(store) = &meta.sums {
            // SAFETY: the append mutex is held; readers load no slot at or
            // past the published length `first`.
            unsafe { store.zero_ahead(first, end)? }; // SYNC K4
            // SAFETY: as above.
            unsafe { store.put_all(first, sums)? };
            store.store_seal(meta.header(), Header::new(frontier, end));
        }
        // The slots and the seal are synced only when the lag is due: then
        // with the entries, as neither needs the other durable first.
        let bytes = entries.iter().map(|e| u64::from(e.phys_length())).sum();
        let lag = meta.sums.as_ref().filter(|s| s.lagging(end, bytes, lag_bytes));
        let (entries, sealed) = crate::sync::join_blocking(
            || meta.flush_entries(first, end),              // SYNC A2
            || lag.map_or(Ok(()), |s| s.flush_sealed(end)), // SYNC K1 + K2 (the lag's)
        );
        entries?;
        sealed?;
        // SAFETY: the append mutex is held. Its K2 finds the seal stored
        // (durable when the lag's sync ran; see `Sums`).
        unsafe { meta.store_header(frontier, end)? }; // SYNC A3 (H1, H2)
        meta.len.store(end, Ordering::Release);
        if let Some(sums) = lag {
            sums.covered_to(end);
        }
        Ok(())
    }
}

impl Meta {
    /// Stores the header (frontier `to`, `length`), each word made durable
    /// before the next, in the order that keeps Invariant F at every instant
    /// (`docs/crash-safety.md`, "The header"): moving to a later chunk, word 0
    /// first ((new chunk, old offset) is past all live data); to an earlier
    /// one, word 1 first ((old chunk, new offset): the old chunk holds no
    /// live record any more). Word 1 alone when the chunk stays.
    ///
    /// # Safety
    /// The caller is the one writer: it holds the append mutex or `&mut Meta`.
    unsafe fn store_header(&self, to: Frontier, length: u32) -> io::Result<()> {
        if let Some(sums) = &self.sums {
            sums.seal(self.header(), Header::new(to, length))?; // SYNC K2
        }
        let from = self.frontier();
        let words = bytemuck::cast::<Header, [u64; 2]>(Header::new(to, length));
        if to.chunk > from.chunk {
            // SAFETY: the forwarded contract; header words are 8-aligned and
            // only ever accessed with 8-byte atomics.
            unsafe { self.map.store_word(0, words[0]) };
            self.flush_header()?; // SYNC H1
        }
        // SAFETY: as above.
        unsafe { self.map.store_word(HEADER_WORD1_OFFSET as usize, words[1]) };
        self.flush_header()?; // SYNC H2
        if to.chunk < from.chunk {
            // SAFETY: as above.
            unsafe { self.map.store_word(0, words[0]) };
            self.flush_header()?; // SYNC H3
        }
        assert_eq!(self.header(), Header::new(to, length), "the header reads back as stored");
        Ok(())
    }

    /// Moves the frontier to `to`, the length unchanged.
    pub(crate) fn move_frontier(&mut self, to: Frontier) -> io::Result<()> {
        if to == self.frontier() {
            return Ok(());
        }
        // SAFETY: `&mut self`: the only writer.
        unsafe { self.store_header(to, self.len()) }
    }

    /// Sets the intent's entries and commits its length (a delete's steps 2
    /// and 3, a compaction round's step 2 across chunks, and recovery).
    pub(crate) fn apply_intent(&mut self, intent: &Intent) -> io::Result<()> {
        let (mut low, mut high) = (u32::MAX, 0);
        for (k, (index, entry)) in intent.items.iter().enumerate() {
            assert!(*index < self.capacity, "intent entry {index} past the table");
            // SAFETY: `&mut self`: no reader runs.
            unsafe { self.map.write(entry_offset(*index) as usize, bytemuck::bytes_of(entry)) };
            if let Some(sums) = &self.sums {
                // SAFETY: `&mut self`: the one writer.
                unsafe { sums.put(*index, intent.sums.get(k).copied().unwrap_or(Sum::NONE)) };
            }
            (low, high) = (low.min(*index), high.max(*index + 1));
        }
        self.flush_entries(low, high)?; // SYNC D2 (delete), C2 (compaction round)
        if let Some(sums) = &self.sums {
            sums.flush(low, high)?; // SYNC K1
        }
        if intent.new_len != intent.old_len || self.header().length() != intent.new_len {
            // SAFETY: `&mut self`: the only writer.
            unsafe { self.store_header(self.frontier(), intent.new_len)? }; // SYNC D3 (H2)
            self.len.store(intent.new_len, Ordering::Release);
        }
        Ok(())
    }

    /// Moves entries within their chunk: stores only each entry's first
    /// word (offset, `phys_length`), with one store, so a crash sees the old
    /// or the new location, never a mix; then makes them durable.
    pub(crate) fn repoint_within_chunks(&mut self, items: &[(u32, Entry)]) -> io::Result<()> {
        let (mut low, mut high) = (u32::MAX, 0);
        for (index, entry) in items {
            let old = self.raw_entry(*index);
            assert_eq!(bytemuck::bytes_of(&old)[8..], bytemuck::bytes_of(entry)[8..], "a move within a chunk");
            let word = bytemuck::cast::<Entry, [u64; 2]>(*entry)[0];
            // SAFETY: `&mut self`: no reader runs; entry offsets are
            // 16 + 16 i, 8-aligned.
            unsafe { self.map.store_word(entry_offset(*index) as usize, word) };
            if let Some(sums) = &self.sums {
                // SAFETY: `&mut self`: the one writer. The same bytes: the
                // same sum, the new entry's tag (until this is durable, the
                // old tag: the bytes still match their sum).
                unsafe { sums.put(*index, sums.get(*index).moved(&old, entry)) };
            }
            (low, high) = (low.min(*index), high.max(*index + 1));
        }
        self.flush_entries(low, high)?; // SYNC C2
        match &self.sums {
            Some(sums) => sums.flush(low, high), // SYNC K1
            None => Ok(()),
        }
    }

    /// The intent in the area past the table, if `meta.zr` extends past it.
    pub(crate) fn read_intent(&self) -> io::Result<Option<Intent>> {
        Intent::read(&*self.file)
    }

    /// Writes an intent past the table and makes it durable, `meta.zr`'s
    /// new size included.
    pub(crate) fn write_intent(&self, intent: &Intent) -> io::Result<()> {
        // The appends' slots and the seal first: a writer's open that finds
        // an intent finds the seal naming the header (see `settle_seal`).
        self.flush_lag()?; // SYNC K1 + K2, K5
        crate::io::write_all_at(&*self.file, &intent.encode(), META_BYTES)?;
        self.file.sync(SyncKind::All) // SYNC D1 (delete), C2a (compaction round)
    }

    /// Removes any intent: `meta.zr` back to its exact size, durably; where
    /// the platform refuses to shrink it while mapped (Windows), the intent
    /// erased in place instead, and the size left.
    pub(crate) fn clear_intent(&self) -> io::Result<()> {
        match self.file.set_len(META_BYTES) {
            Err(e) if crate::io::is_shrink_refused(&e) => Intent::erase(&*self.file)?,
            other => other?,
        }
        self.file.sync(SyncKind::All) // SYNC D4 (delete), C2b (compaction round)
    }

    /// The lag's sync ([`Sums::flush_lag`]): every slot below the length
    /// and the seal durable, the covered word moved up to the length.
    pub(crate) fn flush_lag(&self) -> io::Result<()> {
        self.sums.as_ref().map_or(Ok(()), |sums| sums.flush_lag(self.len()))
    }

    /// Makes the header durable.
    pub(crate) fn flush_header(&self) -> io::Result<()> {
        self.map.flush_range(0, HEADER_BYTES as usize)
    }

    /// Makes durable everything a writer's open presents: the entries below
    /// the length, the header, and the file's length (a truncation that
    /// removed an intent).
    pub(crate) fn settle(&self) -> io::Result<()> {
        if let Some(sums) = &self.sums {
            sums.settle(self.len())?; // before the table: K before H
        }
        self.flush_entries(0, self.len())?;
        self.flush_header()?;
        self.file.sync(SyncKind::All)
    }

    fn flush_entries(&self, first: u32, end: u32) -> io::Result<()> {
        if first >= end {
            return Ok(());
        }
        let start = entry_offset(first) as usize;
        self.map.flush_range(start, entry_offset(end) as usize - start)
    }
}

#[cfg(test)]
impl Meta {
    /// The length of `meta.zr`.
    pub(crate) fn file_len(&self) -> io::Result<u64> {
        Ok(self.file.stat()?.len)
    }

    /// Writes `bytes` into the intent area without syncing (a torn intent).
    pub(crate) fn write_torn_intent_for_test(&self, bytes: &[u8]) {
        crate::io::write_all_at(&*self.file, bytes, META_BYTES).expect("write");
    }
}

#[cfg(test)]
mod tests {
    use crate::Zrecord;
    use crate::format::{Frontier, Header, entry_offset};
    use crate::io::{OpenMode, Vfs, real::RealFs, write_all_at};

    /// A sparse table of 16,384 entries: written ones in the first, second
    /// and last blocks of 4,096, the third all zero. Entry `i`'s codec byte
    /// is `codec`; the other bytes are non-zero.
    fn sparse(dir: &std::path::Path, written: &[(u32, u8)]) -> Zrecord {
        drop(Zrecord::open(dir).unwrap());
        let meta = RealFs.open(&dir.join("meta.zr"), OpenMode::Write).unwrap();
        write_all_at(&*meta, bytemuck::bytes_of(&Header::new(Frontier { chunk: 0, offset: 0 }, 16_384)), 0).unwrap();
        for &(index, codec) in written {
            let mut entry = [0xA5u8; 16];
            entry[14] = codec;
            write_all_at(&*meta, &entry, entry_offset(index)).unwrap();
        }
        drop(meta);
        Zrecord::open_read_only(dir).unwrap()
    }

    #[test]
    fn a_scan_visits_exactly_the_written_entries_in_order_and_stops_at_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let written = [(0, 0), (4095, 1), (4096, 1), (16_383, 7)];
        let store = sparse(dir.path(), &written);
        let mut seen = Vec::new();
        let all = store.meta.try_for_each_written_entry(16_384, |index, entry| {
            seen.push((index, entry.codec));
            Ok::<(), u32>(())
        });
        assert_eq!((all, &seen[..]), (Ok(()), &written[..]));
        seen.clear();
        let stopped = store.meta.try_for_each_written_entry(16_384, |index, entry| {
            seen.push((index, entry.codec));
            if index == 4096 { Err(index) } else { Ok(()) }
        });
        assert_eq!((stopped, &seen[..]), (Err(4096), &written[..3]));
        // `stats` counts an unwritten entry as a raw record of 0 bytes, and a
        // record of an unknown codec under none.
        let stats = store.stats().unwrap();
        assert_eq!(stats.records, 16_384);
        assert_eq!(stats.codec_records, [16_380 + 1, 2, 0]);
        assert_eq!(stats.live_bytes, 4 * u64::from(u32::from_le_bytes([0xA5; 4])));
    }
}
