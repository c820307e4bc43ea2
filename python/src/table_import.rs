//! `write_table` through the importer engine (`loaderx::import::import`):
//! an object with `__arrow_c_stream__` (`arrow_stream.rs`'s source), or
//! files (a path, a list of paths, a glob) read by the crate's Parquet,
//! Arrow IPC, JSON Lines, WebDataset and image folder sources. The engine
//! maps every column type (tensors, structs flattened, dictionaries),
//! applies the column options (`columns=`, `rename=`, `codecs=`,
//! `fill_null=`), commits with the import's mark, and resumes a rerun of
//! the same input after its last commit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use loaderx::import::{
    Format, ImportError, ImportOptions, ImportSummary, Mapping, Opened, Progress, Source, SourceOptions, import,
    open_source,
};
use loaderx::table::Table as RsTable;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::arrow_stream::StreamSource;
use crate::errors::{import_error, type_error, value_error};
use crate::fork;
use crate::store::codec_of;
use crate::table::check_dest;

/// What `write_table` was asked beyond its destination and source.
pub struct Request<'py> {
    pub codec: Option<String>,
    pub codecs: Option<HashMap<String, String>>,
    pub mode: Option<String>,
    pub columns: Option<Vec<String>>,
    pub rename: Option<HashMap<String, String>>,
    pub fill_null: Option<Bound<'py, PyDict>>,
    pub format: Option<String>,
    pub fingerprint: Option<String>,
    pub batch_rows: Option<usize>,
    pub commit_rows: Option<u64>,
}

impl Request<'_> {
    /// The options only the engine's paths take, if any was given (the
    /// dict path refuses them).
    pub fn engine_only(&self) -> Option<&'static str> {
        [
            (self.columns.is_some(), "columns"),
            (self.rename.is_some(), "rename"),
            (self.fill_null.is_some(), "fill_null"),
            (self.format.is_some(), "format"),
            (self.fingerprint.is_some(), "fingerprint"),
            (self.batch_rows.is_some(), "batch_rows"),
            (self.commit_rows.is_some(), "commit_rows"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

/// A summary of a write as `write_table` returns it.
pub fn summary<'py>(py: Python<'py>, s: &ImportSummary) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("rows", s.rows)?;
    out.set_item("skipped", s.skipped)?;
    out.set_item("table_rows", s.table_rows)?;
    out.set_item("bytes", s.bytes)?;
    out.set_item("already_done", s.already_done)?;
    out.set_item("seconds", s.seconds)?;
    Ok(out)
}

/// `write_table` of an Arrow stream or of files, through the engine.
pub fn write<'py>(
    py: Python<'py>,
    dest: &Path,
    source: &Bound<'py, PyAny>,
    req: &Request<'py>,
) -> PyResult<Bound<'py, PyDict>> {
    let opts = options(py, req)?;
    let (mut source, classes): (Box<dyn Source>, Option<String>) = if source.hasattr("__arrow_c_stream__")? {
        if req.format.is_some() || req.batch_rows.is_some() {
            return Err(value_error("format= and batch_rows= are for files; an Arrow stream gives its own batches"));
        }
        (Box::new(StreamSource::new(source, req.fingerprint.as_deref())?), None)
    } else {
        if req.fingerprint.is_some() {
            return Err(value_error(
                "fingerprint= names an Arrow stream's input; files are fingerprinted by their paths, sizes and times",
            ));
        }
        let paths = input_paths(py, source)?;
        let (format, batch_rows) = (req.format.as_deref(), req.batch_rows);
        py.detach(|| open_files(&paths, format, batch_rows)).map_err(|e| import_error(py, &e))?
    };
    let specs = Mapping::new(&source.schema(), &opts.columns).map_err(|e| import_error(py, &e))?.specs();
    check_dest(py, dest, &specs, req.mode.as_deref(), Some(&source.fingerprint()))?;
    let done = run(py, &mut *source, dest, &opts)?;
    if let Some(classes) = classes {
        loaderx::import::write_classes(dest, &classes).map_err(|e| import_error(py, &e))?;
    }
    summary(py, &done)
}

/// Runs the engine with the GIL released.
///
/// The GIL must be released, not held: the engine reads the source on a
/// thread of its own while this thread waits on the batches it sends. A
/// file source never calls into Python. An Arrow C stream calls into its
/// producer only through the stream's C callbacks (`get_schema`,
/// `get_next`, `get_last_error`, `release`), from that reader thread; a
/// producer that needs Python there takes the GIL itself, as the interface
/// requires of any callback that may run on a consumer's thread (pyarrow's
/// reader over a Python iterator does), and the others (a pyarrow Table's
/// batches, polars) never touch it. Holding the GIL here would deadlock
/// the first kind: its callback would wait for the GIL this thread holds
/// while this thread waits for its batch. The only Python this side runs
/// is the interrupt check between batches, which takes the GIL briefly.
fn run(py: Python<'_>, source: &mut dyn Source, dest: &Path, opts: &ImportOptions) -> PyResult<ImportSummary> {
    let mut interrupted: Option<PyErr> = None;
    let mut on_progress = |_: &Progress| match Python::attach(|py| py.check_signals()) {
        Ok(()) => Ok(()),
        Err(e) => {
            interrupted = Some(e);
            Err(ImportError::InvalidArgument("interrupted: the table keeps its last commit".to_string()))
        }
    };
    let done = py.detach(|| fork::run(|| import(source, dest, opts, &mut on_progress)))?;
    match (done, interrupted) {
        (_, Some(e)) => Err(e),
        (Ok(done), None) => Ok(done),
        (Err(e), None) => Err(import_error(py, &e)),
    }
}

/// The engine's options from `req`.
fn options(py: Python<'_>, req: &Request<'_>) -> PyResult<ImportOptions> {
    let mut opts = ImportOptions::default();
    opts.columns.codec = req.codec.as_deref().map(|name| codec_of(py, name)).transpose()?;
    opts.columns.select = req.columns.clone();
    opts.columns.rename = sorted(req.rename.clone());
    for (name, codec) in sorted(req.codecs.clone()) {
        opts.columns.codecs.push((name, codec_of(py, &codec)?));
    }
    if let Some(fills) = &req.fill_null {
        for (name, value) in fills.iter() {
            let name: String = name.extract().map_err(|_| type_error("fill_null's keys are column names (str)"))?;
            let text = fill_text(&name, &value)?;
            opts.columns.fill_null.push((name, text));
        }
    }
    if let Some(rows) = req.commit_rows {
        if rows == 0 {
            return Err(value_error("commit_rows must be at least 1"));
        }
        opts.commit_rows = rows;
    }
    Ok(opts)
}

/// A map's pairs in key order (an option's order never depends on a hash).
fn sorted(map: Option<HashMap<String, String>>) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = map.unwrap_or_default().into_iter().collect();
    pairs.sort();
    pairs
}

/// A fill value as the engine parses it: a bool `true`/`false`, a number
/// as Python writes it, a list of numbers joined by commas (a ragged row),
/// `str` itself, `bytes` as its UTF-8 text.
fn fill_text(column: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = value.cast::<pyo3::types::PyBool>() {
        return Ok(if b.is_true() { "true" } else { "false" }.to_string());
    }
    if let Ok(s) = value.cast::<PyString>() {
        return s.extract::<String>();
    }
    if let Ok(b) = value.cast::<PyBytes>() {
        return std::str::from_utf8(b.as_bytes()).map(str::to_string).map_err(|_| {
            value_error(format!("fill_null[{column:?}]: bytes that are not UTF-8 text cannot be given as a fill"))
        });
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items: Vec<String> = value.try_iter()?.map(|v| fill_text(column, &v?)).collect::<PyResult<_>>()?;
        return Ok(items.join(","));
    }
    if value.hasattr("__index__")? || value.hasattr("__float__")? {
        return value.str()?.extract::<String>();
    }
    let class = value.get_type().name()?;
    Err(type_error(format!(
        "fill_null[{column:?}] is a {class}: give a number, a bool, a list of numbers, a str or bytes"
    )))
}

/// The paths `source` names: a path or a list of them, each glob (`*`,
/// `?`, `[`) expanded in sorted order; a glob that matches nothing refused.
fn input_paths(py: Python<'_>, source: &Bound<'_, PyAny>) -> PyResult<Vec<PathBuf>> {
    let given: Vec<PathBuf> = if source.is_instance_of::<PyList>() || source.is_instance_of::<PyTuple>() {
        source.try_iter()?.map(|p| p?.extract::<PathBuf>()).collect::<PyResult<_>>()
    } else {
        source.extract::<PathBuf>().map(|p| vec![p])
    }
    .map_err(|_| {
        let class = source.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        type_error(format!(
            "source is a {class}: give a dict of columns, an object with __arrow_c_stream__ (a pyarrow Table, a \
             polars DataFrame, ...), or a path, a list of paths or a glob of Parquet, Arrow IPC, JSON Lines or \
             WebDataset files"
        ))
    })?;
    if given.is_empty() {
        return Err(value_error("source is an empty list of paths"));
    }
    let glob = py.import("glob")?;
    let mut paths = Vec::new();
    for path in given {
        let text = path.to_string_lossy();
        // A URL's glob (`*`, `?` in its last segment) is the bucket
        // backend's to expand, by a listing.
        if !text.contains(['*', '?', '[']) || text.starts_with("s3://") || text.starts_with("s3a://") {
            paths.push(path);
            continue;
        }
        let mut found: Vec<PathBuf> = glob.call_method("glob", (text.as_ref(),), None)?.extract()?;
        if found.is_empty() {
            return Err(value_error(format!("{text}: no file matches this pattern")));
        }
        found.sort();
        paths.extend(found);
    }
    Ok(paths)
}

/// The source reading `paths` in `format` (else the one their names
/// give), and an image folder's `classes.json`.
fn open_files(
    paths: &[PathBuf],
    format: Option<&str>,
    batch_rows: Option<usize>,
) -> Result<(Box<dyn Source>, Option<String>), ImportError> {
    let format = format.map(Format::parse).transpose()?;
    let Opened { source, classes } = open_source(format, paths, &SourceOptions { batch_rows, ..Default::default() })?;
    Ok((source, classes))
}

/// True if the table at `dest` last committed an import of `fingerprint`
/// (a rerun resumes or finds it done: no append warning is due).
pub fn resumes(py: Python<'_>, table: &RsTable, fingerprint: &str) -> PyResult<bool> {
    let Some(mark) = table.mark() else { return Ok(false) };
    let parsed = py.import("json")?.call_method1("loads", (mark,));
    let found = parsed.and_then(|m| m.get_item("import")?.get_item("fingerprint")?.extract::<String>());
    Ok(found.is_ok_and(|f| f == fingerprint))
}
