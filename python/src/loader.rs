//! `DataLoader`: the reference's loader API over the crate's
//! (`loaderx::loader`): endless, in step order, resumable, shardable.
//!
//! The crate's workers sample and gather on their own threads, without the
//! GIL; `next()` waits for the batch of the current step with the GIL
//! released, hands it over as a dict of NumPy arrays without a copy (each
//! array owns its batch buffer, which returns to the loader's pool when
//! freed) and applies the transform, in the calling thread. A failure (a
//! gather error, or an exception raised by the transform) is raised by the
//! `next()` of its step, after every batch before it; the loader then
//! stops, and later `next()` calls raise `StopIteration`.

use loaderx::loader::{Column, DataLoader as Loader, Stream};
use numpy::PyArrayDescr;
use pyo3::exceptions::{PyStopIteration, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::array::{from_tensor, i64_array};
use crate::dataset::{Dataset, RaggedDataset};
use crate::errors::{loader_error, value_error};
use crate::fork;
use crate::sampler::mode_of;

/// A stream's name and the NumPy dtype of its batches.
struct StreamColumn {
    name: String,
    dtype: Py<PyArrayDescr>,
}

/// An endless loader over named streams (the reference's
/// `loaderx.DataLoader`): each batch is a dict with one entry per stream,
/// every stream gathered at the same indices. Extra keyword arguments:
/// `shard_index` / `shard_count` (this host's slice of every global batch)
/// and `start_step` (resume where a run stopped: `loader.step`).
#[pyclass(module = "loaderx_rs")]
pub struct DataLoader {
    inner: Option<Loader>,
    columns: Vec<StreamColumn>,
    transform: Option<Py<PyAny>>,
    batch_size: usize,
}

fn streams_of<'py>(streams: &Bound<'py, PyAny>) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    let items = if streams.hasattr("items")? { streams.call_method0("items")? } else { streams.clone() };
    let mut out = Vec::new();
    for item in items.try_iter()? {
        let (name, stream): (String, Bound<'py, PyAny>) = item?.extract()?;
        out.push((name, stream));
    }
    Ok(out)
}

#[pymethods]
impl DataLoader {
    #[new]
    #[pyo3(signature = (streams, num_workers = 4, batch_size = 256, prefetch_size = 4, mode = 1, seed = 42,
                        transform = None, *, shard_index = 0, shard_count = 1, start_step = 0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        streams: &Bound<'_, PyAny>,
        num_workers: usize,
        batch_size: usize,
        prefetch_size: usize,
        mode: u8,
        seed: u64,
        transform: Option<Py<PyAny>>,
        shard_index: usize,
        shard_count: usize,
        start_step: u64,
    ) -> PyResult<DataLoader> {
        if prefetch_size == 0 {
            return Err(value_error("prefetch_size must be at least 1"));
        }
        if let Some(t) = &transform
            && !t.bind(py).is_callable()
        {
            return Err(PyTypeError::new_err("transform must be callable"));
        }
        let mut builder = Loader::builder()
            .batch_size(batch_size)
            .num_workers(num_workers)
            // The reference's prefetch_size counts the batches ready in its
            // queue; each of its workers holds one more in production. The
            // crate's prefetch counts both.
            .prefetch(prefetch_size.saturating_add(num_workers))
            .mode(mode_of(mode)?)
            .seed(seed)
            .shard(shard_index, shard_count)
            .start_step(start_step)
            // In a fork child the global rayon pool has no threads: decode
            // on the workers' own (fork.rs).
            .inline_gathers(fork::forked());
        let mut columns = Vec::new();
        for (name, stream) in streams_of(streams)? {
            let (stream, dtype): (Stream, Py<PyArrayDescr>) = if let Ok(d) = stream.cast::<Dataset>() {
                let d = d.get();
                (d.shared()?.into(), d.dtype_descr(py))
            } else if let Ok(d) = stream.cast::<RaggedDataset>() {
                let d = d.get();
                (d.shared()?.into(), d.dtype_descr(py))
            } else {
                return Err(PyTypeError::new_err(format!(
                    "stream {name:?} is a {}, not a loaderx_rs Dataset or RaggedDataset",
                    stream.get_type().name()?
                )));
            };
            builder = builder.stream(name.clone(), stream);
            columns.push(StreamColumn { name, dtype });
        }
        if columns.is_empty() {
            return Err(value_error("need at least one stream"));
        }
        let loader = py.detach(|| builder.build()).map_err(|e| loader_error(py, &e))?;
        Ok(DataLoader { inner: Some(loader), columns, transform, batch_size })
    }

    /// The step of the batch the next `next()` returns: save it, resume
    /// with `DataLoader(..., start_step=step)`.
    #[getter]
    fn step(&self) -> PyResult<u64> {
        Ok(self.inner.as_ref().ok_or_else(|| value_error("the loader is closed"))?.step())
    }

    /// Records per batch on this host.
    #[getter]
    fn batch_len(&self) -> PyResult<usize> {
        Ok(self.inner.as_ref().map_or(self.batch_size, |l| l.batch_len()))
    }

    fn __len__(&self) -> PyResult<usize> {
        Err(PyTypeError::new_err("Eternal loader has no length."))
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let Some(loader) = self.inner.as_mut() else {
            return Err(PyStopIteration::new_err(()));
        };
        let result = py.detach(|| loader.next_batch());
        let mut batch = match result {
            Ok(batch) => batch,
            Err(loaderx::loader::LoaderError::Stopped) => return Err(PyStopIteration::new_err(())),
            Err(e) => {
                self.stop(py);
                return Err(loader_error(py, &e));
            }
        };
        let dict = PyDict::new(py);
        for column in &self.columns {
            let value = match batch.remove(&column.name) {
                Some(Column::Dense(t)) => from_tensor(py, t, column.dtype.bind(py))?,
                Some(Column::Ragged(r)) => {
                    let values = from_tensor(py, r.values, column.dtype.bind(py))?;
                    PyTuple::new(py, [values, i64_array(py, &r.row_splits).into_any()])?.into_any()
                }
                None => return Err(value_error(format!("the batch has no column {:?}", column.name))),
            };
            dict.set_item(&column.name, value)?;
        }
        let Some(transform) = &self.transform else {
            return Ok(dict.into_any());
        };
        match transform.bind(py).call1((dict,)) {
            Ok(out) => Ok(out),
            Err(e) => {
                self.stop(py);
                Err(e)
            }
        }
    }

    /// Stops and joins every worker thread.
    fn close(&mut self, py: Python<'_>) {
        self.stop(py);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &mut self,
        py: Python<'_>,
        _t: &Bound<'_, PyAny>,
        _v: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> bool {
        self.close(py);
        false
    }
}

impl DataLoader {
    /// Drops the crate's loader (joining its threads, which never need the
    /// GIL) with the GIL released.
    fn stop(&mut self, py: Python<'_>) {
        if let Some(loader) = self.inner.take() {
            py.detach(|| drop(loader));
        }
    }
}
