//! `loaderx_rs`: the Python API of loaderx, a drop-in for the reference
//! package loaderx 0.7.3 (`from loaderx_rs import ...` in place of `from
//! loaderx import ...`), over this crate's store, datasets, sampler and
//! loader. `docs/python.md` has the API, the differences and the figures.
//!
//! | Python | Rust |
//! |---|---|
//! | `Zrecord`, `ZrecordError` and its subclasses | [`store`], [`errors`] |
//! | `Dataset`, `RaggedDataset`, `pad`, `write_dataset`, `write_ragged` | [`dataset`] |
//! | `DataLoader` | [`loader`] |
//! | `pack` | [`pack`] |
//! | `Zsampler` | [`sampler`] |
//! | NumPy arrays in and out | [`array`] |
//! | fork safety of the parallel paths | [`fork`] |
//!
//! Built by maturin (`pip install ./python`) as an abi3 extension module:
//! one build serves every CPython from 3.9 on.

mod array;
mod dataset;
mod errors;
mod fork;
mod loader;
mod pack;
mod sampler;
mod store;

use pyo3::prelude::*;

#[pymodule]
fn loaderx_rs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    fork::init();
    errors::register(m)?;
    m.add_class::<store::Zrecord>()?;
    m.add_class::<dataset::Dataset>()?;
    m.add_class::<dataset::RaggedDataset>()?;
    m.add_class::<loader::DataLoader>()?;
    m.add_class::<sampler::Zsampler>()?;
    m.add_class::<array::TensorOwner>()?;
    m.add_function(wrap_pyfunction!(dataset::pad, m)?)?;
    m.add_function(wrap_pyfunction!(pack::pack, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::write_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::write_ragged, m)?)?;
    // Before the interpreter finalizes, stop every transform thread (they
    // would otherwise wait for the GIL of an interpreter going away).
    let shutdown = wrap_pyfunction!(loader::shutdown_loaders, m)?;
    m.add_function(shutdown.clone())?;
    m.py().import("atexit")?.call_method1("register", (shutdown,))?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("REFERENCE_VERSION", "0.7.3")?;
    m.add("MAX_RECORD_LEN", loaderx::format::RECORD_BYTES_MAX)?;
    m.add("WRITE_CHUNK_BYTES", dataset::WRITE_CHUNK_BYTES)?;
    Ok(())
}
