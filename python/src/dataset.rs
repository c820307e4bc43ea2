//! `Dataset`, `RaggedDataset`, `pad`, `write_dataset`, `write_ragged`: the
//! reference's dataset layer over the crate's (`loaderx::dataset`).
//!
//! A batch read allocates its NumPy output once and the store decodes
//! straight into it, with the GIL released.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, RwLock};

use loaderx::dataset::{self as ds, DType, Tensor, WriteOptions};
use loaderx::{ReadMode, ReadOptions};
use numpy::prelude::*;
use numpy::{PyArrayDescr, PyUntypedArray};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

use crate::array::{descr, filled, from_tensor, i64_array, index, indices, numpy, read_bytes, u64s};
use crate::cast;
use crate::errors::{dataset_error, value_error};
use crate::fork;
use crate::pickle;
use crate::store::{Zrecord, codec_name, codec_of, reads_of};

/// The reference's default bytes per append call of a write.
pub const WRITE_CHUNK_BYTES: usize = ds::WRITE_CHUNK_BYTES_DEFAULT;

fn closed() -> PyErr {
    value_error("the dataset is closed")
}

/// `path` as Python sees it: a `pathlib.Path`, or for a published store's
/// URL the `str` itself (a `Path` would fold its `//`).
pub fn pathlib(py: Python<'_>, path: &std::path::Path) -> PyResult<Py<PyAny>> {
    if let Some(url) = crate::store::url_of(path) {
        return Ok(pyo3::types::PyString::new(py, url).into_any().unbind());
    }
    Ok(py.import("pathlib")?.getattr("Path")?.call1((path.to_path_buf(),))?.unbind())
}

/// A dataset handle shared with loaders; `close` drops this handle's share.
struct Handle<T>(RwLock<Option<Arc<T>>>);

impl<T> Handle<T> {
    fn new(value: Arc<T>) -> Handle<T> {
        Handle(RwLock::new(Some(value)))
    }

    fn get(&self) -> PyResult<Arc<T>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone().ok_or_else(closed)
    }

    fn close(&self) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// Why a read failed: the dataset's error, or a Python one (fork.rs).
enum Failure {
    Dataset(ds::DatasetError),
    Python(PyErr),
}

/// What a dataset handle was opened with, and holds; set by `__init__`.
struct Opened<T> {
    inner: Handle<T>,
    dtype: Py<PyArrayDescr>,
    shape: Vec<usize>,
    codec: &'static str,
    /// `pathlib.Path` of `at`.
    path: Py<PyAny>,
    at: PathBuf,
    reads: ReadOptions,
    /// Shards (1 for a single store; a sharded dataset has no one `_store`).
    shards: usize,
    sharded: bool,
    /// `_store`, made on first use.
    store: PyOnceLock<Py<Zrecord>>,
    /// The table and column name of a table's column (`open_table`),
    /// which pickling reopens instead of the column's directory (whose
    /// records past the table's commit a reader must not see).
    table: Option<(PathBuf, String)>,
}

impl<T> Opened<T> {
    fn new(
        py: Python<'_>,
        dataset: Arc<T>,
        schema: &ds::Schema,
        shape: &[usize],
        at: PathBuf,
        reads: ReadOptions,
        (shards, sharded): (usize, bool),
    ) -> PyResult<Self> {
        Ok(Opened {
            inner: Handle::new(dataset),
            dtype: descr(py, &schema.dtype.to_string())?.unbind(),
            shape: shape.to_vec(),
            codec: codec_name(schema.codec),
            path: pathlib(py, &at)?,
            at,
            reads,
            shards,
            sharded,
            store: PyOnceLock::new(),
            table: None,
        })
    }

    /// `(path, read_mode, verify_reads)`, the arguments that reopen it (pickling).
    fn open_args<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyTuple>, Bound<'py, PyDict>)> {
        self.inner.get()?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("read_mode", self.reads.mode.name())?;
        kwargs.set_item("verify_reads", self.reads.verify.name())?;
        Ok((PyTuple::new(py, [self.path.bind(py)])?, kwargs))
    }

    /// The reference's `_store`: the store under the dataset, read-only.
    fn store<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, Zrecord>> {
        self.inner.get()?;
        if self.sharded {
            return Err(dataset_error(
                py,
                &ds::DatasetError::InvalidArgument(format!(
                    "{} is a sharded dataset of {} shards: it has no one store (each shard's store is its own \
                     directory, see shards.json)",
                    self.at.display(),
                    self.shards
                )),
            ));
        }
        let store = self.store.get_or_try_init(py, || {
            Py::new(py, Zrecord::open_read_only(py, self.at.clone(), self.codec, self.reads)?)
        })?;
        Ok(store.bind(py).clone())
    }
}

/// The object of a class whose `__init__` was not run (a subclass that
/// does not call `super().__init__`).
fn not_open(class: &str) -> PyErr {
    PyRuntimeError::new_err(format!("the {class} is not open: a subclass's __init__ must call super().__init__(path)"))
}

/// The methods `Dataset` and `RaggedDataset` share, written once: the
/// class `$class` over the crate's `$inner`, its shape getter named
/// `$shape`. PyO3 classes cannot be generic, so this macro writes each
/// class's inherent helpers and its one `#[pymethods]` block; what a kind
/// adds comes in `$extra`, and its reads in the class's own `one` (a
/// record) and `batch` (a batch of records).
macro_rules! dataset_class {
    (
        $class:ident over $inner:ty, shape $shape:ident,
        init $init_doc:literal, shape_doc $shape_doc:literal, getitems $getitems_doc:literal,
        { $($extra:tt)* }
    ) => {
        impl $class {
            /// A table's column `column` of the table at `table`, over
            /// `dataset` (already limited to the committed rows) in `dir`.
            pub fn of_table(
                py: Python<'_>,
                dataset: Arc<$inner>,
                dir: PathBuf,
                (table, column): (PathBuf, String),
            ) -> PyResult<Py<$class>> {
                let (schema, shape) = (dataset.schema().clone(), dataset.$shape().to_vec());
                let shards = (dataset.shards(), dataset.is_sharded());
                let mut opened = Opened::new(py, dataset, &schema, &shape, dir, ReadOptions::default(), shards)?;
                opened.table = Some((table, column));
                let object = $class { opened: OnceLock::new() };
                let _ = object.opened.set(opened);
                Py::new(py, object)
            }

            fn opened(&self) -> PyResult<&Opened<$inner>> {
                self.opened.get().ok_or_else(|| not_open(stringify!($class)))
            }

            pub fn shared(&self) -> PyResult<Arc<$inner>> {
                self.opened()?.inner.get()
            }

            /// The NumPy dtype of its elements.
            pub fn dtype_descr(&self, py: Python<'_>) -> PyResult<Py<PyArrayDescr>> {
                Ok(self.opened()?.dtype.clone_ref(py))
            }
        }

        #[pymethods]
        impl $class {
            /// An unopened object; `__init__` opens it (so that a subclass's
            /// `__init__` may take other arguments).
            #[new]
            #[pyo3(signature = (*_args, **_kwargs), text_signature = "(path, read_mode='auto', verify_reads='device')")]
            fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> $class {
                $class { opened: OnceLock::new() }
            }

            #[doc = $init_doc]
            #[pyo3(signature = (path, read_mode = "auto", verify_reads = None))]
            fn __init__(
                &self,
                py: Python<'_>,
                path: PathBuf,
                read_mode: &str,
                verify_reads: Option<&Bound<'_, PyAny>>,
            ) -> PyResult<()> {
                let mode = reads_of(read_mode, verify_reads)?;
                let dataset = py
                    .detach(|| match crate::store::url_of(&path) {
                        Some(url) => <$inner>::open_url(url, mode),
                        None => <$inner>::open_with(&path, mode),
                    })
                    .map_err(|e| dataset_error(py, &e))?;
                let (schema, shape) = (dataset.schema().clone(), dataset.$shape().to_vec());
                let shards = (dataset.shards(), dataset.is_sharded());
                let opened = Opened::new(py, Arc::new(dataset), &schema, &shape, path, mode, shards)?;
                let again = concat!("the ", stringify!($class), " is open already");
                self.opened.set(opened).map_err(|_| PyRuntimeError::new_err(again))
            }

            /// Pickles by path and read mode (and a subclass's `__dict__`); a
            /// table's column by its table and name.
            fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
                let opened = slf.get().opened()?;
                if let Some((table, column)) = &opened.table {
                    opened.inner.get()?;
                    return crate::table::reduce_column(slf.py(), table, column);
                }
                let (args, kwargs) = opened.open_args(slf.py())?;
                pickle::reduce(slf.as_any(), &slf.py().get_type::<$class>(), args, kwargs)
            }

            /// The store under the dataset (the reference's `_store`), read-only.
            #[getter]
            fn _store<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, Zrecord>> {
                self.opened()?.store(py)
            }

            /// The NumPy dtype of one element.
            #[getter]
            fn dtype(&self, py: Python<'_>) -> PyResult<Py<PyArrayDescr>> {
                self.dtype_descr(py)
            }

            /// The dataset's directory (a `pathlib.Path`).
            #[getter]
            fn path(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
                Ok(self.opened()?.path.clone_ref(py))
            }

            #[doc = $shape_doc]
            #[getter]
            fn $shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
                PyTuple::new(py, &self.opened()?.shape)
            }

            /// The codec the dataset was written with.
            #[getter]
            fn codec(&self) -> PyResult<&'static str> {
                Ok(self.opened()?.codec)
            }

            /// Number of shards (1 for a single store), as at open.
            #[getter]
            fn shards(&self) -> PyResult<usize> {
                Ok(self.shared()?.shards())
            }

            /// True if the dataset is sharded (has a `shards.json` shard table).
            #[getter]
            fn sharded(&self) -> PyResult<bool> {
                Ok(self.opened()?.sharded)
            }

            fn __len__(&self) -> PyResult<usize> {
                Ok(self.shared()?.len() as usize)
            }

            fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
                let o = self.opened()?;
                Ok(format!(
                    concat!(stringify!($class), "({}, dtype={}, ", stringify!($shape), "={})"),
                    o.path.bind(py),
                    o.dtype.bind(py),
                    tuple_text(&o.shape)
                ))
            }

            /// A record for an integer index (negative counts from the end);
            /// a batch for a slice, a list or array of indices, or a boolean
            /// mask.
            fn __getitem__<'py>(&self, py: Python<'py>, idx: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
                let len = self.shared()?.len();
                if let Some(i) = index(idx, len)? {
                    return self.one(py, i);
                }
                let idx = indices(py, idx, len)?;
                self.batch(py, &idx)
            }

            #[doc = $getitems_doc]
            fn __getitems__<'py>(&self, py: Python<'py>, idxs: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
                let idx = indices(py, idxs, self.shared()?.len())?;
                self.batch(py, &idx)
            }

            /// Picks up records a writer appended since open; returns the length.
            fn refresh(&self, py: Python<'_>) -> PyResult<u64> {
                let dataset = self.shared()?;
                py.detach(|| dataset.refresh()).map_err(|e| dataset_error(py, &e))
            }

            /// Closes this handle (loaders built from it keep their own).
            fn close(&self) {
                if let Some(opened) = self.opened.get() {
                    opened.inner.close();
                }
            }

            fn __enter__(slf: Py<Self>) -> Py<Self> {
                slf
            }

            fn __exit__(&self, _t: &Bound<'_, PyAny>, _v: &Bound<'_, PyAny>, _tb: &Bound<'_, PyAny>) -> bool {
                self.close();
                false
            }

            $($extra)*
        }
    };
}

/// Fixed-shape records over a store (the reference's `loaderx.Dataset`):
/// `dtype`, `shape` (of one record), `codec`, `path`. Subclasses may take
/// their own `__init__` arguments; pickling reopens by path and read mode.
#[pyclass(frozen, subclass, module = "loaderx_rs")]
pub struct Dataset {
    opened: OnceLock<Opened<ds::Dataset>>,
}

impl Dataset {
    /// Record `i`, of the record's shape.
    fn one<'py>(&self, py: Python<'py>, i: u64) -> PyResult<Bound<'py, PyAny>> {
        self.gather(py, &[i])?.into_any().get_item(0)
    }

    /// The batch of records `idx`, shaped `(len(idx), *shape)`.
    fn batch<'py>(&self, py: Python<'py>, idx: &[u64]) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.gather(py, idx)?.into_any())
    }

    fn gather<'py>(&self, py: Python<'py>, idx: &[u64]) -> PyResult<Bound<'py, PyUntypedArray>> {
        let opened = self.opened()?;
        let dataset = opened.inner.get()?;
        let shape: Vec<usize> = std::iter::once(idx.len()).chain(opened.shape.iter().copied()).collect();
        let fill = |bytes: &mut [u8]| match fork::run(|| dataset.gather_bytes(idx, bytes)) {
            Ok(result) => result.map_err(Failure::Dataset),
            Err(e) => Err(Failure::Python(e)),
        };
        filled(py, opened.dtype.bind(py), &shape, fill)?.map_err(|e| match e {
            Failure::Dataset(e) => dataset_error(py, &e),
            Failure::Python(e) => e,
        })
    }
}

dataset_class!(
    Dataset over ds::Dataset, shape shape,
    init "Opens the dataset at `path` (a store written by `write_dataset`);\n`read_mode` and `verify_reads` as for `Zrecord`.",
    shape_doc "The shape of one record.",
    getitems "The batch of records `idxs`, shaped `(len(idxs), *shape)`.",
    {}
);

/// Variable-length records over a store (the reference's
/// `loaderx.RaggedDataset`): `dtype`, `item_shape` (of one row), `codec`,
/// `path`. A batch is packed: `(values, row_splits)`. Subclassing and
/// pickling as for `Dataset`.
#[pyclass(frozen, subclass, module = "loaderx_rs")]
pub struct RaggedDataset {
    opened: OnceLock<Opened<ds::RaggedDataset>>,
}

impl RaggedDataset {
    /// Record `i`'s `(rows, *item_shape)` array.
    fn one<'py>(&self, py: Python<'py>, i: u64) -> PyResult<Bound<'py, PyAny>> {
        Ok(self.packed(py, &[i])?.0)
    }

    /// The packed batch of records `idx`, `(values, row_splits)`.
    fn batch<'py>(&self, py: Python<'py>, idx: &[u64]) -> PyResult<Bound<'py, PyAny>> {
        Ok(PyTuple::new(py, <[Bound<'py, PyAny>; 2]>::from(self.packed(py, idx)?))?.into_any())
    }

    fn packed<'py>(&self, py: Python<'py>, idx: &[u64]) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
        let opened = self.opened()?;
        let dataset = opened.inner.get()?;
        let ragged = py.detach(|| fork::run(|| dataset.gather(idx)))?.map_err(|e| dataset_error(py, &e))?;
        let values = from_tensor(py, ragged.values, opened.dtype.bind(py))?;
        Ok((values, i64_array(py, &ragged.row_splits).into_any()))
    }
}

dataset_class!(
    RaggedDataset over ds::RaggedDataset, shape item_shape,
    init "Opens the ragged dataset at `path` (written by `write_ragged`);\n`read_mode` and `verify_reads` as for `Zrecord`.",
    shape_doc "The shape of one row.",
    getitems "The packed batch of records `idxs`: `values` (every row, record\nafter record) and `row_splits` (`int64`, `len(idxs) + 1` entries).",
    {
        /// Records `idxs` decoded straight into a dense `(B, max_len,
        /// *item_shape)` batch, the rest `pad_value`; returns `(padded,
        /// lengths)`. `max_len` defaults to the longest record; a longer record
        /// is an error, or with `truncate=True` keeps its first `max_len` rows
        /// (gathered packed, then cut: `pad(..., truncate=True)` of `self[idxs]`).
        #[pyo3(
            signature = (idxs, max_len = None, pad_value = None, *, truncate = false),
            text_signature = "(self, idxs, max_len=None, pad_value=0, *, truncate=False)"
        )]
        fn getitems_padded<'py>(
            &self,
            py: Python<'py>,
            idxs: &Bound<'py, PyAny>,
            max_len: Option<usize>,
            pad_value: Option<&Bound<'py, PyAny>>,
            truncate: bool,
        ) -> PyResult<Bound<'py, PyTuple>> {
            if truncate && max_len.is_none() {
                return Err(value_error("truncate=True needs max_len: the length to cut longer records to"));
            }
            let (dataset, dtype) = (self.shared()?, self.dtype_descr(py)?);
            let idx = indices(py, idxs, dataset.len())?;
            let element = pad_element(py, dtype.bind(py), pad_value)?;
            let padded = py
                .detach(|| match (truncate, max_len) {
                    (true, Some(max_len)) => dataset
                        .gather(&idx)
                        .and_then(|packed| ds::pad_truncated_bytes(&packed.values, &packed.row_splits, max_len, &element)),
                    _ => dataset.gather_padded_bytes(&idx, max_len, &element),
                })
                .map_err(|e| dataset_error(py, &e))?;
            let values = from_tensor(py, padded.values, dtype.bind(py))?;
            PyTuple::new(py, [values, i64_array(py, &padded.lengths).into_any()])
        }
    }
);

/// A shape as Python prints a tuple: `()`, `(3,)`, `(4, 3)`.
fn tuple_text(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!("({})", shape.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// The bytes of one element `pad_value` (default 0) of `dtype`.
fn pad_element(
    py: Python<'_>,
    dtype: &Bound<'_, PyArrayDescr>,
    pad_value: Option<&Bound<'_, PyAny>>,
) -> PyResult<Vec<u8>> {
    let np = numpy(py)?;
    let value = match pad_value {
        Some(v) => v.clone(),
        None => 0i64.into_pyobject(py)?.into_any(),
    };
    let scalar = np.call_method1("array", (value, dtype))?;
    scalar.call_method0("tobytes")?.extract()
}

fn dtype_of(py: Python<'_>, array: &Bound<'_, PyUntypedArray>) -> PyResult<DType> {
    let text: String = array.dtype().getattr("str")?.extract()?;
    DType::parse(&text).map_err(|e| dataset_error(py, &e))
}

/// Turns a packed `(values, row_splits)` batch into a dense padded one:
/// returns `(padded, lengths)`, `padded` shaped `(B, max_len, *tail)`.
/// A record longer than `max_len` is an error, or with `truncate=True`
/// keeps its first `max_len` rows (its `lengths` entry is then `max_len`).
#[pyfunction]
#[pyo3(
    signature = (values, row_splits, max_len = None, pad_value = None, *, truncate = false),
    text_signature = "(values, row_splits, max_len=None, pad_value=0, *, truncate=False)"
)]
pub fn pad<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    row_splits: &Bound<'py, PyAny>,
    max_len: Option<usize>,
    pad_value: Option<&Bound<'py, PyAny>>,
    truncate: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    if truncate && max_len.is_none() {
        return Err(value_error("truncate=True needs max_len: the length to cut longer records to"));
    }
    let np = numpy(py)?;
    let values = np.call_method1("ascontiguousarray", (values,))?.cast_into::<PyUntypedArray>()?;
    let dtype = dtype_of(py, &values)?;
    let splits = u64s(py, row_splits, "row_splits")?;
    let descr = values.dtype();
    let element = pad_element(py, &descr, pad_value)?;
    let shape = values.shape().to_vec();
    let bytes = read_bytes(values.as_any(), "values")?;
    let bytes = bytes.as_slice()?;
    let padded = py
        .detach(|| -> Result<ds::Padded, ds::DatasetError> {
            let tensor = Tensor::from_bytes(dtype, &shape, bytes)?;
            match (truncate, max_len) {
                (true, Some(max_len)) => ds::pad_truncated_bytes(&tensor, &splits, max_len, &element),
                _ => ds::pad_bytes(&tensor, &splits, max_len, &element),
            }
        })
        .map_err(|e| dataset_error(py, &e))?;
    let out = from_tensor(py, padded.values, &descr)?;
    PyTuple::new(py, [out, i64_array(py, &padded.lengths).into_any()])
}

fn write_options(
    py: Python<'_>,
    codec: &str,
    chunk_bytes: usize,
    dict_size: Option<usize>,
    shard_records: Option<u64>,
) -> PyResult<WriteOptions> {
    if shard_records == Some(0) {
        return Err(value_error("shard_records must be at least 1"));
    }
    Ok(WriteOptions { codec: codec_of(py, codec)?, chunk_bytes, dict_size, shard_records, ..WriteOptions::default() })
}

/// The dataset already at `path`: its record count and dtype, if it is one.
fn existing(path: &std::path::Path) -> Option<(u64, DType)> {
    ds::Shards::open(path, ReadMode::Auto).ok().map(|s| (s.len(), s.schema().dtype))
}

/// `mode` (`None`: append, warning with `AppendWarning` if the dataset at
/// `path` holds records) into `opts`.
fn apply_mode(
    py: Python<'_>,
    opts: &mut WriteOptions,
    mode: Option<&str>,
    path: &std::path::Path,
    existing: Option<(u64, DType)>,
) -> PyResult<()> {
    opts.mode = ds::WriteMode::parse(mode.unwrap_or("append")).map_err(|e| dataset_error(py, &e))?;
    if let (None, Some((records, _))) = (mode, existing)
        && records > 0
    {
        crate::errors::append_warning(
            py,
            &format!(
                "{}: appending to a dataset that already holds {records} records (rerunning a script adds them \
                 again); pass mode=\"append\" to say so and silence this, or mode=\"overwrite\" to replace it",
                path.display()
            ),
        )?;
    }
    Ok(())
}

/// Persists `array` as a dataset at `path`, one record per slice along
/// axis 0; returns the number of records written. `mode`: `"append"` (the
/// default: add to a dataset of the same dtype and shape; without an
/// explicit mode, appending to one with records warns `AppendWarning`),
/// `"overwrite"` (replace it, crash-safely) or `"error"` (refuse one with
/// records). The dtype written: `dtype`, else an existing dataset's (when
/// appending), else the array's; a conversion follows `casting` as in
/// `write_ragged` (default `"same_kind"`, whose values must also fit). A
/// Python list of ints becomes int32 if its values fit, else int64. A
/// C-contiguous array (an `np.load(..., mmap_mode='r')` one included) is
/// read in place, in calls of at most `chunk_bytes`.
#[pyfunction]
#[pyo3(
    signature = (path, array, codec = "zstd", chunk_bytes = WRITE_CHUNK_BYTES, dict_size = None, shard_records = None,
                 mode = None, dtype = None, casting = "same_kind"),
    text_signature = "(path, array, codec='zstd', chunk_bytes=67108864, dict_size=None, shard_records=None, mode='append', dtype=None, casting='same_kind')"
)]
#[allow(clippy::too_many_arguments)]
pub fn write_dataset(
    py: Python<'_>,
    path: PathBuf,
    array: &Bound<'_, PyAny>,
    codec: &str,
    chunk_bytes: usize,
    dict_size: Option<usize>,
    shard_records: Option<u64>,
    mode: Option<&str>,
    dtype: Option<&Bound<'_, PyAny>>,
    casting: &str,
) -> PyResult<u64> {
    let mut opts = write_options(py, codec, chunk_bytes, dict_size, shard_records)?;
    cast::rule(py, casting)?;
    let existing = existing(&path);
    apply_mode(py, &mut opts, mode, &path, existing)?;
    let appending = existing.filter(|_| opts.mode != ds::WriteMode::Overwrite);
    let wanted = match (dtype, appending) {
        (Some(d), _) => Some(PyArrayDescr::new(py, d)?.into_any()),
        (None, Some((_, dtype))) => Some(descr(py, &dtype.to_string())?.into_any()),
        (None, None) => None,
    };
    let array = cast::sample_array(array, wanted.as_ref(), casting)?.cast_into::<PyUntypedArray>()?;
    if array.ndim() < 1 {
        return Err(value_error("array must have a sample axis"));
    }
    let dtype = dtype_of(py, &array)?;
    let shape = array.shape()[1..].to_vec();
    let bytes = read_bytes(array.as_any(), "array")?;
    let bytes = bytes.as_slice()?;
    py.detach(|| fork::run(|| ds::write_dataset_bytes(&path, dtype, &shape, bytes, &opts)))?
        .map_err(|e| dataset_error(py, &e))
}

/// Persists an iterable of variable-length arrays, each `(rows,
/// *item_shape)`, as a ragged dataset at `path`; returns the number of
/// records written. `dtype` and `item_shape` default to the first array's.
/// `mode` as for `write_dataset`.
/// An array of another dtype is converted under NumPy's `casting` rule
/// (default `"same_kind"`, whose values must also fit `dtype`); a
/// conversion that would change values is refused unless
/// `casting="unsafe"`. A failure ends the write: the records of the
/// append call it interrupts are not written, so a new dataset whose first
/// call fails is not created.
#[pyfunction]
#[pyo3(
    signature = (path, arrays, dtype = None, item_shape = None, codec = "zstd",
                 chunk_bytes = WRITE_CHUNK_BYTES, dict_size = None, casting = "same_kind", shard_records = None, mode = None),
    text_signature = "(path, arrays, dtype=None, item_shape=None, codec='zstd', chunk_bytes=67108864, dict_size=None, casting='same_kind', shard_records=None, mode='append')"
)]
#[allow(clippy::too_many_arguments)]
pub fn write_ragged(
    py: Python<'_>,
    path: PathBuf,
    arrays: &Bound<'_, PyAny>,
    dtype: Option<&Bound<'_, PyAny>>,
    item_shape: Option<Vec<usize>>,
    codec: &str,
    chunk_bytes: usize,
    dict_size: Option<usize>,
    casting: &str,
    shard_records: Option<u64>,
    mode: Option<&str>,
) -> PyResult<u64> {
    let mut opts = write_options(py, codec, chunk_bytes, dict_size, shard_records)?;
    cast::rule(py, casting)?;
    cast::refuse_column(arrays)?;
    apply_mode(py, &mut opts, mode, &path, existing(&path))?;
    let mut iter = arrays.try_iter()?;
    let first = match iter.next() {
        Some(first) => cast::ragged_item(&first?, 0)?.cast_into::<PyUntypedArray>()?,
        None => return Err(value_error("no arrays to write")),
    };
    let descr = match dtype {
        Some(d) => PyArrayDescr::new(py, d)?,
        None => first.dtype(),
    };
    let item_shape = match item_shape {
        Some(s) => s,
        None if first.ndim() >= 1 => first.shape()[1..].to_vec(),
        None => Vec::new(),
    };
    let text: String = descr.getattr("str")?.extract()?;
    let element = DType::parse(&text).map_err(|e| dataset_error(py, &e))?;
    let failure: RefCell<Option<PyErr>> = RefCell::new(None);
    let prepared = |(position, a): (usize, Bound<'_, PyAny>)| -> PyResult<Vec<u8>> {
        let a = cast::converted(&a, descr.as_any(), casting, position as u64)?;
        let a = a.cast_into::<PyUntypedArray>()?;
        if a.ndim() < 1 || a.shape()[1..] != item_shape[..] {
            return Err(value_error(format!(
                "array with row shape {:?} does not match item_shape {item_shape:?}",
                a.shape().get(1..).unwrap_or(&[])
            )));
        }
        Ok(read_bytes(a.as_any(), "array")?.as_slice()?.to_vec())
    };
    // A Python error ends the write (the records of the call it interrupts
    // are not written) and is raised as itself.
    let records = std::iter::once(Ok(first.into_any())).chain(iter).enumerate().map_while(|(position, item)| {
        if failure.borrow().is_some() {
            return None;
        }
        Some(item.and_then(|a| prepared((position, a))).map_err(|e| {
            *failure.borrow_mut() = Some(e);
            ds::DatasetError::InvalidArgument("an array could not be written".into())
        }))
    });
    // The records iterator calls Python, so the write runs on this thread
    // with the GIL held; in a fork child, whose parallel encoding must run
    // in a pool of its own (fork.rs), the records are collected first.
    let written = if fork::forked() {
        let all: Vec<Result<Vec<u8>, ds::DatasetError>> = records.collect();
        fork::run(|| ds::write_ragged_results(&path, element, &item_shape, all, &opts))?
    } else {
        ds::write_ragged_results(&path, element, &item_shape, records, &opts)
    };
    if let Some(e) = failure.into_inner() {
        return Err(e);
    }
    written.map_err(|e| dataset_error(py, &e))
}
