//! The Arrow C stream interface (the PyCapsule `arrow_array_stream`), both
//! ways. In: any Python object with `__arrow_c_stream__` (a pyarrow Table
//! or RecordBatchReader, a polars DataFrame, a DuckDB result, a `datasets`
//! Dataset) as an import [`Source`] (`StreamSource`), which `write_table`
//! hands to the importer engine (`table_import.rs`). Out: `to_arrow`, a
//! table's committed rows as an object with `__arrow_c_stream__`
//! (`ArrowStream`) over the crate's `TableBatches`, which pyarrow, polars
//! and any other consumer of the interface read.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{ArrowError, SchemaRef};
use loaderx::import::{ExportOptions, ImportError, Position, Source, TableBatches};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

use crate::errors::{import_error, type_error, value_error};
use crate::fork;
use crate::table::table_of;

/// The name the Arrow PyCapsule interface gives a stream's capsule.
const STREAM_CAPSULE: &std::ffi::CStr = c"arrow_array_stream";

/// The name the Arrow PyCapsule interface gives a schema's capsule.
const SCHEMA_CAPSULE: &std::ffi::CStr = c"arrow_schema";

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
/// rerun could check: its fingerprint is the caller's name for its input
/// (`write_table(..., fingerprint=...)`) with its schema, so a rerun under
/// the same name resumes after the rows committed from it; without a name,
/// every stream is a new input (its fingerprint unique to this call), which
/// an import appends whole.
pub struct StreamSource {
    reader: RecordBatchStreamReader,
    schema: SchemaRef,
    fingerprint: String,
    /// Rows read from the stream (for error positions).
    rows: u64,
    /// The rest of a batch `skip` cut.
    pending: Option<RecordBatch>,
}

impl StreamSource {
    /// The stream of `obj`, fingerprinted by `name` (see the type).
    pub fn new(obj: &Bound<'_, PyAny>, name: Option<&str>) -> PyResult<StreamSource> {
        let reader = stream_reader(obj)?;
        let schema = reader.schema();
        let fingerprint = match name {
            Some(name) => format!("arrow-c-stream {name:?} {:?}", schema.fields()),
            None => unique_fingerprint(),
        };
        Ok(StreamSource { reader, schema, fingerprint, rows: 0, pending: None })
    }
}

impl Source for StreamSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
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

/// A fingerprint no other stream has: this process, the time, a count.
fn unique_fingerprint() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let count = COUNT.fetch_add(1, Ordering::Relaxed);
    format!("arrow-c-stream unnamed {}-{nanos}-{count}", std::process::id())
}

/// The row counts of the batches of `obj`'s Arrow stream read through the
/// import source, after skipping `skip` rows (for the tests of the source).
#[pyfunction]
#[pyo3(signature = (obj, skip = 0, fingerprint = None))]
pub fn _arrow_stream_rows(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    skip: u64,
    fingerprint: Option<&str>,
) -> PyResult<(String, Vec<usize>)> {
    let mut source = StreamSource::new(obj, fingerprint)?;
    let fingerprint = source.fingerprint();
    source.skip(skip).map_err(|e| import_error(py, &e))?;
    let mut rows = Vec::new();
    while let Some(batch) = source.next_batch().map_err(|e| import_error(py, &e))? {
        rows.push(batch.num_rows());
    }
    Ok((fingerprint, rows))
}

/// A table's committed rows as an Arrow C stream, read once: what
/// `to_arrow` returns. Any consumer of the Arrow PyCapsule interface reads
/// it (`pyarrow.RecordBatchReader.from_stream(s)`, `pyarrow.table(s)`,
/// `polars.DataFrame(s)`); `schema` is its pyarrow schema (with pyarrow).
#[pyclass(frozen, module = "loaderx_rs")]
pub struct ArrowStream {
    schema: SchemaRef,
    rows: u64,
    /// The batches, until a consumer takes them.
    batches: Mutex<Option<TableBatches>>,
}

/// [`TableBatches`] as the stream's reader: each batch read, in a fork
/// child, on the child's own pool (`fork.rs`), an error as Arrow's.
struct Batches(TableBatches);

impl Iterator for Batches {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        match fork::run(|| self.0.next()) {
            Ok(next) => Some(next?.map_err(|e| ArrowError::ExternalError(Box::new(e)))),
            Err(e) => Some(Err(ArrowError::ExternalError(Box::new(e)))),
        }
    }
}

impl RecordBatchReader for Batches {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }
}

#[pymethods]
impl ArrowStream {
    /// The Arrow PyCapsule interface: the stream, taken over by the
    /// consumer. A `requested_schema` is not applied (the interface lets a
    /// producer give its own schema); a second call raises, the batches
    /// having gone to the first.
    #[pyo3(signature = (requested_schema = None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let batches = self.batches.lock().map_err(|_| value_error("the stream's lock is poisoned"))?.take();
        let Some(batches) = batches else {
            return Err(value_error("this stream was read already: call to_arrow again for another"));
        };
        // The capsule owns the boxed `FFI_ArrowArrayStream`. A consumer
        // moves the struct out (the interface's rule) and leaves a released
        // one, whose drop does nothing; a capsule never consumed drops an
        // unreleased one, whose drop releases the stream and frees the
        // batches. So the destructor is `Drop`, and no `unsafe` is needed.
        let stream = FFI_ArrowArrayStream::new(Box::new(Batches(batches)));
        PyCapsule::new_with_value(py, stream, STREAM_CAPSULE)
    }

    /// The stream's schema as a `pyarrow.Schema` (pyarrow needed).
    #[getter]
    fn schema<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let schema = FFI_ArrowSchema::try_from(self.schema.as_ref())
            .map_err(|e| value_error(format!("the schema has no Arrow C form: {e}")))?;
        let capsule = PyCapsule::new_with_value(py, schema, SCHEMA_CAPSULE)?.unbind();
        py.import("pyarrow")?.getattr("schema")?.call1((SchemaCapsule(capsule),))
    }

    /// Every batch as one `pyarrow.Table` (pyarrow needed), as
    /// `pyarrow.RecordBatchReader.read_all` gives.
    fn read_all<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py().import("pyarrow")?.getattr("table")?.call1((slf,))
    }

    /// The rows the stream gives in all.
    #[getter]
    fn rows(&self) -> u64 {
        self.rows
    }

    fn __repr__(&self) -> String {
        let names: Vec<&str> = self.schema.fields().iter().map(|f| f.name().as_str()).collect();
        format!("ArrowStream(rows={}, columns={names:?})", self.rows)
    }
}

/// A schema capsule as an object with `__arrow_c_schema__`, for pyarrow.
#[pyclass(frozen)]
struct SchemaCapsule(Py<PyCapsule>);

#[pymethods]
impl SchemaCapsule {
    fn __arrow_c_schema__(&self, py: Python<'_>) -> Py<PyCapsule> {
        self.0.clone_ref(py)
    }
}

/// `to_arrow(table_or_path, columns=None, batch_rows=None)`: the committed
/// rows of a `Table` (those it saw when opened) or of the table at a path,
/// as an [`ArrowStream`], of the columns `columns` names (all, in order, if
/// None), in batches of at most `batch_rows` rows (default 65,536) and
/// 64 MiB of values.
#[pyfunction]
#[pyo3(signature = (table, columns = None, batch_rows = None))]
pub fn to_arrow(
    py: Python<'_>,
    table: &Bound<'_, PyAny>,
    columns: Option<Vec<String>>,
    batch_rows: Option<usize>,
) -> PyResult<ArrowStream> {
    let table = table_of(py, table)?;
    let mut opts = ExportOptions { columns, ..ExportOptions::default() };
    if let Some(rows) = batch_rows {
        opts.batch_rows = rows;
    }
    let batches = TableBatches::new(&table, &opts).map_err(|e| import_error(py, &e))?;
    Ok(ArrowStream { schema: batches.schema(), rows: batches.rows(), batches: Mutex::new(Some(batches)) })
}
