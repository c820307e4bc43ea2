//! NumPy arrays in and out: index arguments as the reference accepts them,
//! byte views of caller arrays, output arrays allocated once, and batches of
//! the Rust loader handed over without a copy.

use loaderx::dataset::Tensor;
use numpy::npyffi::{self, NPY_ARRAY_WRITEABLE, PY_ARRAY_API, npy_intp};
use numpy::prelude::*;
use numpy::{PyArray1, PyArrayDescr, PyReadonlyArray1, PyReadwriteArray1, PyUntypedArray};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyInt, PySlice};

use crate::errors::{type_error, value_error};

static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// The `numpy` module.
pub fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    NUMPY.get_or_try_init(py, || Ok::<_, PyErr>(py.import("numpy")?.unbind())).map(|m| m.bind(py))
}

/// `np.dtype(dtype)`.
pub fn descr<'py>(py: Python<'py>, dtype: &str) -> PyResult<Bound<'py, PyArrayDescr>> {
    PyArrayDescr::new(py, dtype)
}

/// Record indices from what the reference's `__getitems__` accepts: an
/// integer array or list (negative indices count from `len`, as in NumPy),
/// a slice, a boolean mask, a NumPy integer. Returns them as `u64`; an index
/// still out of range is left for the store to refuse with its own error.
pub fn indices(py: Python<'_>, obj: &Bound<'_, PyAny>, len: u64) -> PyResult<Vec<u64>> {
    // Fast paths: the arrays a loader or a sampler produces.
    if let Ok(a) = obj.cast::<PyArray1<u64>>() {
        let a = a.readonly();
        if let Ok(s) = a.as_slice() {
            return Ok(s.to_vec());
        }
    }
    if let Ok(a) = obj.cast::<PyArray1<i64>>() {
        let a = a.readonly();
        if let Ok(s) = a.as_slice() {
            return s.iter().map(|&i| wrap(i, len)).collect();
        }
    }
    if let Ok(slice) = obj.cast::<PySlice>() {
        let len = isize::try_from(len).map_err(|_| value_error("length too large"))?;
        let ind = slice.indices(len)?;
        let mut out = Vec::with_capacity(ind.slicelength);
        let mut at = ind.start;
        for _ in 0..ind.slicelength {
            out.push(at as u64);
            at += ind.step;
        }
        return Ok(out);
    }
    if obj.is_instance_of::<PyBool>() {
        return Err(type_error("a bool is not a record index"));
    }
    let np = numpy(py)?;
    let array = np.call_method1("asarray", (obj,))?;
    let array = array.cast_into::<PyUntypedArray>().map_err(|_| type_error("indices must be array-like"))?;
    let kind = array.dtype().kind();
    let flat = array.call_method0("ravel")?;
    match kind {
        b'b' => {
            if array.ndim() != 1 || array.len() as u64 != len {
                return Err(value_error(format!(
                    "a boolean mask must be 1-D with one entry per record ({len}), got shape {:?}",
                    array.shape()
                )));
            }
            let nz = np.call_method1("flatnonzero", (flat,))?;
            let nz = nz.call_method1("astype", (np.getattr("int64")?,))?;
            let nz = nz.cast_into::<PyArray1<i64>>()?;
            let nz = nz.readonly();
            Ok(nz.as_slice()?.iter().map(|&i| i as u64).collect())
        }
        b'u' => {
            let a = flat.call_method1("astype", (np.getattr("uint64")?,))?.cast_into::<PyArray1<u64>>()?;
            Ok(a.readonly().as_slice()?.to_vec())
        }
        b'i' => {
            let a = flat.call_method1("astype", (np.getattr("int64")?,))?.cast_into::<PyArray1<i64>>()?;
            a.readonly().as_slice()?.iter().map(|&i| wrap(i, len)).collect()
        }
        _ if array.len() == 0 => Ok(Vec::new()),
        // Python integers past int64 (NumPy's object arrays): converting
        // raises OverflowError, anything else not an integer TypeError.
        b'O' if flat.try_iter()?.all(|v| v.is_ok_and(|v| v.is_instance_of::<PyInt>())) => {
            let a = np.call_method1("asarray", (flat, np.getattr("int64")?))?.cast_into::<PyArray1<i64>>()?;
            a.readonly().as_slice()?.iter().map(|&i| wrap(i, len)).collect()
        }
        _ => Err(type_error(format!("record indices must be integers, got dtype {}", array.dtype()))),
    }
}

/// One index: a Python or NumPy integer, negative counting from `len`.
pub fn index(obj: &Bound<'_, PyAny>, len: u64) -> PyResult<Option<u64>> {
    if obj.is_instance_of::<PyBool>() {
        return Ok(None);
    }
    let is_int = obj.is_instance_of::<PyInt>() || obj.hasattr("__index__")? && !obj.hasattr("__len__")?;
    if !is_int {
        return Ok(None);
    }
    let i: i128 = obj.call_method0("__index__")?.extract()?;
    let wrapped = if i < 0 { i + i128::from(len) } else { i };
    u64::try_from(wrapped)
        .map(Some)
        .map_err(|_| pyo3::exceptions::PyIndexError::new_err(format!("index {i} out of range for {len} records")))
}

fn wrap(i: i64, len: u64) -> PyResult<u64> {
    if i >= 0 {
        return Ok(i as u64);
    }
    let wrapped = i128::from(i) + i128::from(len);
    u64::try_from(wrapped)
        .map_err(|_| pyo3::exceptions::PyIndexError::new_err(format!("index {i} out of range for {len} records")))
}

/// `u64` values from an array-like (offsets, sizes).
pub fn u64s(py: Python<'_>, obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u64>> {
    let np = numpy(py)?;
    let a = np.call_method1("asarray", (obj,))?.call_method0("ravel")?;
    let a = a.cast_into::<PyUntypedArray>().map_err(|_| type_error(format!("{what} must be array-like")))?;
    match a.dtype().kind() {
        b'u' | b'i' => {}
        _ if a.len() == 0 => return Ok(Vec::new()),
        _ => return Err(type_error(format!("{what} must be integers, got dtype {}", a.dtype()))),
    }
    let signed = a.call_method1("astype", (np.getattr("int64")?,))?.cast_into::<PyArray1<i64>>()?;
    let signed = signed.readonly();
    signed
        .as_slice()?
        .iter()
        .map(|&v| u64::try_from(v).map_err(|_| value_error(format!("{what} must not be negative, got {v}"))))
        .collect()
}

/// A flat `uint8` view of a C-contiguous array (no copy).
fn byte_view<'py>(array: &Bound<'py, PyAny>, what: &str) -> PyResult<Bound<'py, PyArray1<u8>>> {
    let py = array.py();
    let Ok(untyped) = array.cast::<PyUntypedArray>() else {
        return Err(type_error(format!("{what} must be a NumPy array, got {}", array.get_type().name()?)));
    };
    if !untyped.is_c_contiguous() {
        return Err(value_error(format!("{what} must be C-contiguous")));
    }
    let np = numpy(py)?;
    let flat = array.call_method1("reshape", (-1,))?;
    Ok(flat.call_method1("view", (np.getattr("uint8")?,))?.cast_into::<PyArray1<u8>>()?)
}

/// The bytes of a C-contiguous array, read-only (borrow-checked against
/// writers on the Rust side).
pub fn read_bytes<'py>(array: &Bound<'py, PyAny>, what: &str) -> PyResult<PyReadonlyArray1<'py, u8>> {
    Ok(byte_view(array, what)?.readonly())
}

/// The bytes of a C-contiguous, writeable array.
pub fn write_bytes<'py>(array: &Bound<'py, PyAny>, what: &str) -> PyResult<PyReadwriteArray1<'py, u8>> {
    byte_view(array, what)?.try_readwrite().map_err(|e| value_error(format!("{what} is not writeable: {e}")))
}

fn dims(shape: &[usize]) -> PyResult<Vec<npy_intp>> {
    shape.iter().map(|&d| npy_intp::try_from(d).map_err(|_| value_error("dimension too large"))).collect()
}

/// A new C-order array of `descr` and `shape`, its memory allocated by
/// NumPy and not initialised (`np.empty`). The caller must write every byte
/// before anything reads it ([`filled`]).
fn empty<'py>(
    py: Python<'py>,
    descr: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let mut dims = dims(shape)?;
    let nd = std::os::raw::c_int::try_from(dims.len()).map_err(|_| value_error("too many dimensions"))?;
    // SAFETY: the type object is NumPy's ndarray type; the descriptor
    // reference is a new one (`clone().into_dtype_ptr()`), which
    // PyArray_NewFromDescr steals; `dims` outlives the call and holds `nd`
    // entries; null strides, data and obj ask NumPy for a fresh C-order
    // allocation. The result is a new reference or null with an exception set.
    let ptr = unsafe {
        PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
            descr.clone().into_dtype_ptr(),
            nd,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
        )
    };
    // SAFETY: `ptr` is a new reference to an ndarray, or null with a Python
    // exception set (then `from_owned_ptr_or_err` returns it).
    let any = unsafe { Bound::from_owned_ptr_or_err(py, ptr)? };
    Ok(any.cast_into::<PyUntypedArray>()?)
}

/// A new array of `descr` and `shape` (from [`empty`]) filled by `fill`
/// with the GIL released: `fill` gets the array's bytes and must write
/// every one of them when it returns `Ok` (the store's gathers do: they
/// write every byte of their destination or fail; so does the sampler). On
/// `Err` the array is dropped unseen.
pub fn filled<'py, E: Send>(
    py: Python<'py>,
    descr: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
    fill: impl FnOnce(&mut [u8]) -> Result<(), E> + Send,
) -> PyResult<Result<Bound<'py, PyUntypedArray>, E>> {
    fill_new(py, descr, shape, |bytes| py.detach(|| fill(bytes)))
}

/// [`filled`] without releasing the GIL (for fills of a microsecond).
pub fn filled_attached<'py, E>(
    py: Python<'py>,
    descr: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
) -> PyResult<Result<Bound<'py, PyUntypedArray>, E>> {
    fill_new(py, descr, shape, fill)
}

fn fill_new<'py, E>(
    py: Python<'py>,
    descr: &Bound<'py, PyArrayDescr>,
    shape: &[usize],
    fill: impl FnOnce(&mut [u8]) -> Result<(), E>,
) -> PyResult<Result<Bound<'py, PyUntypedArray>, E>> {
    let array = empty(py, descr, shape)?;
    let len = shape.iter().try_fold(descr.itemsize(), |acc, &d| acc.checked_mul(d));
    let len = len.ok_or_else(|| value_error("array too large"))?;
    let bytes: &mut [u8] = if len == 0 {
        &mut []
    } else {
        // SAFETY: `array` was just made by `empty`: C-contiguous, owning
        // `len` bytes at its data pointer (aligned for its dtype), allocated
        // by NumPy for it. It has not been handed to any Python code, so
        // nothing else refers to that memory while `bytes` lives (until
        // `fill` returns); every byte value is a valid `u8`, and the bytes
        // are only written (by `fill`) before the array becomes visible.
        unsafe { std::slice::from_raw_parts_mut((*array.as_array_ptr()).fields.data.cast::<u8>(), len) }
    };
    Ok(fill(bytes).map(|()| array))
}

/// Owns the memory of a NumPy array made from a [`Tensor`] without a copy
/// (the array's `base`); the memory returns to the loader's buffer pool when
/// the array is freed.
#[pyclass(frozen, module = "loaderx_rs")]
pub struct TensorOwner {
    /// Held for its memory only: dropping it returns the buffer to its pool.
    #[allow(dead_code)]
    tensor: Tensor,
}

/// A NumPy array viewing `tensor`'s memory (no copy), of dtype `descr`.
pub fn from_tensor<'py>(
    py: Python<'py>,
    tensor: Tensor,
    descr: &Bound<'py, PyArrayDescr>,
) -> PyResult<Bound<'py, PyAny>> {
    let mut dims = dims(tensor.shape())?;
    let nd = std::os::raw::c_int::try_from(dims.len()).map_err(|_| value_error("too many dimensions"))?;
    if descr.itemsize() != tensor.dtype().itemsize() {
        return Err(value_error("dtype does not match the tensor's element size"));
    }
    let mut tensor = tensor;
    // Taken from a mutable borrow: NumPy's consumer may write the array.
    // The bytes live in the tensor's heap buffer, which moving the tensor
    // into its owner does not move.
    let data = tensor.as_bytes_mut().as_mut_ptr();
    let owner = Bound::new(py, TensorOwner { tensor })?;
    // SAFETY: as in `empty`, with `data` pointing at the tensor's
    // `nbytes` bytes (C order, `dims`, aligned to 8 by the tensor's buffer;
    // numpy recomputes the alignment flag). The memory stays valid and
    // unmoved for as long as the array lives: the owner holding the tensor
    // becomes the array's base below, and no Rust code reads or writes the
    // tensor again until the owner drops it (frozen, no accessor).
    let ptr = unsafe {
        PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            npyffi::get_type_object(py, npyffi::NpyTypes::PyArray_Type),
            descr.clone().into_dtype_ptr(),
            nd,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            data.cast(),
            NPY_ARRAY_WRITEABLE,
            std::ptr::null_mut(),
        )
    };
    // SAFETY: a new reference or null with an exception set.
    let array = unsafe { Bound::from_owned_ptr_or_err(py, ptr)? };
    // SAFETY: `array` is the ndarray just made; PyArray_SetBaseObject steals
    // the new reference to `owner` (also on failure, when it returns -1 with
    // an exception set).
    let status = unsafe { PY_ARRAY_API.PyArray_SetBaseObject(py, array.as_ptr().cast(), owner.into_any().into_ptr()) };
    if status != 0 {
        return Err(PyErr::fetch(py));
    }
    Ok(array)
}

/// A `uint64`/`int64` vector as a new NumPy array.
pub fn i64_array<'py>(py: Python<'py>, values: &[u64]) -> Bound<'py, PyArray1<i64>> {
    let signed: Vec<i64> = values.iter().map(|&v| v as i64).collect();
    PyArray1::from_vec(py, signed)
}
