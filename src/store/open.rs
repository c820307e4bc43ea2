//! Opening a store: creation, validation of the header against the files,
//! recovery of an interrupted delete or compaction.

use std::io;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::sync::{AtomicBool, AtomicU32, Mutex, Ordering};

use bytemuck::Zeroable;

use super::chunks::Chunks;
use super::codec::Dictionary;
use super::intent::Intent;
use super::table::Table;
use super::{Options, Writer, Zrecord};
use crate::error::{Corruption, Error, Result};
use crate::format::{
    CHUNK_BYTES_MAX, CHUNKS_MAX, DICT_FILE, DICT_TMP_FILE, HEADER_BYTES, Header, MAGIC, META_BYTES, META_FILE,
    META_TMP_FILE, RECORDS_MAX, Tail, VERSION, entry_offset,
};
use crate::io::{FileKind, LockKind, OpenMode, Vfs, read_exact_at, read_file, write_all_at};

/// Largest `dict.zr` accepted (the reference caps training at 1 MiB).
const DICT_BYTES_MAX: u64 = 64 << 20;

pub(super) fn open(vfs: Arc<dyn Vfs>, path: &Path, options: Options) -> Result<Zrecord> {
    let io_err = |op: &'static str| move |source| Error::Io { path: path.to_path_buf(), op, source };
    match vfs.kind(path).map_err(io_err("stat store directory"))? {
        Some(FileKind::Dir) => {}
        Some(_) => return Err(Error::NotADirectory { path: path.to_path_buf() }),
        None if options.read_only => return Err(Error::NoStore { path: path.to_path_buf() }),
        None => {
            vfs.create_dir_all(path).map_err(io_err("create store directory"))?;
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                vfs.sync_dir(parent).map_err(io_err("sync parent directory"))?;
            }
        }
    }
    let meta_path = path.join(META_FILE);
    if vfs.kind(&meta_path).map_err(io_err("stat meta.zr"))?.is_none() {
        let names = vfs.list_dir(path).map_err(io_err("list store directory"))?;
        let holds_data = names.iter().any(|n| n == DICT_FILE || is_chunk_name(n));
        if holds_data {
            return Err(Error::MetaMissing { path: path.to_path_buf() });
        }
        if options.read_only {
            return Err(Error::NoStore { path: path.to_path_buf() });
        }
        create(&*vfs, path, &names).map_err(io_err("create store"))?;
    }

    let mode = if options.read_only { OpenMode::Read } else { OpenMode::Write };
    let meta = vfs.open(&meta_path, mode).map_err(io_err("open meta.zr"))?;
    if !options.read_only && !meta.try_lock(LockKind::Exclusive).map_err(io_err("lock meta.zr"))? {
        return Err(Error::Locked { path: path.to_path_buf() });
    }
    let meta_len = meta.len().map_err(io_err("stat meta.zr"))?;
    if meta_len < HEADER_BYTES {
        return Err(Error::MetaTruncated { path: path.to_path_buf(), len: meta_len, needed: HEADER_BYTES });
    }
    let mut header = Header::zeroed();
    read_exact_at(&*meta, bytemuck::bytes_of_mut(&mut header), 0).map_err(io_err("read meta.zr"))?;
    check_header(path, &header)?;
    let needed = entry_offset(header.length());
    if meta_len < needed {
        return Err(Error::MetaTruncated { path: path.to_path_buf(), len: meta_len, needed });
    }
    let intent = Intent::read(&*meta).map_err(io_err("read intent"))?;
    if options.read_only && intent.is_some() {
        return Err(Error::RecoveryNeeded { path: path.to_path_buf() });
    }
    if !options.read_only && meta_len < META_BYTES {
        // The reference grows a short meta.zr back too; entries past the old
        // end read as zeros, which no written entry is.
        meta.set_len(META_BYTES).map_err(io_err("grow meta.zr"))?;
        meta.sync_all().map_err(io_err("sync meta.zr"))?;
    }
    let map_len = meta_len.clamp(HEADER_BYTES, META_BYTES).max(if options.read_only { 0 } else { META_BYTES });
    let map = meta.map_shared(map_len as usize, !options.read_only).map_err(io_err("map meta.zr"))?;

    let dict = OnceLock::new();
    let dict_path = path.join(DICT_FILE);
    if vfs.kind(&dict_path).map_err(io_err("stat dict.zr"))?.is_some() {
        let bytes = read_file(&*vfs, &dict_path, DICT_BYTES_MAX).map_err(io_err("read dict.zr"))?;
        let prepared =
            Dictionary::new(bytes).map_err(|what| Error::Corrupt { path: path.to_path_buf(), index: None, what })?;
        let _ = dict.set(prepared);
    }
    if !options.read_only {
        for leftover in [META_TMP_FILE, DICT_TMP_FILE] {
            remove_if_present(&*vfs, &path.join(leftover)).map_err(io_err("remove leftover file"))?;
        }
    }

    let tail = header.tail();
    let mut store = Zrecord {
        path: path.to_path_buf(),
        chunks: Chunks::new(path, !options.read_only),
        vfs,
        options,
        meta,
        table: Table::new(map),
        dict,
        len: AtomicU32::new(header.length()),
        tail_chunk: AtomicU32::new(u32::from(tail.chunk)),
        poisoned: AtomicBool::new(false),
        writer: Mutex::new(Writer { tail }),
    };
    if let Some(intent) = intent {
        store.recover(intent)?;
    } else if !store.options.read_only && meta_len > META_BYTES {
        // A torn intent: the mutation it announced never started.
        Intent::clear(&*store.meta).map_err(|e| store.sync_failed(e))?;
    }
    if !store.options.read_only {
        store.repair_frontier()?;
        store.settle()?;
    }
    Ok(store)
}

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
    if u32::from(header.tail().chunk) >= CHUNKS_MAX {
        return Err(corrupt(format!("tail chunk {} exceeds the {CHUNKS_MAX} chunk limit", header.tail().chunk)));
    }
    Ok(())
}

/// True for `N.zr` with N a decimal chunk id.
fn is_chunk_name(name: &str) -> bool {
    name.strip_suffix(".zr").is_some_and(|stem| !stem.is_empty() && stem.bytes().all(|b| b.is_ascii_digit()))
}

fn remove_if_present(vfs: &dyn Vfs, path: &Path) -> io::Result<()> {
    match vfs.remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Creates a new store in `dir` (which holds no store data). See
/// `docs/crash-safety.md`, "Store creation": `meta.zr` appears whole, by
/// rename, or not at all.
fn create(vfs: &dyn Vfs, dir: &Path, names: &[String]) -> io::Result<()> {
    if names.iter().any(|n| n == META_TMP_FILE) {
        vfs.remove_file(&dir.join(META_TMP_FILE))?;
    }
    let tmp = dir.join(META_TMP_FILE);
    let meta = vfs.open(&tmp, OpenMode::Create)?;
    meta.set_len(META_BYTES)?;
    write_all_at(&*meta, bytemuck::bytes_of(&Header::new(Tail::default(), 0)), 0)?;
    meta.sync_all()?; // SYNC S1
    vfs.rename(&tmp, &dir.join(META_FILE))?;
    // After the rename: a directory never holds a chunk file without meta.zr
    // (directory operations persist in order).
    let chunk = vfs.open(&dir.join(crate::format::chunk_file_name(0)), OpenMode::Create)?;
    chunk.sync_all()?;
    vfs.sync_dir(dir) // SYNC S2
}

impl Zrecord {
    /// Raises the frontier past any readable record of the last chunk that
    /// ends beyond it. A sound store has none; a damaged header (the
    /// fuzzer's finding F7) would otherwise let the next append or
    /// compaction write over those records, and a raw record would then
    /// read back another record's bytes. Records in chunks past the last,
    /// or past their chunk file's end, are unreadable anyway (a typed error)
    /// and left alone.
    ///
    /// O(1) in the normal case: a record can end past the frontier only if
    /// the last chunk file does, and this crate leaves it no longer than
    /// the frontier (appends write up to it, compaction trims to it). A
    /// longer file (an append that crashed before its commit, the
    /// reference's chunk preallocated to 4 GiB, a damaged header) costs one
    /// pass over the live entries; the file is then trimmed to its last
    /// readable byte, so the next open takes the O(1) path again.
    fn repair_frontier(&mut self) -> Result<()> {
        let tail = self.lock_writer().tail;
        let Some(chunk) = self.chunks.get(&*self.vfs, tail.chunk).map_err(|e| self.io("open chunk", e))? else {
            return Ok(());
        };
        let chunk_len = chunk.len();
        if chunk_len <= u64::from(tail.offset) {
            return Ok(());
        }
        // `far`: where the frontier must be; `keep`: the last readable byte
        // (past `far` only for a record ending at the chunk's very end,
        // where no frontier offset can point).
        let mut far = u64::from(tail.offset);
        let mut keep = far;
        for index in 0..self.len() {
            let entry = self.table.entry(index);
            let end = u64::from(entry.loc().offset) + u64::from(entry.phys_length());
            if !entry.is_unwritten() && entry.loc().chunk == tail.chunk && end <= chunk_len {
                keep = keep.max(end);
                if end < CHUNK_BYTES_MAX {
                    far = far.max(end);
                }
            }
        }
        if far != u64::from(tail.offset) {
            // Below `CHUNK_BYTES_MAX`: a valid offset.
            self.commit_tail(Tail { chunk: tail.chunk, offset: far as u32 })?;
        }
        if keep < chunk_len {
            // Nothing a durable entry points to lies past `keep`.
            let chunk = self.chunks.get_mut(tail.chunk).expect("opened above");
            chunk.shrink_to(keep);
            let trimmed = chunk.file.set_len(keep).and_then(|()| chunk.file.sync_all());
            trimmed.map_err(|e| self.io("trim chunk", e))?;
        }
        Ok(())
    }

    /// Makes durable everything a writer open presents: the state a process
    /// that died after a failed sync left in the page cache may not be on
    /// disk yet. Syncing clean files and ranges costs little.
    fn settle(&self) -> Result<()> {
        let tail = self.lock_writer().tail;
        for id in 0..=tail.chunk {
            if let Some(chunk) = self.chunks.get(&*self.vfs, id).map_err(|e| self.io("open chunk", e))? {
                chunk.file.sync_data().map_err(|e| self.sync_failed(e))?;
            }
        }
        if let Some(dict) = self.vfs.kind(&self.path.join(DICT_FILE)).map_err(|e| self.io("stat dict.zr", e))? {
            debug_assert_eq!(dict, FileKind::File);
            let file =
                self.vfs.open(&self.path.join(DICT_FILE), OpenMode::Read).map_err(|e| self.io("open dict.zr", e))?;
            file.sync_all().map_err(|e| self.sync_failed(e))?;
        }
        self.table.flush_entries(0, self.len()).map_err(|e| self.sync_failed(e))?;
        self.table.flush_header().map_err(|e| self.sync_failed(e))?;
        // The length of meta.zr too: a truncation that removed an intent.
        self.meta.sync_all().map_err(|e| self.sync_failed(e))?;
        self.vfs.sync_dir(&self.path).map_err(|e| self.sync_failed(e))
    }

    /// Finishes an interrupted delete or compaction (see
    /// `docs/crash-safety.md`, "Recovery").
    fn recover(&mut self, intent: Intent) -> Result<()> {
        let length = self.table.header().length();
        let bad =
            |what: String| Error::Corrupt { path: self.path.clone(), index: None, what: Corruption::Intent(what) };
        if length != intent.old_len && length != intent.new_len {
            return Err(bad(format!(
                "it takes length {} to {}, the header says {length}",
                intent.old_len, intent.new_len
            )));
        }
        // A delete shrinks the length, a compaction round keeps it; no
        // intent may take it past the table.
        if intent.new_len > intent.old_len || intent.old_len > self.table.capacity() {
            return Err(bad(format!("it takes length {} to {}", intent.old_len, intent.new_len)));
        }
        let limit = intent.new_len.max(intent.old_len);
        if let Some((index, _)) = intent.items.iter().find(|(i, _)| *i >= limit || *i >= self.table.capacity()) {
            return Err(bad(format!("entry {index} is past the length {limit}")));
        }
        // Apply it again even when the header already shows the new length:
        // what the page cache shows after a failed sync need not be durable,
        // and the intent may go only once all of it is.
        self.apply_intent(&intent)?;
        Intent::clear(&*self.meta).map_err(|e| self.sync_failed(e))
    }

    /// Sets the intent's entries and commits its length (steps 2 and 3 of a
    /// delete; the table step of a compaction round).
    pub(super) fn apply_intent(&mut self, intent: &Intent) -> Result<()> {
        let (mut low, mut high) = (u32::MAX, 0);
        for (index, entry) in &intent.items {
            // SAFETY: `&mut self`: no reader runs.
            unsafe { self.table.set_entry(*index, entry) };
            low = low.min(*index);
            high = high.max(*index + 1);
        }
        self.table.flush_entries(low, high).map_err(|e| self.sync_failed(e))?; // SYNC D2 / C3
        if intent.new_len != intent.old_len || self.table.header().length() != intent.new_len {
            let tail = self.lock_writer().tail;
            // SAFETY: `&mut self`: the only writer.
            unsafe { self.table.set_header_word1(tail.offset, intent.new_len) };
            self.table.flush_header().map_err(|e| self.sync_failed(e))?; // SYNC D3
            self.len.store(intent.new_len, Ordering::Release);
        }
        Ok(())
    }
}
