//! `Mixture`: several sources of streams mixed by weights, given to a
//! `DataLoader` in place of its stream dict (the crate's
//! `loaderx::loader::Mixture`).

use loaderx::loader::{Mixture as Mix, Stream};
use numpy::PyArrayDescr;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::errors::{loader_error, value_error};
use crate::loader::{StreamColumn, stream_of, streams_of};
use crate::sampler::{mode_number, mode_of};

/// Sources, each a dict of streams with the same names, dtypes and shapes
/// (`{'x': ds_a}`, `{'x': ds_b}`), mixed by `weights` (relative, finite,
/// positive: `[3, 1]` is three quarters and a quarter). `schedule` changes
/// the weights from a step on: `[(step, weights), ...]`, steps going up;
/// the batches before each step stay what they were. `modes` gives a
/// source its own sampler mode (a number or name, as `DataLoader`'s;
/// `None`: the loader's). Give it to
/// `DataLoader` in place of the stream dict; each batch then has a
/// `source` attribute, the source of each record (`uint32`), and its
/// `indices` are within that source.
#[pyclass(module = "loaderx_rs", frozen)]
pub struct Mixture {
    sources: Py<PyList>,
    weights: Vec<f64>,
    schedule: Vec<(u64, Vec<f64>)>,
    modes: Vec<Option<u8>>,
}

#[pymethods]
impl Mixture {
    #[new]
    #[pyo3(signature = (sources, weights, *, schedule = Vec::new(), modes = None))]
    fn new(
        py: Python<'_>,
        sources: &Bound<'_, PyAny>,
        weights: Vec<f64>,
        schedule: Vec<(u64, Vec<f64>)>,
        modes: Option<Vec<Option<Bound<'_, PyAny>>>>,
    ) -> PyResult<Mixture> {
        if sources.is_instance_of::<PyDict>() {
            return Err(PyTypeError::new_err("sources is a list of stream dicts, one per source, not one dict"));
        }
        let list = PyList::empty(py);
        for source in sources.try_iter()? {
            let source = source?;
            let dict = PyDict::new(py);
            for (name, stream) in streams_of(&source)? {
                dict.set_item(name, stream)?;
            }
            list.append(dict)?;
        }
        let modes = match modes {
            Some(modes) => modes.iter().map(|m| m.as_ref().map(mode_number).transpose()).collect::<PyResult<_>>()?,
            None => vec![None; list.len()],
        };
        if modes.len() != list.len() {
            return Err(value_error(format!("{} modes for {} sources", modes.len(), list.len())));
        }
        let mixture = Mixture { sources: list.unbind(), weights, schedule, modes };
        mixture.parts(py)?.0.check().map_err(|e| loader_error(py, &e))?;
        Ok(mixture)
    }

    /// The sources: a new list of new stream dicts (changing them does not
    /// change the mixture).
    #[getter]
    fn sources<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let copies = self.sources.bind(py).iter().map(|d| d.call_method0("copy")).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, copies)
    }

    /// The weights from step 0.
    #[getter]
    fn weights(&self) -> Vec<f64> {
        self.weights.clone()
    }

    /// The later weight changes, `[(step, weights), ...]`.
    #[getter]
    fn schedule(&self) -> Vec<(u64, Vec<f64>)> {
        self.schedule.clone()
    }

    /// Each source's mode (`None`: the loader's).
    #[getter]
    fn modes(&self) -> Vec<Option<u8>> {
        self.modes.clone()
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.sources.bind(py).len()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Mixture({} sources, weights={:?}, schedule={:?})",
            self.sources.bind(py).len(),
            self.weights,
            self.schedule
        ))
    }

    /// Pickles by its sources (datasets pickle by path) and weights.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.get();
        let kwargs = PyDict::new(py);
        kwargs.set_item("schedule", me.schedule.clone())?;
        kwargs.set_item("modes", me.modes.clone())?;
        let partial = py.import("functools")?.getattr("partial")?;
        let make = partial.call((py.get_type::<Mixture>(),), Some(&kwargs))?;
        let args = (me.sources.clone_ref(py), me.weights.clone()).into_pyobject(py)?;
        PyTuple::new(py, [make, args.into_any()])
    }
}

impl Mixture {
    /// The crate's mixture, and the columns of its batches (source 0's
    /// names and dtypes, in order).
    pub(crate) fn parts(&self, py: Python<'_>) -> PyResult<(Mix, Vec<StreamColumn>)> {
        let mut mixture = Mix::new(self.weights.clone());
        let mut columns = Vec::new();
        for (k, source) in self.sources.bind(py).iter().enumerate() {
            let mut streams: Vec<(String, Stream)> = Vec::new();
            for (name, stream) in streams_of(&source)? {
                let (stream, dtype): (Stream, Py<PyArrayDescr>) = stream_of(py, &name, &stream)?;
                if k == 0 {
                    columns.push(StreamColumn { name: name.clone(), dtype });
                }
                streams.push((name, stream));
            }
            mixture = match self.modes[k] {
                None => mixture.source(streams),
                Some(mode) => mixture.source_in_mode(streams, mode_of(mode)?),
            };
        }
        for (step, weights) in &self.schedule {
            mixture = mixture.weights_from(*step, weights.clone());
        }
        Ok((mixture, columns))
    }
}
