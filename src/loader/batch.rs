//! [`Batch`]: what the loader yields, one named [`Column`] per stream (or
//! whatever the transform made of them), with the step and the indices.

use std::sync::Arc;

use super::skip::Skip;
use crate::dataset::{Dataset, DatasetError, Pool, Ragged, RaggedDataset, Tensor};

/// A loader's source of records: a fixed-shape or a ragged dataset. Shared
/// (`Arc`), so one dataset may feed several loaders.
#[derive(Clone, Debug)]
pub enum Stream {
    /// A fixed-shape dataset; its batches are [`Column::Dense`].
    Fixed(Arc<Dataset>),
    /// A ragged dataset; its batches are [`Column::Ragged`] (packed).
    Ragged(Arc<RaggedDataset>),
}

impl Stream {
    /// Number of records.
    pub fn len(&self) -> u64 {
        match self {
            Stream::Fixed(d) => d.len(),
            Stream::Ragged(d) => d.len(),
        }
    }

    /// What the stream's stores read, by path ([`ReadStats`](crate::ReadStats)).
    pub fn read_stats(&self) -> crate::ReadStats {
        match self {
            Stream::Fixed(d) => d.read_stats(),
            Stream::Ragged(d) => d.read_stats(),
        }
    }

    /// The same dataset handle as `other`.
    pub(crate) fn same(&self, other: &Stream) -> bool {
        match (self, other) {
            (Stream::Fixed(a), Stream::Fixed(b)) => Arc::ptr_eq(a, b),
            (Stream::Ragged(a), Stream::Ragged(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// True if the stream has no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn gather(&self, indices: &[u64], pool: Option<&Arc<Pool>>) -> Result<Column, DatasetError> {
        match self {
            Stream::Fixed(d) => d.gather_pooled(indices, pool).map(Column::Dense),
            Stream::Ragged(d) => d.gather_pooled(indices, pool).map(Column::Ragged),
        }
    }
}

impl From<Dataset> for Stream {
    fn from(d: Dataset) -> Stream {
        Stream::Fixed(Arc::new(d))
    }
}

impl From<Arc<Dataset>> for Stream {
    fn from(d: Arc<Dataset>) -> Stream {
        Stream::Fixed(d)
    }
}

impl From<RaggedDataset> for Stream {
    fn from(d: RaggedDataset) -> Stream {
        Stream::Ragged(Arc::new(d))
    }
}

impl From<Arc<RaggedDataset>> for Stream {
    fn from(d: Arc<RaggedDataset>) -> Stream {
        Stream::Ragged(d)
    }
}

/// One column of a batch.
#[derive(Clone, Debug, PartialEq)]
pub enum Column {
    /// A dense array, `[batch, ...]`.
    Dense(Tensor),
    /// Packed variable-length records.
    Ragged(Ragged),
}

impl Column {
    /// The tensor of a dense column.
    pub fn as_dense(&self) -> Option<&Tensor> {
        match self {
            Column::Dense(t) => Some(t),
            Column::Ragged(_) => None,
        }
    }

    /// The packed records of a ragged column.
    pub fn as_ragged(&self) -> Option<&Ragged> {
        match self {
            Column::Ragged(r) => Some(r),
            Column::Dense(_) => None,
        }
    }
}

impl From<Tensor> for Column {
    fn from(t: Tensor) -> Column {
        Column::Dense(t)
    }
}

impl From<Ragged> for Column {
    fn from(r: Ragged) -> Column {
        Column::Ragged(r)
    }
}

/// A batch: named columns, in the order the streams were given, every one
/// gathered at the same [`indices`](Batch::indices), so record `k` lines up
/// across them. A [mixture](super::Mixture)'s batch also says which source
/// each record is from ([`source`](Batch::source)); its indices are within
/// that source.
#[derive(Clone, Debug, PartialEq)]
pub struct Batch {
    step: u64,
    indices: Vec<u64>,
    source: Option<Vec<u32>>,
    columns: Vec<(String, Column)>,
    skipped: Vec<Skip>,
}

impl Batch {
    /// An empty batch of `step` at `indices` (for tests and transforms).
    pub fn new(step: u64, indices: Vec<u64>) -> Batch {
        Batch { step, indices, source: None, columns: Vec::new(), skipped: Vec::new() }
    }

    /// The damaged records this batch replaced (`skip_corrupt`); `indices`
    /// holds the replacements.
    pub fn skipped(&self) -> &[Skip] {
        &self.skipped
    }

    pub(crate) fn with_skipped(mut self, skipped: Vec<Skip>) -> Batch {
        self.skipped = skipped;
        self
    }

    /// A mixture's batch: `source[k]` is the source of record `k`.
    pub fn with_source(mut self, source: Vec<u32>) -> Batch {
        self.source = Some(source);
        self
    }

    /// The source of each record (a mixture's batch; `None` otherwise).
    pub fn source(&self) -> Option<&[u32]> {
        self.source.as_deref()
    }

    /// `batch` with its indices set (the workers gather first, then attach them).
    pub(crate) fn with_indices(mut batch: Batch, indices: Vec<u64>) -> Batch {
        batch.indices = indices;
        batch
    }

    /// The step this batch is the batch of.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The record indices of this batch (this host's share, when sharded).
    pub fn indices(&self) -> &[u64] {
        &self.indices
    }

    /// The column called `name`.
    pub fn get(&self, name: &str) -> Option<&Column> {
        self.columns.iter().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    /// The column called `name`, writable.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Column> {
        self.columns.iter_mut().find(|(n, _)| n == name).map(|(_, c)| c)
    }

    /// The dense column called `name`.
    pub fn dense(&self, name: &str) -> Option<&Tensor> {
        self.get(name).and_then(Column::as_dense)
    }

    /// The ragged column called `name`.
    pub fn ragged(&self, name: &str) -> Option<&Ragged> {
        self.get(name).and_then(Column::as_ragged)
    }

    /// Sets column `name` (replacing one of that name, in its place;
    /// otherwise added last); returns the replaced column.
    pub fn insert(&mut self, name: impl Into<String>, column: impl Into<Column>) -> Option<Column> {
        let name = name.into();
        let column = column.into();
        match self.columns.iter_mut().find(|(n, _)| *n == name) {
            Some((_, slot)) => Some(std::mem::replace(slot, column)),
            None => {
                self.columns.push((name, column));
                None
            }
        }
    }

    /// Removes and returns column `name`.
    pub fn remove(&mut self, name: &str) -> Option<Column> {
        let at = self.columns.iter().position(|(n, _)| n == name)?;
        Some(self.columns.remove(at).1)
    }

    /// The column names, in order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.columns.iter().map(|(n, _)| n.as_str())
    }

    /// The columns with their names, in order.
    pub fn columns(&self) -> impl Iterator<Item = (&str, &Column)> {
        self.columns.iter().map(|(n, c)| (n.as_str(), c))
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// True if the batch has no column.
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }
}
