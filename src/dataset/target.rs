//! [`Target`]: the dataset a write appends to, one store or the last shard
//! of a sharded dataset, and the shard rollover (`docs/crash-safety.md`,
//! "Shard rollover"): when the last store is full (by records, by its
//! chunk files' capacity, or at the caller's `shard_records`), the next
//! shard's store is made complete (created, `schema.json`, the dictionary)
//! and durable, and only then is the shard table replaced to name it. Records
//! go into a shard only once the shard table names it, by the store's own
//! crash-ordered append.
//!
//! One writer at a time: the writer of a dataset is the holder of its last
//! shard's writer lock (`meta.zr`'s `flock`), and only it replaces the shard table.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::DatasetError;
use super::schema::Schema;
use super::shard_table::{ShardTable, shard_dir};
use crate::format::{Codec, DICT_FILE, META_FILE, RECORDS_MAX};
use crate::io::{FileKind, Vfs, read_file};
use crate::{Options, Zrecord};

/// Attempts at opening the last shard while rollovers keep replacing it.
const OPEN_ATTEMPTS: usize = 8;

/// Records of one append call, a range of which goes to one store.
pub(crate) enum Batch<'a> {
    /// `data` holds `n` records of `item` bytes (0 included) back to back.
    Fixed { data: &'a [u8], n: usize, item: usize },
    /// Record `k` is `data[offsets[k]..][..lens[k]]`.
    Var { data: &'a [u8], offsets: &'a [u64], lens: &'a [u32] },
}

impl Batch<'_> {
    fn len(&self) -> usize {
        match self {
            Batch::Fixed { n, .. } => *n,
            Batch::Var { lens, .. } => lens.len(),
        }
    }

    fn append(&self, store: &Zrecord, range: std::ops::Range<usize>, codec: Codec) -> crate::Result<u64> {
        match self {
            Batch::Fixed { data, item, .. } => {
                store.append(&data[range.start * item..range.end * item], range.len(), *item, codec)
            }
            Batch::Var { data, offsets, lens } => store.append_var(data, &offsets[range.clone()], &lens[range], codec),
        }
    }
}

/// The dataset a write goes to, with the effective schema. A new dataset
/// is created only when its first records are ready (and, for `zstd_dict`,
/// its dictionary trained on them), so a write that fails before that
/// leaves nothing on disk; one that fails later leaves the records of its
/// completed calls, a dataset the next write continues.
pub(crate) struct Target {
    vfs: Arc<dyn Vfs>,
    root: PathBuf,
    pub(crate) schema: Schema,
    pub(crate) row_bytes: usize,
    store_opts: Options,
    /// Records per shard before a new one starts (at most a store's capacity).
    shard_records: u64,
    /// The shard table, for a sharded dataset.
    shard_table: Option<ShardTable>,
    /// The last shard (the root for a single store) and its store, once open.
    shard: usize,
    store: Option<Zrecord>,
    /// `schema.json` is in the last shard (an existing dataset, or written since).
    schema_written: bool,
}

impl Target {
    /// Resolves the dataset at `root` for appending records of `wanted`'s
    /// dtype and shape: an existing one (whose schema must match, and which
    /// keeps its codec) is opened now, a new one is left to [`Target::prepare`].
    pub(crate) fn open(
        vfs: Arc<dyn Vfs>,
        root: &Path,
        wanted: Schema,
        store: &Options,
        shard_records: Option<u64>,
    ) -> Result<Target, DatasetError> {
        let row_bytes = wanted.row_bytes().map_err(|e| e.at(root))?;
        let shard_records = shard_records.unwrap_or(u64::from(RECORDS_MAX)).min(u64::from(RECORDS_MAX));
        if shard_records == 0 {
            return Err(DatasetError::InvalidArgument("shard_records must be at least 1".into()));
        }
        let kind =
            vfs.kind(root).map_err(|source| DatasetError::Io { path: root.to_path_buf(), op: "stat", source })?;
        if kind.is_some_and(|k| k != FileKind::Dir) {
            return Err(crate::Error::NotADirectory { path: root.to_path_buf() }.into());
        }
        let store_opts = Options { read_only: false, ..store.clone() };
        let mut target = Target {
            vfs,
            root: root.to_path_buf(),
            schema: wanted,
            row_bytes,
            store_opts,
            shard_records,
            shard_table: None,
            shard: 0,
            store: None,
            schema_written: false,
        };
        if ShardTable::read(&*target.vfs, root)?.is_some() {
            target.open_sharded()?;
        } else {
            target.open_single()?;
        }
        Ok(target)
    }

    /// The sharded dataset at `root`, its last shard locked, for a delete
    /// or compaction of its shards (`store`'s `wait` applies to them).
    pub(crate) fn open_to_mutate(vfs: Arc<dyn Vfs>, root: &Path, store: &Options) -> Result<Target, DatasetError> {
        let shard_table = ShardTable::read(&*vfs, root)?.ok_or_else(|| DatasetError::ShardTable {
            path: root.join(super::shard_table::SHARDS_FILE),
            reason: "missing: not a sharded dataset".into(),
        })?;
        Target::open(vfs, root, shard_table.schema, store, None)
    }

    /// The shard table (a sharded dataset's).
    pub(crate) fn shard_table(&self) -> Option<&ShardTable> {
        self.shard_table.as_ref()
    }

    /// Replaces the shard table (the writer's lock is held).
    pub(crate) fn set_shard_table(&mut self, shard_table: ShardTable) -> Result<(), DatasetError> {
        shard_table.write(&*self.vfs, &self.root)?;
        self.shard_table = Some(shard_table);
        Ok(())
    }

    /// The last shard's store (open once the dataset exists).
    pub(crate) fn last(&self) -> Option<&Zrecord> {
        self.store.as_ref()
    }

    /// The last shard's store, to delete from (open once the dataset exists).
    pub(crate) fn last_mut(&mut self) -> Option<&mut Zrecord> {
        self.store.as_mut()
    }

    /// The last shard's number.
    pub(crate) fn last_shard(&self) -> usize {
        self.shard
    }

    /// Opens sealed shard `k` for writing.
    pub(crate) fn open_sealed(&self, k: usize) -> Result<Zrecord, DatasetError> {
        Ok(Zrecord::open_in(self.vfs.clone(), &shard_dir(&self.root, k), self.store_opts.clone())?)
    }

    /// An existing single store (or nothing yet) at the root.
    fn open_single(&mut self) -> Result<(), DatasetError> {
        let existing = match Schema::read(&*self.vfs, &self.root) {
            Ok(schema) => Some(schema),
            Err(DatasetError::NoSchema { .. }) => None,
            Err(e) => return Err(e),
        };
        if let Some(existing) = existing {
            self.adopt(existing)?;
        }
        // A store without a schema (a plain one) is opened now too: it may
        // have its dictionary already.
        let has_store = self.vfs.kind(&self.root.join(META_FILE)).ok().flatten().is_some();
        if self.schema_written || has_store {
            self.store = Some(Zrecord::open_in(self.vfs.clone(), &self.root, self.store_opts.clone())?);
        }
        Ok(())
    }

    /// Takes an existing dataset's schema, if it holds records of the wanted kind.
    fn adopt(&mut self, existing: Schema) -> Result<(), DatasetError> {
        if existing.layout != self.schema.layout || existing.dtype != self.schema.dtype {
            return Err(DatasetError::Incompatible {
                path: self.root.clone(),
                holds: existing.describe(),
                given: self.schema.describe(),
            });
        }
        self.schema = existing;
        self.schema_written = true;
        Ok(())
    }

    /// A sharded dataset: its last shard opened and locked, the shard table
    /// read again under the lock (a rollover may have sealed the shard
    /// meanwhile), and a delete left pending by a crash finished.
    fn open_sharded(&mut self) -> Result<(), DatasetError> {
        for _ in 0..OPEN_ATTEMPTS {
            let Some(shard_table) = ShardTable::read(&*self.vfs, &self.root)? else {
                return Err(DatasetError::ShardMissing { path: self.root.clone(), shard: 0 });
            };
            let last = shard_table.shards() - 1;
            let dir = shard_dir(&self.root, last);
            if Schema::read(&*self.vfs, &dir).is_err() || self.vfs.kind(&dir.join(META_FILE)).ok().flatten().is_none() {
                return Err(DatasetError::ShardMissing { path: dir, shard: last });
            }
            let store = Zrecord::open_in(self.vfs.clone(), &dir, self.store_opts.clone())?;
            if ShardTable::read(&*self.vfs, &self.root)?.as_ref() != Some(&shard_table) {
                continue;
            }
            self.adopt(shard_table.schema.clone())?;
            self.shard = last;
            self.store = Some(store);
            self.shard_table = Some(shard_table);
            return self.finish_pending();
        }
        Err(DatasetError::Store(crate::Error::StoreChanged {
            path: self.root.clone(),
            index: None,
            what: format!("the last shard changed {OPEN_ATTEMPTS} times while opening; retry"),
        }))
    }

    /// Finishes a delete a crash left pending: the shard's count is the one
    /// of the two its store holds.
    fn finish_pending(&mut self) -> Result<(), DatasetError> {
        let Some(mut shard_table) = self.shard_table.clone() else { return Ok(()) };
        let Some(p) = shard_table.pending.take() else { return Ok(()) };
        let dir = shard_dir(&self.root, p.shard);
        let len = u64::from(Zrecord::open_in(self.vfs.clone(), &dir, self.store_opts.clone())?.len());
        if len != p.records && len != shard_table.sealed[p.shard] {
            return Err(DatasetError::ShardLength { path: dir, shard: p.shard, holds: len, shard_table: p.records });
        }
        shard_table.sealed[p.shard] = len;
        shard_table.write(&*self.vfs, &self.root)?;
        self.shard_table = Some(shard_table);
        Ok(())
    }

    /// The dataset's root directory.
    pub(crate) fn path(&self) -> &Path {
        &self.root
    }

    /// The last shard's directory.
    fn dir(&self) -> PathBuf {
        shard_dir(&self.root, self.shard)
    }

    pub(crate) fn needs_dict(&self) -> bool {
        self.schema.codec == Codec::ZstdDict && self.store.as_ref().is_none_or(|s| !s.has_dict())
    }

    /// Makes the last store ready to append: created with its schema if
    /// new; `dict` installed if it has none.
    pub(crate) fn prepare(&mut self, dict: Option<Vec<u8>>) -> Result<&Zrecord, DatasetError> {
        if self.store.is_none() {
            self.store = Some(Zrecord::open_in(self.vfs.clone(), &self.dir(), self.store_opts.clone())?);
        }
        if !self.schema_written {
            self.schema.write(&*self.vfs, &self.dir())?;
            self.schema_written = true;
        }
        let store = self.store.as_ref().expect("opened above");
        if let Some(dict) = dict {
            store.install_dict(dict)?;
        }
        Ok(store)
    }

    /// Appends `batch`, starting new shards as stores fill.
    pub(crate) fn append(&mut self, batch: &Batch<'_>) -> Result<(), DatasetError> {
        let codec = self.schema.codec;
        let (n, mut at) = (batch.len(), 0usize);
        let cap = self.shard_records;
        while at < n {
            let store = self.prepare(None)?;
            let room = cap.saturating_sub(u64::from(store.len()));
            let mut take = room.min((n - at) as u64) as usize;
            while take > 0 {
                match batch.append(store, at..at + take, codec) {
                    Ok(_) => break,
                    // The chunk files' capacity: as many as fit, then a new shard.
                    Err(crate::Error::StoreFull { .. }) if take > 1 => take /= 2,
                    Err(crate::Error::StoreFull { .. }) if !store.is_empty() => take = 0,
                    Err(e) => return Err(e.into()),
                }
            }
            if take == 0 {
                self.roll_over()?;
            }
            at += take;
        }
        Ok(())
    }

    /// Seals the last shard and starts the next (steps R1-R4 of
    /// `docs/crash-safety.md`, "Shard rollover").
    fn roll_over(&mut self) -> Result<(), DatasetError> {
        // R0: the sealed shard's appends durable (each is already).
        let sealed = self.store.take().expect("a full store is open");
        sealed.sync()?;
        let next = self.shard + 1;
        let dir = shard_dir(&self.root, next);
        // R1: the store, created (its directory and the root synced) or
        // left by a rollover that crashed before R3, and empty either way.
        let store = Zrecord::open_in(self.vfs.clone(), &dir, self.store_opts.clone())?;
        if !store.is_empty() {
            return Err(DatasetError::ShardNotEmpty { path: dir, holds: u64::from(store.len()) });
        }
        // R2: its schema (whole, by rename) and the sealed shard's dictionary.
        match Schema::read(&*self.vfs, &dir) {
            Ok(schema) if schema == self.schema => {}
            Err(DatasetError::NoSchema { .. }) => self.schema.write(&*self.vfs, &dir)?,
            Ok(other) => {
                return Err(DatasetError::ShardSchema {
                    path: dir,
                    shard: next,
                    holds: other.describe(),
                    shard_table: self.schema.describe(),
                });
            }
            Err(e) => return Err(e),
        }
        if self.schema.codec == Codec::ZstdDict && !store.has_dict() && sealed.has_dict() {
            let path = self.dir().join(DICT_FILE);
            let bytes = read_file(&*self.vfs, &path, crate::format::DICT_BYTES_MAX)
                .map_err(|source| DatasetError::Io { path, op: "read dict.zr", source })?;
            store.install_dict(bytes)?;
        }
        // R3: the shard table names the new shard (the commit point).
        let mut shard_table = self.shard_table.clone().unwrap_or_else(|| ShardTable {
            schema: self.schema.clone(),
            sealed: Vec::new(),
            pending: None,
        });
        shard_table.sealed.push(u64::from(sealed.len()));
        shard_table.write(&*self.vfs, &self.root)?;
        // R4: the sealed shard's writer flock released only now.
        drop(sealed);
        (self.shard_table, self.shard, self.store, self.schema_written) = (Some(shard_table), next, Some(store), true);
        Ok(())
    }

    /// Syncs the last store's checksums that appends left to sync later
    /// ([`Zrecord::sync_checksums`]; the sealed shards' were at their
    /// rollover).
    pub(crate) fn sync_checksums(&self) -> Result<(), DatasetError> {
        Ok(self.store.as_ref().map_or(Ok(()), Zrecord::sync_checksums)?)
    }

    /// Makes everything written durable (creating an empty dataset if none).
    pub(crate) fn finish(&mut self) -> Result<(), DatasetError> {
        Ok(self.prepare(None)?.sync()?)
    }
}
