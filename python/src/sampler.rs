//! `Zsampler`: the crate's endless sampler as its own class (the reference
//! keeps its sampler internal, `loaderx._sampler.Sampler`, with the same
//! constructor and `next` / `seek`).

use loaderx::sampler::{Mode, Sampler, SamplerError, ShardedSampler};
use numpy::PyArray1;
use pyo3::prelude::*;
use rayon::prelude::*;

use crate::array::{filled, filled_attached};
use crate::errors::{sampler_error, value_error};
use crate::fork;

/// From this many indices on, a batch is drawn with the GIL released and
/// split across the rayon pool.
const DETACH_INDICES_MIN: usize = 1 << 16;

/// Fills `out` with `sampler`'s batch of `step`; a large batch in parallel,
/// as contiguous slices, each the batch of a finer shard of the same global
/// sampler (so the result is the same as one `fill`).
fn fill_parallel(sampler: &ShardedSampler, step: u64, out: &mut [u64]) -> Result<(), SamplerError> {
    let threads = rayon::current_num_threads();
    let (index, count) = (sampler.index(), sampler.count());
    let split = (2..=threads).rev().find(|&k| out.len() >= DETACH_INDICES_MIN && out.len().is_multiple_of(k));
    let Some(k) = split else {
        return sampler.fill(step, out);
    };
    let shards: Vec<ShardedSampler> = match (0..k).map(|j| sampler.global().shard(index * k + j, count * k)).collect() {
        Ok(shards) => shards,
        Err(_) => return sampler.fill(step, out),
    };
    out.par_chunks_mut(out.len() / k).zip(shards.par_iter()).try_for_each(|(chunk, shard)| shard.fill(step, chunk))
}

/// The modes by name and by the reference's numbers (also the module's
/// constants `loaderx_rs.SEQUENTIAL`, `IID`, `CYCLIC`).
pub const MODES: [(&str, u8); 3] = [("SEQUENTIAL", 0), ("IID", 1), ("CYCLIC", 2)];

/// A mode argument's number: the reference's int (0, 1, 2) or a name
/// (`"sequential"`, `"iid"`, `"cyclic"`, in any case).
pub fn mode_number(mode: &Bound<'_, PyAny>) -> PyResult<u8> {
    if let Ok(name) = mode.extract::<String>() {
        return MODES.iter().find(|(known, _)| known.eq_ignore_ascii_case(&name)).map(|&(_, n)| n).ok_or_else(|| {
            value_error(format!("mode must be \"sequential\", \"iid\" or \"cyclic\" (or 0, 1, 2), got {name:?}"))
        });
    }
    let Ok(number) = mode.extract::<i64>() else {
        return Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "mode must be a str (\"sequential\", \"iid\", \"cyclic\") or an int (0, 1, 2), not {}",
            mode.get_type().name()?
        )));
    };
    let number = u8::try_from(number).unwrap_or(u8::MAX);
    mode_of(number)?;
    Ok(number)
}

/// The reference's mode numbers.
pub fn mode_of(mode: u8) -> PyResult<Mode> {
    match mode {
        0 => Ok(Mode::Sequential),
        1 => Ok(Mode::Iid),
        2 => Ok(Mode::Cyclic),
        _ => Err(value_error(format!(
            "mode must be 0 (sequential), 1 (iid) or 2 (cyclic), or its name as a str, got {mode}"
        ))),
    }
}

/// An endless stream of index batches over `0..length`, each a pure
/// function of `(seed, step)`: `next()` returns the batch of the current
/// step (a `uint64` array) and advances, `seek(step)` jumps. Modes (an
/// int or its name as a str): `SEQUENTIAL` (0), `IID` (1, with
/// replacement), `CYCLIC` (2, a fresh permutation each cycle). `shard_index` / `shard_count` take this host's
/// contiguous slice of every global batch.
/// `Zsampler.Mode.SEQUENTIAL` etc. name the modes as the reference's
/// `Sampler.Mode` does; `loaderx_rs._sampler.Sampler` is this class.
#[pyclass(subclass, module = "loaderx_rs")]
pub struct Zsampler {
    sampler: ShardedSampler,
    mode: u8,
    step: u64,
}

impl Zsampler {
    fn draw<'py>(&self, py: Python<'py>, step: u64) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let n = self.sampler.batch_len();
        let sampler = self.sampler;
        let fill = move |bytes: &mut [u8]| -> Result<(), SamplerError> {
            let out: &mut [u64] =
                bytemuck::try_cast_slice_mut(bytes).map_err(|_| SamplerError::OutputLength { expected: n, got: 0 })?;
            // A fork child has no global pool threads (fork.rs): one thread.
            if fork::forked() { sampler.fill(step, out) } else { fill_parallel(&sampler, step, out) }
        };
        let array = if n >= DETACH_INDICES_MIN {
            filled(py, &numpy::dtype::<u64>(py), &[n], fill)?
        } else {
            filled_attached(py, &numpy::dtype::<u64>(py), &[n], fill)?
        };
        Ok(array.map_err(|e| sampler_error(&e))?.cast_into::<PyArray1<u64>>()?)
    }
}

#[pymethods]
impl Zsampler {
    #[classattr]
    const SEQUENTIAL: u8 = 0;
    #[classattr]
    const IID: u8 = 1;
    #[classattr]
    const CYCLIC: u8 = 2;

    /// The reference's `Sampler.Mode`: `SEQUENTIAL`, `IID`, `CYCLIC`.
    #[classattr]
    #[pyo3(name = "Mode")]
    fn mode_names(py: Python<'_>) -> PyResult<Py<PyAny>> {
        let names = pyo3::types::PyDict::new(py);
        names.set_item("SEQUENTIAL", Zsampler::SEQUENTIAL)?;
        names.set_item("IID", Zsampler::IID)?;
        names.set_item("CYCLIC", Zsampler::CYCLIC)?;
        names.set_item("__module__", "loaderx_rs")?;
        names.set_item("__qualname__", "Zsampler.Mode")?;
        let class = py.import("builtins")?.getattr("type")?.call1(("Mode", pyo3::types::PyTuple::empty(py), names))?;
        Ok(class.unbind())
    }

    #[new]
    #[pyo3(
        signature = (length, batch_size, mode = None, seed = 42, shard_index = 0, shard_count = 1, step = 0),
        text_signature = "(length, batch_size, mode=1, seed=42, shard_index=0, shard_count=1, step=0)"
    )]
    fn new(
        length: u64,
        batch_size: usize,
        mode: Option<&Bound<'_, PyAny>>,
        seed: u64,
        shard_index: usize,
        shard_count: usize,
        step: u64,
    ) -> PyResult<Zsampler> {
        let mode = mode.map_or(Ok(Zsampler::IID), mode_number)?;
        let sampler = Sampler::new(length, batch_size, mode_of(mode)?, seed).map_err(|e| sampler_error(&e))?;
        let sampler = sampler.shard(shard_index, shard_count).map_err(|e| sampler_error(&e))?;
        Ok(Zsampler { sampler, mode, step })
    }

    /// The batch of the current step; advances to the next.
    fn next<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        let out = self.draw(py, self.step)?;
        self.step = self.step.wrapping_add(1);
        Ok(out)
    }

    /// Repositions to `step`: the batches after it are exactly the ones
    /// iterating from step 0 gives there.
    fn seek(&mut self, step: u64) {
        self.step = step;
    }

    /// The batch of `step`, without moving.
    fn batch<'py>(&self, py: Python<'py>, step: u64) -> PyResult<Bound<'py, PyArray1<u64>>> {
        self.draw(py, step)
    }

    /// The step the next `next()` returns the batch of.
    #[getter]
    fn step(&self) -> u64 {
        self.step
    }

    /// Indices per batch on this shard (`batch_size / shard_count`, or the
    /// length if that is smaller than one batch).
    #[getter]
    fn batch_len(&self) -> usize {
        self.sampler.batch_len()
    }

    /// The size of the index space.
    #[getter]
    fn length(&self) -> u64 {
        self.sampler.global().len()
    }

    /// The mode number.
    #[getter]
    fn mode(&self) -> u8 {
        self.mode
    }

    /// The seed.
    #[getter]
    fn seed(&self) -> u64 {
        self.sampler.global().seed()
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<u64>>> {
        self.next(py)
    }
}
