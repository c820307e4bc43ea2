//! [`Shards`]: the stores under a dataset, read-only. One store (a
//! directory without `shards.json`) or the shards a shard table names
//! ([`ShardTable`]), opened on first use: opening a sharded dataset reads the
//! shard table and opens the last shard (its length is the last count), and
//! nothing else. A global index goes to its shard by [`ShardIndex`].
//!
//! A shard is checked when it opens: its `schema.json` must be the
//! shard table's, and a sealed shard must hold exactly the count the shard table
//! records for it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::error::DatasetError;
use super::schema::Schema;
use super::shard_index::ShardIndex;
use super::shard_table::{ShardTable, shard_dir};
use crate::io::{FileKind, Vfs};
use crate::{ReadOptions, Zrecord};

/// The stores under a dataset and the index over them: byte-level reads
/// by global index (the datasets' typed reads go through it).
#[derive(Debug)]
pub struct Shards {
    vfs: Arc<dyn Vfs>,
    root: PathBuf,
    schema: Schema,
    reads: ReadOptions,
    /// True if the dataset has a shard table.
    sharded: bool,
    table: RwLock<Arc<Table>>,
    /// The records a reader may see at most, the first ones across the
    /// shards (a table column's committed rows); `None`: all of them.
    limit: Option<u64>,
    /// Held while a shard opens, so that it opens once.
    opening: Mutex<()>,
}

/// The index and the shards' stores, each opened on first use.
#[derive(Debug)]
struct Table {
    /// The records a reader sees: every shard's, or the first `limit`.
    index: ShardIndex,
    /// What each shard holds (a sealed shard is checked against it).
    counts: Vec<u64>,
    stores: Vec<Arc<OnceLock<Zrecord>>>,
}

/// Where a batch's records are: all in one shard, or spread.
enum Split {
    /// Every record in shard `.0`, at local indices `.1`.
    One(usize, Vec<u64>),
    /// Per shard touched: the shard, local indices, positions in the batch.
    Many(Vec<(usize, Vec<u64>, Vec<usize>)>),
}

impl Shards {
    /// Opens the dataset at `root` (a store with its `schema.json`, or a
    /// sharded dataset) read-only, for byte-level reads by global index.
    pub fn open(root: impl AsRef<Path>, reads: impl Into<ReadOptions>) -> Result<Shards, DatasetError> {
        Shards::open_in(Arc::new(crate::io::real::RealFs), root.as_ref(), reads)
    }

    /// [`Shards::open`] on any filesystem implementation.
    pub fn open_in(vfs: Arc<dyn Vfs>, root: &Path, reads: impl Into<ReadOptions>) -> Result<Shards, DatasetError> {
        let reads = reads.into();
        let kind =
            vfs.kind(root).map_err(|source| DatasetError::Io { path: root.to_path_buf(), op: "stat", source })?;
        if kind.is_none() {
            return Err(DatasetError::NoDataset { path: root.to_path_buf() });
        }
        let Some(shard_table) = ShardTable::read(&*vfs, root)? else {
            let schema = Schema::read(&*vfs, root)?;
            let store = Zrecord::open_in(vfs.clone(), root, reads.read_only())?;
            let counts = vec![u64::from(store.len())];
            let table =
                Table { index: ShardIndex::new(&counts)?, counts, stores: vec![Arc::new(OnceLock::from(store))] };
            return Ok(Shards::new(vfs, root, schema, reads, false, table));
        };
        let shards =
            Shards::new(vfs, root, shard_table.schema.clone(), reads, true, Table::empty(shard_table.shards()));
        let table = shards.table_for(&shard_table, None)?;
        *shards.table.write().expect("not poisoned") = Arc::new(table);
        Ok(shards)
    }

    fn new(vfs: Arc<dyn Vfs>, root: &Path, schema: Schema, reads: ReadOptions, sharded: bool, table: Table) -> Shards {
        Shards {
            vfs,
            root: root.to_path_buf(),
            schema,
            reads,
            sharded,
            table: RwLock::new(Arc::new(table)),
            limit: None,
            opening: Mutex::new(()),
        }
    }

    /// The table of `shard table`'s shards: the last one opened (its length
    /// is its count), and a shard with a pending delete opened to learn
    /// which of its two counts holds. `old` lends the stores already open.
    fn table_for(&self, shard_table: &ShardTable, old: Option<&Table>) -> Result<Table, DatasetError> {
        let n = shard_table.shards();
        let stores: Vec<Arc<OnceLock<Zrecord>>> = (0..n)
            .map(|k| old.and_then(|t| t.stores.get(k).cloned()).unwrap_or_else(|| Arc::new(OnceLock::new())))
            .collect();
        let mut counts = shard_table.sealed.clone();
        if let Some(p) = shard_table.pending {
            let len = self.opened(&stores[p.shard], p.shard, None)?.len();
            if u64::from(len) != counts[p.shard] && u64::from(len) != p.records {
                return Err(self.length_error(p.shard, len, counts[p.shard]));
            }
            counts[p.shard] = u64::from(len);
        }
        let last = self.opened(&stores[n - 1], n - 1, None)?;
        counts.push(u64::from(last.refresh()?));
        for (k, store) in stores.iter().enumerate().take(n - 1) {
            if let Some(store) = store.get()
                && u64::from(store.refresh()?) != counts[k]
            {
                return Err(self.length_error(k, store.len(), counts[k]));
            }
        }
        Ok(Table { index: self.visible(&counts)?, counts, stores })
    }

    /// The schema every shard holds.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The filesystem the shards are on (the real one, a published
    /// dataset's remote one).
    pub fn filesystem(&self) -> Arc<dyn Vfs> {
        self.vfs.clone()
    }

    /// The dataset's root directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// True if the dataset has a shard table (even of one shard).
    pub fn is_sharded(&self) -> bool {
        self.sharded
    }

    fn table(&self) -> Arc<Table> {
        self.table.read().expect("not poisoned").clone()
    }

    /// Total records.
    pub fn len(&self) -> u64 {
        self.table().index.len()
    }

    /// True if no shard holds a record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What the gathers of the shards' stores opened so far read, by path
    /// ([`ReadStats`](crate::ReadStats)).
    pub fn read_stats(&self) -> crate::ReadStats {
        let table = self.table();
        table
            .stores
            .iter()
            .filter_map(|cell| cell.get())
            .fold(crate::ReadStats::default(), |sum, store| sum.plus(&store.read_stats()))
    }

    /// Number of shards (1 for a single store).
    pub fn count(&self) -> usize {
        self.table().index.shards()
    }

    /// Shard `k`'s record count and first global index.
    pub fn extent(&self, k: usize) -> Option<(u64, u64)> {
        let table = self.table();
        (k < table.index.shards()).then(|| (table.index.start(k), table.index.count(k)))
    }

    /// Shard `k`'s store, opened (and checked) if it was not yet.
    pub fn shard(&self, k: usize) -> Result<ShardRef, DatasetError> {
        let table = self.table();
        let store =
            table.stores.get(k).cloned().ok_or_else(|| {
                DatasetError::InvalidArgument(format!("shard {k} of {} shards", table.index.shards()))
            })?;
        let count = table.counts[k];
        let last = k + 1 == table.index.shards();
        self.opened(&store, k, (!last).then_some(count))?;
        Ok(ShardRef(store))
    }

    /// Opens shard `k` into `cell` once; a sealed shard's length must be `expect`.
    fn opened<'c>(
        &self,
        cell: &'c OnceLock<Zrecord>,
        k: usize,
        expect: Option<u64>,
    ) -> Result<&'c Zrecord, DatasetError> {
        if let Some(store) = cell.get() {
            return Ok(store);
        }
        let _opening = self.opening.lock().expect("not poisoned");
        if let Some(store) = cell.get() {
            return Ok(store);
        }
        let store = self.open_shard(k)?;
        if let Some(expect) = expect
            && u64::from(store.len()) != expect
        {
            return Err(self.length_error(k, store.len(), expect));
        }
        Ok(cell.get_or_init(|| store))
    }

    /// Opens shard `k`'s store after checking its schema against the shard table's.
    fn open_shard(&self, k: usize) -> Result<Zrecord, DatasetError> {
        let dir = shard_dir(&self.root, k);
        let io = |source| DatasetError::Io { path: dir.clone(), op: "stat shard directory", source };
        if self.vfs.kind(&dir).map_err(io)? != Some(FileKind::Dir) {
            return Err(DatasetError::ShardMissing { path: dir, shard: k });
        }
        let schema = match Schema::read(&*self.vfs, &dir) {
            Err(DatasetError::NoSchema { .. }) => return Err(DatasetError::ShardMissing { path: dir, shard: k }),
            other => other?,
        };
        if schema != self.schema {
            return Err(DatasetError::ShardSchema {
                path: dir,
                shard: k,
                holds: format!("{} ({})", schema.describe(), schema.codec.name()),
                shard_table: format!("{} ({})", self.schema.describe(), self.schema.codec.name()),
            });
        }
        Ok(Zrecord::open_in(self.vfs.clone(), &dir, self.reads.read_only())?)
    }

    fn length_error(&self, k: usize, holds: u32, shard_table: u64) -> DatasetError {
        DatasetError::ShardLength { path: shard_dir(&self.root, k), shard: k, holds: u64::from(holds), shard_table }
    }

    /// Picks up appends (and, for a sharded dataset, new shards) since
    /// open; returns the new length.
    pub fn refresh(&self) -> Result<u64, DatasetError> {
        let old = self.table();
        let table = if self.sharded {
            let shard_table = ShardTable::read(&*self.vfs, &self.root)?
                .ok_or_else(|| DatasetError::ShardMissing { path: self.root.clone(), shard: 0 })?;
            if shard_table.schema != self.schema || shard_table.shards() < old.index.shards() {
                return Err(DatasetError::Store(crate::Error::StoreChanged {
                    path: self.root.clone(),
                    index: None,
                    what: "the shard table changed under this reader".into(),
                }));
            }
            self.table_for(&shard_table, Some(&old))?
        } else {
            let store = old.stores[0].get().expect("a single store opens at open");
            let counts = vec![u64::from(store.refresh()?)];
            Table { index: self.visible(&counts)?, counts, stores: old.stores.clone() }
        };
        let len = table.index.len();
        *self.table.write().expect("not poisoned") = Arc::new(table);
        Ok(len)
    }

    /// Where the records of `indices` are.
    fn split(&self, table: &Table, indices: &[u64]) -> Result<Split, DatasetError> {
        let out_of_range =
            |index| DatasetError::IndexOutOfRange { path: self.root.clone(), index, len: table.index.len() };
        let first = match indices.first() {
            None => return Ok(Split::One(0, Vec::new())),
            Some(&i) => table.index.locate(i).ok_or_else(|| out_of_range(i))?.0,
        };
        let (start, end) = (table.index.start(first), table.index.start(first + 1));
        if indices.iter().all(|&i| (start..end).contains(&i)) {
            return Ok(Split::One(first, indices.iter().map(|&i| i - start).collect()));
        }
        let mut per: Vec<(usize, Vec<u64>, Vec<usize>)> = Vec::new();
        let mut slot_of = std::collections::HashMap::new();
        for (position, &i) in indices.iter().enumerate() {
            let (k, local) = table.index.locate(i).ok_or_else(|| out_of_range(i))?;
            let slot = *slot_of.entry(k).or_insert_with(|| {
                per.push((k, Vec::new(), Vec::new()));
                per.len() - 1
            });
            per[slot].1.push(local);
            per[slot].2.push(position);
        }
        Ok(Split::Many(per))
    }

    /// Decodes fixed records `indices` into `dst`, record `k` at
    /// `dst[k * stride..]`, each exactly `stride` bytes.
    pub fn gather(&self, indices: &[u64], dst: &mut [u8], stride: usize) -> Result<(), DatasetError> {
        let table = self.table();
        if !self.sharded {
            return Ok(self.single_checked(&table, indices)?.gather(indices, dst, stride)?);
        }
        match self.split(&table, indices)? {
            Split::One(k, local) => Ok(self.shard(k)?.gather(&local, dst, stride)?),
            Split::Many(per) => {
                let len = u32::try_from(stride).map_err(|_| DatasetError::InvalidArgument("stride".into()))?;
                for (k, local, positions) in per {
                    let offsets: Vec<u64> = positions.iter().map(|&p| (p * stride) as u64).collect();
                    self.shard(k)?.gather_var(&local, dst, &offsets, &vec![len; local.len()])?;
                }
                Ok(())
            }
        }
    }

    /// The byte length of each record of `indices`, into `out`.
    pub fn lengths(&self, indices: &[u64], out: &mut [u32]) -> Result<(), DatasetError> {
        let table = self.table();
        if !self.sharded {
            return Ok(self.single_checked(&table, indices)?.lengths(indices, out)?);
        }
        if indices.len() != out.len() {
            return Err(DatasetError::InvalidArgument(format!("{} indices, {} outputs", indices.len(), out.len())));
        }
        match self.split(&table, indices)? {
            Split::One(k, local) => Ok(self.shard(k)?.lengths(&local, out)?),
            Split::Many(per) => {
                for (k, local, positions) in per {
                    let mut lens = vec![0u32; local.len()];
                    self.shard(k)?.lengths(&local, &mut lens)?;
                    for (&p, l) in positions.iter().zip(lens) {
                        out[p] = l;
                    }
                }
                Ok(())
            }
        }
    }

    /// Decodes record `indices[k]` into `dst[offsets[k]..][..lens[k]]`.
    pub fn gather_var(
        &self,
        indices: &[u64],
        dst: &mut [u8],
        offsets: &[u64],
        lens: &[u32],
    ) -> Result<(), DatasetError> {
        let table = self.table();
        if !self.sharded {
            return Ok(self.single_checked(&table, indices)?.gather_var(indices, dst, offsets, lens)?);
        }
        if indices.len() != offsets.len() || indices.len() != lens.len() {
            return Err(DatasetError::InvalidArgument(format!(
                "{} indices, {} offsets, {} lengths",
                indices.len(),
                offsets.len(),
                lens.len()
            )));
        }
        match self.split(&table, indices)? {
            Split::One(k, local) => Ok(self.shard(k)?.gather_var(&local, dst, offsets, lens)?),
            Split::Many(per) => {
                for (k, local, positions) in per {
                    let offs: Vec<u64> = positions.iter().map(|&p| offsets[p]).collect();
                    let ls: Vec<u32> = positions.iter().map(|&p| lens[p]).collect();
                    self.shard(k)?.gather_var(&local, dst, &offs, &ls)?;
                }
                Ok(())
            }
        }
    }

    fn single<'t>(&self, table: &'t Table) -> &'t Zrecord {
        table.stores[0].get().expect("a single store opens at open")
    }

    /// The records past the first `limit`, if any, out of sight, across
    /// the shards: [`Shards::len`] is at most `limit` from now on, and an
    /// index at or past it is out of range; a shard's extent is what it
    /// shows of the first `limit`.
    pub(crate) fn limit(&mut self, limit: u64) -> Result<(), DatasetError> {
        self.limit = Some(limit);
        let table = self.table();
        let index = self.visible(&table.counts)?;
        let table = Table { index, counts: table.counts.clone(), stores: table.stores.clone() };
        *self.table.write().expect("not poisoned") = Arc::new(table);
        Ok(())
    }

    /// The index of shards holding `counts`, cut at the limit if there is one.
    fn visible(&self, counts: &[u64]) -> Result<ShardIndex, DatasetError> {
        let Some(mut left) = self.limit else { return ShardIndex::new(counts) };
        let cut: Vec<u64> = counts
            .iter()
            .map(|&n| {
                let seen = n.min(left);
                left -= seen;
                seen
            })
            .collect();
        ShardIndex::new(&cut)
    }

    /// A single store's `indices`, each below the limit if there is one.
    fn single_checked<'t>(&self, table: &'t Table, indices: &[u64]) -> Result<&'t Zrecord, DatasetError> {
        if self.limit.is_some() {
            let len = table.index.len();
            if let Some(&index) = indices.iter().find(|&&i| i >= len) {
                return Err(DatasetError::IndexOutOfRange { path: self.root.clone(), index, len });
            }
        }
        Ok(self.single(table))
    }
}

impl Table {
    /// A table of `n` shards not opened, before the first is built.
    fn empty(n: usize) -> Table {
        Table { index: ShardIndex::new(&vec![0; n]).expect("zeros"), counts: vec![0; n], stores: Vec::new() }
    }
}

/// A shard's store, kept open while the reference is held.
#[derive(Debug)]
pub struct ShardRef(Arc<OnceLock<Zrecord>>);

impl std::ops::Deref for ShardRef {
    type Target = Zrecord;
    fn deref(&self) -> &Zrecord {
        self.0.get().expect("a ShardRef is made of an opened shard")
    }
}
