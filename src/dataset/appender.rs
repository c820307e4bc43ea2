//! [`DatasetAppender`]: a dataset kept open for appending, batch after
//! batch: the schema read, the store opened and its writer lock taken
//! once, not per batch. The `write_*` functions append through it (one
//! path), and a table holds one per column.
//!
//! A `zstd_dict` dataset without a dictionary has one trained on the first
//! non-empty append (an evenly spaced sample of a fixed batch, the first
//! records of a ragged one), as the `write_*` functions do. Each append is
//! durable when it returns: the store's own appends are (SYNC A1-A3 of
//! `docs/crash-safety.md`), so no further sync follows them. [`DatasetAppender::truncate`] drops the last
//! records, across shards: how a table's writer drops an uncommitted tail.

use std::path::Path;
use std::sync::Arc;

use super::dtype::DType;
use super::error::DatasetError;
use super::mutate::ShardedMutation;
use super::schema::Schema;
use super::target::{Batch, Target};
use super::write::{DICT_SAMPLES_MAX, FixedSource, SliceSource, WriteOptions, dict_sample_indices, train};
use crate::format::RECORD_BYTES_MAX;
use crate::io::Vfs;

/// A dataset open for appending (created on its first append if new).
pub struct DatasetAppender {
    target: Option<Target>,
    opts: WriteOptions,
}

impl DatasetAppender {
    /// The fixed-shape dataset at `path` (records of `dtype` and `shape`),
    /// opened to append: an existing one must hold the same records and
    /// keeps its own codec; a new one is created by the first append (or
    /// [`DatasetAppender::finish`]). `opts.mode` is not applied here.
    pub fn fixed_in(
        vfs: Arc<dyn Vfs>,
        path: &Path,
        dtype: DType,
        shape: &[usize],
        opts: &WriteOptions,
    ) -> Result<DatasetAppender, DatasetError> {
        let schema = Schema::fixed(dtype, shape.to_vec(), opts.codec).map_err(|e| e.at(path))?;
        DatasetAppender::open(vfs, path, schema, opts)
    }

    /// The ragged dataset at `path` (rows of `item_shape` elements of
    /// `dtype`), opened to append, as [`DatasetAppender::fixed_in`].
    pub fn ragged_in(
        vfs: Arc<dyn Vfs>,
        path: &Path,
        dtype: DType,
        item_shape: &[usize],
        opts: &WriteOptions,
    ) -> Result<DatasetAppender, DatasetError> {
        let schema = Schema::ragged(dtype, item_shape.to_vec(), opts.codec).map_err(|e| e.at(path))?;
        DatasetAppender::open(vfs, path, schema, opts)
    }

    fn open(vfs: Arc<dyn Vfs>, path: &Path, schema: Schema, opts: &WriteOptions) -> Result<Self, DatasetError> {
        let target = Target::open(vfs, path, schema, &opts.store, opts.shard_records)?;
        Ok(DatasetAppender { target: Some(target), opts: opts.clone() })
    }

    fn target(&mut self) -> &mut Target {
        self.target.as_mut().expect("a target between calls")
    }

    fn target_ref(&self) -> &Target {
        self.target.as_ref().expect("a target between calls")
    }

    /// The dataset's directory.
    pub fn path(&self) -> &Path {
        self.target_ref().path()
    }

    /// The dataset's schema (an existing dataset's own).
    pub fn schema(&self) -> &Schema {
        &self.target_ref().schema
    }

    /// Bytes of one row (a fixed record; a ragged record is any number).
    pub fn row_bytes(&self) -> usize {
        self.target_ref().row_bytes
    }

    /// Records per append call to the store.
    fn step(&self) -> usize {
        (self.opts.chunk_bytes / self.row_bytes().max(1)).max(1)
    }

    /// Appends fixed records back to back (whole records of
    /// [`DatasetAppender::row_bytes`], which must not be 0); returns how
    /// many. Durable on return.
    pub fn append_fixed(&mut self, data: &[u8]) -> Result<u64, DatasetError> {
        let row_bytes = self.row_bytes();
        if self.schema().is_ragged() {
            return Err(DatasetError::InvalidArgument(format!(
                "{} is ragged: append items, not fixed records",
                self.path().display()
            )));
        }
        if row_bytes == 0 {
            return Err(DatasetError::ShapeMismatch(format!(
                "records of {} are 0 bytes: their count cannot be told from a slice",
                self.schema().describe()
            )));
        }
        if !data.len().is_multiple_of(row_bytes) {
            return Err(DatasetError::ShapeMismatch(format!(
                "{} bytes are not a whole number of {row_bytes}-byte records of {}",
                data.len(),
                self.schema().describe()
            )));
        }
        self.append_source((data.len() / row_bytes) as u64, &SliceSource { data, row_bytes })
    }

    /// Appends the `count` fixed records of `records`, training the
    /// dictionary first, if one is wanted, on a sample spread over them all.
    pub(crate) fn append_source(&mut self, count: u64, records: &dyn FixedSource) -> Result<u64, DatasetError> {
        let row_bytes = self.row_bytes();
        let mut scratch = Vec::new();
        let dict = if count > 0 && self.needs_dict() {
            let indices = dict_sample_indices(count, row_bytes);
            let mut sample = Vec::with_capacity(indices.len() * row_bytes);
            for &i in &indices {
                sample.extend_from_slice(records.records(i, 1, &mut scratch)?);
            }
            Some(train(self.path(), &sample, &vec![row_bytes; indices.len()], &self.opts)?)
        } else {
            None
        };
        if count == 0 {
            return Ok(0);
        }
        let step = self.step() as u64;
        let target = self.target();
        target.prepare(dict)?;
        let mut start = 0u64;
        while start < count {
            let n = step.min(count - start) as usize;
            let data = records.records(start, n, &mut scratch)?;
            target.append(&Batch::Fixed { data, n, item: row_bytes })?;
            start += n as u64;
        }
        Ok(count)
    }

    /// True while a `zstd_dict` dataset has no dictionary yet (the next
    /// non-empty append trains it).
    pub(crate) fn needs_dict(&self) -> bool {
        self.target_ref().needs_dict()
    }

    /// Appends ragged records, each the bytes of whole rows; returns how
    /// many. Every record is checked before any is written. Durable on return.
    pub fn append_items(&mut self, items: &[&[u8]]) -> Result<u64, DatasetError> {
        let total = self.check_items(items.iter().copied())?;
        let mut block = Vec::with_capacity(total);
        let mut lens = Vec::with_capacity(items.len());
        for item in items {
            block.extend_from_slice(item);
            lens.push(item.len() as u32);
        }
        self.write_packed(&block, &lens)
    }

    /// Appends ragged records already packed back to back: record `k` the
    /// `lens[k]` bytes after those before it, `lens` summing to
    /// `data.len()`. No copy of `data` is made to pack it (an Arrow list or
    /// binary array's values are packed so). Every record is checked before
    /// any is written. Durable on return.
    pub fn append_packed(&mut self, data: &[u8], lens: &[u32]) -> Result<u64, DatasetError> {
        let total = self.check_items(packed_items(data, lens)?)?;
        debug_assert_eq!(total, data.len());
        self.write_packed(data, lens)
    }

    /// Each record at most [`RECORD_BYTES_MAX`] and whole rows; their total bytes.
    fn check_items<'a>(&self, items: impl Iterator<Item = &'a [u8]>) -> Result<usize, DatasetError> {
        let mut total = 0usize;
        for (k, item) in items.enumerate() {
            self.check_item(k as u64, item)?;
            total += item.len();
        }
        Ok(total)
    }

    /// Ragged record `position` (for messages) at most [`RECORD_BYTES_MAX`]
    /// bytes, whole rows, and this dataset ragged.
    pub(crate) fn check_item(&self, position: u64, item: &[u8]) -> Result<(), DatasetError> {
        let row_bytes = self.row_bytes();
        let path = self.target_ref().path();
        if !self.schema().is_ragged() {
            return Err(DatasetError::InvalidArgument(format!(
                "{} is fixed: append records, not items",
                path.display()
            )));
        }
        if item.len() > RECORD_BYTES_MAX as usize {
            return Err(DatasetError::RecordTooLarge { path: Some(path.to_path_buf()), bytes: item.len() as u64 });
        }
        if !item.len().is_multiple_of(row_bytes) {
            return Err(DatasetError::ShapeMismatch(format!(
                "record {position} has {} bytes, not a whole number of {row_bytes}-byte rows of {}",
                item.len(),
                self.schema().describe()
            )));
        }
        Ok(())
    }

    /// Appends ragged records packed back to back, record `k` of
    /// `lens[k]` bytes (checked by the caller); the dictionary, if one is
    /// wanted, trained on the first of them.
    pub(crate) fn write_packed(&mut self, block: &[u8], lens: &[u32]) -> Result<u64, DatasetError> {
        let dict = if !lens.is_empty() && self.needs_dict() {
            let k = lens.len().min(DICT_SAMPLES_MAX);
            let sizes: Vec<usize> = lens[..k].iter().map(|&l| l as usize).collect();
            Some(train(self.path(), &block[..sizes.iter().sum()], &sizes, &self.opts)?)
        } else {
            None
        };
        let mut offsets = Vec::with_capacity(lens.len());
        let mut at = 0u64;
        for &l in lens {
            offsets.push(at);
            at += u64::from(l);
        }
        if lens.is_empty() {
            return Ok(0);
        }
        let target = self.target();
        target.prepare(dict)?;
        target.append(&Batch::Var { data: block, offsets: &offsets, lens })?;
        Ok(lens.len() as u64)
    }

    /// Records the dataset holds, across its shards.
    pub fn len(&self) -> u64 {
        let target = self.target_ref();
        let sealed: u64 = target.shard_table().map_or(0, |t| t.sealed.iter().sum());
        sealed + target.last().map_or(0, |s| u64::from(s.len()))
    }

    /// True if the dataset holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the records past the first `rows` (the last ones: no record
    /// moves), shard by shard from the first the tail touches; a sharded
    /// dataset's sealed shards through the shard table's pending mark
    /// (`docs/crash-safety.md`, "Deleting in a sealed shard"). A crash part
    /// way leaves the first `rows` records where they were and a shorter
    /// tail, which a truncate again drops. Shards it empties stay in the
    /// shard table, empty. Returns the records dropped. The indices listed
    /// are one shard's at a time (at most a store's records).
    pub fn truncate(&mut self, rows: u64) -> Result<u64, DatasetError> {
        let holds = self.len();
        if holds <= rows {
            return Ok(0);
        }
        let mut target = self.target.take().expect("a target between calls");
        if target.shard_table().is_none() {
            let tail: Vec<u64> = (rows..holds).collect();
            let result = target.last_mut().expect("a dataset holding records is open").delete(&tail);
            self.target = Some(target);
            result?;
        } else {
            let mut mutation = ShardedMutation::of(target);
            let result = truncate_shards(&mut mutation, rows);
            self.target = Some(mutation.into_target());
            result?;
        }
        Ok(holds - rows)
    }

    /// Syncs the checksums appends left to sync later
    /// ([`crate::Zrecord::sync_checksums`]).
    pub fn sync_checksums(&self) -> Result<(), DatasetError> {
        self.target_ref().sync_checksums()
    }

    /// Makes what was appended durable, creating an empty dataset if none
    /// exists yet.
    pub fn finish(&mut self) -> Result<(), DatasetError> {
        self.target().finish()
    }
}

/// The records of a packed block, `lens` of them back to back, or
/// [`DatasetError::InvalidArgument`] when `lens` does not sum to the block.
pub(crate) fn packed_items<'a>(
    data: &'a [u8],
    lens: &[u32],
) -> Result<impl Iterator<Item = &'a [u8]> + Clone, DatasetError> {
    let sum = lens.iter().try_fold(0usize, |sum, &l| sum.checked_add(l as usize));
    if sum != Some(data.len()) {
        return Err(DatasetError::InvalidArgument(format!(
            "{} record lengths sum to {}, not the {} bytes given",
            lens.len(),
            sum.map_or_else(|| "more than the address space".to_string(), |s| s.to_string()),
            data.len()
        )));
    }
    let mut at = 0usize;
    Ok(lens.iter().map(move |&l| {
        let item = &data[at..at + l as usize];
        at += l as usize;
        item
    }))
}

/// A sharded dataset's records past the first `rows` deleted, each shard's
/// local tail in shard order.
fn truncate_shards(mutation: &mut ShardedMutation, rows: u64) -> Result<(), DatasetError> {
    let mut start = 0u64;
    for (k, count) in mutation.counts().into_iter().enumerate() {
        let keep = rows.saturating_sub(start).min(count);
        if keep < count {
            let tail: Vec<u64> = (keep..count).collect();
            mutation.delete_in(k, &tail)?;
        }
        start += count;
    }
    Ok(())
}
