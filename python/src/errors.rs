//! Errors as Python exceptions: one base, `ZrecordError` (a `RuntimeError`,
//! as the reference's), and a subclass per kind of failure, each carrying
//! `path` and `index` where they apply and the reference's numeric `code`
//! where it has one. Subclasses that are also a builtin exception
//! (`IndexError`, `ValueError`, `OSError`, `FileNotFoundError`) keep
//! `except` clauses written for the reference's exceptions working.
//!
//! The classes are plain Python classes, defined once at import
//! (`EXCEPTIONS_PY`), so that they can inherit from two builtins.

use loaderx::Error;
use loaderx::dataset::DatasetError;
use loaderx::import::ImportError;
use loaderx::loader::LoaderError;
use loaderx::sampler::SamplerError;
use loaderx::table::TableError;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyModule, PyType};

/// The exception classes, in Python.
const EXCEPTIONS_PY: &std::ffi::CStr = cr#"
class ZrecordError(RuntimeError):
    """Base of every error loaderx_rs raises about a store, a dataset or a loader.

    Attributes: ``path`` (the store or file, or None), ``index`` (the record,
    or None) and ``code`` (the reference package's error code, or None).
    """

    def __init__(self, message, path=None, index=None, code=None):
        super().__init__(message)
        self.path = path
        self.index = index
        self.code = code


class StoreIOError(ZrecordError, OSError):
    """An operating-system call on the store's files failed."""


class NotAStoreError(ZrecordError):
    """The directory holds no store, or not one this version reads."""


class LockedError(ZrecordError):
    """Another writer has the store open."""


class BusyError(ZrecordError):
    """The readers' lock is taken: a delete or compaction while the store is
    open for reading elsewhere, or a read-only open while one runs. Pass
    ``wait=True`` to wait instead."""


class StoreChangedError(ZrecordError):
    """The store's files changed under a read-only store (a delete or
    compaction by a process that takes no readers' lock); not corruption:
    open the store again."""


class ReadOnlyError(ZrecordError):
    """A write on a store opened read-only."""


class PoisonedError(ZrecordError):
    """An earlier sync failed; the store refuses writes until reopened."""


class RecoveryNeededError(ZrecordError):
    """An interrupted delete or compaction: open the store for writing once."""


class StoreIndexError(ZrecordError, IndexError):
    """A record index at or past the store's length."""


class RecordTooLargeError(ZrecordError, ValueError):
    """A record over the 1 MiB limit."""


class StoreFullError(ZrecordError):
    """The store holds its maximum number of records or bytes."""


class LayoutError(ZrecordError, ValueError):
    """Arguments that do not fit together: buffer sizes, offsets, strides,
    or a stored length that is not the one the caller's layout expects."""


class DictionaryError(ZrecordError):
    """No dictionary where one is needed, one already installed, or training failed."""


class CorruptError(ZrecordError):
    """The store's bytes contradict its own invariants."""


class DatasetError(ZrecordError, ValueError):
    """A dataset's schema, dtype, shape or kind does not fit the call."""


class SchemaNotFoundError(DatasetError, FileNotFoundError):
    """The directory has no schema.json: it is not a loaderx dataset."""


class DatasetNotFoundError(SchemaNotFoundError):
    """The dataset's directory does not exist; ``errno`` is ``ENOENT`` and
    ``filename`` the path."""

    def __init__(self, message, path=None, index=None, code=None):
        super().__init__(message, path, index, code)
        import errno

        self.errno = errno.ENOENT
        self.strerror = message
        self.filename = path


class DatasetExistsError(DatasetError, FileExistsError):
    """A write with ``mode="error"`` found a dataset that holds records."""


class AppendWarning(UserWarning):
    """A write without an explicit ``mode`` appended to a dataset that
    already held records. Pass ``mode="append"`` to say that is meant (and
    silence it), or ``mode="overwrite"`` to replace the dataset."""


class LoaderError(ZrecordError):
    """A loader worker failed; ``step`` is the step whose batch it was."""

    def __init__(self, message, path=None, index=None, code=None, step=None):
        super().__init__(message, path, index, code)
        self.step = step
"#;

/// Every exception class, fetched once.
pub struct Exceptions {
    module: Py<PyModule>,
}

static EXCEPTIONS: PyOnceLock<Exceptions> = PyOnceLock::new();

/// The names `EXCEPTIONS_PY` defines, exported by the module.
pub const NAMES: &[&str] = &[
    "ZrecordError",
    "StoreIOError",
    "NotAStoreError",
    "LockedError",
    "BusyError",
    "StoreChangedError",
    "ReadOnlyError",
    "PoisonedError",
    "RecoveryNeededError",
    "StoreIndexError",
    "RecordTooLargeError",
    "StoreFullError",
    "LayoutError",
    "DictionaryError",
    "CorruptError",
    "DatasetError",
    "SchemaNotFoundError",
    "DatasetNotFoundError",
    "DatasetExistsError",
    "AppendWarning",
    "LoaderError",
];

/// Defines the classes (once) and adds them to `module`.
pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    let exceptions = exceptions(py)?;
    for name in NAMES {
        let class = exceptions.module.bind(py).getattr(*name)?;
        class.setattr("__module__", "loaderx_rs")?;
        module.add(*name, class)?;
    }
    Ok(())
}

fn exceptions(py: Python<'_>) -> PyResult<&Exceptions> {
    EXCEPTIONS.get_or_try_init(py, || {
        let module = PyModule::from_code(py, EXCEPTIONS_PY, c"loaderx_rs/_errors.py", c"loaderx_rs._errors")?;
        Ok(Exceptions { module: module.unbind() })
    })
}

/// An instance of class `name` with these fields.
fn make(py: Python<'_>, name: &str, message: String, path: Option<String>, index: Option<u64>) -> PyErr {
    let code = reference_code(name);
    match exceptions(py).and_then(|e| e.module.bind(py).getattr(name)) {
        Ok(class) => match class.cast_into::<PyType>() {
            Ok(class) => PyErr::from_type(class, (message, path, index, code)),
            Err(e) => e.into(),
        },
        Err(e) => e,
    }
}

/// The reference package's error code of an exception class, where it has one.
fn reference_code(name: &str) -> Option<i32> {
    Some(match name {
        "StoreIOError" => -2,
        "StoreIndexError" => -3,
        "RecordTooLargeError" => -4,
        "StoreFullError" => -5,
        "LayoutError" => -6,
        "CorruptError" => -7,
        "NotAStoreError" => -8,
        "DictionaryError" => -9,
        _ => return None,
    })
}

fn path_string(path: &std::path::Path) -> Option<String> {
    Some(path.display().to_string())
}

/// A store error as its Python exception.
pub fn store_error(py: Python<'_>, e: &Error) -> PyErr {
    let message = e.to_string();
    let (name, path, index) = match e {
        Error::Io { path, .. } => ("StoreIOError", path_string(path), None),
        Error::NotADirectory { path }
        | Error::NoStore { path }
        | Error::NoDirectory { path }
        | Error::NotAStore { path, .. }
        | Error::MetaMissing { path }
        | Error::MetaTruncated { path, .. } => ("NotAStoreError", path_string(path), None),
        Error::Locked { path } => ("LockedError", path_string(path), None),
        Error::ReadersOpen { path } | Error::MutationRunning { path } => ("BusyError", path_string(path), None),
        Error::StoreChanged { path, index, .. } => ("StoreChangedError", path_string(path), *index),
        Error::ReadOnly { path } => ("ReadOnlyError", path_string(path), None),
        Error::Poisoned { path } => ("PoisonedError", path_string(path), None),
        Error::RecoveryNeeded { path } => ("RecoveryNeededError", path_string(path), None),
        Error::IndexOutOfRange { path, index, .. } => ("StoreIndexError", path_string(path), Some(*index)),
        Error::RecordTooLarge { position, .. } => ("RecordTooLargeError", None, Some(*position as u64)),
        Error::StoreFull { path } => ("StoreFullError", path_string(path), None),
        Error::InvalidArgument(_) => ("LayoutError", None, None),
        Error::LengthMismatch { path, index, .. } => ("LayoutError", path_string(path), Some(*index)),
        Error::NoDictionary { path, index } => ("DictionaryError", path_string(path), *index),
        Error::DictionaryExists { path } => ("DictionaryError", path_string(path), None),
        Error::DictionaryTraining { .. } => ("DictionaryError", None, None),
        Error::Corrupt { path, index, .. } => ("CorruptError", path_string(path), *index),
        _ => ("ZrecordError", None, None),
    };
    make(py, name, message, path, index)
}

/// A dataset error as its Python exception.
pub fn dataset_error(py: Python<'_>, e: &DatasetError) -> PyErr {
    let message = e.to_string();
    match e {
        DatasetError::Store(e) => store_error(py, e),
        DatasetError::Io { path, .. } => make(py, "StoreIOError", message, path_string(path), None),
        DatasetError::NoSchema { path } => make(py, "SchemaNotFoundError", message, path_string(path), None),
        DatasetError::NoDataset { path } => make(py, "DatasetNotFoundError", message, path_string(path), None),
        DatasetError::Exists { path, .. } => make(py, "DatasetExistsError", message, path_string(path), None),
        DatasetError::Schema { path, .. }
        | DatasetError::UnknownFormat { path, .. }
        | DatasetError::UnsupportedVersion { path, .. }
        | DatasetError::WrongKind { path, .. }
        | DatasetError::Incompatible { path, .. }
        | DatasetError::Npy { path, .. } => make(py, "DatasetError", message, path_string(path), None),
        DatasetError::PartialRow { index, .. } => make(py, "CorruptError", message, None, Some(*index)),
        DatasetError::TooLong { position, .. } => make(py, "DatasetError", message, None, Some(*position as u64)),
        DatasetError::RecordTooLarge { path, .. } => {
            make(py, "RecordTooLargeError", message, path.as_deref().and_then(path_string), None)
        }
        DatasetError::DictionaryTraining { path, .. } => make(py, "DictionaryError", message, path_string(path), None),
        DatasetError::IndexOutOfRange { path, index, .. } => {
            make(py, "StoreIndexError", message, path_string(path), Some(*index))
        }
        DatasetError::ShardLength { path, .. } => make(py, "CorruptError", message, path_string(path), None),
        DatasetError::ShardTable { path, .. }
        | DatasetError::ShardMissing { path, .. }
        | DatasetError::ShardSchema { path, .. }
        | DatasetError::ShardNotEmpty { path, .. } => make(py, "DatasetError", message, path_string(path), None),
        _ => make(py, "DatasetError", message, None, None),
    }
}

/// A table error as its Python exception: a column's dataset error as
/// that error, a bad argument a `ValueError`, the rest `DatasetError`s
/// (`DatasetExistsError` for a table already there, `DatasetNotFoundError`
/// for a directory that is no table).
pub fn table_error(py: Python<'_>, e: &TableError) -> PyErr {
    let message = e.to_string();
    match e {
        TableError::Dataset(e) => dataset_error(py, e),
        TableError::InvalidArgument(_) => PyValueError::new_err(message),
        TableError::Io { path, .. } => make(py, "StoreIOError", message, path_string(path), None),
        TableError::NotATable { path } => make(py, "DatasetNotFoundError", message, path_string(path), None),
        TableError::Exists { path } => make(py, "DatasetExistsError", message, path_string(path), None),
        TableError::Commit { path, .. } | TableError::ColumnShort { path, .. } => {
            make(py, "CorruptError", message, path_string(path), None)
        }
        _ => make(py, "DatasetError", message, None, None),
    }
}

/// An import or export error as its Python exception, as `write_table`'s
/// dict path reports the same failures: a table's error as
/// [`table_error`] gives it, a column whose type cannot be a table column a
/// `TypeError`, an input file that cannot be read a `StoreIOError`, bad
/// input, a null and a bad argument a `ValueError`.
pub fn import_error(py: Python<'_>, e: &ImportError) -> PyErr {
    match e {
        ImportError::Table(e) => table_error(py, e),
        ImportError::ColumnType { .. } => PyTypeError::new_err(e.to_string()),
        ImportError::Io { path, .. } => make(py, "StoreIOError", e.to_string(), path_string(path), None),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// Warns with `AppendWarning` (a `UserWarning`): `message`.
pub fn append_warning(py: Python<'_>, message: &str) -> PyResult<()> {
    let class = exceptions(py)?.module.bind(py).getattr("AppendWarning")?;
    PyErr::warn(py, &class, &std::ffi::CString::new(message).unwrap_or_default(), 1)
}

/// A sampler error: always a bad argument.
pub fn sampler_error(e: &SamplerError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// A loader error as its Python exception: configuration mistakes are
/// `ValueError`s (as the reference's), worker failures `LoaderError`s
/// naming the step, with the underlying store error as `__cause__`.
pub fn loader_error(py: Python<'_>, e: &LoaderError) -> PyErr {
    let message = e.to_string();
    match e {
        LoaderError::NoStreams
        | LoaderError::DuplicateStream(_)
        | LoaderError::LengthMismatch(_)
        | LoaderError::NoSources
        | LoaderError::SourceStreams { .. }
        | LoaderError::SourceSchema { .. }
        | LoaderError::InvalidArgument(_)
        | LoaderError::State(_) => PyValueError::new_err(message),
        LoaderError::Sampler(e) => sampler_error(e),
        LoaderError::Gather { step, source, .. } => {
            let cause = dataset_error(py, source);
            let (path, index) = cause
                .value(py)
                .getattr("path")
                .and_then(|p| Ok((p.extract::<Option<String>>()?, cause.value(py).getattr("index")?.extract()?)))
                .unwrap_or((None, None));
            let err = loader_failure(py, message, path, index, Some(*step));
            err.set_cause(py, Some(cause));
            err
        }
        _ => loader_failure(py, message, None, None, e.step()),
    }
}

fn loader_failure(
    py: Python<'_>,
    message: String,
    path: Option<String>,
    index: Option<u64>,
    step: Option<u64>,
) -> PyErr {
    match exceptions(py).and_then(|e| e.module.bind(py).getattr("LoaderError")) {
        Ok(class) => match class.cast_into::<PyType>() {
            Ok(class) => PyErr::from_type(class, (message, path, index, None::<i32>, step)),
            Err(e) => e.into(),
        },
        Err(e) => e,
    }
}

/// A `TypeError` with `message`.
pub fn type_error(message: impl Into<String>) -> PyErr {
    PyTypeError::new_err(message.into())
}

/// A `ValueError` with `message`.
pub fn value_error(message: impl Into<String>) -> PyErr {
    PyValueError::new_err(message.into())
}
