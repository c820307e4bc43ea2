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
//! | `Mixture` | [`mixture`] |
//! | `pack` | [`pack`] |
//! | `open_table`, `Table`, `write_table` | [`table`] |
//! | `write_table` of an Arrow stream or of files (the importer engine) | [`table_import`] |
//! | the Arrow C stream in (a source) and out (`to_arrow`, `ArrowStream`) | [`arrow_stream`] |
//! | `Zsampler` | [`sampler`] |
//! | NumPy arrays in and out | [`array`] |
//! | `write_ragged`'s dtype conversion (`casting`) | [`cast`] |
//! | fork safety of the parallel paths | [`fork`] |
//! | pickling (spawn, forkserver) and subclassing | [`pickle`] |
//!
//! Built by maturin (`pip install ./python`) as an abi3 extension module:
//! one build serves every CPython from 3.9 on.

mod array;
mod arrow_stream;
mod cast;
mod dataset;
mod errors;
mod fork;
mod loader;
mod mixture;
mod pack;
mod pickle;
mod sampler;
mod store;
mod table;
mod table_import;
mod tuning;

use pyo3::prelude::*;

#[pymodule]
fn loaderx_rs(m: &Bound<'_, PyModule>) -> PyResult<()> {
    fork::init();
    errors::register(m)?;
    m.add_class::<store::Zrecord>()?;
    m.add_class::<dataset::Dataset>()?;
    m.add_class::<dataset::RaggedDataset>()?;
    m.add_class::<loader::DataLoader>()?;
    m.add_class::<mixture::Mixture>()?;
    m.add("Batch", loader::batch_class(m.py())?)?;
    m.add_class::<sampler::Zsampler>()?;
    m.add_class::<array::TensorOwner>()?;
    m.add_function(wrap_pyfunction!(pickle::_restore, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::pad, m)?)?;
    m.add_function(wrap_pyfunction!(pack::pack, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::write_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::write_ragged, m)?)?;
    m.add_class::<table::Table>()?;
    m.add_function(wrap_pyfunction!(table::open_table, m)?)?;
    m.add_function(wrap_pyfunction!(table::write_table, m)?)?;
    m.add_function(wrap_pyfunction!(table::_table_column, m)?)?;
    m.add_function(wrap_pyfunction!(table::_adopt_tables, m)?)?;
    m.add_function(wrap_pyfunction!(table::_gc, m)?)?;
    m.add_function(wrap_pyfunction!(table::_published, m)?)?;
    m.add_function(wrap_pyfunction!(table::_push, m)?)?;
    m.add_function(wrap_pyfunction!(table::_adopt_published, m)?)?;
    m.add_function(wrap_pyfunction!(table::_remove_published, m)?)?;
    m.add_function(wrap_pyfunction!(table::_remove_unlisted, m)?)?;
    m.add_function(wrap_pyfunction!(table::_lock_writes, m)?)?;
    m.add_function(wrap_pyfunction!(table::_unlock_writes, m)?)?;
    m.add_function(wrap_pyfunction!(arrow_stream::_arrow_stream_rows, m)?)?;
    m.add_class::<arrow_stream::ArrowStream>()?;
    m.add_function(wrap_pyfunction!(arrow_stream::to_arrow, m)?)?;
    // Before the interpreter finalizes, stop every transform thread (they
    // would otherwise wait for the GIL of an interpreter going away).
    let shutdown = wrap_pyfunction!(loader::shutdown_loaders, m)?;
    m.add_function(shutdown.clone())?;
    m.py().import("atexit")?.call_method1("register", (shutdown,))?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("REFERENCE_VERSION", "0.7.3")?;
    m.add("MAX_RECORD_LEN", loaderx::format::RECORD_BYTES_MAX)?;
    m.add("WRITE_CHUNK_BYTES", dataset::WRITE_CHUNK_BYTES)?;
    for (name, number) in sampler::MODES {
        m.add(name, number)?;
    }
    reference_modules(m)?;
    export_all(m)
}

/// `__all__`: the public names, and the private ones the package's
/// `__init__.py` must re-export (`from .loaderx_rs import *`, in
/// python/python/loaderx_rs/__init__.py): `_restore` and `_table_column`, which
/// pickles name, `_adopt_tables`, `_gc`, `_published`, `_push`, `_adopt_published`, `_remove_published`, `_remove_unlisted`, `_lock_writes` and `_unlock_writes` (`loaderx_rs.ray`'s commits, gc, what a URL holds, and its writes to object storage), `_arrow_stream_rows` (the tests of the Arrow stream
/// source), and the reference's private submodules `_sampler` and `_zrecord`.
fn export_all(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let mut names: Vec<String> = Vec::new();
    for key in m.dict().keys() {
        let name: String = key.extract()?;
        if !name.starts_with('_') {
            names.push(name);
        }
    }
    names.extend(
        [
            "_restore",
            "_table_column",
            "_adopt_tables",
            "_gc",
            "_published",
            "_push",
            "_adopt_published",
            "_remove_published",
            "_remove_unlisted",
            "_lock_writes",
            "_unlock_writes",
            "_arrow_stream_rows",
            "_sampler",
            "_zrecord",
            "__version__",
        ]
        .map(String::from),
    );
    m.add("__all__", names)
}

/// The reference's submodules, for code that imports from them
/// (`from loaderx.dataset import pad`): each holds this module's objects
/// under the reference's names, and is registered in `sys.modules`.
fn reference_modules(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let zrecord = ["Zrecord", "ZrecordError", "write_dataset", "write_ragged", "MAX_RECORD_LEN", "WRITE_CHUNK_BYTES"];
    let zr = alias_module(m, "_zrecord", &zrecord)?;
    zr.add("SCHEMA", loaderx::dataset::SCHEMA_FILE)?;
    zr.add("FORMAT", loaderx::dataset::SCHEMA_FORMAT)?;
    alias_module(m, "dataset", &["Dataset", "RaggedDataset", "pad", "Zrecord"])?;
    let zsampler = m.py().get_type::<sampler::Zsampler>();
    alias_module(m, "dataloader", &["DataLoader"])?.add("Sampler", &zsampler)?;
    alias_module(m, "_sampler", &[])?.add("Sampler", &zsampler)?;
    Ok(())
}

/// A submodule `loaderx_rs.NAME` holding `m`'s `names`.
fn alias_module<'py>(m: &Bound<'py, PyModule>, name: &str, names: &[&str]) -> PyResult<Bound<'py, PyModule>> {
    let py = m.py();
    let sub = PyModule::new(py, name)?;
    m.add_submodule(&sub)?;
    py.import("sys")?.getattr("modules")?.set_item(format!("loaderx_rs.{name}"), &sub)?;
    for item in names {
        sub.add(*item, m.getattr(*item)?)?;
    }
    Ok(sub)
}
