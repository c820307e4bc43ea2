//! Fork safety of the parallel paths.
//!
//! The store decodes and encodes on rayon's global thread pool. After
//! `os.fork()` (PyTorch's DataLoader workers, `multiprocessing` with the
//! fork start method) the child has none of the parent's threads, but the
//! global pool's state says it has: a parallel call there would wait forever
//! for workers that do not exist. So in a process that is not the one that
//! imported the module (a fork child), every call that may go parallel runs
//! inside a pool of the child's own ([`run`]), and loaders decode on their
//! workers' own threads ([`forked`]; the crate's `inline_gathers`).

use std::sync::{Mutex, OnceLock};

use pyo3::PyResult;
use pyo3::exceptions::PyRuntimeError;

/// The process that imported the module.
static HOME_PID: OnceLock<u32> = OnceLock::new();

/// A fork child's own pool, with the process it was made in.
static CHILD_POOL: Mutex<Option<(u32, &'static rayon::ThreadPool)>> = Mutex::new(None);

/// Records the importing process (module initialisation).
pub fn init() {
    HOME_PID.get_or_init(std::process::id);
}

/// True in a fork child of the importing process.
pub fn forked() -> bool {
    HOME_PID.get().is_some_and(|&home| home != std::process::id())
}

/// Runs `f`, whose parallel loops use the global pool, on a pool this
/// process owns if it is a fork child.
pub fn run<R: Send>(f: impl FnOnce() -> R + Send) -> PyResult<R> {
    if !forked() {
        return Ok(f());
    }
    Ok(child_pool()?.install(f))
}

fn child_pool() -> PyResult<&'static rayon::ThreadPool> {
    let pid = std::process::id();
    let mut slot = CHILD_POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, pool)) = *slot
        && owner == pid
    {
        return Ok(pool);
    }
    // A pool inherited from a parent that was itself a fork child has no
    // threads here either; it is left alone (never dropped: its threads do
    // not exist in this process) and a new one made. Once per process.
    let pool = rayon::ThreadPoolBuilder::new()
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("could not start the decoding threads: {e}")))?;
    let pool: &'static rayon::ThreadPool = Box::leak(Box::new(pool));
    *slot = Some((pid, pool));
    Ok(pool)
}
