//! The one dataset core: [`DatasetOf`], a dataset over a store or a sharded
//! dataset's stores, generic over its [`ColumnKind`], what differs between
//! kinds of column.
//!
//! Every kind opens, checks its schema, counts, shards, refreshes and
//! gathers a batch (of one dataset, or of several, part after part, for a
//! mixture) in the same way; the kinds differ only in how a record's bytes
//! map to the rows of a batch. [`FixedKind`](super::FixedKind): a record is
//! one row of the schema's shape, read at a fixed stride, and a batch is a
//! [`Tensor`](super::Tensor). [`RaggedKind`](super::RaggedKind): a record is
//! any number of rows, its length looked up before its bytes are read, and
//! a batch is packed with its `row_splits` ([`Ragged`](super::Ragged)). A
//! new kind (a bytes or string column) implements [`ColumnKind`] in a file
//! of its own and adds its own typed methods there, as `fixed.rs` and
//! `ragged.rs` do; nothing here changes.
//!
//! A generic over a trait, rather than an enum of kinds in one struct:
//! each kind's typed API (`Dataset::gather` returns a `Tensor`,
//! `RaggedDataset::gather` a `Ragged`) stays a distinct type checked at
//! compile time, and [`Dataset`](super::Dataset) and
//! [`RaggedDataset`](super::RaggedDataset) stay the names callers use
//! (aliases of [`DatasetOf`]).

use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;

use super::dtype::DType;
use super::error::DatasetError;
use super::schema::Schema;
use super::shards::{ShardRef, Shards};
use super::tensor::{Pool, Tensor};
use crate::ReadOptions;
use crate::io::Vfs;

mod sealed {
    /// Only this crate's kinds implement [`super::ColumnKind`].
    pub trait Sealed {}
}
pub(super) use sealed::Sealed;

/// What differs between kinds of column: how the bytes of a record map to
/// the rows of a batch. Implemented by [`FixedKind`](super::FixedKind) and
/// [`RaggedKind`](super::RaggedKind).
pub trait ColumnKind: Sealed + Debug + Sized + Send + Sync + 'static {
    /// True if a record is any number of rows (the schema's `"ragged"`).
    const RAGGED: bool;
    /// What the rows of a batch are, for an error ("records", "rows").
    const ROWS: &'static str;
    /// What a part of a batch knows of its records before their bytes are
    /// read (nothing for fixed records; each one's byte length for ragged).
    type Lengths: Send + Sync;
    /// A gathered batch.
    type Batch;

    /// The lengths of records `indices`, checked against the kind.
    fn lengths(dataset: &DatasetOf<Self>, indices: &[u64]) -> Result<Self::Lengths, DatasetError>;

    /// The rows records `indices` of these `lengths` make.
    fn rows(dataset: &DatasetOf<Self>, indices: &[u64], lengths: &Self::Lengths) -> u64;

    /// Decodes records `indices` into `dst`, exactly their rows' bytes.
    fn read(
        dataset: &DatasetOf<Self>,
        indices: &[u64],
        lengths: &Self::Lengths,
        dst: &mut [u8],
    ) -> Result<(), DatasetError>;

    /// The batch of `values`, every part's rows back to back, each part of
    /// `lengths` in turn.
    fn batch(values: Tensor, row_bytes: usize, lengths: Vec<Self::Lengths>) -> Self::Batch;
}

/// A dataset of kind `K`, read-only: the schema, the bytes of one row, and
/// the stores. Use it through its aliases, [`Dataset`](super::Dataset) and
/// [`RaggedDataset`](super::RaggedDataset).
#[derive(Debug)]
pub struct DatasetOf<K: ColumnKind> {
    schema: Schema,
    row_bytes: usize,
    shards: Shards,
    kind: std::marker::PhantomData<K>,
}

impl<K: ColumnKind> DatasetOf<K> {
    /// Opens the dataset in directory `path` (a store and its `schema.json`).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, DatasetError> {
        Self::open_in(Arc::new(crate::io::real::RealFs), path.as_ref())
    }

    /// Opens with reads as `reads` says (a [`ReadMode`](crate::ReadMode)
    /// converts, with checks by default).
    pub fn open_with(path: impl AsRef<Path>, reads: impl Into<ReadOptions>) -> Result<Self, DatasetError> {
        Self::open_in_with(Arc::new(crate::io::real::RealFs), path.as_ref(), reads)
    }

    /// Opens on any filesystem implementation.
    pub fn open_in(vfs: Arc<dyn Vfs>, path: &Path) -> Result<Self, DatasetError> {
        Self::open_in_with(vfs, path, ReadOptions::default())
    }

    /// Opens the dataset published at `url` (`s3://bucket/prefix`; see
    /// [`Zrecord::open_url`](crate::Zrecord::open_url)).
    #[cfg(feature = "remote")]
    pub fn open_url(url: &str, reads: impl Into<ReadOptions>) -> Result<Self, DatasetError> {
        let (vfs, root) = super::remote_vfs(url)?;
        Self::open_in_with(vfs, &root, reads)
    }

    /// Opens on any filesystem implementation, with reads as `reads` says;
    /// a schema of another kind is [`DatasetError::WrongKind`].
    pub fn open_in_with(vfs: Arc<dyn Vfs>, path: &Path, reads: impl Into<ReadOptions>) -> Result<Self, DatasetError> {
        let shards = Shards::open_in(vfs, path, reads)?;
        let schema = shards.schema().clone();
        if schema.is_ragged() != K::RAGGED {
            return Err(DatasetError::WrongKind { path: path.to_path_buf(), ragged: schema.is_ragged() });
        }
        let row_bytes = schema.row_bytes()?;
        Ok(DatasetOf { schema, row_bytes, shards, kind: std::marker::PhantomData })
    }

    /// The dataset's directory.
    pub fn path(&self) -> &Path {
        self.shards.path()
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// What this dataset's gathers read, by where the bytes came from
    /// (memory or the device; [`ReadStats`](crate::ReadStats)).
    pub fn read_stats(&self) -> crate::ReadStats {
        self.shards.read_stats()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.schema.dtype
    }

    /// Bytes per row: of a record of a fixed dataset (one row), of one of
    /// a ragged record's rows.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// Number of records.
    pub fn len(&self) -> u64 {
        self.shards.len()
    }

    /// True if the dataset holds no record.
    pub fn is_empty(&self) -> bool {
        self.shards.len() == 0
    }

    /// True if the dataset is sharded (has a `shards.json` shard table).
    pub fn is_sharded(&self) -> bool {
        self.shards.is_sharded()
    }

    /// Number of shards (1 for a single store).
    pub fn shards(&self) -> usize {
        self.shards.count()
    }

    /// Shard `k`'s first global index and record count.
    pub fn shard_extent(&self, k: usize) -> Option<(u64, u64)> {
        self.shards.extent(k)
    }

    /// Shard `k`'s store, for byte-level access (opened on first use; a
    /// single-store dataset is shard 0).
    pub fn shard(&self, k: usize) -> Result<ShardRef, DatasetError> {
        self.shards.shard(k)
    }

    /// Picks up records a writer appended since open; returns the new length.
    pub fn refresh(&self) -> Result<u64, DatasetError> {
        self.shards.refresh()
    }

    /// Hides the records past `rows` (a table's uncommitted tail): the
    /// length is at most `rows` from now on, an index at or past it out of
    /// range, a refresh included. A single store only (`shard` still
    /// reaches the whole store).
    pub(crate) fn limit(&mut self, rows: u64) -> Result<(), DatasetError> {
        self.shards.limit(rows)
    }

    /// The stores, for the kinds' reads.
    pub(super) fn stores(&self) -> &Shards {
        &self.shards
    }

    /// The shape of a batch of `rows` rows: `[rows, *shape]`.
    pub(super) fn rows_shape(&self, rows: usize) -> Vec<usize> {
        std::iter::once(rows).chain(self.schema.shape().iter().copied()).collect()
    }

    /// Gathers records `indices` into one batch, its buffer from `pool`.
    pub(crate) fn gather_pooled(&self, indices: &[u64], pool: Option<&Arc<Pool>>) -> Result<K::Batch, DatasetError> {
        Self::gather_parts(&[(self, indices)], pool).map_err(|(_, e)| e)
    }

    /// One batch of several datasets' records, part after part (a
    /// mixture's batch), each decoded straight into its place. The
    /// datasets must share dtype and shape. An error names the part.
    pub(crate) fn gather_parts(
        parts: &[(&Self, &[u64])],
        pool: Option<&Arc<Pool>>,
    ) -> Result<K::Batch, (usize, DatasetError)> {
        let Some(&(first, _)) = parts.first() else {
            return Err((0, DatasetError::InvalidArgument("a batch of no part".into())));
        };
        let mut lengths = Vec::with_capacity(parts.len());
        let mut rows = Vec::with_capacity(parts.len());
        for (k, &(dataset, indices)) in parts.iter().enumerate() {
            if (dataset.dtype(), dataset.schema.shape()) != (first.dtype(), first.schema.shape()) {
                let (at, other) = (dataset.path().display(), first.path().display());
                return Err((k, DatasetError::InvalidArgument(format!("{at} holds other {} than {other}", K::ROWS))));
            }
            let part = K::lengths(dataset, indices).map_err(|e| (k, e))?;
            rows.push(K::rows(dataset, indices, &part));
            lengths.push(part);
        }
        let total = usize::try_from(rows.iter().sum::<u64>())
            .map_err(|_| (0, DatasetError::InvalidArgument("batch too large".into())))?;
        let mut values = Tensor::pooled(first.dtype(), &first.rows_shape(total), pool).map_err(|e| (0, e))?;
        let mut slots = Vec::with_capacity(parts.len());
        let mut rest = values.as_bytes_mut();
        for (k, ((&(dataset, indices), part), &n)) in parts.iter().zip(&lengths).zip(&rows).enumerate() {
            let (dst, tail) = rest.split_at_mut(n as usize * first.row_bytes);
            slots.push(Slot { part: k, dataset, indices, lengths: part, dst });
            rest = tail;
        }
        gather_slots(&mut slots)?;
        Ok(K::batch(values, first.row_bytes, lengths))
    }
}

/// A part of a [`DatasetOf::gather_parts`]: its number, dataset, records,
/// their lengths, and its bytes of the batch.
struct Slot<'a, K: ColumnKind> {
    part: usize,
    dataset: &'a DatasetOf<K>,
    indices: &'a [u64],
    lengths: &'a K::Lengths,
    dst: &'a mut [u8],
}

/// Gathers every slot, the parts at once (halves joined on rayon's pool),
/// so that the pool balances the parts' reads rather than finishing each
/// part's before starting the next.
fn gather_slots<K: ColumnKind>(slots: &mut [Slot<'_, K>]) -> Result<(), (usize, DatasetError)> {
    match slots {
        [] => Ok(()),
        [s] => K::read(s.dataset, s.indices, s.lengths, s.dst).map_err(|e| (s.part, e)),
        _ => {
            let (a, b) = slots.split_at_mut(slots.len() / 2);
            let (ra, rb) = crate::sync::join(|| gather_slots(a), || gather_slots(b));
            ra.and(rb)
        }
    }
}
