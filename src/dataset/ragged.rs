//! [`RaggedDataset`]: variable-length records (token sequences, waveforms,
//! point sets) read back packed, `(values, row_splits)`, or padded; and
//! [`pad`], the separate, visible step from packed to dense. [`RaggedKind`]
//! is what a ragged record is to the dataset core (`column.rs`): any number
//! of rows, its length looked up before its bytes are read.

use std::ops::Range;

use super::column::{ColumnKind, DatasetOf, Sealed};
use super::dtype::{DType, Element};
use super::error::DatasetError;
use super::tensor::{Tensor, check_dtype};

/// A packed batch: every record's rows back to back in `values`
/// (`[total_rows, *item_shape]`), record `k` being rows
/// `row_splits[k]..row_splits[k + 1]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Ragged {
    /// Every row of the batch, record after record.
    pub values: Tensor,
    /// `len() + 1` row offsets, from 0 to the total row count.
    pub row_splits: Vec<u64>,
}

impl Ragged {
    /// Number of records.
    pub fn len(&self) -> usize {
        self.row_splits.len().saturating_sub(1)
    }

    /// True if the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows of record `k`; `None` if `k >= len()`.
    pub fn rows(&self, k: usize) -> Option<Range<usize>> {
        let start = usize::try_from(*self.row_splits.get(k)?).ok()?;
        let end = usize::try_from(*self.row_splits.get(k + 1)?).ok()?;
        Some(start..end)
    }

    /// The bytes of record `k`; `None` if `k >= len()` (or if `row_splits`
    /// does not fit `values`).
    pub fn record(&self, k: usize) -> Option<&[u8]> {
        let row_bytes = row_bytes_of(&self.values).ok()?;
        let rows = self.rows(k)?;
        self.values.as_bytes().get(rows.start.checked_mul(row_bytes)?..rows.end.checked_mul(row_bytes)?)
    }

    /// [`pad`] of this batch.
    pub fn pad<T: Element>(&self, max_len: Option<usize>, pad_value: T) -> Result<Padded, DatasetError> {
        pad(&self.values, &self.row_splits, max_len, pad_value)
    }
}

/// A dense batch made from ragged records: `values` is
/// `[batch, max_len, *item_shape]`, record `k`'s rows first in row `k`, the
/// rest the pad value; `lengths[k]` is record `k`'s row count.
#[derive(Clone, Debug, PartialEq)]
pub struct Padded {
    /// The padded rows.
    pub values: Tensor,
    /// Row count of each record.
    pub lengths: Vec<u64>,
}

impl Padded {
    /// The lengths as a `<i8` tensor of shape `[batch]` (the reference's
    /// int64 `lengths` array), for a collate step that emits it as a column.
    pub fn lengths_tensor(&self) -> Tensor {
        let lengths: Vec<i64> = self.lengths.iter().map(|&l| l as i64).collect();
        Tensor::from_slice(&lengths, &[lengths.len()]).expect("a 1-D shape of its own length")
    }
}

/// Bytes per row of a `[rows, *item_shape]` tensor.
fn row_bytes_of(values: &Tensor) -> Result<usize, DatasetError> {
    if values.shape().is_empty() {
        return Err(DatasetError::ShapeMismatch("ragged values need a row axis (at least 1-D)".into()));
    }
    Ok(values.shape()[1..].iter().product::<usize>() * values.dtype().itemsize())
}

/// Turns a packed batch into a dense padded one: `values` is
/// `[total_rows, *tail]`, `row_splits` the `batch + 1` row offsets (non-decreasing,
/// within `values`). `max_len` defaults to the longest record; a record
/// longer than an explicit `max_len` is [`DatasetError::TooLong`], never a
/// silent truncation ([`pad_truncated`] asks for one). `pad_value` must be
/// of the values' dtype.
///
/// ```
/// use loaderx::dataset::{Tensor, pad};
/// let values = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], &[6])?;
/// let p = pad(&values, &[0, 3, 4, 6], None, -1i32)?;
/// assert_eq!(p.values.shape(), &[3, 3]);
/// assert_eq!(p.values.as_slice::<i32>()?, &[1, 2, 3, 4, -1, -1, 5, 6, -1]);
/// assert_eq!(p.lengths, [3, 1, 2]);
/// assert!(pad(&values, &[0, 3, 4, 6], Some(2), 0i32).is_err()); // a record of 3 rows
/// # Ok::<(), loaderx::dataset::DatasetError>(())
/// ```
pub fn pad<T: Element>(
    values: &Tensor,
    row_splits: &[u64],
    max_len: Option<usize>,
    pad_value: T,
) -> Result<Padded, DatasetError> {
    check_dtype::<T>(values.dtype())?;
    pad_bytes(values, row_splits, max_len, bytemuck::bytes_of(&pad_value))
}

/// [`pad`] with the pad value given as the bytes of one element (any dtype).
pub fn pad_bytes(
    values: &Tensor,
    row_splits: &[u64],
    max_len: Option<usize>,
    pad_element: &[u8],
) -> Result<Padded, DatasetError> {
    pad_rows(values, row_splits, max_len, false, pad_element)
}

/// [`pad`] to exactly `max_len` rows, keeping the first `max_len` rows of a
/// longer record (its `lengths` entry is then `max_len`): the truncation
/// [`pad`] refuses to do unasked.
///
/// ```
/// use loaderx::dataset::{Tensor, pad_truncated};
/// let values = Tensor::from_slice(&[1i32, 2, 3, 4, 5, 6], &[6])?;
/// let p = pad_truncated(&values, &[0, 3, 4, 6], 2, -1i32)?;
/// assert_eq!(p.values.as_slice::<i32>()?, &[1, 2, 4, -1, 5, 6]);
/// assert_eq!(p.lengths, [2, 1, 2]);
/// # Ok::<(), loaderx::dataset::DatasetError>(())
/// ```
pub fn pad_truncated<T: Element>(
    values: &Tensor,
    row_splits: &[u64],
    max_len: usize,
    pad_value: T,
) -> Result<Padded, DatasetError> {
    check_dtype::<T>(values.dtype())?;
    pad_truncated_bytes(values, row_splits, max_len, bytemuck::bytes_of(&pad_value))
}

/// [`pad_truncated`] with the pad value given as the bytes of one element.
pub fn pad_truncated_bytes(
    values: &Tensor,
    row_splits: &[u64],
    max_len: usize,
    pad_element: &[u8],
) -> Result<Padded, DatasetError> {
    pad_rows(values, row_splits, Some(max_len), true, pad_element)
}

/// [`pad_bytes`] and [`pad_truncated_bytes`]: `truncate` cuts a record
/// longer than `max_len` instead of refusing it.
fn pad_rows(
    values: &Tensor,
    row_splits: &[u64],
    max_len: Option<usize>,
    truncate: bool,
    pad_element: &[u8],
) -> Result<Padded, DatasetError> {
    let row_bytes = row_bytes_of(values)?;
    check_pad_element(values.dtype(), pad_element)?;
    let total_rows = values.shape()[0] as u64;
    if row_splits.is_empty() {
        return Err(DatasetError::InvalidArgument("row_splits is empty (it has batch + 1 entries)".into()));
    }
    if row_splits.windows(2).any(|w| w[0] > w[1]) || row_splits[row_splits.len() - 1] > total_rows {
        return Err(DatasetError::InvalidArgument(format!(
            "row_splits must be non-decreasing and end within the {total_rows} rows of values"
        )));
    }
    let mut lengths: Vec<u64> = row_splits.windows(2).map(|w| w[1] - w[0]).collect();
    if let (true, Some(max_len)) = (truncate, max_len) {
        lengths.iter_mut().for_each(|l| *l = (*l).min(max_len as u64));
    }
    let max_len = check_max_len(&lengths, max_len)?;
    let slot = padded_slot(max_len, row_bytes)?;
    let mut out = Tensor::zeros(values.dtype(), &padded_shape(lengths.len(), max_len, &values.shape()[1..]))?;
    let src = values.as_bytes();
    for (k, dst) in out.as_bytes_mut().chunks_exact_mut(slot.max(1)).enumerate().take(lengths.len()) {
        let start = row_splits[k] as usize * row_bytes;
        let n = lengths[k] as usize * row_bytes;
        dst[..n].copy_from_slice(&src[start..start + n]);
        fill_pattern(&mut dst[n..], pad_element);
    }
    Ok(Padded { values: out, lengths })
}

fn check_pad_element(dtype: DType, pad_element: &[u8]) -> Result<(), DatasetError> {
    if pad_element.len() != dtype.itemsize() {
        return Err(DatasetError::InvalidArgument(format!(
            "a pad element of {} bytes for {dtype} elements of {}",
            pad_element.len(),
            dtype.itemsize()
        )));
    }
    Ok(())
}

/// The padded length: `max_len` or the longest record; a longer record is an error.
fn check_max_len(lengths: &[u64], max_len: Option<usize>) -> Result<usize, DatasetError> {
    let longest = lengths.iter().copied().max().unwrap_or(0);
    let Some(max_len) = max_len else {
        return usize::try_from(longest).map_err(|_| DatasetError::InvalidArgument("record too long".into()));
    };
    match lengths.iter().position(|&l| l > max_len as u64) {
        Some(position) => Err(DatasetError::TooLong { position, rows: lengths[position], max_len }),
        None => Ok(max_len),
    }
}

/// Bytes of one padded row of `max_len` rows, checked.
fn padded_slot(max_len: usize, row_bytes: usize) -> Result<usize, DatasetError> {
    max_len
        .checked_mul(row_bytes)
        .ok_or_else(|| DatasetError::InvalidArgument(format!("max_len {max_len} overflows the address space")))
}

fn padded_shape(batch: usize, max_len: usize, tail: &[usize]) -> Vec<usize> {
    [batch, max_len].into_iter().chain(tail.iter().copied()).collect()
}

/// Fills `dst` with repetitions of `pattern` (a whole number of them).
fn fill_pattern(dst: &mut [u8], pattern: &[u8]) {
    match pattern {
        [] => {}
        [first, rest @ ..] if rest.iter().all(|b| b == first) => dst.fill(*first),
        _ => dst.chunks_exact_mut(pattern.len()).for_each(|c| c.copy_from_slice(pattern)),
    }
}

/// The kind of a ragged column: a record is any number of rows of the
/// schema's `item_shape`; a batch is packed, a [`Ragged`].
#[derive(Debug)]
pub struct RaggedKind;

impl Sealed for RaggedKind {}

impl ColumnKind for RaggedKind {
    const RAGGED: bool = true;
    const ROWS: &'static str = "rows";
    /// Each record's byte length, a whole number of rows.
    type Lengths = Vec<u32>;
    type Batch = Ragged;

    fn lengths(dataset: &RaggedDataset, indices: &[u64]) -> Result<Vec<u32>, DatasetError> {
        dataset.byte_lengths(indices)
    }

    fn rows(dataset: &RaggedDataset, _: &[u64], lens: &Vec<u32>) -> u64 {
        lens.iter().map(|&len| u64::from(len)).sum::<u64>() / dataset.row_bytes() as u64
    }

    fn read(dataset: &RaggedDataset, indices: &[u64], lens: &Vec<u32>, dst: &mut [u8]) -> Result<(), DatasetError> {
        let offsets: Vec<u64> = lens
            .iter()
            .scan(0u64, |at, &len| {
                let offset = *at;
                *at += u64::from(len);
                Some(offset)
            })
            .collect();
        dataset.stores().gather_var(indices, dst, &offsets, lens)
    }

    fn batch(values: Tensor, row_bytes: usize, lengths: Vec<Vec<u32>>) -> Ragged {
        let records = lengths.iter().map(Vec::len).sum::<usize>();
        let mut row_splits = Vec::with_capacity(records + 1);
        let mut at = 0u64;
        row_splits.push(0);
        for &len in lengths.iter().flatten() {
            at += u64::from(len);
            row_splits.push(at / row_bytes as u64);
        }
        Ragged { values, row_splits }
    }
}

/// A ragged dataset: each record any number of rows of the schema's
/// `item_shape`. Opened read-only.
///
/// ```
/// use loaderx::dataset::{RaggedDataset, WriteOptions, write_ragged};
/// let dir = tempfile::tempdir()?;
/// let seqs: Vec<Vec<i32>> = [3, 1, 4, 0, 5].iter().map(|&n| (0..n).collect()).collect();
/// write_ragged(dir.path(), &[], &seqs, &WriteOptions::default())?;
/// let rds = RaggedDataset::open(dir.path())?;
/// let batch = rds.gather(&[0, 2, 3])?; // packed
/// assert_eq!(batch.row_splits, [0, 3, 7, 7]);
/// assert_eq!(batch.values.as_slice::<i32>()?, &[0, 1, 2, 0, 1, 2, 3]);
/// let padded = rds.gather_padded(&[0, 2, 3], None, -1i32)?; // fused gather + pad
/// assert_eq!(padded.values.as_slice::<i32>()?, &[0, 1, 2, -1, 0, 1, 2, 3, -1, -1, -1, -1]);
/// assert_eq!(padded, batch.pad(None, -1i32)?);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub type RaggedDataset = DatasetOf<RaggedKind>;

impl DatasetOf<RaggedKind> {
    /// The shape of one row.
    pub fn item_shape(&self) -> &[usize] {
        self.schema().shape()
    }

    /// The byte length of each record of `indices`, checked to be whole rows.
    fn byte_lengths(&self, indices: &[u64]) -> Result<Vec<u32>, DatasetError> {
        let mut lens = vec![0u32; indices.len()];
        self.stores().lengths(indices, &mut lens)?;
        let row_bytes = self.row_bytes();
        for (&index, &bytes) in indices.iter().zip(&lens) {
            if !(bytes as usize).is_multiple_of(row_bytes) {
                return Err(DatasetError::PartialRow { index, bytes, row_bytes });
            }
        }
        Ok(lens)
    }

    /// The row count of each record of `indices`.
    pub fn row_counts(&self, indices: &[u64]) -> Result<Vec<u64>, DatasetError> {
        Ok(self.byte_lengths(indices)?.iter().map(|&b| u64::from(b) / self.row_bytes() as u64).collect())
    }

    /// Gathers records `indices` packed: one tensor of every row, in place
    /// and in parallel, plus `row_splits`. Nothing is padded.
    pub fn gather(&self, indices: &[u64]) -> Result<Ragged, DatasetError> {
        self.gather_pooled(indices, None)
    }

    /// Gathers records `indices` straight into a dense padded batch
    /// (`[batch, max_len, *item_shape]`), each record decoded into its own
    /// padded row in one pass; as [`pad`] of [`RaggedDataset::gather`], without
    /// the packed copy. `pad_value` must be of the dataset's dtype.
    pub fn gather_padded<T: Element>(
        &self,
        indices: &[u64],
        max_len: Option<usize>,
        pad_value: T,
    ) -> Result<Padded, DatasetError> {
        check_dtype::<T>(self.dtype())?;
        self.gather_padded_bytes(indices, max_len, bytemuck::bytes_of(&pad_value))
    }

    /// [`RaggedDataset::gather_padded`] with the pad value as the bytes of one element.
    pub fn gather_padded_bytes(
        &self,
        indices: &[u64],
        max_len: Option<usize>,
        pad_element: &[u8],
    ) -> Result<Padded, DatasetError> {
        check_pad_element(self.dtype(), pad_element)?;
        let lens = self.byte_lengths(indices)?;
        let lengths: Vec<u64> = lens.iter().map(|&b| u64::from(b) / self.row_bytes() as u64).collect();
        let max_len = check_max_len(&lengths, max_len)?;
        let slot = padded_slot(max_len, self.row_bytes())?;
        let mut out = Tensor::zeros(self.dtype(), &padded_shape(indices.len(), max_len, self.item_shape()))?;
        let offsets: Vec<u64> = (0..indices.len() as u64).map(|k| k * slot as u64).collect();
        self.stores().gather_var(indices, out.as_bytes_mut(), &offsets, &lens)?;
        if pad_element.iter().any(|&b| b != 0) {
            for (dst, &len) in out.as_bytes_mut().chunks_exact_mut(slot.max(1)).zip(&lens) {
                fill_pattern(&mut dst[len as usize..], pad_element);
            }
        }
        Ok(Padded { values: out, lengths })
    }

    /// Record `index` as a `[rows, *item_shape]` tensor.
    pub fn get(&self, index: u64) -> Result<Tensor, DatasetError> {
        Ok(self.gather(&[index])?.values)
    }
}
