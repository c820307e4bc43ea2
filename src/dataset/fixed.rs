//! [`Dataset`]: fixed-shape records over a store, read-only, typed against
//! its schema; [`FixedKind`], what a fixed record is to the dataset core
//! (`column.rs`): one row of the schema's shape, read at a fixed stride.

use super::column::{ColumnKind, DatasetOf, Sealed};
use super::dtype::Element;
use super::error::DatasetError;
use super::tensor::{Tensor, check_dtype};

/// The kind of a fixed-shape column: every record one row of the schema's
/// shape; a batch is a [`Tensor`] of shape `[n, *shape]`.
#[derive(Debug)]
pub struct FixedKind;

impl Sealed for FixedKind {}

impl ColumnKind for FixedKind {
    const RAGGED: bool = false;
    const ROWS: &'static str = "records";
    type Lengths = ();
    type Batch = Tensor;

    fn lengths(_: &Dataset, _: &[u64]) -> Result<(), DatasetError> {
        Ok(())
    }

    fn rows(_: &Dataset, indices: &[u64], (): &()) -> u64 {
        indices.len() as u64
    }

    fn read(dataset: &Dataset, indices: &[u64], (): &(), dst: &mut [u8]) -> Result<(), DatasetError> {
        dataset.gather_bytes(indices, dst)
    }

    fn batch(values: Tensor, _: usize, _: Vec<()>) -> Tensor {
        values
    }
}

/// A fixed-shape dataset: every record is one sample of the schema's dtype
/// and shape. Opened read-only (no lock; many processes may read while one
/// writer appends, see [`DatasetOf::refresh`]).
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
pub type Dataset = DatasetOf<FixedKind>;

impl DatasetOf<FixedKind> {
    /// The shape of one record.
    pub fn shape(&self) -> &[usize] {
        self.schema().shape()
    }

    /// The shape of a batch of `n` records: `[n, *shape]`.
    pub fn batch_shape(&self, n: usize) -> Vec<usize> {
        self.rows_shape(n)
    }

    /// Gathers records `indices` into `dst`, which must be exactly
    /// `indices.len() * row_bytes()` bytes: record `k` at
    /// `dst[k * row_bytes..]`. Decoded in parallel, straight into `dst`.
    pub fn gather_bytes(&self, indices: &[u64], dst: &mut [u8]) -> Result<(), DatasetError> {
        let need = indices.len().checked_mul(self.row_bytes());
        if need != Some(dst.len()) {
            return Err(DatasetError::ShapeMismatch(format!(
                "{} records of {} bytes need {} bytes, the buffer has {}",
                indices.len(),
                self.row_bytes(),
                need.map_or_else(|| "more than usize::MAX".to_string(), |n| n.to_string()),
                dst.len()
            )));
        }
        self.stores().gather(indices, dst, self.row_bytes())
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
