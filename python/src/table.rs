//! Tables in Python (`loaderx::table`): `open_table` (a table's columns as
//! the stream dict a `DataLoader` takes), the `Table` object (rows, columns,
//! kinds, the commit's mark, a bytes or text column's values as `bytes` or
//! `str`) and `write_table` (a dict of columns through the table writer
//! here; an Arrow stream or files through the importer engine,
//! `table_import.rs`).
//!
//! A column is a `Dataset` (fixed) or a `RaggedDataset` (ragged, bytes and
//! text: a bytes or text column is a ragged dataset of `uint8` items, so a
//! batch is `(values, row_splits)`), limited to the rows the table
//! committed when it was opened. Pickling reopens the table by its path.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use loaderx::dataset::{DType, WriteOptions};
use loaderx::format::{TABLE_FILE, column_dir_name};
use loaderx::import::{ImportSummary, kind_codec};
use loaderx::table::{ColumnSpec, ColumnType, Table as RsTable, TableColumn, TableError, TableWriter, Values};
use numpy::prelude::*;
use numpy::{PyReadonlyArray1, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::array::{indices, read_bytes};
use crate::cast;
use crate::dataset::{Dataset, RaggedDataset, WRITE_CHUNK_BYTES, pathlib};
use crate::errors::{append_warning, table_error, type_error, value_error};
use crate::fork;
use crate::store::codec_of;
use crate::table_import::{self, Request};

/// A table open for reading: the rows committed when it was opened.
#[pyclass(frozen, module = "loaderx_rs")]
pub struct Table {
    inner: Arc<RsTable>,
}

/// The table at `path` (a directory, or an `s3://` URL where it was
/// pushed), opened with the GIL released.
fn open(py: Python<'_>, path: &Path) -> PyResult<Arc<RsTable>> {
    py.detach(|| match crate::store::url_of(path) {
        Some(url) => RsTable::open_url(url),
        None => RsTable::open(path),
    })
    .map(Arc::new)
    .map_err(|e| table_error(py, &e))
}

/// Column `k` (named `name`) of `table` as its Python dataset.
fn dataset(py: Python<'_>, table: &RsTable, k: usize, name: &str, column: &TableColumn) -> PyResult<Py<PyAny>> {
    let dir = table.path().join(column_dir_name(k));
    let origin = (table.path().to_path_buf(), name.to_string());
    Ok(match column {
        TableColumn::Fixed(d) => Dataset::of_table(py, d.clone(), dir, origin)?.into_any(),
        TableColumn::Ragged(d) => RaggedDataset::of_table(py, d.clone(), dir, origin)?.into_any(),
    })
}

/// `{column: dataset}` of `table`, in column order.
fn datasets<'py>(py: Python<'py>, table: &RsTable) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (k, (name, _, column)) in table.columns().enumerate() {
        out.set_item(name, dataset(py, table, k, name, column)?)?;
    }
    Ok(out)
}

/// What is published at `url` (`s3://bucket/prefix`), by its manifest:
/// `"store"` (a store or a sharded dataset), `"table"`, or None.
#[pyfunction]
pub fn _published(py: Python<'_>, url: &str) -> PyResult<Option<&'static str>> {
    use loaderx::io::remote::{Published, RemoteOptions, published_at};
    let published = py.detach(|| published_at(url, RemoteOptions::from_env())).map_err(|e| {
        let error = loaderx::Error::Io { path: url.into(), op: "read manifest.json", source: e };
        crate::errors::store_error(py, &error)
    })?;
    Ok(published.map(|p| match p {
        Published::Store { .. } => "store",
        Published::Table { .. } => "table",
    }))
}

/// A pickled table column's `__reduce__`: `_table_column(table, column)`.
pub fn reduce_column<'py>(py: Python<'py>, table: &Path, column: &str) -> PyResult<Bound<'py, PyTuple>> {
    let restore = py.import("loaderx_rs")?.getattr("_table_column")?;
    let args = PyTuple::new(py, [pathlib(py, table)?.into_bound(py), PyString::new(py, column).into_any()])?;
    PyTuple::new(py, [restore, args.into_any()])
}

/// Column `column` of the table at `table`, reopened (unpickling): the
/// rows the table has committed now.
#[pyfunction]
pub fn _table_column(py: Python<'_>, table: PathBuf, column: &str) -> PyResult<Py<PyAny>> {
    let table = open(py, &table)?;
    column_of(py, &table, column)
}

/// Opens the table at `path` and returns `{column: Dataset | RaggedDataset}`
/// in column order, each limited to the committed rows: the streams of a
/// `DataLoader` (or one source of a `Mixture`). A bytes or text column is
/// a `RaggedDataset` of `uint8`: a batch is `(values, row_splits)`
/// (`Table.values` and `Table.strings` give `bytes` and `str`).
#[pyfunction]
pub fn open_table<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let table = open(py, &path)?;
    datasets(py, &table)
}

#[pymethods]
impl Table {
    /// Opens the table at `path`.
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Table> {
        Ok(Table { inner: open(py, &path)? })
    }

    /// The table's directory (a `pathlib.Path`).
    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        pathlib(py, self.inner.path())
    }

    /// Rows committed when opened (every column's length).
    #[getter]
    fn rows(&self) -> u64 {
        self.inner.rows()
    }

    fn __len__(&self) -> usize {
        self.inner.rows() as usize
    }

    /// The mark the last commit recorded (an import's progress), or None.
    #[getter]
    fn mark(&self) -> Option<String> {
        self.inner.mark().map(str::to_string)
    }

    /// The column names, in order.
    #[getter]
    fn columns(&self) -> Vec<String> {
        self.inner.columns().map(|(name, _, _)| name.to_string()).collect()
    }

    /// `{column: kind}`, a kind one of `"fixed"`, `"ragged"`, `"bytes"`, `"utf8"`.
    #[getter]
    fn kinds<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let out = PyDict::new(py);
        for (name, kind, _) in self.inner.columns() {
            out.set_item(name, kind.name())?;
        }
        Ok(out)
    }

    /// `{column: dataset}`, as `open_table` gives.
    fn datasets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        datasets(py, &self.inner)
    }

    /// The dataset of column `name`.
    fn __getitem__(&self, py: Python<'_>, name: &str) -> PyResult<Py<PyAny>> {
        column_of(py, &self.inner, name)
    }

    /// Rows `idxs` of bytes or text column `name`, each as `bytes` (a text
    /// column's checked to be UTF-8).
    fn values<'py>(&self, py: Python<'py>, name: &str, idxs: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let idx = indices(py, idxs, self.inner.rows())?;
        let table = self.inner.clone();
        let values = py.detach(|| table.values(name, &idx)).map_err(|e| table_error(py, &e))?;
        PyList::new(py, values.iter().map(|v| PyBytes::new(py, v)))
    }

    /// Rows `idxs` of text column `name`, each as `str`.
    fn strings<'py>(&self, py: Python<'py>, name: &str, idxs: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        let idx = indices(py, idxs, self.inner.rows())?;
        let table = self.inner.clone();
        let values = py.detach(|| table.strings(name, &idx)).map_err(|e| table_error(py, &e))?;
        PyList::new(py, values)
    }

    /// Pickles by path: the copy sees the rows committed when it opens.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let args = PyTuple::new(py, [pathlib(py, slf.get().inner.path())?])?;
        PyTuple::new(py, [py.get_type::<Table>().into_any(), args.into_any()])
    }

    fn __repr__(&self) -> String {
        let kinds: Vec<String> = self.inner.columns().map(|(n, k, _)| format!("{n:?}: {}", k.name())).collect();
        format!("Table({}, rows={}, columns={{{}}})", self.inner.path().display(), self.inner.rows(), kinds.join(", "))
    }
}

/// Column `name` of `table` as its dataset, or a `KeyError`.
fn column_of(py: Python<'_>, table: &RsTable, name: &str) -> PyResult<Py<PyAny>> {
    match table.columns().enumerate().find(|(_, (n, _, _))| *n == name) {
        Some((k, (n, _, column))) => dataset(py, table, k, n, column),
        None => Err(pyo3::exceptions::PyKeyError::new_err(format!(
            "{}: no column {name:?} (the columns: {:?})",
            table.path().display(),
            table.columns().map(|(n, _, _)| n).collect::<Vec<_>>()
        ))),
    }
}

/// The values of one column of a `write_table` dict, held for the write.
enum Held<'py> {
    /// A fixed column: the array's bytes, `row_bytes` a row.
    Fixed { bytes: PyReadonlyArray1<'py, u8>, row_bytes: usize },
    /// A ragged column: each row's array bytes.
    Arrays(Vec<PyReadonlyArray1<'py, u8>>),
    /// A bytes or text column (text encoded as UTF-8).
    Bytes(Vec<Bound<'py, PyBytes>>),
}

/// A column of a `write_table` dict: its spec, rows and values.
struct Column<'py> {
    spec: ColumnSpec,
    rows: usize,
    held: Held<'py>,
}

impl Column<'_> {
    /// The values as the writer takes them.
    fn part(&self) -> PyResult<Part<'_>> {
        Ok(match &self.held {
            Held::Fixed { bytes, row_bytes } => Part::Fixed(bytes.as_slice()?, *row_bytes),
            Held::Arrays(a) => Part::Items(a.iter().map(|a| a.as_slice()).collect::<Result<_, _>>()?),
            Held::Bytes(b) => Part::Items(b.iter().map(|b| b.as_bytes()).collect()),
        })
    }
}

/// What a `write_table` column may be, for errors.
const COLUMN_KINDS: &str = "give a NumPy array (a fixed column, rows along the first axis), a list of arrays (ragged), a list of bytes \
     (bytes) or a list of str (utf8)";

/// `value`, the dict's column `name`, read into a [`Column`].
fn column<'py>(py: Python<'py>, name: &str, value: &Bound<'py, PyAny>) -> PyResult<Column<'py>> {
    if value.is_instance_of::<PyDict>() || value.is_instance_of::<PyString>() || value.is_instance_of::<PyBytes>() {
        let class = value.get_type().name()?;
        return Err(type_error(format!("column {name:?} is a {class}: {COLUMN_KINDS}")));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        return list_column(py, name, value);
    }
    let array = cast::sample_array(value, None, "same_kind").map_err(|e| in_column(py, name, e))?;
    let array = array.cast_into::<PyUntypedArray>()?;
    if array.ndim() < 1 {
        return Err(value_error(format!("column {name:?} is a 0-d array: {COLUMN_KINDS}")));
    }
    let dtype = dtype(name, &array)?;
    let rows = array.shape()[0];
    let shape = array.shape()[1..].to_vec();
    let row_bytes = shape.iter().product::<usize>() * dtype.itemsize();
    let bytes = read_bytes(array.as_any(), name)?;
    Ok(Column { spec: ColumnSpec::fixed(name, dtype, &shape), rows, held: Held::Fixed { bytes, row_bytes } })
}

/// `e`, of the same type, its message prefixed by the column it is about.
fn in_column(py: Python<'_>, name: &str, e: PyErr) -> PyErr {
    let again = PyErr::from_type(e.get_type(py), format!("column {name:?}: {}", e.value(py)));
    again.set_cause(py, Some(e));
    again
}

/// The element type of `array`, column `name`'s, or a `TypeError`.
fn dtype(name: &str, array: &Bound<'_, PyUntypedArray>) -> PyResult<DType> {
    let text: String = array.dtype().getattr("str")?.extract()?;
    DType::parse(&text)
        .map_err(|_| type_error(format!("column {name:?} has dtype {text}, not numbers: {COLUMN_KINDS}")))
}

/// A list column: bytes, text or ragged, by its first value.
fn list_column<'py>(py: Python<'py>, name: &str, list: &Bound<'py, PyAny>) -> PyResult<Column<'py>> {
    let values: Vec<Bound<'py, PyAny>> = list.try_iter()?.collect::<PyResult<_>>()?;
    let Some(first) = values.first() else {
        return Err(value_error(format!("column {name:?} is an empty list, which has no type: {COLUMN_KINDS}")));
    };
    let rows = values.len();
    let wrong = |row: usize, v: &Bound<'py, PyAny>, want: &str| -> PyErr {
        let class = v.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        type_error(format!("column {name:?}, row {row}: a {class} in a column of {want} (its first row's kind)"))
    };
    if first.is_instance_of::<PyBytes>() {
        let mut held = Vec::with_capacity(rows);
        for (row, v) in values.iter().enumerate() {
            held.push(v.cast::<PyBytes>().map_err(|_| wrong(row, v, "bytes"))?.clone());
        }
        return Ok(Column { spec: ColumnSpec::bytes(name), rows, held: Held::Bytes(held) });
    }
    if first.is_instance_of::<PyString>() {
        let mut held = Vec::with_capacity(rows);
        for (row, v) in values.iter().enumerate() {
            let s = v.cast::<PyString>().map_err(|_| wrong(row, v, "str"))?;
            held.push(s.call_method1("encode", ("utf-8",))?.cast_into::<PyBytes>()?);
        }
        return Ok(Column { spec: ColumnSpec::utf8(name), rows, held: Held::Bytes(held) });
    }
    ragged_column(py, name, values)
}

/// A ragged column: every row an array of the first's dtype and row shape.
fn ragged_column<'py>(py: Python<'py>, name: &str, values: Vec<Bound<'py, PyAny>>) -> PyResult<Column<'py>> {
    let first = cast::ragged_item(&values[0], 0).map_err(|e| in_column(py, name, e))?;
    let first = first.cast_into::<PyUntypedArray>()?;
    let element = dtype(name, &first)?;
    let descr = first.dtype();
    let item_shape = if first.ndim() >= 1 { first.shape()[1..].to_vec() } else { Vec::new() };
    let mut held = Vec::with_capacity(values.len());
    for (row, v) in values.iter().enumerate() {
        let a = cast::converted(v, descr.as_any(), "same_kind", row as u64).map_err(|e| in_column(py, name, e))?;
        let a = a.cast_into::<PyUntypedArray>()?;
        if a.ndim() < 1 || a.shape()[1..] != item_shape[..] {
            return Err(value_error(format!(
                "column {name:?}, row {row}: an array of row shape {:?}, not the first row's {item_shape:?}",
                a.shape().get(1..).unwrap_or(&[])
            )));
        }
        held.push(read_bytes(a.as_any(), name)?);
    }
    let rows = values.len();
    Ok(Column { spec: ColumnSpec::ragged(name, element, &item_shape), rows, held: Held::Arrays(held) })
}

/// The rows of `columns`, one count for all, or a `ValueError` naming them.
fn rows_of(columns: &[Column<'_>]) -> PyResult<usize> {
    let rows = columns.first().map_or(0, |c| c.rows);
    if columns.iter().any(|c| c.rows != rows) {
        let counts: Vec<String> = columns.iter().map(|c| format!("{:?} has {}", c.spec.name, c.rows)).collect();
        return Err(value_error(format!(
            "columns of unequal lengths ({}): every column needs one value per row",
            counts.join(", ")
        )));
    }
    Ok(rows)
}

/// The writer of `dest` for `specs` under `mode`: a new table, or the one
/// there (the same columns, dtypes and shapes) to append to.
pub fn writer(
    py: Python<'_>,
    dest: &Path,
    specs: &[ColumnSpec],
    mode: Option<&str>,
    opts: &WriteOptions,
) -> PyResult<TableWriter> {
    if check_dest(py, dest, specs, mode, None)? {
        py.detach(|| TableWriter::open(dest, opts)).map_err(|e| table_error(py, &e))
    } else {
        py.detach(|| TableWriter::create(dest, specs, opts)).map_err(|e| table_error(py, &e))
    }
}

/// Checks that a write of `specs` may go to `dest` under `mode`: a new
/// table, or the one there if it has the same columns, dtypes and shapes
/// and `mode` is not `"error"`; an `AppendWarning` if `mode` is None and
/// the table holds rows, unless they are a commit of the import
/// `fingerprint` names (a rerun resuming it). True if a table is there.
pub fn check_dest(
    py: Python<'_>,
    dest: &Path,
    specs: &[ColumnSpec],
    mode: Option<&str>,
    fingerprint: Option<&str>,
) -> PyResult<bool> {
    match mode {
        None | Some("append") | Some("error") => {}
        Some("overwrite") => {
            return Err(value_error(
                "mode=\"overwrite\" is not supported for tables: remove the table's directory first, or append",
            ));
        }
        Some(other) => return Err(value_error(format!("mode must be \"append\" or \"error\", not {other:?}"))),
    }
    if !dest.join(TABLE_FILE).exists() {
        return Ok(false);
    }
    // A reader's open columns hold their stores' readers' lock, which the
    // writer's trim of an uncommitted tail waits for: `table` is dropped
    // (its columns closed) before the caller opens a writer.
    let table = open(py, dest)?;
    if mode == Some("error") {
        return Err(table_error(py, &TableError::Exists { path: dest.to_path_buf() }));
    }
    same_columns(dest, &table, specs)?;
    let resumed = match fingerprint {
        Some(f) => crate::table_import::resumes(py, &table, f)?,
        None => false,
    };
    if mode.is_none() && table.rows() > 0 && !resumed {
        append_warning(
            py,
            &format!(
                "{}: appending to a table that already holds {} rows (rerunning a script adds them again); pass \
                 mode=\"append\" to say so and silence this",
                dest.display(),
                table.rows()
            ),
        )?;
    }
    Ok(true)
}

/// A `ValueError` unless `table` has the columns `specs` describe.
fn same_columns(dest: &Path, table: &RsTable, specs: &[ColumnSpec]) -> PyResult<()> {
    let have: Vec<String> = table.columns().map(|(n, k, c)| describe(n, k, column_type(c))).collect();
    let give: Vec<String> = specs.iter().map(|s| describe(&s.name, s.kind, (s.dtype, s.shape.clone()))).collect();
    if have != give {
        return Err(value_error(format!(
            "{}: the table's columns are [{}], the source's [{}]: an append gives the same columns, in order, \
             of the same kinds, dtypes and shapes",
            dest.display(),
            have.join(", "),
            give.join(", ")
        )));
    }
    Ok(())
}

/// A column's dtype and (record or item row) shape.
fn column_type(column: &TableColumn) -> (DType, Vec<usize>) {
    match column {
        TableColumn::Fixed(d) => (d.schema().dtype, d.shape().to_vec()),
        TableColumn::Ragged(d) => (d.schema().dtype, d.item_shape().to_vec()),
    }
}

/// `name: kind dtype shape`, for errors.
fn describe(name: &str, kind: ColumnType, (dtype, shape): (DType, Vec<usize>)) -> String {
    match kind {
        ColumnType::Bytes | ColumnType::Utf8 => format!("{name:?}: {}", kind.name()),
        _ => format!("{name:?}: {} {dtype} {shape:?}", kind.name()),
    }
}

/// `codecs` (`{column: codec}`) onto `specs`.
fn column_codecs(py: Python<'_>, specs: &mut [ColumnSpec], codecs: Option<HashMap<String, String>>) -> PyResult<()> {
    for (name, codec) in codecs.unwrap_or_default() {
        let Some(spec) = specs.iter_mut().find(|s| s.name == name) else {
            return Err(value_error(format!("codecs names {name:?}, which is not a column of the source")));
        };
        spec.codec = Some(codec_of(py, &codec)?);
    }
    Ok(())
}

/// Writes `source` into the table at `dest` (created if there is none,
/// else appended to). Returns a summary: `{"rows", "skipped",
/// "table_rows", "bytes", "already_done", "seconds"}`.
///
/// `source` is a dict of columns (each a NumPy array, a fixed column with
/// rows along the first axis; a list of arrays, ragged; a list of `bytes`
/// or of `str`), written through the table writer and committed once, at
/// the end. Or it goes through the importer engine, which commits every
/// `commit_rows` rows (or 256 MiB) and resumes a rerun of the same input:
/// any object with `__arrow_c_stream__` (a pyarrow Table or
/// RecordBatchReader, a polars DataFrame, ...; `fingerprint` names its
/// input for a rerun to resume), or files: a path, a list of paths or a
/// glob of Parquet, Arrow IPC, JSON Lines or WebDataset files, or an image
/// folder (`format` names the format if the extension does not).
/// `columns` selects and orders the source's columns, `rename` maps a
/// source name to a table name, `fill_null` gives a column's null fill.
/// `codec` is every new column's codec (by default zstd for text, raw for
/// numbers and bytes), `codecs` (`{column: codec}`) a column's own. `mode`: None (append, warning with `AppendWarning` if the
/// table holds rows not of this import), `"append"`, or `"error"`.
#[pyfunction]
#[pyo3(
    signature = (dest, source, *, codec = None, codecs = None, mode = None, columns = None,
                 rename = None, fill_null = None, format = None, fingerprint = None, batch_rows = None,
                 commit_rows = None),
    text_signature = "(dest, source, *, codec=None, codecs=None, mode=None, columns=None, rename=None, \
                      fill_null=None, format=None, fingerprint=None, batch_rows=None, commit_rows=None)"
)]
#[allow(clippy::too_many_arguments)]
pub fn write_table<'py>(
    py: Python<'py>,
    dest: PathBuf,
    source: &Bound<'py, PyAny>,
    codec: Option<String>,
    codecs: Option<HashMap<String, String>>,
    mode: Option<String>,
    columns: Option<Vec<String>>,
    rename: Option<HashMap<String, String>>,
    fill_null: Option<Bound<'py, PyDict>>,
    format: Option<String>,
    fingerprint: Option<String>,
    batch_rows: Option<usize>,
    commit_rows: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let req = Request { codec, codecs, mode, columns, rename, fill_null, format, fingerprint, batch_rows, commit_rows };
    let Ok(dict) = source.cast::<PyDict>() else {
        return table_import::write(py, &dest, source, &req);
    };
    if let Some(option) = req.engine_only() {
        return Err(value_error(format!(
            "{option}= is for an Arrow stream or files: a dict of columns is written as it is given"
        )));
    }
    let started = Instant::now();
    let every = req.codec.as_deref().map(|name| codec_of(py, name)).transpose()?;
    let opts = WriteOptions::default();
    if dict.is_empty() {
        return Err(value_error("source has no columns: give a dict of at least one column"));
    }
    let mut columns = Vec::with_capacity(dict.len());
    for (name, value) in dict.iter() {
        let name: String = name.extract().map_err(|_| type_error("a column name must be a str"))?;
        columns.push(column(py, &name, &value)?);
    }
    let rows = rows_of(&columns)?;
    let mut specs: Vec<ColumnSpec> = columns.iter().map(|c| c.spec.clone()).collect();
    column_codecs(py, &mut specs, req.codecs.clone())?;
    for spec in &mut specs {
        spec.codec = spec.codec.or(every).or(Some(kind_codec(spec.kind)));
    }
    let mut writer = writer(py, &dest, &specs, req.mode.as_deref(), &opts)?;
    let parts: Vec<Part<'_>> = columns.iter().map(Column::part).collect::<PyResult<_>>()?;
    let written = py.detach(|| fork::run(|| append_rows(&mut writer, &parts, rows).and_then(|_| writer.commit())))?;
    let table_rows = written.map_err(|e| table_error(py, &e))?;
    let done = ImportSummary {
        rows: rows as u64,
        skipped: 0,
        table_rows,
        bytes: parts.iter().map(|p| p.bytes() as u64).sum(),
        value_bytes: parts.iter().map(|p| p.bytes() as u64).sum(),
        already_done: false,
        seconds: started.elapsed().as_secs_f64(),
    };
    table_import::summary(py, &done)
}

/// Adopts the complete tables `staged` as new shards of the table at
/// `dest` (created if there is none), all committed by one replacement of
/// its `table.json` (`loaderx::table::adopt_tables`); returns its rows
/// after. The commit of `loaderx_rs.ray`'s parallel writes.
#[pyfunction]
pub fn _adopt_tables(py: Python<'_>, dest: PathBuf, staged: Vec<PathBuf>) -> PyResult<u64> {
    let opts = WriteOptions::default();
    py.detach(|| loaderx::table::adopt_tables(&dest, &staged, &opts)).map_err(|e| table_error(py, &e))
}

/// The location of `url` (`s3://bucket/prefix`), the client from the
/// environment.
fn location(py: Python<'_>, url: &str) -> PyResult<loaderx::io::remote::Location> {
    use loaderx::io::remote::{Location, RemoteOptions};
    Location::s3(url, RemoteOptions::from_env()).map_err(|source| {
        crate::errors::store_error(py, &loaderx::Error::Io { path: url.into(), op: "parse the URL", source })
    })
}

/// Publishes the store, dataset or table at `dir` to `url`
/// (`loaderx::publish::push`): a Ray write task's staged table.
#[pyfunction]
pub fn _push(py: Python<'_>, dir: PathBuf, url: &str) -> PyResult<()> {
    let to = location(py, url)?;
    py.detach(|| loaderx::publish::push(&dir, &to)).map(|_| ()).map_err(|e| crate::errors::store_error(py, &e))
}

/// Adopts the tables published under `dest` at `staged` (paths under it)
/// as new shards of the table published at `dest`, committed by its
/// manifest (`loaderx::publish::adopt_published`); returns its rows after.
/// The commit of `loaderx_rs.ray`'s writes to object storage.
#[pyfunction]
pub fn _adopt_published(py: Python<'_>, dest: &str, staged: Vec<String>) -> PyResult<u64> {
    let to = location(py, dest)?;
    let names: Vec<&str> = staged.iter().map(String::as_str).collect();
    py.detach(|| loaderx::publish::adopt_published(&to, &names)).map_err(|e| crate::errors::store_error(py, &e))
}

/// Removes every object under `url` (`loaderx::publish::remove_published`):
/// a failed write's staging. Returns how many.
#[pyfunction]
pub fn _remove_published(py: Python<'_>, url: &str) -> PyResult<usize> {
    let at = location(py, url)?;
    py.detach(|| loaderx::publish::remove_published(&at)).map_err(|e| crate::errors::store_error(py, &e))
}

/// The objects under `url` that no published manifest lists, written more
/// than `keep_newer_than` seconds ago (`loaderx::publish::remove_unlisted_objects`):
/// what failed writes left. Returns their URLs.
#[pyfunction]
pub fn _remove_unlisted(py: Python<'_>, url: &str, keep_newer_than: f64) -> PyResult<Vec<String>> {
    let keep = std::time::Duration::try_from_secs_f64(keep_newer_than)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("keep_newer_than={keep_newer_than}: {e}")))?;
    let at = location(py, url)?;
    let report = py
        .detach(|| loaderx::publish::remove_unlisted_objects(&at, keep))
        .map_err(|e| crate::errors::store_error(py, &e))?;
    Ok(report.removed.iter().map(|name| format!("{}/{name}", at.url())).collect())
}

/// Takes the write lock of the table at `url` for `holder`
/// (`loaderx::publish::lock_writes`): `(True, unenforced, "")` when taken,
/// `(False, False, held)` when another write holds it (`held`: its id and
/// since when, in seconds since the epoch).
#[pyfunction]
pub fn _lock_writes(py: Python<'_>, url: &str, holder: &str) -> PyResult<(bool, bool, String)> {
    use loaderx::publish::LockTaken;
    let at = location(py, url)?;
    match py.detach(|| loaderx::publish::lock_writes(&at, holder)) {
        Ok(LockTaken::Held { unenforced }) => Ok((true, unenforced, String::new())),
        Ok(LockTaken::Refused(held)) => Ok((false, false, held)),
        Err(e) => Err(crate::errors::store_error(py, &e)),
    }
}

/// Removes the write lock of the table at `url` if `holder` holds it;
/// whether it did.
#[pyfunction]
pub fn _unlock_writes(py: Python<'_>, url: &str, holder: &str) -> PyResult<bool> {
    let at = location(py, url)?;
    py.detach(|| loaderx::publish::unlock_writes(&at, holder)).map_err(|e| crate::errors::store_error(py, &e))
}

/// What `loaderx gc` removes (`loaderx_rs.ray.gc`): the staged tables of
/// writes to `dest` no longer running (`loaderx::table::remove_staging`),
/// then, if no writer holds the table, the shard directories a crashed
/// commit left unlisted (`remove_unlisted_shards`). Returns the removed
/// paths.
#[pyfunction]
pub fn _gc(py: Python<'_>, dest: PathBuf) -> PyResult<Vec<PathBuf>> {
    let opts = WriteOptions::default();
    py.detach(|| {
        let mut removed = loaderx::table::remove_staging(&dest)?;
        if dest.join(loaderx::format::TABLE_FILE).exists() {
            removed.extend(loaderx::table::remove_unlisted_shards(&dest, &opts)?.unwrap_or_default());
        }
        Ok(removed)
    })
    .map_err(|e| table_error(py, &e))
}

/// The table a `Table` is (the rows it saw when opened), or the one at a
/// path, opened now.
pub fn table_of(py: Python<'_>, obj: &Bound<'_, PyAny>) -> PyResult<Arc<RsTable>> {
    if let Ok(table) = obj.cast::<Table>() {
        return Ok(table.get().inner.clone());
    }
    let path: PathBuf = obj.extract().map_err(|_| {
        let class = obj.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        type_error(format!("a {class} is no table: give a Table or a table's path"))
    })?;
    open(py, &path)
}

/// A column's values as the writer takes them.
enum Part<'a> {
    /// A fixed column's rows back to back, `row_bytes` each.
    Fixed(&'a [u8], usize),
    /// Each row's bytes.
    Items(Vec<&'a [u8]>),
}

impl Part<'_> {
    /// Rows `lo..hi` of the column.
    fn rows(&self, lo: usize, hi: usize) -> Values<'_> {
        match self {
            Part::Fixed(bytes, rb) => Values::Fixed(&bytes[lo * rb..hi * rb]),
            Part::Items(items) => Values::Items(&items[lo..hi]),
        }
    }

    /// Bytes of the column in all.
    fn bytes(&self) -> usize {
        match self {
            Part::Fixed(bytes, _) => bytes.len(),
            Part::Items(items) => items.iter().map(|v| v.len()).sum(),
        }
    }
}

/// Appends the `rows` rows of `parts` (one per column) to `writer`, in
/// calls of about `WRITE_CHUNK_BYTES`.
fn append_rows(writer: &mut TableWriter, parts: &[Part<'_>], rows: usize) -> Result<(), TableError> {
    let per_row = parts.iter().map(Part::bytes).sum::<usize>() / rows.max(1);
    let chunk = (WRITE_CHUNK_BYTES / per_row.max(1)).max(1);
    for lo in (0..rows).step_by(chunk) {
        let hi = (lo + chunk).min(rows);
        let values: Vec<Values<'_>> = parts.iter().map(|p| p.rows(lo, hi)).collect();
        writer.append(&values)?;
    }
    Ok(())
}
