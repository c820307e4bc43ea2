//! `write_ragged`'s conversion of each array to the dataset's dtype. By
//! default a conversion that changes values is refused: NumPy's
//! `same_kind` rule (no float to int, no signed to unsigned of another
//! kind, ...), and within a kind the values must fit the narrower type (no
//! integer wrap-around, no finite float becoming infinite). `casting` takes
//! NumPy's other rule names; `"unsafe"` converts as NumPy does, silently,
//! as the reference always does.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

/// The check, in Python (NumPy's own casting tables and value ranges).
const CAST_PY: &std::ffi::CStr = cr#"
import numpy as np

RULES = ("no", "equiv", "safe", "same_kind", "unsafe")


def converted(array, dtype, casting, position):
    """`array` as a C-contiguous array of `dtype`, or TypeError / ValueError
    if `casting` does not allow the conversion or it would change values."""
    array = np.asarray(array)
    if array.dtype == dtype or casting == "unsafe":
        return np.ascontiguousarray(array, dtype=dtype)
    if not np.can_cast(array.dtype, dtype, casting=casting):
        raise TypeError(
            f"array {position}: cannot write {array.dtype} values as {dtype} under casting={casting!r} "
            f"(NumPy's rule); pass casting='unsafe' to convert them anyway"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.ascontiguousarray(array, dtype=dtype)
    if casting == "same_kind" and array.size and not fits(array, out, dtype):
        raise ValueError(
            f"array {position}: values from {array.min()} to {array.max()} do not fit {dtype}; "
            f"pass casting='unsafe' to convert them anyway"
        )
    return out


def fits(array, out, dtype):
    """Whether the converted values are the values: an integer range that
    fits, or no finite float turned infinite."""
    if dtype.kind in "iu" and array.dtype.kind in "biu":
        info = np.iinfo(dtype)
        return info.min <= int(array.min()) and int(array.max()) <= info.max
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

/// `array` converted to `dtype` under `casting` (see the module doc).
pub fn converted<'py>(
    array: &Bound<'py, PyAny>,
    dtype: &Bound<'py, PyAny>,
    casting: &str,
    position: u64,
) -> PyResult<Bound<'py, PyAny>> {
    module(array.py())?.getattr("converted")?.call1((array, dtype, casting, position))
}
