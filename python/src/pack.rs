//! `pack`: sequence packing of a ragged batch (`loaderx::loader::pack`).

use loaderx::dataset::{DType, Ragged, Tensor};
use numpy::PyUntypedArray;
use numpy::prelude::*;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::array::{descr, from_tensor, numpy, read_bytes, u64s};
use crate::errors::value_error;

/// Packs the sequences of a ragged batch `(values, row_splits)` into rows
/// of `seq_len`, first fit decreasing; returns `(tokens, segment_ids,
/// positions)`, each `(rows, seq_len)` (tokens with the values' dtype and
/// item shape; the two others int32, 0 for padding, segment ids counting
/// from 1 along each row, positions from 0 in each segment). A sequence
/// longer than `seq_len` is cut into pieces unless `truncate`, which keeps
/// its first `seq_len` elements. Deterministic.
#[pyfunction]
#[pyo3(signature = (values, row_splits, seq_len, truncate = false))]
pub fn pack<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
    row_splits: &Bound<'py, PyAny>,
    seq_len: usize,
    truncate: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let np = numpy(py)?;
    let values = np.call_method1("ascontiguousarray", (values,))?.cast_into::<PyUntypedArray>()?;
    let text: String = values.dtype().getattr("str")?.extract()?;
    let dtype = DType::parse(&text).map_err(|e| value_error(e.to_string()))?;
    let splits = u64s(py, row_splits, "row_splits")?;
    let (values_descr, shape) = (values.dtype(), values.shape().to_vec());
    let bytes = read_bytes(values.as_any(), "values")?;
    let bytes = bytes.as_slice()?;
    let packed = py
        .detach(|| {
            let tensor = Tensor::from_bytes(dtype, &shape, bytes).map_err(|e| e.to_string())?;
            loaderx::loader::pack(&Ragged { values: tensor, row_splits: splits }, seq_len, truncate)
                .map_err(|e| e.to_string())
        })
        .map_err(value_error)?;
    let int32 = descr(py, "<i4")?;
    let tokens = from_tensor(py, packed.tokens, &values_descr)?;
    let segment_ids = from_tensor(py, packed.segment_ids, &int32)?;
    let positions = from_tensor(py, packed.positions, &int32)?;
    PyTuple::new(py, [tokens, segment_ids, positions])
}
