//! `DataLoader`: the reference's loader API over the crate's
//! (`loaderx::loader`): endless, in step order, resumable, shardable.
//!
//! The crate's workers sample and gather on their own threads, without the
//! GIL, and hand the batches over in step order. Each becomes a dict of
//! NumPy arrays without a copy (each array owns its batch buffer, which
//! returns to the loader's pool when freed). Without a transform, `next()`
//! waits for the crate's batch with the GIL released and converts it. With
//! one, as in the reference, the transform runs ahead of the consumer: a
//! thread of the loader takes the crate's batches in order, converts them,
//! calls the transform (holding the GIL only for that) and queues up to
//! `prefetch_size` results, which `next()` takes with the GIL released.
//!
//! A failure (a gather error, or an exception raised by the transform) is
//! raised by the `next()` of its step, after every batch before it; the
//! loader then stops, and later `next()` calls raise `StopIteration`.
//! Closing (or dropping) the loader stops and joins its threads; at
//! interpreter exit, an `atexit` hook closes every loader still open, so no
//! thread of ours asks for the GIL of a finalizing interpreter. A loader
//! does not survive `os.fork()` (its threads stay in the parent): in a fork
//! child it raises instead of waiting forever, and is dropped without
//! joining threads that are not there.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use loaderx::loader::{
    Batch, Column, DataLoader as Loader, LoaderError, LoaderState, LoaderStats, StatsHandle, Stream,
};
use numpy::PyArrayDescr;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::{PyRuntimeError, PyStopIteration, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyModule, PyTuple, PyType};

use crate::array::{from_tensor, i64_array};
use crate::dataset::{Dataset, RaggedDataset};
use crate::errors::{loader_error, value_error};
use crate::fork;
use crate::mixture::Mixture;
use crate::sampler::{mode_number, mode_of};
use crate::tuning;

/// A stream's name and the NumPy dtype of its batches.
pub(crate) struct StreamColumn {
    pub(crate) name: String,
    pub(crate) dtype: Py<PyArrayDescr>,
}

/// A batch of the crate's loader as the reference's dict of NumPy arrays
/// (a ragged stream's entry is `(values, row_splits)`).
/// The batch class, in Python: a `dict` (stream name to array) whose
/// `indices` and `step` attributes cannot clash with a stream's name.
const BATCH_PY: &std::ffi::CStr = cr#"
class Batch(dict):
    """A batch: one entry per stream, plus ``indices`` (uint64, the records
    it holds, in order), ``step`` (its step), ``source`` (a mixture's:
    uint32, the source of each record; otherwise None) and ``skipped``
    (with ``skip_corrupt=True``: a ``(position, index, replacement)`` tuple
    per damaged record the batch replaced) as attributes."""

    __slots__ = ("indices", "step", "source", "skipped")
"#;

static BATCH_CLASS: pyo3::sync::PyOnceLock<Py<PyType>> = pyo3::sync::PyOnceLock::new();

/// The `Batch` class (made once).
pub fn batch_class(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    let class = BATCH_CLASS.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        let module = PyModule::from_code(py, BATCH_PY, c"loaderx_rs/_batch.py", c"loaderx_rs._batch")?;
        let class = module.getattr("Batch")?.cast_into::<PyType>()?;
        class.setattr("__module__", "loaderx_rs")?;
        Ok(class.unbind())
    })?;
    Ok(class.bind(py))
}

/// One warning on the `loaderx_rs` logger per damaged record a batch
/// replaced (`skip_corrupt=True`).
fn log_skips(py: Python<'_>, step: u64, skipped: &[(usize, u64, u64)]) -> PyResult<()> {
    if skipped.is_empty() {
        return Ok(());
    }
    let logger = py.import("logging")?.call_method1("getLogger", ("loaderx_rs",))?;
    for &(position, index, replacement) in skipped {
        let message = "step %d: record %d is damaged (failed its checksum or decoding); \
                       read record %d in its place (position %d of the batch)";
        logger.call_method1("warning", (message, step, index, replacement, position))?;
    }
    Ok(())
}

fn to_dict<'py>(py: Python<'py>, mut batch: Batch, columns: &[StreamColumn]) -> PyResult<Bound<'py, PyDict>> {
    let dict = batch_class(py)?.call0()?.cast_into::<PyDict>()?;
    dict.setattr("indices", numpy::PyArray1::from_slice(py, batch.indices()))?;
    dict.setattr("step", batch.step())?;
    match batch.source() {
        Some(source) => dict.setattr("source", numpy::PyArray1::from_slice(py, source))?,
        None => dict.setattr("source", py.None())?,
    }
    let skipped: Vec<(usize, u64, u64)> =
        batch.skipped().iter().map(|s| (s.position, s.index, s.replacement)).collect();
    log_skips(py, batch.step(), &skipped)?;
    dict.setattr("skipped", skipped)?;
    for column in columns {
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
    Ok(dict)
}

/// The queue between the transform thread and `next()`.
struct Pipe {
    state: Mutex<PipeState>,
    changed: Condvar,
    capacity: usize,
    /// Nanoseconds in the Python transform (with the batch's conversion).
    transform_ns: AtomicU64,
    /// How closing the crate's loader went (writing its trace), once the thread has ended.
    closed: Mutex<Option<std::io::Result<()>>>,
}

struct PipeState {
    /// Transformed batches (or the failure of the step), in step order.
    ready: VecDeque<PyResult<Py<PyAny>>>,
    /// The consumer asked the thread to stop.
    stop: bool,
    /// The thread has queued its last item.
    ended: bool,
}

impl Pipe {
    fn lock(&self) -> MutexGuard<'_, PipeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stopped(&self) -> bool {
        self.lock().stop
    }

    /// Waits for room; false if asked to stop.
    fn wait_for_room(&self) -> bool {
        let mut state = self.lock();
        while state.ready.len() >= self.capacity && !state.stop {
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        !state.stop
    }

    /// Queues `item`; false if asked to stop (the item is handed back to be
    /// dropped with the GIL).
    fn push(&self, item: PyResult<Py<PyAny>>) -> Result<(), PyResult<Py<PyAny>>> {
        let mut state = self.lock();
        if state.stop {
            return Err(item);
        }
        state.ready.push_back(item);
        self.changed.notify_all();
        Ok(())
    }

    /// The next item, waiting for it; `None` once the thread has ended and
    /// everything it queued was taken.
    fn pop(&self) -> Option<PyResult<Py<PyAny>>> {
        let mut state = self.lock();
        loop {
            if let Some(item) = state.ready.pop_front() {
                self.changed.notify_all();
                return Some(item);
            }
            if state.ended {
                return None;
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn end(&self) {
        self.lock().ended = true;
        self.changed.notify_all();
    }
}

/// The transform thread and its queue.
struct Producer {
    pipe: Arc<Pipe>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Producer {
    /// Stops the thread and joins it (the caller has released the GIL, which
    /// the thread may be waiting for). Returns what was still queued.
    fn shut_down(&self) -> Vec<PyResult<Py<PyAny>>> {
        let left = {
            let mut state = self.pipe.lock();
            state.stop = true;
            self.pipe.changed.notify_all();
            state.ready.drain(..).collect()
        };
        let thread = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(thread) = thread {
            // A panic in the thread was already turned into its step's error.
            let _ = thread.join();
        }
        left
    }
}

/// Every transform thread still running, for the `atexit` hook.
static PRODUCERS: Mutex<Vec<Weak<Producer>>> = Mutex::new(Vec::new());

/// Closes every loader's transform thread (registered with `atexit`).
#[pyfunction]
#[pyo3(name = "_shutdown_loaders")]
pub fn shutdown_loaders(py: Python<'_>) {
    let producers: Vec<Arc<Producer>> = {
        let mut all = PRODUCERS.lock().unwrap_or_else(|e| e.into_inner());
        let live = all.iter().filter_map(Weak::upgrade).collect();
        all.clear();
        live
    };
    for producer in producers {
        let left = py.detach(|| producer.shut_down());
        drop(left);
    }
}

/// The track of the transform thread's spans in a loader's trace.
const PYTHON_TRACK: &str = "python transform";

/// The transform thread: the crate's batches in order, converted and
/// transformed (each a `python_transform` span when tracing), queued.
fn produce(mut loader: Loader, pipe: Arc<Pipe>, transform: Py<PyAny>, columns: Arc<Vec<StreamColumn>>) {
    let mut step = loader.step();
    while pipe.wait_for_room() {
        let result = loader.next_batch();
        if matches!(result, Err(LoaderError::Stopped)) || pipe.stopped() {
            break;
        }
        let outcome = Python::attach(|py| {
            if pipe.stopped() {
                return true;
            }
            let start = Instant::now();
            let item = match result {
                Ok(batch) => {
                    to_dict(py, batch, &columns).and_then(|dict| transform.bind(py).call1((dict,))).map(Bound::unbind)
                }
                Err(e) => Err(loader_error(py, &e)),
            };
            let end = Instant::now();
            let spent = u64::try_from((end - start).as_nanos()).unwrap_or(u64::MAX);
            pipe.transform_ns.fetch_add(spent, Relaxed);
            loader.trace_span(PYTHON_TRACK, "python_transform", step, start, end);
            let failed = item.is_err();
            match pipe.push(item) {
                Ok(()) => failed,
                Err(item) => {
                    drop(item);
                    true
                }
            }
        });
        if outcome {
            break;
        }
        step = step.wrapping_add(1);
    }
    pipe.end();
    // The crate's loader joins its workers, which never need the GIL.
    let closed = loader.close();
    *pipe.closed.lock().unwrap_or_else(|e| e.into_inner()) = Some(closed);
    Python::attach(|_| drop((transform, columns)));
}

/// Where `next()` takes batches from.
enum Source {
    /// No transform: straight from the crate's loader.
    Direct(Box<Loader>),
    /// A transform: from the transform thread's queue.
    Piped(Arc<Producer>),
}

/// An endless loader over named streams (the reference's
/// `loaderx.DataLoader`): each batch is a dict with one entry per stream,
/// every stream gathered at the same indices. `streams` may also be a
/// `Mixture` (several sources by weights; each batch's `source` names the
/// source of each record). `mode` is the reference's number or its name
/// (`"sequential"` 0, `"iid"` 1, `"cyclic"` 2). Extra keyword arguments:
/// `shard_index` / `shard_count` (this host's slice of every global batch),
/// `start_step` (resume where a run stopped: `loader.step`) and `epochs`
/// (stop after `epochs * steps_per_epoch` steps; endless without it).
///
/// Subclasses may take their own `__init__` arguments. A loader pickles by
/// its configuration and its `step`: unpickled (in a spawn worker, say), it
/// reopens its streams and resumes at that step.
#[pyclass(subclass, module = "loaderx_rs")]
pub struct DataLoader {
    /// The arguments `__init__` took; `None` before it runs.
    config: Option<Config>,
    source: Option<Source>,
    columns: Arc<Vec<StreamColumn>>,
    batch_len: usize,
    /// The step of the batch the next `next()` returns.
    step: u64,
    /// The step it started at (`start_step`).
    first_step: u64,
    /// Records per stream; `None` for a `Mixture`.
    records: Option<u64>,
    /// The step it stops before (`epochs`); `None`: endless.
    end: Option<u64>,
    /// The process that made the loader (its threads live there).
    home_pid: u32,
    /// The crate loader's statistics (also once it is in the transform thread).
    stats: Option<StatsHandle>,
    /// The snapshot of the last `stats()` call: the start of the next window.
    window_start: Option<LoaderStats>,
    /// Time `next()` was blocked waiting for a batch (the exposed wait).
    consumer_wait: Duration,
    /// The crate loader's state at its first step (`state_dict` sets the
    /// step); `None` before `__init__`.
    state: Option<LoaderState>,
    /// Writing the trace failed when the loader stopped before `close()`,
    /// which raises it.
    trace_error: Option<std::io::Error>,
}

/// A loader's arguments, but `start_step` (pickling).
struct Config {
    /// The stream dict (a copy), or the `Mixture`.
    streams: Py<PyAny>,
    /// `None`: `"auto"`.
    num_workers: Option<usize>,
    batch_size: usize,
    /// `None`: `"auto"`.
    prefetch_size: Option<usize>,
    mode: u8,
    seed: u64,
    transform: Option<Py<PyAny>>,
    shard_index: usize,
    shard_count: usize,
    epochs: Option<u64>,
    trace_path: Option<PathBuf>,
    /// `memory_budget=`, in bytes.
    memory_budget: Option<u64>,
    skip_corrupt: bool,
}

impl Config {
    fn clone_ref(&self, py: Python<'_>) -> Config {
        Config {
            streams: self.streams.clone_ref(py),
            transform: self.transform.as_ref().map(|t| t.clone_ref(py)),
            trace_path: self.trace_path.clone(),
            ..*self
        }
    }
}

pub(crate) fn streams_of<'py>(streams: &Bound<'py, PyAny>) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
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
    /// An unopened loader; `__init__` starts it (so that a subclass's
    /// `__init__` may take other arguments).
    #[new]
    #[pyo3(
        signature = (*_args, **_kwargs),
        text_signature = "(streams, num_workers=4, batch_size=256, prefetch_size=4, mode=1, seed=42, transform=None, *, shard_index=0, shard_count=1, start_step=0, epochs=None, trace_path=None, memory_budget=None, skip_corrupt=False)"
    )]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> DataLoader {
        DataLoader {
            config: None,
            source: None,
            columns: Arc::new(Vec::new()),
            batch_len: 0,
            step: 0,
            first_step: 0,
            records: None,
            end: None,
            home_pid: std::process::id(),
            stats: None,
            window_start: None,
            consumer_wait: Duration::ZERO,
            state: None,
            trace_error: None,
        }
    }

    #[pyo3(signature = (streams, num_workers = None, batch_size = 256, prefetch_size = None, mode = None, seed = 42,
                        transform = None, *, shard_index = 0, shard_count = 1, start_step = 0, epochs = None,
                        trace_path = None, memory_budget = None, skip_corrupt = false))]
    #[allow(clippy::too_many_arguments)]
    fn __init__(
        &mut self,
        py: Python<'_>,
        streams: &Bound<'_, PyAny>,
        num_workers: Option<&Bound<'_, PyAny>>,
        batch_size: usize,
        prefetch_size: Option<&Bound<'_, PyAny>>,
        mode: Option<&Bound<'_, PyAny>>,
        seed: u64,
        transform: Option<Py<PyAny>>,
        shard_index: usize,
        shard_count: usize,
        start_step: u64,
        epochs: Option<u64>,
        trace_path: Option<PathBuf>,
        memory_budget: Option<&Bound<'_, PyAny>>,
        skip_corrupt: bool,
    ) -> PyResult<()> {
        let mode = mode.map_or(Ok(1), mode_number)?;
        let num_workers = num_workers.map_or(Ok(Some(4)), |n| tuning::count_or_auto("num_workers", n))?;
        let prefetch_size = prefetch_size.map_or(Ok(Some(4)), |n| tuning::count_or_auto("prefetch_size", n))?;
        let memory_budget = memory_budget.map(tuning::byte_size).transpose()?;
        if memory_budget == Some(0) {
            return Err(value_error("memory_budget must be above 0 bytes"));
        }
        if self.config.is_some() {
            return Err(PyRuntimeError::new_err("the DataLoader is open already"));
        }
        if prefetch_size == Some(0) {
            return Err(value_error("prefetch_size must be at least 1"));
        }
        if let Some(t) = &transform
            && !t.bind(py).is_callable()
        {
            return Err(PyTypeError::new_err("transform must be callable"));
        }
        let streams = match streams.cast::<Mixture>() {
            Ok(_) => streams.clone().unbind(),
            Err(_) => {
                let kept = PyDict::new(py);
                for (name, stream) in streams_of(streams)? {
                    kept.set_item(&name, &stream)?;
                }
                kept.into_any().unbind()
            }
        };
        let config = Config {
            streams,
            num_workers,
            batch_size,
            prefetch_size,
            mode,
            seed,
            transform,
            shard_index,
            shard_count,
            epochs,
            trace_path,
            memory_budget,
            skip_corrupt,
        };
        *self = DataLoader::open(py, config, Start::Step(start_step))?;
        Ok(())
    }

    /// Pickles by configuration and `step` (and a subclass's `__dict__`).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.borrow();
        let c = me.config.as_ref().ok_or_else(not_open)?;
        let transform = c.transform.as_ref().map_or_else(|| py.None(), |t| t.clone_ref(py));
        let auto = |n: Option<usize>| n.map_or_else(|| "auto".into_py_any(py), |n| n.into_py_any(py));
        let (workers, prefetch) = (auto(c.num_workers)?, auto(c.prefetch_size)?);
        let args = (c.streams.clone_ref(py), workers, c.batch_size, prefetch, c.mode, c.seed, transform);
        let args = args.into_pyobject(py)?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("shard_index", c.shard_index)?;
        kwargs.set_item("shard_count", c.shard_count)?;
        kwargs.set_item("start_step", me.step)?;
        kwargs.set_item("epochs", c.epochs)?;
        kwargs.set_item("trace_path", c.trace_path.as_ref())?;
        kwargs.set_item("memory_budget", c.memory_budget)?;
        kwargs.set_item("skip_corrupt", c.skip_corrupt)?;
        drop(me);
        crate::pickle::reduce(slf.as_any(), &py.get_type::<DataLoader>(), args, kwargs)
    }

    /// The step of the batch the next `next()` returns: save it, resume
    /// with `DataLoader(..., start_step=step)`.
    #[getter]
    fn step(&self) -> u64 {
        self.step
    }

    /// The loader's checkpoint, as torchdata's `StatefulDataLoader` gives
    /// it: a small dict of plain values (JSON- and `torch.save`-safe) with
    /// the step of the next batch, the seed, mode, global batch size and
    /// sharding, and the identity of the streams (names, dtypes, shapes,
    /// lengths; a mixture's sources, modes and weight schedule). Save it
    /// with the model; `load_state_dict` resumes from it.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let template = self.state.as_ref().ok_or_else(not_open)?;
        let state = LoaderState { step: self.step, ..template.clone() };
        py.import("json")?.call_method1("loads", (state.to_json().to_string(),))
    }

    /// Resumes from a `state_dict()`: the next batch is the one of its
    /// step, exactly as the loader that saved it would have given. The
    /// state must be of this loader's streams (names, dtypes, shapes and
    /// lengths), seed, mode and batch size, else `ValueError` says what
    /// differs; `shard_index` / `shard_count` may differ (elastic resume:
    /// every host's slice is cut from the same global batch). Stops the
    /// loader's threads and starts new ones at that step.
    fn load_state_dict(&mut self, py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<()> {
        let text: String = py.import("json")?.call_method1("dumps", (state,))?.extract()?;
        let state: LoaderState = text.parse().map_err(|e| loader_error(py, &e))?;
        let config = self.config.as_ref().ok_or_else(not_open)?.clone_ref(py);
        let reopened = DataLoader::open(py, config, Start::State(state))?;
        self.stop(py);
        *self = reopened;
        Ok(())
    }

    /// Records per batch on this host.
    #[getter]
    fn batch_len(&self) -> usize {
        self.batch_len
    }

    /// Steps of one epoch: how many batches see every record once (or
    /// as many records as the dataset holds, in IID mode); see
    /// `epoch_steps`. `TypeError` for a `Mixture`, whose sources have
    /// epochs of their own.
    #[getter]
    fn steps_per_epoch(&self) -> PyResult<u64> {
        let c = self.config.as_ref().ok_or_else(not_open)?;
        let records = self.records.ok_or_else(|| {
            PyTypeError::new_err("a loader over a Mixture has no epoch: each source has its own length")
        })?;
        Ok(epoch_steps(records, c.batch_size, c.mode))
    }

    /// The batches it yields (from `start_step` to the end of its
    /// `epochs`); `TypeError` for an endless loader (no `epochs`).
    fn __len__(&self) -> PyResult<usize> {
        match self.end {
            Some(end) => Ok(usize::try_from(end - self.first_step).unwrap_or(usize::MAX)),
            None => Err(PyTypeError::new_err(
                "the DataLoader is endless, so it has no len(): loader.steps_per_epoch gives the steps of one \
                 epoch, and DataLoader(..., epochs=N) a loader that stops after N epochs (whose len() is its steps)",
            )),
        }
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.home_pid != std::process::id() {
            return Err(PyRuntimeError::new_err(
                "a DataLoader does not survive os.fork() (its threads stay in the parent): build one in this process",
            ));
        }
        if self.config.is_none() {
            return Err(not_open());
        }
        if self.end.is_some_and(|end| self.step >= end) {
            self.stop(py);
            return Err(PyStopIteration::new_err(()));
        }
        let waiting = Instant::now();
        let item = match self.source.as_mut() {
            None => return Err(PyStopIteration::new_err(())),
            Some(Source::Direct(loader)) => match py.detach(|| loader.next_batch()) {
                Ok(batch) => to_dict(py, batch, &self.columns).map(Bound::into_any),
                Err(LoaderError::Stopped) => return Err(PyStopIteration::new_err(())),
                Err(e) => Err(loader_error(py, &e)),
            },
            Some(Source::Piped(producer)) => {
                let pipe = producer.pipe.clone();
                match py.detach(|| pipe.pop()) {
                    Some(item) => item.map(|obj| obj.into_bound(py)),
                    None => return Err(PyStopIteration::new_err(())),
                }
            }
        };
        self.consumer_wait += waiting.elapsed();
        match item {
            Ok(batch) => {
                self.step += 1;
                Ok(batch)
            }
            Err(e) => {
                self.stop(py);
                Err(e)
            }
        }
    }

    /// Where the time goes: `{"run": ..., "window": ...}`, the whole run
    /// and the time since the previous `stats()` call, each a dict of
    /// seconds (`_s`), bytes and counts (see docs/loader.md, "Statistics").
    /// Also after `close()`, with the counts it reached (but
    /// `python_transform_s`, which then reads zero).
    fn stats<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let handle = self.stats.as_ref().ok_or_else(not_open)?;
        let run = handle.stats();
        let window = match &self.window_start {
            Some(previous) => run.since(previous),
            None => run.clone(),
        };
        self.window_start = Some(run.clone());
        let out = PyDict::new(py);
        out.set_item("run", stats_dict(py, &run)?)?;
        out.set_item("window", stats_dict(py, &window)?)?;
        out.set_item("consumer_wait_s", self.consumer_wait.as_secs_f64())?;
        out.set_item("python_transform_s", self.python_transform().as_secs_f64())?;
        let tuned = handle.tuning().map(|t| tuning::tuning_dict(py, &t)).transpose()?;
        out.set_item("tuning", tuned)?;
        Ok(out)
    }

    /// The statistics of the whole run in the Prometheus text exposition
    /// format (metrics named `loaderx_...`), for a metrics endpoint.
    fn metrics_text(&self) -> PyResult<String> {
        let handle = self.stats.as_ref().ok_or_else(not_open)?;
        let mut text = handle.stats().prometheus();
        let mut counter = |name: &str, help: &str, value: f64| {
            text.push_str(&format!(
                "# HELP loaderx_{name} {help}\n# TYPE loaderx_{name} counter\nloaderx_{name} {value}\n"
            ));
        };
        counter(
            "consumer_wait_seconds_total",
            "Time next() was blocked waiting for a batch.",
            self.consumer_wait.as_secs_f64(),
        );
        counter(
            "python_transform_seconds_total",
            "Time in the Python transform.",
            self.python_transform().as_secs_f64(),
        );
        Ok(text)
    }

    /// Stops and joins every worker thread, then writes the trace
    /// (`trace_path=`), raising `OSError` if it cannot be written.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        self.stop(py);
        match self.trace_error.take() {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
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
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }
}

/// Adds `streams` (the stream dict or a `Mixture`) to `builder`. Returns
/// the builder, the batch's columns, and the records per stream (`None`
/// for a `Mixture`).
fn with_streams(
    py: Python<'_>,
    mut builder: loaderx::loader::LoaderBuilder,
    streams: &Bound<'_, PyAny>,
) -> PyResult<(loaderx::loader::LoaderBuilder, Vec<StreamColumn>, Option<u64>)> {
    if let Ok(mixture) = streams.cast::<Mixture>() {
        let (mixture, columns) = mixture.get().parts(py)?;
        return Ok((builder.mixture(mixture), columns, None));
    }
    let mut columns = Vec::new();
    let mut records = None;
    for (name, stream) in streams_of(streams)? {
        records = records.or(stream.len().ok().map(|n| n as u64));
        let (stream, dtype) = stream_of(py, &name, &stream)?;
        builder = builder.stream(name.clone(), stream);
        columns.push(StreamColumn { name, dtype });
    }
    if columns.is_empty() {
        return Err(value_error("need at least one stream"));
    }
    Ok((builder, columns, records))
}

/// A stream's crate handle and NumPy dtype; `TypeError` naming it if it
/// is not a `Dataset` or `RaggedDataset` (or a subclass).
pub(crate) fn stream_of(py: Python<'_>, name: &str, stream: &Bound<'_, PyAny>) -> PyResult<(Stream, Py<PyArrayDescr>)> {
    if let Ok(d) = stream.cast::<Dataset>() {
        let d = d.get();
        return Ok((d.shared()?.into(), d.dtype_descr(py)?));
    }
    if let Ok(d) = stream.cast::<RaggedDataset>() {
        let d = d.get();
        return Ok((d.shared()?.into(), d.dtype_descr(py)?));
    }
    Err(PyTypeError::new_err(format!(
        "stream {name:?} is a {}, not a loaderx_rs Dataset or RaggedDataset",
        stream.get_type().name()?
    )))
}

/// Starts the transform thread over `loader`, queueing up to `capacity`
/// transformed batches.
fn piped(loader: Loader, transform: Py<PyAny>, columns: Arc<Vec<StreamColumn>>, capacity: usize) -> PyResult<Source> {
    let pipe = Arc::new(Pipe {
        state: Mutex::new(PipeState { ready: VecDeque::new(), stop: false, ended: false }),
        changed: Condvar::new(),
        capacity,
        transform_ns: AtomicU64::new(0),
        closed: Mutex::new(None),
    });
    let thread_pipe = pipe.clone();
    let thread = std::thread::Builder::new()
        .name("loaderx-transform".into())
        .spawn(move || produce(loader, thread_pipe, transform, columns))
        .map_err(|e| PyRuntimeError::new_err(format!("could not start the transform thread: {e}")))?;
    let producer = Arc::new(Producer { pipe, thread: Mutex::new(Some(thread)) });
    let mut all = PRODUCERS.lock().unwrap_or_else(|e| e.into_inner());
    all.retain(|p| p.strong_count() > 0);
    all.push(Arc::downgrade(&producer));
    Ok(Source::Piped(producer))
}

/// Steps per epoch over `records` in `mode`: cyclic, one cycle (every
/// record at most once, `records / batch` full batches, the remainder left
/// to later cycles); sequential, the steps whose window sweeps every
/// record, `ceil(records / batch)` (the last one wraps into the next
/// sweep); IID, the steps that draw `records` indices in all (the same
/// count). One step when a batch holds every record.
fn epoch_steps(records: u64, batch_size: usize, mode: u8) -> u64 {
    let batch = (batch_size as u64).max(1);
    let steps = if mode == 2 { records / batch } else { records.div_ceil(batch) };
    steps.max(1)
}

/// The step an `epochs`-long run stops before; `None` when endless.
fn epoch_end(records: Option<u64>, batch_size: usize, mode: u8, epochs: Option<u64>) -> PyResult<Option<u64>> {
    let Some(epochs) = epochs else {
        return Ok(None);
    };
    let records = records.ok_or_else(|| {
        value_error("epochs= needs streams of one length, not a Mixture: stop the loop after the steps you want")
    })?;
    let steps = epochs.checked_mul(epoch_steps(records, batch_size, mode));
    steps.map(Some).ok_or_else(|| value_error(format!("epochs={epochs} overflows the step counter")))
}

/// Warns that every batch holds the whole dataset, fewer than asked.
fn warn_batch_over_records(py: Python<'_>, batch_size: usize, records: u64) -> PyResult<()> {
    let message = format!(
        "batch_size={batch_size} is larger than the dataset's {records} records: every batch holds the \
         {records} records, each once"
    );
    let category = py.get_type::<pyo3::exceptions::PyUserWarning>();
    PyErr::warn(py, &category, &std::ffi::CString::new(message)?, 1)
}

fn not_open() -> PyErr {
    PyRuntimeError::new_err(
        "the DataLoader is not open: a subclass's __init__ must call super().__init__(streams, ...)",
    )
}

/// One snapshot (or window) of the crate loader's statistics as a dict.
fn stats_dict<'py>(py: Python<'py>, s: &LoaderStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let secs = |f: fn(&loaderx::loader::WorkerStats) -> Duration| -> f64 {
        s.workers.iter().map(|w| f(w).as_secs_f64()).sum()
    };
    d.set_item("elapsed_s", s.elapsed.as_secs_f64())?;
    d.set_item("sample_s", secs(|w| w.sample))?;
    d.set_item("read_decode_s", secs(|w| w.gather))?;
    d.set_item("collate_s", secs(|w| w.transform))?;
    d.set_item("bytes", s.bytes())?;
    d.set_item("batches", s.taken)?;
    d.set_item("skipped", s.skipped)?;
    d.set_item("wait_s", s.wait.as_secs_f64())?;
    d.set_item("wait_p50_s", s.wait_quantile(0.5).as_secs_f64())?;
    d.set_item("wait_p99_s", s.wait_quantile(0.99).as_secs_f64())?;
    d.set_item("ready", s.ready)?;
    d.set_item("mean_ready", s.mean_ready())?;
    d.set_item("in_flight_bytes", s.in_flight_bytes)?;
    d.set_item("read_memory_s", s.reads.memory_time.as_secs_f64())?;
    d.set_item("read_memory_bytes", s.reads.memory_bytes)?;
    d.set_item("read_device_s", s.reads.device_time.as_secs_f64())?;
    d.set_item("read_device_bytes", s.reads.device_bytes)?;
    let workers: Vec<f64> = (0..s.workers.len()).map(|k| s.busy_fraction(k)).collect();
    d.set_item("worker_busy", workers)?;
    d.set_item("worker_batches", s.workers.iter().map(|w| w.batches).collect::<Vec<_>>())?;
    Ok(d)
}

/// Transformed batches queued ahead of `next()` when `prefetch_size` is
/// `"auto"` (the tuner sizes the crate's window, not this queue).
const TUNED_TRANSFORM_QUEUE: usize = 2;

/// Where a loader starts: a step (`start_step`), or a saved state
/// (`load_state_dict`), checked against the loader.
enum Start {
    Step(u64),
    State(LoaderState),
}

impl DataLoader {
    /// Builds the crate's loader from `config`, starting at `start`, and
    /// starts its threads.
    fn open(py: Python<'_>, config: Config, start: Start) -> PyResult<DataLoader> {
        let mut builder = Loader::builder().batch_size(config.batch_size);
        let limits = tuning::limits(config.num_workers, config.prefetch_size, config.memory_budget);
        builder = match (limits, config.num_workers, config.prefetch_size) {
            (Some(limits), ..) => builder.autotune(limits),
            // The reference's prefetch_size counts the batches ready in its
            // queue; each of its workers holds one more in production. The
            // crate's prefetch counts both.
            (None, Some(workers), Some(prefetch)) => {
                builder.num_workers(workers).prefetch(prefetch.saturating_add(workers))
            }
            (None, ..) => unreachable!("tuning::limits is None only for two counts"),
        };
        builder = builder.mode(mode_of(config.mode)?).seed(config.seed).shard(config.shard_index, config.shard_count);
        builder = match &start {
            Start::Step(step) => builder.start_step(*step),
            Start::State(state) => builder.resume(state),
        };
        if let Some(path) = &config.trace_path {
            builder = builder.trace_path(path);
        }
        builder = builder.skip_corrupt(config.skip_corrupt);
        if fork::forked() {
            // In a fork child the global rayon pool has no threads: decode
            // on the workers' own (fork.rs).
            builder = builder.inline_gathers(true);
        }
        let (builder, columns, records) = with_streams(py, builder, config.streams.bind(py))?;
        let loader = py.detach(|| builder.build()).map_err(|e| loader_error(py, &e))?;
        let batch_len = loader.batch_len();
        let end = epoch_end(records, config.batch_size, config.mode, config.epochs)?;
        if let Some(records) = records
            && (config.batch_size as u64) > records
        {
            warn_batch_over_records(py, config.batch_size, records)?;
        }
        let columns = Arc::new(columns);
        let stats = Some(loader.stats_handle());
        let state = loader.state();
        let start_step = state.step;
        let source = match &config.transform {
            None => Source::Direct(Box::new(loader)),
            Some(transform) => {
                let ready = config.prefetch_size.unwrap_or(TUNED_TRANSFORM_QUEUE);
                piped(loader, transform.clone_ref(py), columns.clone(), ready)?
            }
        };
        Ok(DataLoader {
            config: Some(config),
            source: Some(source),
            columns,
            batch_len,
            step: start_step,
            first_step: start_step,
            records,
            end: end.map(|steps| start_step.max(steps)),
            home_pid: std::process::id(),
            stats,
            window_start: None,
            consumer_wait: Duration::ZERO,
            state: Some(state),
            trace_error: None,
        })
    }

    /// Time in the Python transform so far (zero without one).
    fn python_transform(&self) -> Duration {
        match &self.source {
            Some(Source::Piped(p)) => Duration::from_nanos(p.pipe.transform_ns.load(Relaxed)),
            _ => Duration::ZERO,
        }
    }

    /// Stops and joins the loader's threads with the GIL released (the
    /// crate's workers never need it; the transform thread may be waiting
    /// for it), which writes the trace; its error is kept for `close()`.
    /// In a fork child the threads are not there: nothing is joined or
    /// dropped.
    fn stop(&mut self, py: Python<'_>) {
        let Some(source) = self.source.take() else {
            return;
        };
        if self.home_pid != std::process::id() {
            std::mem::forget(source);
            return;
        }
        let closed = match source {
            Source::Direct(loader) => py.detach(|| loader.close()),
            Source::Piped(producer) => {
                let left = py.detach(|| producer.shut_down());
                drop(left);
                let closed = producer.pipe.closed.lock().unwrap_or_else(|e| e.into_inner()).take();
                closed.unwrap_or(Ok(()))
            }
        };
        if let Err(e) = closed {
            self.trace_error = Some(e);
        }
    }
}

impl Drop for DataLoader {
    fn drop(&mut self) {
        if self.source.is_some() {
            Python::attach(|py| self.stop(py));
        }
    }
}
