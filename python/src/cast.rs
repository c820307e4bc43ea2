//! `write_ragged`'s conversion of each array to the dataset's dtype. By
//! default a conversion that changes values is refused: NumPy's
//! `same_kind` rule (no float to int, no signed to unsigned of another
//! kind, ...), and within a kind the values must fit the narrower type (no
//! integer wrap-around, no finite float becoming infinite). `casting` takes
//! NumPy's other rule names; `"unsafe"` converts as NumPy does, silently,
//! as the reference always does. `write_dataset` converts under the same
//! rule (`sample_array`), and there a Python list or tuple of ints, whose
//! dtype NumPy would make int64, becomes int32 if its values fit. Arrays of
//! Python objects are refused, naming what was given and what to pass.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

/// The check, in Python (NumPy's own casting tables and value ranges).
const CAST_PY: &std::ffi::CStr = cr#"
import numpy as np

RULES = ("no", "equiv", "safe", "same_kind", "unsafe")


def label(position):
    return "the array" if position is None else f"array {position}"


def numeric(given, array, position):
    """`array` (made from `given`), or TypeError if it holds Python objects."""
    if array.dtype.kind == "O":
        kind = f"{type(given).__module__}.{type(given).__qualname__}"
        what = "an array" if isinstance(given, np.ndarray) else f"a {kind} that NumPy turns into an array"
        raise TypeError(
            f"{label(position)} is {what} of Python objects "
            f"(shape {array.shape}), not of numbers; pass a NumPy array of numbers: "
            f"np.asarray(x, dtype=...) (for ragged records, a list of such arrays, one per record)"
        )
    return array


def refuse_column(arrays):
    """TypeError for an Arrow column given to write_ragged whole."""
    module = type(arrays).__module__ or ""
    if module.split(".")[0] == "pyarrow":
        raise TypeError(
            f"write_ragged got a {module}.{type(arrays).__qualname__}; it takes an iterable of NumPy arrays, "
            f"one per record: pass [np.asarray(x, dtype=...) for x in column.to_pylist()] "
            f"(or, per chunk of a list column, np.split(chunk.flatten().to_numpy(), chunk.offsets.to_numpy()[1:-1]))"
        )


def ragged_item(item, position):
    """One write_ragged record as a C-contiguous array of numbers."""
    return np.ascontiguousarray(numeric(item, np.asarray(item), position))


def sample_array(given, dtype, casting):
    """write_dataset's input as a C-contiguous array: of `dtype` under
    `casting` if given, else as NumPy makes it, a list of ints as int32 if
    its values fit."""
    array = numeric(given, np.asarray(given), None)
    if array.ndim < 1:
        raise ValueError(f"array must have a sample axis (got a scalar of {array.dtype}); pass a 1-D or larger array")
    if dtype is None:
        if isinstance(given, (list, tuple)) and array.dtype == np.int64 and fits(array, None, np.dtype(np.int32)):
            array = array.astype(np.int32)
        return np.ascontiguousarray(array)
    return converted(array, np.dtype(dtype), casting, None)


def converted(array, dtype, casting, position):
    """`array` as a C-contiguous array of `dtype`, or TypeError / ValueError
    if `casting` does not allow the conversion or it would change values."""
    array = numeric(array, np.asarray(array), position)
    if array.dtype == dtype or casting == "unsafe":
        return np.ascontiguousarray(array, dtype=dtype)
    if not np.can_cast(array.dtype, dtype, casting=casting):
        raise TypeError(
            f"{label(position)}: cannot write {array.dtype} values as {dtype} under casting={casting!r} "
            f"(NumPy's rule); pass casting='unsafe' to convert them anyway"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.ascontiguousarray(array, dtype=dtype)
    if casting == "same_kind" and array.size and not fits(array, out, dtype):
        raise ValueError(
            f"{label(position)}: values from {array.min()} to {array.max()} do not fit {dtype}; "
            f"pass casting='unsafe' to convert them anyway"
        )
    return out


def fits(array, out, dtype):
    """Whether the converted values are the values: an integer range that
    fits, or no finite float turned infinite."""
    if dtype.kind in "iu" and array.dtype.kind in "biu":
        info = np.iinfo(dtype)
        return array.size == 0 or (info.min <= int(array.min()) and int(array.max()) <= info.max)
    if dtype.kind in "fc":
        return not (np.isinf(out) & np.isfinite(array)).any()
    return True
"#;

static CAST: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

fn module(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    let module = CAST.get_or_try_init(py, || {
        Ok::<_, PyErr>(PyModule::from_code(py, CAST_PY, c"loaderx_rs/_cast.py", c"loaderx_rs._cast")?.unbind())
    })?;
    Ok(module.bind(py))
}

/// `casting` if it is one of NumPy's rule names, else a `ValueError`.
pub fn rule(py: Python<'_>, casting: &str) -> PyResult<()> {
    let rules: Vec<String> = module(py)?.getattr("RULES")?.extract()?;
    match rules.iter().any(|r| r == casting) {
        true => Ok(()),
        false => {
            Err(crate::errors::value_error(format!("casting must be one of {}, not {casting:?}", rules.join(", "))))
        }
    }
}

/// TypeError if `arrays` is an Arrow column (see the module doc).
pub fn refuse_column(arrays: &Bound<'_, PyAny>) -> PyResult<()> {
    module(arrays.py())?.getattr("refuse_column")?.call1((arrays,))?;
    Ok(())
}

/// One `write_ragged` record as a C-contiguous array of numbers.
pub fn ragged_item<'py>(item: &Bound<'py, PyAny>, position: u64) -> PyResult<Bound<'py, PyAny>> {
    module(item.py())?.getattr("ragged_item")?.call1((item, position))
}

/// `write_dataset`'s input as a C-contiguous array (see the module doc).
pub fn sample_array<'py>(
    given: &Bound<'py, PyAny>,
    dtype: Option<&Bound<'py, PyAny>>,
    casting: &str,
) -> PyResult<Bound<'py, PyAny>> {
    module(given.py())?.getattr("sample_array")?.call1((given, dtype, casting))
}

/// `array` converted to `dtype` under `casting` (see the module doc).
pub fn converted<'py>(
    array: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
    casting: &str,
    position: u64,
) -> PyResult<Bound<'py, PyAny>> {
    module(array.py())?.getattr("converted")?.call1((array, dtype, casting, position))
}
