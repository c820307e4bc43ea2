//! `Zrecord`: the store, its byte-level API as the reference's `Zrecord`
//! class has it, plus `verify`, `refresh` and a read-only open.
//!
//! Reads (`gather`, `gather_var`, `lengths`) and appends take the store
//! shared and run with the GIL released, so several Python threads gather at
//! once; `delete` and `compact` take it exclusively (they wait for running
//! reads, and reads wait for them), which the Rust API demands (`&mut`).

use std::path::PathBuf;
use std::sync::{OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use loaderx::dataset::parse_codec;
use loaderx::{Codec, Options, ReadMode, ReadOptions, VerifyReads};
use numpy::PyArray1;
use numpy::prelude::*;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::array::{indices, read_bytes, u64s, write_bytes};
use crate::errors::{dataset_error, store_error, value_error};
use crate::fork;

/// A record store (the reference's `loaderx.Zrecord`): a dense index space
/// `0..len` of byte records, each compressed on its own.
/// Subclasses may take their own `__init__` arguments; a read-only store
/// pickles by its arguments (a writable one does not: the writer flock is
/// the opening process's).
#[pyclass(frozen, subclass, module = "loaderx_rs")]
pub struct Zrecord {
    inner: RwLock<Option<loaderx::Zrecord>>,
    opened: OnceLock<Opened>,
}

/// What `__init__` opened the store with.
struct Opened {
    path: PathBuf,
    codec: Codec,
    reads: ReadOptions,
    wait: bool,
}

/// The URL of a published store (`s3://bucket/prefix`), when `path` is one.
pub fn url_of(path: &std::path::Path) -> Option<&str> {
    path.to_str().filter(|p| loaderx::io::remote::is_url(p))
}

fn closed() -> PyErr {
    value_error("the store is closed")
}

pub fn codec_name(codec: Codec) -> &'static str {
    codec.name()
}

pub fn codec_of(py: Python<'_>, name: &str) -> PyResult<Codec> {
    parse_codec(name).map_err(|e| dataset_error(py, &e))
}

/// The read mode named `name` ("auto", "mapped", "batched"); `ValueError`
/// for another name.
pub fn read_mode_of(name: &str) -> PyResult<ReadMode> {
    ReadMode::from_name(name).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "read_mode must be \"auto\", \"mapped\", \"batched\" or \"direct\", not {name:?}"
        ))
    })
}

/// `verify_reads` as Python passes it: "never", "device" or "always", or a
/// bool (`True`: "always", `False`: "never"); `ValueError` otherwise.
pub fn verify_reads_of(value: &Bound<'_, PyAny>) -> PyResult<VerifyReads> {
    if let Ok(on) = value.cast::<pyo3::types::PyBool>() {
        return Ok(if on.is_true() { VerifyReads::Always } else { VerifyReads::Never });
    }
    let name: Option<String> = value.extract().ok();
    name.as_deref().and_then(VerifyReads::from_name).ok_or_else(|| {
        value_error(format!(
            "verify_reads must be \"never\", \"device\", \"always\" or a bool, not {}",
            value.repr().map_or_else(|_| "?".to_string(), |r| r.to_string())
        ))
    })
}

/// The reads named by Python's `read_mode` and `verify_reads` arguments.
pub fn reads_of(read_mode: &str, verify_reads: Option<&Bound<'_, PyAny>>) -> PyResult<ReadOptions> {
    let verify = verify_reads.map_or(Ok(VerifyReads::default()), verify_reads_of)?;
    Ok(ReadOptions { mode: read_mode_of(read_mode)?, verify })
}

impl Zrecord {
    fn read(&self) -> PyResult<RwLockReadGuard<'_, Option<loaderx::Zrecord>>> {
        Ok(self.inner.read().unwrap_or_else(|e| e.into_inner()))
    }

    fn write(&self) -> RwLockWriteGuard<'_, Option<loaderx::Zrecord>> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the store with the GIL released.
    fn with<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&loaderx::Zrecord) -> loaderx::Result<R> + Send,
    ) -> PyResult<R> {
        let result = py.detach(|| -> PyResult<Result<R, loaderx::Error>> {
            let guard = self.read()?;
            let store = guard.as_ref().ok_or_else(closed)?;
            fork::run(|| f(store))
        })?;
        result.map_err(|e| store_error(py, &e))
    }

    /// Runs `f` on the store, exclusively, with the GIL released.
    fn with_mut<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut loaderx::Zrecord) -> loaderx::Result<R> + Send,
    ) -> PyResult<R> {
        let result = py.detach(|| -> PyResult<Result<R, loaderx::Error>> {
            let mut guard = self.write();
            let store = guard.as_mut().ok_or_else(closed)?;
            fork::run(|| f(store))
        })?;
        result.map_err(|e| store_error(py, &e))
    }

    fn len_now(&self) -> PyResult<u64> {
        Ok(u64::from(self.read()?.as_ref().ok_or_else(closed)?.len()))
    }

    fn codec_arg(&self, py: Python<'_>, codec: Option<&str>) -> PyResult<Codec> {
        codec.map_or(Ok(self.opened()?.codec), |c| codec_of(py, c))
    }

    fn opened(&self) -> PyResult<&Opened> {
        self.opened.get().ok_or_else(|| {
            pyo3::exceptions::PyRuntimeError::new_err(
                "the Zrecord is not open: a subclass's __init__ must call super().__init__(path)",
            )
        })
    }

    /// A store opened read-only (a dataset's `_store`).
    pub fn open_read_only(py: Python<'_>, path: PathBuf, codec: &str, reads: ReadOptions) -> PyResult<Zrecord> {
        let store = Zrecord { inner: RwLock::new(None), opened: OnceLock::new() };
        store.open_as(py, path, codec_of(py, codec)?, reads.read_only())?;
        Ok(store)
    }

    /// `__init__`, its arguments parsed.
    fn open_as(&self, py: Python<'_>, path: PathBuf, codec: Codec, options: Options) -> PyResult<()> {
        let (reads, wait) = (ReadOptions { mode: options.read_mode, verify: options.verify_reads }, options.wait);
        let url = url_of(&path);
        if url.is_some() && !options.read_only {
            return Err(value_error("a published store (s3://...) opens read-only: Zrecord(url, read_only=True)"));
        }
        let store = py
            .detach(|| match url {
                Some(url) => loaderx::Zrecord::open_url(url, options),
                None => loaderx::Zrecord::open_with(&path, options),
            })
            .map_err(|e| store_error(py, &e))?;
        if self.opened.set(Opened { path, codec, reads, wait }).is_err() {
            return Err(pyo3::exceptions::PyRuntimeError::new_err("the Zrecord is open already"));
        }
        *self.write() = Some(store);
        Ok(())
    }
}

#[pymethods]
impl Zrecord {
    /// Opens (creating if missing or empty) the store at `path`; `codec` is
    /// the default compression of `append` ("zstd", "raw" or "zstd_dict").
    /// `read_only=True` opens without the writer flock and refuses writes.
    /// `read_mode`: how reads reach records ("auto": by residency;
    /// "mapped": through the mapping; "batched": batched reads, for data
    /// not in memory, see `read_engine()`; "direct": batched reads past the
    /// page cache, O_DIRECT, for stores far larger than memory).
    /// `verify_reads`: which reads check each record against its checksum
    /// ("device", the default: reads from the device or the network;
    /// "always": warm reads from memory too; "never"; or a bool). A
    /// failed check raises `CorruptError` naming the record.
    /// A read-only store holds the readers' lock while it is open (no
    /// delete or compaction runs meanwhile); `wait=True` makes a read-only
    /// open wait for a running delete or compaction to end instead of
    /// raising `BusyError`.
    #[new]
    #[pyo3(
        signature = (*_args, **_kwargs),
        text_signature = "(path, codec='zstd', read_only=False, read_mode='auto', wait=False, verify_reads='device')"
    )]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Zrecord {
        Zrecord { inner: RwLock::new(None), opened: OnceLock::new() }
    }

    #[pyo3(signature = (path, codec = "zstd", read_only = false, read_mode = "auto", wait = false, verify_reads = None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn __init__(
        &self,
        py: Python<'_>,
        path: PathBuf,
        codec: &str,
        read_only: bool,
        read_mode: &str,
        wait: bool,
        verify_reads: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let codec = codec_of(py, codec)?;
        let reads = reads_of(read_mode, verify_reads)?;
        let options =
            Options { read_only, wait, read_mode: reads.mode, verify_reads: reads.verify, ..Options::default() };
        self.open_as(py, path, codec, options)
    }

    /// `Zrecord(path, codec, read_only, read_mode, wait, verify_reads)`, by name.
    #[staticmethod]
    #[pyo3(signature = (path, codec = "zstd", read_only = false, read_mode = "auto", wait = false, verify_reads = None))]
    fn open(
        py: Python<'_>,
        path: PathBuf,
        codec: &str,
        read_only: bool,
        read_mode: &str,
        wait: bool,
        verify_reads: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Zrecord> {
        let store = Zrecord { inner: RwLock::new(None), opened: OnceLock::new() };
        store.__init__(py, path, codec, read_only, read_mode, wait, verify_reads)?;
        Ok(store)
    }

    /// Pickles a read-only store by its arguments (and a subclass's
    /// `__dict__`); a writable one is a `TypeError`.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        let py = slf.py();
        let me = slf.get();
        if !me.read_only()? {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "a writable Zrecord cannot be pickled (its writer's lock belongs to this process); \
                 open it with read_only=True to pass it to another process",
            ));
        }
        let opened = me.opened()?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("codec", codec_name(opened.codec))?;
        kwargs.set_item("read_only", true)?;
        kwargs.set_item("read_mode", opened.reads.mode.name())?;
        kwargs.set_item("wait", opened.wait)?;
        kwargs.set_item("verify_reads", opened.reads.verify.name())?;
        let args = PyTuple::new(py, [crate::dataset::pathlib(py, &opened.path)?])?;
        crate::pickle::reduce(slf.as_any(), &py.get_type::<Zrecord>(), args, kwargs)
    }

    /// The store's directory (a `pathlib.Path`), or its URL (a `str`).
    #[getter]
    fn path(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::dataset::pathlib(py, &self.opened()?.path)
    }

    /// The default codec of `append` and `append_var`.
    #[getter]
    fn codec(&self) -> PyResult<&'static str> {
        Ok(codec_name(self.opened()?.codec))
    }

    /// Which reads check checksums: "never", "device" or "always".
    #[getter]
    fn verify_reads(&self) -> PyResult<&'static str> {
        Ok(self.opened()?.reads.verify.name())
    }

    /// True if the store was opened read-only.
    #[getter]
    fn read_only(&self) -> PyResult<bool> {
        Ok(self.read()?.as_ref().ok_or_else(closed)?.is_read_only())
    }

    fn __len__(&self) -> PyResult<usize> {
        Ok(self.len_now()? as usize)
    }

    fn __repr__(&self) -> PyResult<String> {
        let path = self.opened()?.path.display().to_string();
        Ok(match self.read().ok().and_then(|g| g.as_ref().map(|s| s.len())) {
            Some(len) => format!("Zrecord({path:?}, {len} records)"),
            None => format!("Zrecord({path:?}, closed)"),
        })
    }

    /// Makes everything durable (every mutation already is when it returns).
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |s| s.sync())
    }

    /// For a read-only store: picks up records a writer appended since open;
    /// returns the length.
    fn refresh(&self, py: Python<'_>) -> PyResult<u32> {
        self.with(py, |s| s.refresh())
    }

    /// What reads of records that are not in memory run on: `"io_uring"`,
    /// or `"threads"` (a pool of I/O threads, where io_uring is missing or
    /// blocked, or `LOADERX_READ_ENGINE=threads`).
    fn read_engine(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |s| Ok(s.read_engine().name()))
    }

    /// The logical (decoded) size of each record of `idxs`, as `uint32`.
    fn lengths<'py>(&self, py: Python<'py>, idxs: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyArray1<u32>>> {
        let idx = indices(py, idxs, self.len_now()?)?;
        let out = PyArray1::<u32>::zeros(py, idx.len(), false);
        {
            let mut rw = out.try_readwrite().map_err(|e| value_error(e.to_string()))?;
            let slice = rw.as_slice_mut()?;
            self.with(py, |s| s.lengths(&idx, slice))?;
        }
        Ok(out)
    }

    /// Decodes records `idxs` straight into `dst` (a C-contiguous, writeable
    /// array), record `k` at byte `k * stride`; every record must be `stride`
    /// bytes long.
    fn gather(&self, py: Python<'_>, idxs: &Bound<'_, PyAny>, dst: &Bound<'_, PyAny>, stride: usize) -> PyResult<()> {
        let idx = indices(py, idxs, self.len_now()?)?;
        let mut dst = write_bytes(dst, "dst")?;
        let bytes = dst.as_slice_mut()?;
        self.with(py, |s| s.gather(&idx, bytes, stride))
    }

    /// Decodes records `idxs` into `dst` at byte `offsets[k]` each (its
    /// length is the record's, `lengths(idxs)`); the regions must lie
    /// inside `dst` and not overlap.
    fn gather_var(
        &self,
        py: Python<'_>,
        idxs: &Bound<'_, PyAny>,
        dst: &Bound<'_, PyAny>,
        offsets: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let idx = indices(py, idxs, self.len_now()?)?;
        let offsets = u64s(py, offsets, "offsets")?;
        if offsets.len() != idx.len() {
            return Err(value_error(format!("{} indices but {} offsets", idx.len(), offsets.len())));
        }
        let mut dst = write_bytes(dst, "dst")?;
        let bytes = dst.as_slice_mut()?;
        self.with(py, |s| {
            let mut lens = vec![0u32; idx.len()];
            s.lengths(&idx, &mut lens)?;
            s.gather_var(&idx, bytes, &offsets, &lens)
        })
    }

    /// Appends `n` records of `item_len` bytes taken back to back from the
    /// start of `src` (a C-contiguous array); returns the index of the
    /// first. Atomic and durable when it returns.
    #[pyo3(signature = (src, n, item_len, codec = None))]
    fn append(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        n: usize,
        item_len: usize,
        codec: Option<&str>,
    ) -> PyResult<u64> {
        let codec = self.codec_arg(py, codec)?;
        let src = read_bytes(src, "src")?;
        let bytes = src.as_slice()?;
        self.with(py, |s| s.append(bytes, n, item_len, codec))
    }

    /// Appends variable-size records, record `k` being
    /// `src[offsets[k]:offsets[k] + lens[k]]` (bytes); returns the index of
    /// the first. Empty records are records.
    #[pyo3(signature = (src, offsets, lens, codec = None))]
    fn append_var(
        &self,
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        offsets: &Bound<'_, PyAny>,
        lens: &Bound<'_, PyAny>,
        codec: Option<&str>,
    ) -> PyResult<u64> {
        let codec = self.codec_arg(py, codec)?;
        let offsets = u64s(py, offsets, "offsets")?;
        let lens: Vec<u32> = u64s(py, lens, "lens")?
            .into_iter()
            .map(|l| u32::try_from(l).map_err(|_| value_error(format!("record length {l} is over the record limit"))))
            .collect::<PyResult<_>>()?;
        let src = read_bytes(src, "src")?;
        let bytes = src.as_slice()?;
        self.with(py, |s| s.append_var(bytes, &offsets, &lens, codec))
    }

    /// Trains a zstd dictionary on `samples` (concatenated records of
    /// `sizes` bytes), stores and installs it; returns its size. `target`
    /// caps the size. Required before appending `zstd_dict` records.
    fn train_dict(
        &self,
        py: Python<'_>,
        samples: &Bound<'_, PyAny>,
        sizes: &Bound<'_, PyAny>,
        target: usize,
    ) -> PyResult<usize> {
        let sizes: Vec<usize> = u64s(py, sizes, "sizes")?.into_iter().map(|s| s as usize).collect();
        let samples = read_bytes(samples, "samples")?;
        let bytes = samples.as_slice()?;
        self.with(py, |s| s.train_dict(bytes, &sizes, target))
    }

    /// True if the store has a dictionary.
    fn has_dict(&self) -> PyResult<bool> {
        Ok(self.read()?.as_ref().ok_or_else(closed)?.has_dict())
    }

    /// Removes records `idxs` (any order, duplicates allowed), swapping the
    /// last records into their places so the index space stays dense.
    /// Atomic. Waits for running reads; nothing else runs meanwhile.
    /// Raises `BusyError` while the store is open for reading elsewhere (a
    /// read-only open holds the readers' lock), or with `wait=True` waits
    /// for every such reader to close.
    #[pyo3(signature = (idxs, wait = false))]
    fn delete(&self, py: Python<'_>, idxs: &Bound<'_, PyAny>, wait: bool) -> PyResult<()> {
        let idx = indices(py, idxs, self.len_now()?)?;
        self.with_mut(py, |s| {
            s.set_wait(wait);
            s.delete(&idx)
        })
    }

    /// Reclaims the space deleted records left, in place; returns what it
    /// did. The default fill moves records from the end of the live data
    /// into the holes (about a byte written per byte freed); `max_bytes`
    /// caps what one call moves (`remaining_bytes` says what is left);
    /// `repack=True` packs every record in physical order, as the
    /// reference does (every byte back, everything behind the first hole
    /// rewritten). `BusyError` and `wait` as for `delete`.
    #[pyo3(signature = (max_bytes = None, repack = false, wait = false))]
    fn compact<'py>(
        &self,
        py: Python<'py>,
        max_bytes: Option<u64>,
        repack: bool,
        wait: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let options = loaderx::CompactOptions { max_bytes, repack };
        let report = self.with_mut(py, |s| {
            s.set_wait(wait);
            s.compact_with(options, |_, _| {})
        })?;
        let d = PyDict::new(py);
        d.set_item("moved_records", report.moved_records)?;
        d.set_item("moved_bytes", report.moved_bytes)?;
        d.set_item("rounds", report.rounds)?;
        d.set_item("bytes_before", report.bytes_before)?;
        d.set_item("bytes_after", report.bytes_after)?;
        d.set_item("removed_chunks", report.removed_chunks)?;
        d.set_item("remaining_bytes", report.remaining_bytes)?;
        Ok(d)
    }

    /// What `compact(max_bytes, repack)` would do, changing nothing.
    #[pyo3(signature = (max_bytes = None, repack = false))]
    fn compact_plan<'py>(&self, py: Python<'py>, max_bytes: Option<u64>, repack: bool) -> PyResult<Bound<'py, PyDict>> {
        let options = loaderx::CompactOptions { max_bytes, repack };
        let plan = self.with(py, |s| s.compact_plan(options))?;
        let d = PyDict::new(py);
        d.set_item("move_records", plan.move_records)?;
        d.set_item("move_bytes", plan.move_bytes)?;
        d.set_item("bytes_before", plan.bytes_before)?;
        d.set_item("bytes_after", plan.bytes_after)?;
        d.set_item("removed_chunks", plan.removed_chunks)?;
        d.set_item("remaining_bytes", plan.remaining_bytes)?;
        Ok(d)
    }

    /// Storage usage: the reference's `records`, `live_bytes`,
    /// `chunk_bytes`, `reclaimable`, plus `logical_bytes`, `chunks`,
    /// `codec_records` (`{"raw": n, "zstd": n, "zstd_dict": n}`, as the
    /// CLI's JSON) and `dict_bytes`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.with(py, |s| s.stats())?;
        let d = PyDict::new(py);
        d.set_item("records", s.records)?;
        d.set_item("live_bytes", s.live_bytes)?;
        d.set_item("chunk_bytes", s.chunk_file_bytes)?;
        d.set_item("reclaimable", s.reclaimable)?;
        d.set_item("logical_bytes", s.logical_bytes)?;
        d.set_item("chunks", s.chunks)?;
        let codec_records = PyDict::new(py);
        for (codec, n) in [Codec::Raw, Codec::Zstd, Codec::ZstdDict].into_iter().zip(s.codec_records) {
            codec_records.set_item(codec_name(codec), n)?;
        }
        d.set_item("codec_records", codec_records)?;
        d.set_item("dict_bytes", s.dict_bytes)?;
        Ok(d)
    }

    /// Checks the whole store (every entry, every record decoded, no
    /// overlaps). Returns `{"records": n, "ok": bool, "problems": [str]}`;
    /// raises only if the check itself could not run (I/O).
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let report = self.with(py, |s| s.verify())?;
        let d = PyDict::new(py);
        d.set_item("records", report.records)?;
        d.set_item("ok", report.is_ok())?;
        d.set_item("problems", report.problems.iter().map(|p| p.to_string()).collect::<Vec<_>>())?;
        d.set_item("checksummed", report.checksummed)?;
        d.set_item("unchecked", report.unchecked)?;
        d.set_item("sealed", report.sealed)?;
        Ok(d)
    }

    /// Takes the checksum of every record none covers (records the
    /// reference package appended, or a store written before checksums,
    /// whose `sums.zr` it then creates), and seals them: afterwards
    /// `verify()` reports no record unchecked. Returns `{"records",
    /// "summed", "failed", "created"}`; `failed` records do not decode
    /// (`verify()` names them). What `loaderx checksum` runs.
    fn cover<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let report = self.with_mut(py, |s| s.cover())?;
        let d = PyDict::new(py);
        d.set_item("records", report.records)?;
        d.set_item("summed", report.summed)?;
        d.set_item("failed", report.failed)?;
        d.set_item("created", report.created)?;
        Ok(d)
    }

    /// Closes the store (waits for running calls); later calls raise.
    fn close(&self, py: Python<'_>) {
        let store = py.detach(|| self.write().take());
        drop(store);
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _tb: &Bound<'_, PyAny>,
    ) -> bool {
        self.close(py);
        false
    }
}
