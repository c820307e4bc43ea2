//! [`Dataset`]: fixed-shape records over a store, read-only, typed against
//! its schema.

use std::path::Path;
use std::sync::Arc;

use super::dtype::{DType, Element};
use super::error::DatasetError;
use super::schema::Schema;
use super::shards::{ShardRef, Shards};
use super::tensor::{Pool, Tensor, check_dtype};
use crate::ReadMode;
use crate::io::Vfs;

/// A fixed-shape dataset: every record is one sample of the schema's dtype
/// and shape. Opened read-only (no lock; many processes may read while one
/// writer appends, see [`Dataset::refresh`]).
///
/// ```
/// use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
/// let dir = tempfile::tempdir()?;
/// let data: Vec<f32> = (0..12).map(|x| x as f32).collect();
/// write_dataset(dir.path(), &data, &[3], &WriteOptions::default())?; // 4 records of 3 floats
/// let ds = Dataset::open(dir.path())?;
/// assert_eq!((ds.len(), ds.shape()), (4, &[3][..]));
/// let mut batch = [0f32; 6];
/// ds.gather_into(&[3, 1], &mut batch)?;
/// assert_eq!(batch, [9.0, 10.0, 11.0, 3.0, 4.0, 5.0]);
/// let owned = ds.gather(&[0, 2])?; // carries its shape
/// assert_eq!(owned.shape(), &[2, 3]);
/// assert!(ds.gather_into(&[0], &mut [0i32; 3]).is_err()); // the dataset holds <f4
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Dataset {
    schema: Schema,
    record_bytes: usize,
    shards: Shards,
}

impl Dataset {
    /// Opens the dataset in directory `path` (a store and its `schema.json`).
    pub fn open(path: impl AsRef<Path>) -> Result<Dataset, DatasetError> {
        Dataset::open_in(Arc::new(crate::io::real::RealFs), path.as_ref())
    }

    /// Opens with reads in `read_mode` (the default is [`ReadMode::Auto`]).
    pub fn open_with(path: impl AsRef<Path>, read_mode: ReadMode) -> Result<Dataset, DatasetError> {
        Dataset::open_in_with(Arc::new(crate::io::real::RealFs), path.as_ref(), read_mode)
    }

    /// Opens on any filesystem implementation.
    pub fn open_in(vfs: Arc<dyn Vfs>, path: &Path) -> Result<Dataset, DatasetError> {
        Dataset::open_in_with(vfs, path, ReadMode::default())
    }

    /// Opens the dataset published at `url` (`s3://bucket/prefix`; see
    /// [`Zrecord::open_url`]).
    #[cfg(feature = "remote")]
    pub fn open_url(url: &str, read_mode: ReadMode) -> Result<Dataset, DatasetError> {
        let (vfs, root) = super::remote_vfs(url)?;
        Dataset::open_in_with(vfs, &root, read_mode)
    }

    /// Opens on any filesystem implementation, with reads in `read_mode`.
    pub fn open_in_with(vfs: Arc<dyn Vfs>, path: &Path, read_mode: ReadMode) -> Result<Dataset, DatasetError> {
        let shards = Shards::open_in(vfs, path, read_mode)?;
        let schema = shards.schema().clone();
        if schema.is_ragged() {
            return Err(DatasetError::WrongKind { path: path.to_path_buf(), ragged: true });
        }
        let record_bytes = schema.unit_bytes()?;
        Ok(Dataset { schema, record_bytes, shards })
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

    /// The shape of one record.
    pub fn shape(&self) -> &[usize] {
        self.schema.shape()
    }

    /// Bytes per record.
    pub fn record_bytes(&self) -> usize {
        self.record_bytes
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

    /// The shape of a batch of `n` records: `[n, *shape]`.
    pub fn batch_shape(&self, n: usize) -> Vec<usize> {
        std::iter::once(n).chain(self.shape().iter().copied()).collect()
    }

    /// Gathers records `indices` into `dst`, which must be exactly
    /// `indices.len() * record_bytes()` bytes: record `k` at
    /// `dst[k * record_bytes..]`. Decoded in parallel, straight into `dst`.
    pub fn gather_bytes(&self, indices: &[u64], dst: &mut [u8]) -> Result<(), DatasetError> {
        let need = indices.len().checked_mul(self.record_bytes);
        if need != Some(dst.len()) {
            return Err(DatasetError::ShapeMismatch(format!(
                "{} records of {} bytes need {} bytes, the buffer has {}",
                indices.len(),
                self.record_bytes,
                need.map_or_else(|| "more than usize::MAX".to_string(), |n| n.to_string()),
                dst.len()
            )));
        }
        self.shards.gather(indices, dst, self.record_bytes)
    }

    /// Gathers records `indices` into `dst` as elements of `T`, which must be
    /// the dataset's dtype ([`DatasetError::DtypeMismatch`] otherwise); `dst`
    /// holds exactly `indices.len()` records.
    pub fn gather_into<T: Element>(&self, indices: &[u64], dst: &mut [T]) -> Result<(), DatasetError> {
        check_dtype::<T>(self.dtype())?;
        self.gather_bytes(indices, bytemuck::cast_slice_mut(dst))
    }

    /// Gathers records `indices` into a new tensor of shape
    /// `[indices.len(), *shape]`.
    pub fn gather(&self, indices: &[u64]) -> Result<Tensor, DatasetError> {
        self.gather_pooled(indices, None)
    }

    pub(crate) fn gather_pooled(&self, indices: &[u64], pool: Option<&Arc<Pool>>) -> Result<Tensor, DatasetError> {
        let mut out = Tensor::pooled(self.dtype(), &self.batch_shape(indices.len()), pool)?;
        self.gather_bytes(indices, out.as_bytes_mut())?;
        Ok(out)
    }

    /// One batch of several datasets' records, part after part (a
    /// mixture's batch), each gathered straight into its place. The
    /// datasets must share dtype and shape. An error names the part.
    pub(crate) fn gather_parts(
        parts: &[(&Dataset, &[u64])],
        pool: Option<&Arc<Pool>>,
    ) -> Result<Tensor, (usize, DatasetError)> {
        let Some(&(first, _)) = parts.first() else {
            return Err((0, DatasetError::InvalidArgument("a batch of no part".into())));
        };
        for (k, &(dataset, _)) in parts.iter().enumerate() {
            if (dataset.dtype(), dataset.shape()) != (first.dtype(), first.shape()) {
                let why = format!("{} holds other records than {}", dataset.path().display(), first.path().display());
                return Err((k, DatasetError::InvalidArgument(why)));
            }
        }
        let records = parts.iter().map(|(_, indices)| indices.len()).sum();
        let mut out = Tensor::pooled(first.dtype(), &first.batch_shape(records), pool).map_err(|e| (0, e))?;
        let mut slots = Vec::with_capacity(parts.len());
        let mut rest = out.as_bytes_mut();
        for (k, &(dataset, indices)) in parts.iter().enumerate() {
            let (dst, tail) = rest.split_at_mut(indices.len() * first.record_bytes);
            slots.push((k, dataset, indices, dst));
            rest = tail;
        }
        gather_slots(&mut slots)?;
        Ok(out)
    }

    /// Record `index`, a tensor of the record's shape.
    pub fn get(&self, index: u64) -> Result<Tensor, DatasetError> {
        let mut out = self.gather(&[index])?;
        out.reshape(self.shape())?;
        Ok(out)
    }

    /// Record `index` into `dst` (exactly one record of `T`).
    pub fn get_into<T: Element>(&self, index: u64, dst: &mut [T]) -> Result<(), DatasetError> {
        self.gather_into(&[index], dst)
    }
}

/// A part of a [`Dataset::gather_parts`]: its number, dataset, indices, bytes.
type Slot<'a> = (usize, &'a Dataset, &'a [u64], &'a mut [u8]);

/// Gathers every slot, the parts at once (halves joined on rayon's pool),
/// so that the pool balances the parts' reads rather than finishing each
/// part's before starting the next.
fn gather_slots(slots: &mut [Slot<'_>]) -> Result<(), (usize, DatasetError)> {
    match slots {
        [] => Ok(()),
        [(k, dataset, indices, dst)] => dataset.gather_bytes(indices, dst).map_err(|e| (*k, e)),
        _ => {
            let (a, b) = slots.split_at_mut(slots.len() / 2);
            let (ra, rb) = crate::sync::join(|| gather_slots(a), || gather_slots(b));
            ra.and(rb)
        }
    }
}
