//! A parallel write's commit crashed at every I/O operation: two staged
//! tables (each a task's, one store a column) adopted as new shards of a
//! table's columns by `table::adopt_tables_in` (steps A0-A4 of
//! `docs/crash-safety.md`, "Adopting staged tables").
//!
//! The table is [`table`](crate::table)'s: three columns of different
//! kinds, two rows a shard, its first [`COMMITTED`] rows committed. The
//! staged tables hold the next rows of the same oracle. After a crash and
//! the reboot, a reader must see exactly the committed rows or all of
//! them, every column alike; a writer's open must leave every column
//! holding exactly those rows. What follows must work: when the commit
//! was lost, the rows are written again, by a later adoption of new
//! staged tables (whose A1 removes what the crash left unlisted) or, on
//! other seeds, by `gc` (`remove_unlisted_shards_in`) and a plain append.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use loaderx::dataset::WriteOptions;
use loaderx::io::Vfs;
use loaderx::table::{TableError, adopt_tables_in, remove_unlisted_shards_in};

use crate::exhaustive::{CRASH_KEEPS, Explored};
use crate::fs::{Faults, Persist, SimFs};
use crate::rng::Rng;
use crate::table::{ROOT, append_at, check, finish, opts, step, trimmed};
use crate::workload::Violation;

/// Rows committed before the adoption: the table's first two steps.
const COMMITTED: usize = 5;
/// The staged tables' rows, in order.
const STAGED: [(usize, usize); 2] = [(5, 2), (7, 2)];
/// Every row, once adopted (the oracle's, as [`crate::table`]'s steps end).
const TOTAL: usize = 9;

/// Staged table `k` of write `write`.
fn staged(write: &str, k: usize) -> PathBuf {
    Path::new(ROOT).join(".staging").join(write).join(k.to_string())
}

/// The staged tables of write `write`, written and committed.
fn stage(vfs: &Arc<dyn Vfs>, write: &str) -> Result<Vec<PathBuf>, TableError> {
    let mut out = Vec::new();
    for (k, &(start, n)) in STAGED.iter().enumerate() {
        let root = staged(write, k);
        let mut writer = append_at(vfs, &root, true, start, n, &WriteOptions::default())?;
        writer.commit()?;
        out.push(root);
    }
    Ok(out)
}

/// The table's committed rows and a write's staged tables, all durable.
fn setup(fs: &SimFs, vfs: &Arc<dyn Vfs>) -> Result<Vec<PathBuf>, Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    step(vfs, true, 0, 3).map_err(|e| v(format!("step 0: {e}")))?;
    step(vfs, false, 3, 2).map_err(|e| v(format!("step 1: {e}")))?;
    let staged = stage(vfs, "w").map_err(|e| v(format!("staging: {e}")))?;
    fs.reboot(Persist::Nothing);
    Ok(staged)
}

/// The adoption crashed at its I/O operation `at` (`None`: no crash),
/// recovered with `persist`; returns the adoption's I/O operations.
fn run_once(at: Option<u64>, persist: Persist, seed: u64) -> Result<u64, Violation> {
    let fs = SimFs::new(Rng::new(seed), Faults::default());
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let staged = setup(&fs, &vfs)?;
    let start = fs.ops();
    fs.arm_crash(at.map(|at| start + at));
    let result = adopt_tables_in(vfs.clone(), Path::new(ROOT), &staged, &opts());
    fs.arm_crash(None);
    let ops = fs.ops() - start;
    match (result, fs.crashed()) {
        (Err(e), false) => return Err(Violation { what: format!("the adoption failed: {e}"), trace: fs.trace() }),
        (_, true) => fs.reboot(persist),
        (Ok(_), false) => {}
    }
    recover(&fs, &vfs, seed)?;
    Ok(ops)
}

/// The reader's view, a writer's trim, then the lost rows written again.
fn recover(fs: &SimFs, vfs: &Arc<dyn Vfs>, seed: u64) -> Result<(), Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    let seen = check(fs, vfs, Some(COMMITTED), TOTAL)?.ok_or_else(|| v("the table is gone".into()))?;
    trimmed(fs, vfs, seen)?;
    if seen == TOTAL {
        return Ok(());
    }
    if seed.is_multiple_of(2) {
        let again = stage(vfs, "w2").map_err(|e| v(format!("staging again: {e}")))?;
        let rows = adopt_tables_in(vfs.clone(), Path::new(ROOT), &again, &opts())
            .map_err(|e| v(format!("the adoption after recovery failed: {e}")))?;
        if rows != TOTAL as u64 {
            return Err(v(format!("the adoption after recovery committed {rows} rows, not {TOTAL}")));
        }
        check(fs, vfs, Some(TOTAL), TOTAL).map(|_| ())
    } else {
        remove_unlisted_shards_in(vfs.clone(), Path::new(ROOT), &opts())
            .map_err(|e| v(format!("gc after recovery failed: {e}")))?;
        finish(fs, vfs, Some(seen), TOTAL)
    }
}

/// Crashes the adoption at every I/O operation.
pub fn run() -> Result<Explored, (String, Violation)> {
    let name = "table: two staged tables adopted";
    let total = run_once(None, Persist::Nothing, 0).map_err(|v| (format!("{name} without a crash"), v))?;
    let mut explored = Explored::default();
    for at in 1..=total {
        for (persist, seed) in CRASH_KEEPS {
            run_once(Some(at), persist, seed)
                .map_err(|v| (format!("{name}: crash at its I/O {at}, keeping {persist:?} (#{seed})"), v))?;
            explored.states += 1;
        }
    }
    explored.crash_points += total;
    println!("  {name:<45} {:>4} crash points", explored.crash_points);
    Ok(explored)
}
