//! Any Python object with `__arrow_c_stream__` (a pyarrow Table or
//! RecordBatchReader, a polars DataFrame, a DuckDB result, a `datasets`
//! Dataset) as an import [`Source`], through the Arrow C stream interface
//! (the PyCapsule `arrow_array_stream`), and `write_table`'s Arrow path:
//! the stream's batches into a table's columns, committed once at the end.
//!
//! The column mapping here is the small one the Python binding needs until
//! the importer engine (`loaderx::import`) is called in its place: integer,
//! float and bool scalars and fixed-size lists of them become fixed
//! columns, lists and large lists of them ragged ones, binary bytes
//! columns, strings text columns (views and dictionaries cast to those);
//! a null is refused, naming the column and the row.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchReader};
use arrow_buffer::Buffer;
use arrow_schema::{DataType, Field, SchemaRef};
use loaderx::dataset::{DType, WriteOptions};
use loaderx::import::{ImportError, Position, Source};
use loaderx::table::{ColumnSpec, ColumnType, TableWriter};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::{table_error, type_error, value_error};
use crate::fork;
use crate::table::{Part, append_rows, column_codecs, writer};

/// The name the Arrow PyCapsule interface gives a stream's capsule.
const STREAM_CAPSULE: &std::ffi::CStr = c"arrow_array_stream";

/// The path an error names for a Python stream (it has no file).
const STREAM_PATH: &str = "<__arrow_c_stream__>";

/// The Arrow C stream `obj.__arrow_c_stream__()` exports, taken over.
fn stream_reader(obj: &Bound<'_, PyAny>) -> PyResult<RecordBatchStreamReader> {
    let capsule = obj.call_method0("__arrow_c_stream__")?.cast_into::<PyCapsule>().map_err(|_| {
        type_error("__arrow_c_stream__ returned no PyCapsule: the object does not follow the Arrow PyCapsule interface")
    })?;
    let pointer = capsule.pointer_checked(Some(STREAM_CAPSULE))?;
    // SAFETY: the Arrow PyCapsule interface makes a capsule named
    // "arrow_array_stream" (the name `pointer_checked` just checked) point
    // at a valid, unreleased `ArrowArrayStream`, alive while the capsule
    // is, which `capsule` keeps for this call. `from_raw` moves the struct
    // out and leaves a released one (its `release` null) in its place, so
    // the capsule's destructor frees the struct's memory and releases
    // nothing: the stream is the reader's alone.
    let reader = unsafe { RecordBatchStreamReader::from_raw(pointer.as_ptr().cast::<FFI_ArrowArrayStream>()) };
    reader.map_err(|e| value_error(format!("the Arrow stream could not be read: {e}")))
}

/// An Arrow C stream as a [`Source`]. A Python stream has no identity a
/// rerun could check, so its fingerprint is its schema.
pub struct StreamSource {
    reader: RecordBatchStreamReader,
    schema: SchemaRef,
    /// Rows read from the stream (for error positions).
    rows: u64,
    /// The rest of a batch `skip` cut.
    pending: Option<RecordBatch>,
}

impl StreamSource {
    fn new(reader: RecordBatchStreamReader) -> StreamSource {
        let schema = reader.schema();
        StreamSource { reader, schema, rows: 0, pending: None }
    }
}

impl Source for StreamSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn fingerprint(&self) -> String {
        format!("arrow-c-stream {:?}", self.schema.fields())
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ImportError> {
        if let Some(batch) = self.pending.take() {
            return Ok(Some(batch));
        }
        match self.reader.next() {
            None => Ok(None),
            Some(Ok(batch)) => {
                self.rows += batch.num_rows() as u64;
                Ok(Some(batch))
            }
            Some(Err(e)) => Err(ImportError::BadInput {
                path: PathBuf::from(STREAM_PATH),
                at: Position::Row(self.rows),
                reason: format!("the stream failed: {e}"),
            }),
        }
    }

    fn skip(&mut self, mut rows: u64) -> Result<(), ImportError> {
        while rows > 0 {
            let Some(batch) = self.next_batch()? else {
                return Err(ImportError::InvalidArgument(format!(
                    "the stream ended {rows} rows before the rows the table already holds from it: it changed since \
                     the import began"
                )));
            };
            let n = batch.num_rows() as u64;
            if n > rows {
                self.pending = Some(batch.slice(rows as usize, (n - rows) as usize));
                return Ok(());
            }
            rows -= n;
        }
        Ok(())
    }
}

/// The NumPy dtype of an Arrow scalar type, if a column can hold it.
fn element(data_type: &DataType) -> Option<&'static str> {
    Some(match data_type {
        DataType::Boolean => "|b1",
        DataType::Int8 => "|i1",
        DataType::Int16 => "<i2",
        DataType::Int32 => "<i4",
        DataType::Int64 => "<i8",
        DataType::UInt8 => "|u1",
        DataType::UInt16 => "<u2",
        DataType::UInt32 => "<u4",
        DataType::UInt64 => "<u8",
        DataType::Float16 => "<f2",
        DataType::Float32 => "<f4",
        DataType::Float64 => "<f8",
        _ => return None,
    })
}

/// The element dtype and shape of a scalar or (nested) fixed-size list.
fn fixed_shape(data_type: &DataType) -> Option<(DType, Vec<usize>)> {
    if let Some(e) = element(data_type) {
        return Some((DType::parse(e).ok()?, Vec::new()));
    }
    let DataType::FixedSizeList(field, n) = data_type else { return None };
    let (dtype, mut shape) = fixed_shape(field.data_type())?;
    shape.insert(0, usize::try_from(*n).ok()?);
    Some((dtype, shape))
}

/// A field's column: its spec, and the Arrow type its arrays are cast to.
fn column(field: &Field) -> Result<(ColumnSpec, DataType), ImportError> {
    let name = field.name().as_str();
    let data_type = match field.data_type() {
        DataType::Dictionary(_, values) => values.as_ref(),
        other => other,
    };
    if let Some((dtype, shape)) = fixed_shape(data_type) {
        return Ok((ColumnSpec::fixed(name, dtype, &shape), data_type.clone()));
    }
    Ok(match data_type {
        DataType::List(f) | DataType::LargeList(f) | DataType::ListView(f) | DataType::LargeListView(f) => {
            let Some((dtype, shape)) = fixed_shape(f.data_type()) else {
                return Err(unsupported(name, data_type));
            };
            (ColumnSpec::ragged(name, dtype, &shape), DataType::LargeList(f.clone()))
        }
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => {
            (ColumnSpec::bytes(name), DataType::LargeBinary)
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => (ColumnSpec::utf8(name), DataType::LargeUtf8),
        other => return Err(unsupported(name, other)),
    })
}

/// An array the stream gave that breaks the Arrow format's rules.
fn malformed(column: &str, reason: &str) -> ImportError {
    ImportError::BadInput {
        path: PathBuf::from(STREAM_PATH),
        at: Position::File,
        reason: format!("column {column:?}: not a valid Arrow array: {reason}"),
    }
}

fn unsupported(name: &str, data_type: &DataType) -> ImportError {
    ImportError::ColumnType {
        column: name.to_string(),
        reason: format!(
            "Arrow type {data_type} has no column kind here (numbers, fixed-size lists and lists of numbers, binary, \
             strings); select or cast the columns first"
        ),
    }
}

/// A column's values of one batch, owned, as the writer takes them.
enum Owned {
    Fixed(Buffer, usize),
    Ragged { values: Buffer, offsets: Vec<usize> },
    Binary(ArrayRef),
    Text(ArrayRef),
}

impl Owned {
    fn part(&self) -> Part<'_> {
        match self {
            Owned::Fixed(bytes, row_bytes) => Part::Fixed(bytes.as_slice(), *row_bytes),
            Owned::Ragged { values, offsets } => {
                Part::Items(offsets.windows(2).map(|w| &values.as_slice()[w[0]..w[1]]).collect())
            }
            Owned::Binary(a) => Part::Items(a.as_binary::<i64>().iter().map(|v| v.unwrap_or_default()).collect()),
            Owned::Text(a) => {
                Part::Items(a.as_string::<i64>().iter().map(|v| v.unwrap_or_default().as_bytes()).collect())
            }
        }
    }
}

/// The bytes of a scalar or fixed-size-list array's elements, in row order.
fn leaf_bytes(column: &str, array: &dyn Array) -> Result<Buffer, ImportError> {
    if array.null_count() > 0 {
        return Err(ImportError::ColumnType {
            column: column.to_string(),
            reason: "a null inside a list: give lists without nulls".to_string(),
        });
    }
    match array.data_type() {
        DataType::Boolean => Ok(Buffer::from_vec(array.as_boolean().values().iter().map(u8::from).collect())),
        DataType::FixedSizeList(_, _) => leaf_bytes(column, array.as_fixed_size_list().values().as_ref()),
        data_type => {
            let width = data_type.primitive_width().ok_or_else(|| unsupported(column, data_type))?;
            let data = array.to_data();
            let (start, len) = (data.offset() * width, array.len() * width);
            match data.buffers().first() {
                Some(values) if start + len <= values.len() => Ok(values.slice_with_length(start, len)),
                _ => Err(malformed(column, "its values buffer is shorter than its length")),
            }
        }
    }
}

/// Batch column `array` (rows from `first` of the stream) of `spec`,
/// cast to `target`; a null refused.
fn owned(array: &ArrayRef, spec: &ColumnSpec, target: &DataType, first: u64) -> Result<Owned, ImportError> {
    let column = spec.name.as_str();
    if let Some(nulls) = array.logical_nulls().filter(|n| n.null_count() > 0) {
        let row = nulls.iter().position(|valid| !valid).unwrap_or(0) as u64;
        return Err(ImportError::Null { column: column.to_string(), row: first + row });
    }
    let array = if array.data_type() == target {
        array.clone()
    } else {
        arrow_cast::cast(array, target)
            .map_err(|e| ImportError::ColumnType { column: column.to_string(), reason: e.to_string() })?
    };
    let row_bytes = spec.shape.iter().product::<usize>() * spec.dtype.itemsize();
    Ok(match spec.kind {
        ColumnType::Fixed => Owned::Fixed(leaf_bytes(column, array.as_ref())?, row_bytes),
        ColumnType::Ragged => {
            let list = array.as_list::<i64>();
            let given = list.value_offsets();
            let (base, end) = (given.first().copied().unwrap_or(0), given.last().copied().unwrap_or(0));
            if base < 0 || given.windows(2).any(|w| w[0] > w[1]) || end as usize > list.values().len() {
                return Err(malformed(column, "its list offsets are not increasing within its values"));
            }
            let offsets = given.iter().map(|&o| (o - base) as usize * row_bytes).collect();
            let values = list.values().slice(base as usize, (end - base) as usize);
            Owned::Ragged { values: leaf_bytes(column, values.as_ref())?, offsets }
        }
        ColumnType::Bytes => Owned::Binary(array),
        ColumnType::Utf8 => Owned::Text(array),
    })
}

/// Every batch of `source` into `writer`, committed once at the end.
/// Returns the rows written.
// The importer engine (`loaderx::import::import`) takes this function's
// place once it is in: resumable commits and the full type mapping.
fn copy(
    source: &mut dyn Source,
    writer: &mut TableWriter,
    columns: &[(ColumnSpec, DataType)],
) -> Result<u64, ImportError> {
    let mut rows = 0u64;
    while let Some(batch) = source.next_batch()? {
        let owned: Vec<Owned> = batch
            .columns()
            .iter()
            .zip(columns)
            .map(|(array, (spec, target))| owned(array, spec, target, rows))
            .collect::<Result<_, _>>()?;
        let parts: Vec<Part<'_>> = owned.iter().map(Owned::part).collect();
        append_rows(writer, &parts, batch.num_rows())?;
        rows += batch.num_rows() as u64;
    }
    writer.commit()?;
    Ok(rows)
}

/// An import error as its Python exception.
fn import_error(py: Python<'_>, e: &ImportError) -> PyErr {
    match e {
        ImportError::Table(e) => table_error(py, e),
        ImportError::ColumnType { .. } => type_error(e.to_string()),
        _ => value_error(e.to_string()),
    }
}

/// `write_table` of an object with `__arrow_c_stream__`.
pub fn write(
    py: Python<'_>,
    dest: &Path,
    obj: &Bound<'_, PyAny>,
    codecs: Option<HashMap<String, String>>,
    mode: Option<&str>,
    opts: &WriteOptions,
) -> PyResult<u64> {
    let mut source = StreamSource::new(stream_reader(obj)?);
    let schema = source.schema();
    let columns: Vec<(ColumnSpec, DataType)> =
        schema.fields().iter().map(|f| column(f)).collect::<Result<_, _>>().map_err(|e| import_error(py, &e))?;
    if columns.is_empty() {
        return Err(value_error("the Arrow stream has no columns"));
    }
    let mut specs: Vec<ColumnSpec> = columns.iter().map(|(s, _)| s.clone()).collect();
    column_codecs(py, &mut specs, codecs)?;
    let columns: Vec<(ColumnSpec, DataType)> = specs.into_iter().zip(columns).map(|(s, (_, t))| (s, t)).collect();
    let specs: Vec<ColumnSpec> = columns.iter().map(|(s, _)| s.clone()).collect();
    let mut writer = writer(py, dest, &specs, mode, opts)?;
    let rows = py.detach(|| fork::run(|| copy(&mut source, &mut writer, &columns)))?;
    rows.map_err(|e| import_error(py, &e))
}

/// The row counts of the batches of `obj`'s Arrow stream read through the
/// import source, after skipping `skip` rows (for the tests of the source).
#[pyfunction]
#[pyo3(signature = (obj, skip = 0))]
pub fn _arrow_stream_rows(py: Python<'_>, obj: &Bound<'_, PyAny>, skip: u64) -> PyResult<(String, Vec<usize>)> {
    let mut source = StreamSource::new(stream_reader(obj)?);
    let fingerprint = source.fingerprint();
    source.skip(skip).map_err(|e| import_error(py, &e))?;
    let mut rows = Vec::new();
    while let Some(batch) = source.next_batch().map_err(|e| import_error(py, &e))? {
        rows.push(batch.num_rows());
    }
    Ok((fingerprint, rows))
}
