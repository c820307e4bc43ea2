//! Every synchronization primitive the store's concurrency protocol uses,
//! from one place: `std` normally, `loom` under `--cfg loom`, so the same
//! code runs in production and in the loom models
//! (`sim/tests/loom_store.rs`). The pattern is tokio's and redb's.
//!
//! Not routed through here, by design: `OnceLock` (loom has none; it guards
//! lazily opened chunk files and the dictionary, installed once and then only
//! read), `Arc<dyn Vfs>` (loom's `Arc` cannot hold a trait object; it is never
//! mutated), and the atomics in `io/real.rs` and the fence in
//! `store/read.rs` (they act on mapped file memory, which loom cannot see).

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::{Mutex, MutexGuard};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::{Mutex, MutexGuard};

/// Runs `f` on every item, in parallel on rayon's pool (sequentially under
/// loom, which must see every thread), stopping at the first error.
pub(crate) fn try_for_each<T: Sync, E: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<(), E> + Sync + Send,
) -> Result<(), E> {
    #[cfg(not(loom))]
    {
        use rayon::prelude::*;
        if items.len() > 1 {
            return items.par_iter().try_for_each(f);
        }
    }
    items.iter().try_for_each(f)
}

/// `(0..n).map(f).collect()`, in parallel on rayon's pool (sequentially
/// under loom), stopping at the first error.
pub(crate) fn map_collect<R: Send, E: Send>(
    n: usize,
    f: impl Fn(usize) -> Result<R, E> + Sync + Send,
) -> Result<Vec<R>, E> {
    #[cfg(not(loom))]
    {
        use rayon::prelude::*;
        if n > 1 {
            return (0..n).into_par_iter().map(f).collect();
        }
    }
    (0..n).map(f).collect()
}

/// Runs `a` and `b`, in parallel on rayon's pool when it has a thread for
/// each (sequentially under loom), and returns both results.
pub(crate) fn join<A: Send, B: Send>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    #[cfg(not(loom))]
    {
        rayon::join(a, b)
    }
    #[cfg(loom)]
    {
        (a(), b())
    }
}

/// Runs `a` on the caller's thread and, at once, `b` on rayon's pool, and
/// returns both results: a sync beside another sync or beside the work
/// that needs only the first sync's end (an append's sums). Sequential
/// (`a`, then `b`) under loom and where rayon's pool has one thread, as in
/// the simulator and the fuzz targets, whose filesystem must see one order.
/// A worker of the pool, not a thread of its own: the pool's threads are
/// started once, a thread per call costs more than a short sync's overlap
/// saves. While `b` waits on the device it holds its worker; the caller
/// waits on a latch, not spinning, when `a` ends first.
pub(crate) fn join_blocking<A: Send, B: Send>(a: impl FnOnce() -> A + Send, b: impl FnOnce() -> B + Send) -> (A, B) {
    #[cfg(not(loom))]
    if rayon::current_num_threads() > 1 {
        let mut b_out = None;
        let a_out = rayon::in_place_scope(|scope| {
            scope.spawn(|_| b_out = Some(b()));
            a()
        });
        // A panic in `b` is raised by the scope; without one, `b` ran.
        return (a_out, b_out.expect("the scope runs `b` before it ends"));
    }
    (a(), b())
}
