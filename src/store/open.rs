//! Opening a store: creation, validation of the header against the files,
//! recovery of an interrupted delete or compaction.

use std::io;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::access::{Access, Home};
use super::chunks::ChunkSet;
use super::codec::Dictionary;
use super::fail_stop::FailStop;
use super::intent::Intent;
use super::meta::Meta;
use super::readers;
use super::{Options, Zrecord};
use crate::error::{Corruption, Error, Result};
use crate::format::{
    CHUNKS_MAX, DICT_BYTES_MAX, DICT_FILE, DICT_TMP_FILE, Frontier, META_BYTES, META_FILE, META_TMP_FILE, chunk_id_of,
};
use crate::io::{FileKind, OpenMode, SyncKind, Vfs, read_file};

pub(super) fn open(vfs: Arc<dyn Vfs>, path: &Path, options: Options) -> Result<Zrecord> {
    let io_err = |op: &'static str| move |source| Error::Io { path: path.to_path_buf(), op, source };
    // `options.read_only` is read here only: from here on the store's
    // `Access` says.
    let read_only = options.read_only;
    ensure_store(&*vfs, path, read_only)?;
    // Before anything of the store is read: no delete or compaction runs
    // from here on, and none is half-way (an intent found below is one a
    // crash left).
    let access = match read_only {
        true => Access::ReadOnly { readers: readers::share(&*vfs, path, options.wait)? },
        false => Access::Writable,
    };
    let (meta, meta_len) = Meta::open(&*vfs, path, read_only)?;
    let intent = meta.read_intent().map_err(io_err("read intent"))?;
    if read_only && intent.is_some() {
        return Err(Error::RecoveryNeeded { path: path.to_path_buf() });
    }
    let dict = open_dict(&*vfs, path)?;
    if options.read_mode == super::ReadMode::Direct {
        // Refused here, not at the first gather, where the filesystem
        // cannot read past its cache (tmpfs).
        vfs.open(&path.join(META_FILE), OpenMode::ReadDirect)
            .map_err(io_err("open meta.zr O_DIRECT (ReadMode::Direct needs a filesystem with O_DIRECT)"))?;
    }
    if !read_only {
        for leftover in [META_TMP_FILE, DICT_TMP_FILE] {
            remove_if_present(&*vfs, &path.join(leftover)).map_err(io_err("remove leftover file"))?;
        }
    }
    if !read_only {
        readers::create_file(&*vfs, path);
    }
    let home = Arc::new(Home::new(vfs, path, access));
    let chunks = ChunkSet::new(home.clone());
    let mut store = Zrecord {
        home,
        chunks,
        fail_stop: FailStop::new(),
        options,
        meta,
        dict,
        residency: Default::default(),
        reads: Default::default(),
        summed_at_open: 0,
    };
    if !read_only {
        store.settle_seal(intent.is_some())?;
        store.recover(intent, meta_len)?;
    }
    Ok(store)
}

/// Creates the directory and the store in it if missing (a writer), or
/// says why there is none.
fn ensure_store(vfs: &dyn Vfs, path: &Path, read_only: bool) -> Result<()> {
    let io_err = |op: &'static str| move |source| Error::Io { path: path.to_path_buf(), op, source };
    match vfs.kind(path).map_err(io_err("stat store directory"))? {
        Some(FileKind::Dir) => {}
        Some(_) => return Err(Error::NotADirectory { path: path.to_path_buf() }),
        None if read_only => return Err(Error::NoDirectory { path: path.to_path_buf() }),
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
        let holds_data = names.iter().any(|n| n == DICT_FILE || chunk_id_of(n).is_some());
        if holds_data {
            return Err(Error::MetaMissing { path: path.to_path_buf() });
        }
        if read_only {
            return Err(Error::NoStore { path: path.to_path_buf() });
        }
        create(vfs, path, &names).map_err(io_err("create store"))?;
    }
    Ok(())
}

/// `dict.zr`, prepared, if the store has one.
fn open_dict(vfs: &dyn Vfs, path: &Path) -> Result<OnceLock<Dictionary>> {
    let io_err = |op: &'static str| move |source| Error::Io { path: path.to_path_buf(), op, source };
    let dict = OnceLock::new();
    let dict_path = path.join(DICT_FILE);
    if vfs.kind(&dict_path).map_err(io_err("stat dict.zr"))?.is_some() {
        let bytes = read_file(vfs, &dict_path, DICT_BYTES_MAX).map_err(io_err("read dict.zr"))?;
        let prepared =
            Dictionary::new(bytes).map_err(|what| Error::Corrupt { path: path.to_path_buf(), index: None, what })?;
        let _ = dict.set(prepared);
    }
    Ok(dict)
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
    Meta::create(vfs, dir, names)?; // SYNC S1
    // After the rename: a directory never holds a chunk file without meta.zr
    // (directory operations persist in order).
    ChunkSet::create_first(vfs, dir)?;
    vfs.sync_dir(dir) // SYNC S2
}

impl Zrecord {
    /// What a writer's open does after the files are open: finish an
    /// interrupted mutation, check Invariant F, make everything durable.
    fn recover(&mut self, intent: Option<Intent>, meta_len: u64) -> Result<()> {
        match intent {
            Some(intent) => self.finish_intent(intent)?,
            // A torn intent: the mutation it announced never started.
            None if meta_len > META_BYTES => self.meta.clear_intent().map_err(|e| self.sync_failed(e))?,
            None => {}
        }
        self.repair_frontier()?;
        // The length durable before the covered word moves up to it: a
        // writer whose commit failed may have left it in the page cache
        // only (docs/fuzzing.md, F11).
        self.settle()?;
        self.summed_at_open = self.cover_tail()?;
        self.debug_check_invariants();
        Ok(())
    }

    /// Raises the frontier past any readable record that ends beyond it: in
    /// the last chunk, or in a chunk file past it. A sound store has none;
    /// a damaged header (the fuzzer's findings F7 and F9) would otherwise
    /// let the next append or compaction write over those records (an
    /// append that rolls over into a chunk past the last writes from its
    /// offset 0), and a raw record would then read back another record's
    /// bytes. Records past their chunk file's end are unreadable (a typed
    /// error) and left alone.
    ///
    /// O(1) in the normal case: a record can end past the frontier only if
    /// the last chunk file does, or a chunk file past it exists, and this
    /// crate leaves neither (appends write up to the frontier, compaction
    /// trims to it and removes the files past it). Otherwise (an append
    /// that crashed before its commit, the reference's chunk preallocated
    /// to 4 GiB, a damaged header) it costs one pass over the live entries;
    /// the last chunk file is then trimmed to its last readable byte and
    /// the files past the last chunk, which no readable record is in, are
    /// removed.
    fn repair_frontier(&mut self) -> Result<()> {
        let frontier = self.meta.frontier();
        let chunk_len = self.chunks.get(frontier.chunk).map_err(|e| self.io("open chunk", e))?.map(|c| c.len());
        let past = self.chunks.count_past(frontier.chunk).map_err(|e| self.io("list store directory", e))? > 0;
        if !past && chunk_len.is_none_or(|len| len <= u64::from(frontier.offset)) {
            return Ok(());
        }
        // `far`: where the frontier must be; `keep`: the last chunk's last readable byte.
        let mut far = frontier;
        let mut keep = u64::from(frontier.offset);
        self.meta.try_for_each_written_entry(self.len(), |_, entry| {
            let (loc, end) = (entry.loc(), u64::from(entry.loc().offset) + u64::from(entry.phys_length()));
            if loc.chunk < frontier.chunk || !self.readable_end(loc.chunk, end)? {
                return Ok(());
            }
            if loc.chunk == frontier.chunk {
                keep = keep.max(end);
            }
            let after = Frontier::after(loc, entry.phys_length());
            // A record reaching the last possible chunk's end leaves no
            // frontier past it: the store is full (appends fail).
            if after > far && u32::from(after.chunk) < CHUNKS_MAX {
                far = after;
            }
            Ok(())
        })?;
        self.meta.move_frontier(far).map_err(|e| self.sync_failed(e))?;
        if chunk_len.is_some_and(|len| keep < len) {
            // Nothing a durable entry points to lies past `keep`.
            self.chunks.trim(frontier.chunk, keep).map_err(|e| self.io("trim chunk", e))?;
        }
        // Nor in the files past the (new) last chunk: removed, so that the
        // next open takes the O(1) path again.
        if self.chunks.remove_past(far.chunk).map_err(|e| self.io("remove chunk", e))? > 0 {
            self.chunks.sync_dir().map_err(|e| self.sync_failed(e))?;
        }
        Ok(())
    }

    /// Whether chunk `id` exists and holds bytes up to `end`.
    fn readable_end(&self, id: u16, end: u64) -> Result<bool> {
        let chunk = self.chunks.get(id).map_err(|e| self.io("open chunk", e))?;
        Ok(chunk.is_some_and(|c| end <= c.len()))
    }

    /// Makes durable everything a writer open presents: the state a process
    /// that died after a failed sync left in the page cache may not be on
    /// disk yet. Syncing clean files and ranges costs little.
    fn settle(&self) -> Result<()> {
        let sync_failed = |e| self.sync_failed(e);
        self.chunks.sync_data(0..self.meta.frontier().chunk + 1).map_err(sync_failed)?;
        let vfs = self.filesystem();
        let dict = self.path().join(DICT_FILE);
        if vfs.kind(&dict).map_err(|e| self.io("stat dict.zr", e))?.is_some() {
            // For writing: Windows flushes only a handle open for writing.
            let file = vfs.open(&dict, OpenMode::Write).map_err(|e| self.io("open dict.zr", e))?;
            file.sync(SyncKind::All).map_err(sync_failed)?;
        }
        self.meta.settle().map_err(sync_failed)?;
        vfs.sync_dir(self.path()).map_err(sync_failed)
    }

    /// Finishes an interrupted delete or compaction round (see
    /// `docs/crash-safety.md`, "Recovery").
    fn finish_intent(&mut self, intent: Intent) -> Result<()> {
        let length = self.meta.header().length();
        let bad = |what: String| Error::Corrupt {
            path: self.path().to_path_buf(),
            index: None,
            what: Corruption::Intent(what),
        };
        if length != intent.old_len && length != intent.new_len {
            return Err(bad(format!(
                "it takes length {} to {}, the header says {length}",
                intent.old_len, intent.new_len
            )));
        }
        // A delete shrinks the length, a compaction round keeps it; no
        // intent may take it past the table.
        if intent.new_len > intent.old_len || intent.old_len > self.meta.capacity() {
            return Err(bad(format!("it takes length {} to {}", intent.old_len, intent.new_len)));
        }
        let limit = intent.new_len.max(intent.old_len);
        if let Some((index, _)) = intent.items.iter().find(|(i, _)| *i >= limit) {
            return Err(bad(format!("entry {index} is past the length {limit}")));
        }
        // Apply it again even when the header already shows the new length:
        // what the page cache shows after a failed sync need not be durable,
        // and the intent may go only once all of it is.
        self.meta.apply_intent(&intent).map_err(|e| self.sync_failed(e))?;
        self.meta.clear_intent().map_err(|e| self.sync_failed(e))
    }
}
