//! The reverse type mapping (`docs/import.md`, "From a table to Arrow"): a table
//! column's kind, dtype and shape to an Arrow field, and a gathered batch of
//! it to an Arrow array.
//!
//! | column | Arrow |
//! |---|---|
//! | fixed, shape `()` | the primitive of its dtype (`|b1` Boolean, `<f2` Float16, ...) |
//! | fixed, shape `(d0, ..., dn)` | `FixedSizeList<T>[d0 * ... * dn]`, extension `arrow.fixed_shape_tensor` |
//! | ragged | `LargeList<T>`, of `FixedSizeList`s nested per dimension when items have a shape |
//! | bytes | `LargeBinary` |
//! | utf8 | `LargeUtf8` |
//!
//! Fields are not nullable (a table holds no nulls); list items are the
//! conventional nullable `item` field, which is what readers expect of a
//! fixed-shape tensor's storage. Big-endian dtypes are converted to the
//! machine's order; a byte-string or void dtype is `FixedSizeBinary`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::types::{
    Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type,
    UInt32Type, UInt64Type,
};
use arrow_array::{
    ArrayRef, BooleanArray, FixedSizeBinaryArray, FixedSizeListArray, LargeBinaryArray, LargeListArray,
    LargeStringArray, PrimitiveArray,
};
use arrow_buffer::{Buffer, MutableBuffer, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field};

use super::error::ImportError;
use crate::dataset::{ByteOrder, DType, Kind};
use crate::table::{ColumnType, TableError};

/// The extension name readers know a fixed-shape tensor by.
pub const TENSOR_EXTENSION: &str = "arrow.fixed_shape_tensor";

/// What a column is, for the mapping: its kind, dtype, and the shape of a
/// record (fixed) or of an item row (ragged).
#[derive(Clone, Debug)]
pub(crate) struct ColumnLayout {
    pub name: String,
    pub kind: ColumnType,
    pub dtype: DType,
    pub shape: Vec<usize>,
}

fn refused(name: &str, reason: String) -> ImportError {
    ImportError::ColumnType { column: name.to_string(), reason }
}

/// The Arrow type of one element of `dtype`.
fn leaf_type(name: &str, dtype: DType) -> Result<DataType, ImportError> {
    let size = dtype.itemsize();
    let data_type = match (dtype.kind(), size) {
        (Kind::Bool, 1) => DataType::Boolean,
        (Kind::Int, 1) => DataType::Int8,
        (Kind::Int, 2) => DataType::Int16,
        (Kind::Int, 4) => DataType::Int32,
        (Kind::Int, 8) => DataType::Int64,
        (Kind::Uint, 1) => DataType::UInt8,
        (Kind::Uint, 2) => DataType::UInt16,
        (Kind::Uint, 4) => DataType::UInt32,
        (Kind::Uint, 8) => DataType::UInt64,
        (Kind::Float, 2) => DataType::Float16,
        (Kind::Float, 4) => DataType::Float32,
        (Kind::Float, 8) => DataType::Float64,
        (Kind::Bytes | Kind::Void, n) if n > 0 => {
            let n = i32::try_from(n).map_err(|_| refused(name, format!("dtype {dtype} is too wide for Arrow")))?;
            DataType::FixedSizeBinary(n)
        }
        _ => return Err(refused(name, format!("dtype {dtype} has no Arrow equivalent; export the other columns"))),
    };
    Ok(data_type)
}

/// `d` as an Arrow list size.
fn list_size(name: &str, d: usize) -> Result<i32, ImportError> {
    i32::try_from(d).map_err(|_| refused(name, format!("dimension {d} is larger than an Arrow list holds")))
}

/// `inner` in `FixedSizeList`s, one per dimension of `dims`, the last innermost.
fn nested_type(name: &str, inner: DataType, dims: &[usize]) -> Result<DataType, ImportError> {
    let mut data_type = inner;
    for &d in dims.iter().rev() {
        data_type = DataType::FixedSizeList(Arc::new(Field::new_list_field(data_type, true)), list_size(name, d)?);
    }
    Ok(data_type)
}

impl ColumnLayout {
    /// The Arrow field this column exports as.
    pub fn field(&self) -> Result<Field, ImportError> {
        let name = self.name.as_str();
        let field = match self.kind {
            ColumnType::Bytes => Field::new(name, DataType::LargeBinary, false),
            ColumnType::Utf8 => Field::new(name, DataType::LargeUtf8, false),
            ColumnType::Ragged => {
                let item = nested_type(name, leaf_type(name, self.dtype)?, &self.shape)?;
                Field::new(name, DataType::LargeList(Arc::new(Field::new_list_field(item, true))), false)
            }
            ColumnType::Fixed if self.shape.is_empty() => Field::new(name, leaf_type(name, self.dtype)?, false),
            ColumnType::Fixed => {
                let elements = self.elements(name)?;
                let data_type = nested_type(name, leaf_type(name, self.dtype)?, &[elements])?;
                Field::new(name, data_type, false).with_metadata(tensor_metadata(&self.shape))
            }
        };
        Ok(field)
    }

    /// Elements per record (fixed) or per item row (ragged).
    fn elements(&self, name: &str) -> Result<usize, ImportError> {
        let n = self.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        n.ok_or_else(|| refused(name, format!("shape {:?} overflows", self.shape)))
    }

    /// The Arrow array of `rows` records gathered back to back in `bytes`
    /// (a fixed column).
    pub fn fixed_array(&self, bytes: Buffer, rows: usize) -> Result<ArrayRef, ImportError> {
        let elements = self.elements(&self.name)?;
        let leaf = self.leaf_array(bytes, rows * elements)?;
        if self.shape.is_empty() {
            return Ok(leaf);
        }
        self.wrap(leaf, elements, rows)
    }

    /// The Arrow array of a ragged, bytes or text column's packed batch:
    /// every item row in `values`, record `k` (row `first + k` of the table)
    /// rows `splits[k]..splits[k + 1]`.
    pub fn ragged_array(&self, values: Buffer, splits: &[u64], first: u64) -> Result<ArrayRef, ImportError> {
        let offsets = self.offsets(splits)?;
        let array: ArrayRef = match self.kind {
            ColumnType::Bytes => Arc::new(LargeBinaryArray::try_new(offsets, values, None).map_err(|e| self.arrow(e))?),
            ColumnType::Utf8 => Arc::new(self.strings(offsets, values, splits, first)?),
            _ => {
                let items = *splits.last().unwrap_or(&0) as usize;
                let elements = self.elements(&self.name)?;
                let mut inner = self.leaf_array(values, items * elements)?;
                for (i, &d) in self.shape.iter().enumerate().rev() {
                    // Lists of dimension i: one per item and outer index.
                    inner = self.wrap(inner, d, items * self.shape[..i].iter().product::<usize>())?;
                }
                let item = Arc::new(Field::new_list_field(inner.data_type().clone(), true));
                Arc::new(LargeListArray::try_new(item, offsets, inner, None).map_err(|e| self.arrow(e))?)
            }
        };
        Ok(array)
    }

    /// A text column's array; a row that is not UTF-8 is
    /// [`TableError::NotUtf8`], naming the table's row.
    fn strings(
        &self,
        offsets: OffsetBuffer<i64>,
        values: Buffer,
        splits: &[u64],
        first: u64,
    ) -> Result<LargeStringArray, ImportError> {
        LargeStringArray::try_new(offsets, values.clone(), None).map_err(|e| {
            let bad =
                splits.windows(2).position(|w| std::str::from_utf8(&values[w[0] as usize..w[1] as usize]).is_err());
            match bad {
                Some(k) => TableError::NotUtf8 { column: self.name.clone(), row: first + k as u64 }.into(),
                None => self.arrow(e),
            }
        })
    }

    /// `splits` as Arrow's 64-bit offsets, checked.
    fn offsets(&self, splits: &[u64]) -> Result<OffsetBuffer<i64>, ImportError> {
        let wide = splits.iter().map(|&s| i64::try_from(s)).collect::<Result<Vec<i64>, _>>();
        let wide = wide.map_err(|_| refused(&self.name, "a row offset past i64".to_string()))?;
        if wide.is_empty() || wide[0] != 0 || wide.windows(2).any(|w| w[0] > w[1]) {
            return Err(refused(&self.name, "row offsets not ascending from 0".to_string()));
        }
        Ok(OffsetBuffer::new(ScalarBuffer::from(wide)))
    }

    /// `values` grouped `size` at a time into a list array of `len` lists.
    fn wrap(&self, values: ArrayRef, size: usize, len: usize) -> Result<ArrayRef, ImportError> {
        let field = Arc::new(Field::new_list_field(values.data_type().clone(), true));
        let size = list_size(&self.name, size)?;
        let array = FixedSizeListArray::try_new_with_length(field, size, values, None, len);
        Ok(Arc::new(array.map_err(|e| self.arrow(e))?))
    }

    /// `count` elements of the column's dtype in `bytes`, in the machine's order.
    fn leaf_array(&self, bytes: Buffer, count: usize) -> Result<ArrayRef, ImportError> {
        let size = self.dtype.itemsize();
        if bytes.len() != count * size {
            return Err(refused(&self.name, format!("{} bytes for {count} elements of {}", bytes.len(), self.dtype)));
        }
        let bytes = aligned(native_order(bytes, self.dtype));
        macro_rules! primitive {
            ($t:ty) => {
                Arc::new(PrimitiveArray::<$t>::new(ScalarBuffer::new(bytes, 0, count), None)) as ArrayRef
            };
        }
        let array = match leaf_type(&self.name, self.dtype)? {
            DataType::Boolean => Arc::new(BooleanArray::from_iter(bytes.iter().map(|&b| Some(b != 0)))) as ArrayRef,
            DataType::Int8 => primitive!(Int8Type),
            DataType::Int16 => primitive!(Int16Type),
            DataType::Int32 => primitive!(Int32Type),
            DataType::Int64 => primitive!(Int64Type),
            DataType::UInt8 => primitive!(UInt8Type),
            DataType::UInt16 => primitive!(UInt16Type),
            DataType::UInt32 => primitive!(UInt32Type),
            DataType::UInt64 => primitive!(UInt64Type),
            DataType::Float16 => primitive!(Float16Type),
            DataType::Float32 => primitive!(Float32Type),
            DataType::Float64 => primitive!(Float64Type),
            DataType::FixedSizeBinary(n) => {
                Arc::new(FixedSizeBinaryArray::try_new(n, bytes, None).map_err(|e| self.arrow(e))?) as ArrayRef
            }
            other => return Err(refused(&self.name, format!("no array of {other}"))),
        };
        Ok(array)
    }

    fn arrow(&self, e: arrow_schema::ArrowError) -> ImportError {
        refused(&self.name, format!("building its Arrow array: {e}"))
    }
}

/// The field metadata of a fixed-shape tensor of `shape` (row-major).
fn tensor_metadata(shape: &[usize]) -> HashMap<String, String> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    HashMap::from([
        ("ARROW:extension:name".to_string(), TENSOR_EXTENSION.to_string()),
        ("ARROW:extension:metadata".to_string(), format!("{{\"shape\":[{}]}}", dims.join(","))),
    ])
}

/// `bytes` with every element of `dtype` in the machine's byte order: a
/// big-endian number's bytes reversed (one copy); anything else as it is.
fn native_order(bytes: Buffer, dtype: DType) -> Buffer {
    let size = dtype.itemsize();
    let numeric = matches!(dtype.kind(), Kind::Int | Kind::Uint | Kind::Float);
    if !numeric || size == 1 || dtype.byte_order() == ByteOrder::NATIVE {
        return bytes;
    }
    let mut swapped = MutableBuffer::from_len_zeroed(bytes.len());
    swapped.as_slice_mut().copy_from_slice(&bytes);
    for element in swapped.as_slice_mut().chunks_exact_mut(size) {
        element.reverse();
    }
    swapped.into()
}

/// `bytes` in a buffer aligned for any primitive (Arrow's own allocations
/// are; a copy otherwise, so an array never panics on a misaligned buffer).
pub(crate) fn aligned(bytes: Buffer) -> Buffer {
    if bytes.as_ptr().align_offset(std::mem::align_of::<u64>()) == 0 {
        return bytes;
    }
    let mut copy = MutableBuffer::from_len_zeroed(bytes.len());
    copy.as_slice_mut().copy_from_slice(&bytes);
    copy.into()
}
