//! [`RaggedDataset`]: variable-length records (token sequences, waveforms,
//! point sets) read back packed, `(values, row_splits)`, or padded; and
//! [`pad`], the separate, visible step from packed to dense.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use super::dtype::{DType, Element};
use super::error::DatasetError;
use super::schema::Schema;
use super::shards::{ShardRef, Shards};
use super::tensor::{Pool, Tensor, check_dtype};
use crate::ReadMode;
use crate::io::Vfs;

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
/// silent truncation. `pad_value` must be of the values' dtype.
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
    let lengths: Vec<u64> = row_splits.windows(2).map(|w| w[1] - w[0]).collect();
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
#[derive(Debug)]
pub struct RaggedDataset {
    schema: Schema,
    row_bytes: usize,
    shards: Shards,
}

impl RaggedDataset {
    /// Opens the ragged dataset in directory `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<RaggedDataset, DatasetError> {
        RaggedDataset::open_in(Arc::new(crate::io::real::RealFs), path.as_ref())
    }

    /// Opens with reads in `read_mode` (the default is [`ReadMode::Auto`]).
    pub fn open_with(path: impl AsRef<Path>, read_mode: ReadMode) -> Result<RaggedDataset, DatasetError> {
        RaggedDataset::open_in_with(Arc::new(crate::io::real::RealFs), path.as_ref(), read_mode)
    }

    /// Opens on any filesystem implementation.
    pub fn open_in(vfs: Arc<dyn Vfs>, path: &Path) -> Result<RaggedDataset, DatasetError> {
        RaggedDataset::open_in_with(vfs, path, ReadMode::default())
    }

    /// Opens the dataset published at `url` (`s3://bucket/prefix`; see
    /// [`Zrecord::open_url`]).
    #[cfg(feature = "remote")]
    pub fn open_url(url: &str, read_mode: ReadMode) -> Result<RaggedDataset, DatasetError> {
        let (vfs, root) = super::remote_vfs(url)?;
        RaggedDataset::open_in_with(vfs, &root, read_mode)
    }

    /// Opens on any filesystem implementation, with reads in `read_mode`.
    pub fn open_in_with(vfs: Arc<dyn Vfs>, path: &Path, read_mode: ReadMode) -> Result<RaggedDataset, DatasetError> {
        let shards = Shards::open_in(vfs, path, read_mode)?;
        let schema = shards.schema().clone();
        if !schema.is_ragged() {
            return Err(DatasetError::WrongKind { path: path.to_path_buf(), ragged: false });
        }
        let row_bytes = schema.unit_bytes()?;
        Ok(RaggedDataset { schema, row_bytes, shards })
    }

    /// The dataset's directory.
    pub fn path(&self) -> &Path {
        self.shards.path()
    }

    /// The schema.
    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.schema.dtype
    }

    /// The shape of one row.
    pub fn item_shape(&self) -> &[usize] {
        self.schema.shape()
    }

    /// Bytes per row.
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

    /// True if the dataset is sharded (has a `shards.json` manifest).
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

    /// The byte length of each record of `indices`, checked to be whole rows.
    fn byte_lengths(&self, indices: &[u64]) -> Result<Vec<u32>, DatasetError> {
        let mut lens = vec![0u32; indices.len()];
        self.shards.lengths(indices, &mut lens)?;
        for (&index, &bytes) in indices.iter().zip(&lens) {
            if !(bytes as usize).is_multiple_of(self.row_bytes) {
                return Err(DatasetError::PartialRow { index, bytes, row_bytes: self.row_bytes });
            }
        }
        Ok(lens)
    }

    /// The row count of each record of `indices`.
    pub fn row_counts(&self, indices: &[u64]) -> Result<Vec<u64>, DatasetError> {
        Ok(self.byte_lengths(indices)?.iter().map(|&b| u64::from(b) / self.row_bytes as u64).collect())
    }

    /// Gathers records `indices` packed: one tensor of every row, in place
    /// and in parallel, plus `row_splits`. Nothing is padded.
    pub fn gather(&self, indices: &[u64]) -> Result<Ragged, DatasetError> {
        self.gather_pooled(indices, None)
    }

    pub(crate) fn gather_pooled(&self, indices: &[u64], pool: Option<&Arc<Pool>>) -> Result<Ragged, DatasetError> {
        let lens = self.byte_lengths(indices)?;
        let mut offsets = Vec::with_capacity(indices.len());
        let mut row_splits = Vec::with_capacity(indices.len() + 1);
        let mut at = 0u64;
        row_splits.push(0);
        for &len in &lens {
            offsets.push(at);
            at += u64::from(len);
            row_splits.push(at / self.row_bytes as u64);
        }
        let total_rows = usize::try_from(at / self.row_bytes as u64)
            .map_err(|_| DatasetError::InvalidArgument("batch too large".into()))?;
        let shape: Vec<usize> = std::iter::once(total_rows).chain(self.item_shape().iter().copied()).collect();
        let mut values = Tensor::pooled(self.dtype(), &shape, pool)?;
        self.shards.gather_var(indices, values.as_bytes_mut(), &offsets, &lens)?;
        Ok(Ragged { values, row_splits })
    }

    /// The records `indices` into `dst`, record `k` at `offsets[k]`, of
    /// `lens[k]` bytes (the store's `gather_var`).
    fn gather_var_into(
        &self,
        indices: &[u64],
        dst: &mut [u8],
        offsets: &[u64],
        lens: &[u32],
    ) -> Result<(), DatasetError> {
        self.shards.gather_var(indices, dst, offsets, lens)
    }

    /// One packed batch of several datasets' records, part after part
    /// (a mixture's batch), each decoded straight into its place. The
    /// datasets must share dtype and item shape. An error names the part.
    pub(crate) fn gather_parts(
        parts: &[(&RaggedDataset, &[u64])],
        pool: Option<&Arc<Pool>>,
    ) -> Result<Ragged, (usize, DatasetError)> {
        let Some(&(first, _)) = parts.first() else {
            return Err((0, DatasetError::InvalidArgument("a batch of no part".into())));
        };
        let records: usize = parts.iter().map(|(_, indices)| indices.len()).sum();
        let mut lens = Vec::with_capacity(parts.len());
        let mut row_splits = Vec::with_capacity(records + 1);
        let mut at = 0u64;
        row_splits.push(0);
        for (k, &(dataset, indices)) in parts.iter().enumerate() {
            if (dataset.dtype(), dataset.item_shape()) != (first.dtype(), first.item_shape()) {
                let why = format!("{} holds other rows than {}", dataset.path().display(), first.path().display());
                return Err((k, DatasetError::InvalidArgument(why)));
            }
            let part = dataset.byte_lengths(indices).map_err(|e| (k, e))?;
            for &len in &part {
                at += u64::from(len);
                row_splits.push(at / first.row_bytes as u64);
            }
            lens.push(part);
        }
        let total_rows = usize::try_from(at / first.row_bytes as u64)
            .map_err(|_| (0, DatasetError::InvalidArgument("batch too large".into())))?;
        let shape: Vec<usize> = std::iter::once(total_rows).chain(first.item_shape().iter().copied()).collect();
        let mut values = Tensor::pooled(first.dtype(), &shape, pool).map_err(|e| (0, e))?;
        let mut slots = Vec::with_capacity(parts.len());
        let mut rest = values.as_bytes_mut();
        for (k, (&(dataset, indices), part)) in parts.iter().zip(&lens).enumerate() {
            let bytes: usize = part.iter().map(|&l| l as usize).sum();
            let (dst, tail) = rest.split_at_mut(bytes);
            let mut offsets = Vec::with_capacity(part.len());
            let mut offset = 0u64;
            for &len in part {
                offsets.push(offset);
                offset += u64::from(len);
            }
            slots.push(Slot { part: k, dataset, indices, lens: part, offsets, dst });
            rest = tail;
        }
        gather_slots(&mut slots)?;
        Ok(Ragged { values, row_splits })
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
        let lengths: Vec<u64> = lens.iter().map(|&b| u64::from(b) / self.row_bytes as u64).collect();
        let max_len = check_max_len(&lengths, max_len)?;
        let slot = padded_slot(max_len, self.row_bytes)?;
        let mut out = Tensor::zeros(self.dtype(), &padded_shape(indices.len(), max_len, self.item_shape()))?;
        let offsets: Vec<u64> = (0..indices.len() as u64).map(|k| k * slot as u64).collect();
        self.shards.gather_var(indices, out.as_bytes_mut(), &offsets, &lens)?;
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

/// A part of a [`RaggedDataset::gather_parts`], its bytes laid out.
struct Slot<'a> {
    part: usize,
    dataset: &'a RaggedDataset,
    indices: &'a [u64],
    lens: &'a [u32],
    offsets: Vec<u64>,
    dst: &'a mut [u8],
}

/// Gathers every slot, the parts at once (halves joined on rayon's pool).
fn gather_slots(slots: &mut [Slot<'_>]) -> Result<(), (usize, DatasetError)> {
    match slots {
        [] => Ok(()),
        [s] => s.dataset.gather_var_into(s.indices, s.dst, &s.offsets, s.lens).map_err(|e| (s.part, e)),
        _ => {
            let (a, b) = slots.split_at_mut(slots.len() / 2);
            let (ra, rb) = crate::sync::join(|| gather_slots(a), || gather_slots(b));
            ra.and(rb)
        }
    }
}
