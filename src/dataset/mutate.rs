//! [`ShardedMutation`]: deletes and compactions of a sharded dataset's
//! shards, one shard at a time, under the dataset's writer flock (its last
//! shard's). Each shard's delete or compaction is the store's own, atomic
//! (a delete) or resumable (a compaction) across a crash. A delete of a
//! sealed shard changes the count the shard table records for it, in three
//! steps (`docs/crash-safety.md`, "Deleting in a sealed shard"): the
//! shard table marks the shard `pending` with its count after the delete
//! (SYNC M1-M2), the store deletes, the shard table records the new count and
//! drops the mark. A reader or writer that finds the mark opens the shard
//! and takes whichever of the two counts it holds.
//!
//! A delete over several shards is not atomic as a whole: each shard's
//! part is, in shard order, and the report says which were done.

use std::path::Path;
use std::sync::Arc;

use super::error::DatasetError;
use super::shard_index::ShardIndex;
use super::shard_table::{Pending, ShardTable};
use super::target::Target;
use crate::io::Vfs;
use crate::io::real::RealFs;
use crate::{CompactOptions, CompactReport, Options, Zrecord};

/// What a delete did to one shard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardDelete {
    /// The shard.
    pub shard: usize,
    /// Its records before and after.
    pub before: u64,
    /// Its records after.
    pub after: u64,
}

/// A sharded dataset opened to delete from or compact its shards.
pub struct ShardedMutation {
    target: Target,
}

impl ShardedMutation {
    /// Opens the sharded dataset at `path`; `wait` as [`Options::wait`]
    /// for each shard's delete or compaction.
    pub fn open(path: impl AsRef<Path>, wait: bool) -> Result<ShardedMutation, DatasetError> {
        ShardedMutation::open_in(Arc::new(RealFs), path.as_ref(), wait)
    }

    /// [`ShardedMutation::open`] on any filesystem implementation.
    pub fn open_in(vfs: Arc<dyn Vfs>, path: &Path, wait: bool) -> Result<ShardedMutation, DatasetError> {
        let target = Target::open_to_mutate(vfs, path, &Options { wait, ..Options::default() })?;
        Ok(ShardedMutation { target })
    }

    /// The mutation of the sharded dataset `target` is open on.
    pub(crate) fn of(target: Target) -> ShardedMutation {
        ShardedMutation { target }
    }

    /// The target back, for appends after the mutation.
    pub(crate) fn into_target(self) -> Target {
        self.target
    }

    fn shard_table(&self) -> &ShardTable {
        self.target.shard_table().expect("a sharded dataset")
    }

    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.shard_table().shards()
    }

    /// Records per shard.
    pub fn counts(&mut self) -> Vec<u64> {
        let mut counts = self.shard_table().sealed.clone();
        counts.push(u64::from(self.target.last_mut().expect("open").len()));
        counts
    }

    /// Deletes records by global index (as the dataset was before the
    /// call), shard by shard (swap-with-last within each shard). Every
    /// index is checked before anything changes.
    pub fn delete(&mut self, indices: &[u64]) -> Result<Vec<ShardDelete>, DatasetError> {
        let mut done = Vec::new();
        for (k, local) in self.split(indices)? {
            done.push(self.delete_in(k, &local)?);
        }
        Ok(done)
    }

    /// The shards global `indices` are in and their local indices there,
    /// shard by shard in order (shards with none left out); an index past
    /// the end is an error.
    pub fn split(&mut self, indices: &[u64]) -> Result<Vec<(usize, Vec<u64>)>, DatasetError> {
        let index = ShardIndex::new(&self.counts())?;
        let mut per: Vec<Vec<u64>> = vec![Vec::new(); index.shards()];
        for &i in indices {
            let (k, local) = index.locate(i).ok_or_else(|| DatasetError::IndexOutOfRange {
                path: self.target.path().to_path_buf(),
                index: i,
                len: index.len(),
            })?;
            per[k].push(local);
        }
        Ok(per.into_iter().enumerate().filter(|(_, l)| !l.is_empty()).collect())
    }

    /// Deletes `local` indices of shard `k`.
    pub fn delete_in(&mut self, k: usize, local: &[u64]) -> Result<ShardDelete, DatasetError> {
        if k == self.target.last_shard() {
            let last = self.target.last_mut().expect("open");
            let before = u64::from(last.len());
            last.delete(local)?;
            return Ok(ShardDelete { shard: k, before, after: u64::from(last.len()) });
        }
        let mut store = self.sealed(k)?;
        let before = u64::from(store.len());
        if let Some(&bad) = local.iter().find(|&&i| i >= before) {
            return Err(crate::Error::IndexOutOfRange {
                path: store.path().to_path_buf(),
                index: bad,
                len: store.len(),
            }
            .into());
        }
        let mut distinct = local.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let after = before - distinct.len() as u64;
        let mut shard_table = self.shard_table().clone();
        // S1: the mark, durable before the shard changes.
        shard_table.pending = Some(Pending { shard: k, records: after });
        self.target.set_shard_table(shard_table.clone())?;
        // S2: the store's delete (its commit is D3).
        let deleted = store.delete(local);
        drop(store);
        // The count the store holds now (reopened: a failed delete is
        // recovered to before or after), and the mark dropped.
        let len = u64::from(self.target.open_sealed(k)?.len());
        if len != before && len != after {
            return Err(DatasetError::ShardLength {
                path: super::shard_table::shard_dir(self.target.path(), k),
                shard: k,
                holds: len,
                shard_table: after,
            });
        }
        // S3: the count, the mark dropped.
        shard_table.pending = None;
        shard_table.sealed[k] = len;
        self.target.set_shard_table(shard_table)?;
        deleted?;
        Ok(ShardDelete { shard: k, before, after })
    }

    /// Sealed shard `k`, opened for writing and checked against the shard table.
    fn sealed(&self, k: usize) -> Result<Zrecord, DatasetError> {
        let recorded = *self.shard_table().sealed.get(k).ok_or_else(|| {
            DatasetError::InvalidArgument(format!("shard {k} of {} shards", self.shard_table().shards()))
        })?;
        let store = self.target.open_sealed(k)?;
        if u64::from(store.len()) != recorded {
            return Err(DatasetError::ShardLength {
                path: store.path().to_path_buf(),
                shard: k,
                holds: u64::from(store.len()),
                shard_table: recorded,
            });
        }
        Ok(store)
    }

    /// Compacts shard `k` as `options` say (its count does not change).
    pub fn compact(
        &mut self,
        k: usize,
        options: CompactOptions,
        progress: impl FnMut(u64, u64),
    ) -> Result<CompactReport, DatasetError> {
        if k == self.target.last_shard() {
            return Ok(self.target.last_mut().expect("open").compact_with(options, progress)?);
        }
        Ok(self.sealed(k)?.compact_with(options, progress)?)
    }

    /// Shard `k`'s store for reading what a mutation left (stats), opened
    /// read-only (the last shard: the writer's own).
    pub fn with_shard<T>(&mut self, k: usize, f: impl FnOnce(&Zrecord) -> T) -> Result<T, DatasetError> {
        if k == self.target.last_shard() {
            return Ok(f(self.target.last_mut().expect("open")));
        }
        Ok(f(&self.sealed(k)?))
    }
}
