//! Tables crashed at every I/O operation: a table of three columns of
//! different kinds (fixed `<u4[2]`, ragged `<u2`, UTF-8 text), each a
//! sharded dataset of [`SHARD_RECORDS`] rows a shard, is created and
//! appended to in steps, each step a writer's open (the create, for the
//! first), one batch appended to every column and one commit; the batches
//! roll the columns over into new shards (steps 1 and 2 seal shards, step
//! 2 twice). A crash is injected at each I/O operation of one step in
//! turn; after the reboot a reader must see exactly the rows before that
//! step or after it, every column the same committed rows, each the
//! oracle's; a writer's open must then leave every column holding exactly
//! those rows (the uncommitted tail trimmed, across shards), and the steps
//! that remain, run by it, end in the whole oracle.
//!
//! The trim itself is crashed too (`run_trim`): a step's batch appended
//! and not committed (its tail spanning rollovers, reaching into a sealed
//! shard), then a writer's open crashed at each of its I/O operations;
//! after the reboot a reader sees the committed rows, and a writer's open
//! trims what is left. The campaign crashes one step at random per seed
//! ([`run_random`]).

use std::path::Path;
use std::sync::Arc;

use loaderx::dataset::{DType, Dataset, RaggedDataset, WriteOptions};
use loaderx::format::column_dir_name;
use loaderx::io::Vfs;
use loaderx::table::{ColumnSpec, Table, TableColumn, TableError, TableWriter, Values};

use crate::exhaustive::CRASH_KEEPS;
use crate::exhaustive::Explored;
use crate::fs::{Faults, Persist, SimFs};
use crate::rng::Rng;
use crate::workload::Violation;

/// The table's root on the simulated filesystem.
pub(crate) const ROOT: &str = "/data/table";
/// Rows per step, in order: with two rows a shard, step 0 leaves shards
/// of 2 and 1 rows, step 1 fills shard 1 and starts shard 2, step 2 fills
/// it and rolls over twice more.
const STEPS: [usize; 3] = [3, 2, 4];
/// Rows per shard of every column.
pub const SHARD_RECORDS: u64 = 2;

/// The writer's options: columns that roll over every two rows.
pub(crate) fn opts() -> WriteOptions {
    WriteOptions { shard_records: Some(SHARD_RECORDS), ..WriteOptions::default() }
}

/// Row `i` of the oracle: its three values.
fn row(i: usize) -> [Vec<u8>; 3] {
    let x: Vec<u8> = [i as u32, (i * 7) as u32].iter().flat_map(|v| v.to_le_bytes()).collect();
    let tokens: Vec<u8> = (0..i % 5).flat_map(|j| ((i * 3 + j) as u16).to_le_bytes()).collect();
    let text = format!("row {i} é").repeat(i % 3).into_bytes();
    [x, tokens, text]
}

fn columns() -> Vec<ColumnSpec> {
    let dtype = |s| DType::parse(s).expect("a dtype");
    vec![
        ColumnSpec::fixed("x", dtype("<u4"), &[2]),
        ColumnSpec::ragged("tokens", dtype("<u2"), &[]),
        ColumnSpec::utf8("text"),
    ]
}

/// Step `k`: rows `start..start + STEPS[k]` by a new writer (the create
/// when `create`), appended and committed.
pub(crate) fn step(vfs: &Arc<dyn Vfs>, create: bool, start: usize, n: usize) -> Result<u64, TableError> {
    let mut writer = append(vfs, create, start, n)?;
    writer.commit()
}

/// Rows `start..start + n` appended by a new writer, not committed.
fn append(vfs: &Arc<dyn Vfs>, create: bool, start: usize, n: usize) -> Result<TableWriter, TableError> {
    append_at(vfs, Path::new(ROOT), create, start, n, &opts())
}

/// Rows `start..start + n` appended by a new writer of the table at
/// `root` (created when `create`), not committed.
pub(crate) fn append_at(
    vfs: &Arc<dyn Vfs>,
    root: &Path,
    create: bool,
    start: usize,
    n: usize,
    opts: &WriteOptions,
) -> Result<TableWriter, TableError> {
    let opts = opts.clone();
    let mut writer = if create {
        TableWriter::create_in(vfs.clone(), root, &columns(), &opts)?
    } else {
        TableWriter::open_in(vfs.clone(), root, &opts)?
    };
    let rows: Vec<[Vec<u8>; 3]> = (start..start + n).map(row).collect();
    let x: Vec<u8> = rows.iter().flat_map(|r| r[0].clone()).collect();
    let tokens: Vec<&[u8]> = rows.iter().map(|r| r[1].as_slice()).collect();
    let text: Vec<&[u8]> = rows.iter().map(|r| r[2].as_slice()).collect();
    writer.append(&[Values::Fixed(&x), Values::Items(&tokens), Values::Items(&text)])?;
    Ok(writer)
}

/// The rows a reader sees (`None`: no table yet).
fn read(vfs: &Arc<dyn Vfs>) -> Result<Option<Vec<[Vec<u8>; 3]>>, TableError> {
    let table = match Table::open_in(vfs.clone(), Path::new(ROOT)) {
        Err(TableError::NotATable { .. }) => return Ok(None),
        other => other?,
    };
    let all: Vec<u64> = (0..table.rows()).collect();
    let x = match table.column("x") {
        Some(TableColumn::Fixed(d)) => d.gather(&all)?,
        _ => return Err(TableError::InvalidArgument("column x is not fixed".into())),
    };
    let tokens = match table.column("tokens") {
        Some(TableColumn::Ragged(d)) => d.gather(&all)?,
        _ => return Err(TableError::InvalidArgument("column tokens is not ragged".into())),
    };
    let text = table.strings("text", &all)?;
    for (_, _, column) in table.columns() {
        if column.len() != table.rows() {
            return Err(TableError::InvalidArgument(format!(
                "a column shows {} rows of {}",
                column.len(),
                table.rows()
            )));
        }
    }
    let rows = (0..all.len())
        .map(|k| {
            let t = tokens.record(k).expect("a record").to_vec();
            [x.as_bytes()[k * 8..][..8].to_vec(), t, text[k].clone().into_bytes()]
        })
        .collect();
    Ok(Some(rows))
}

/// What every column's store holds, past the commit included.
fn stored(vfs: &Arc<dyn Vfs>) -> Result<[u64; 3], TableError> {
    let dir = |k| Path::new(ROOT).join(column_dir_name(k));
    Ok([
        Dataset::open_in(vfs.clone(), &dir(0))?.len(),
        RaggedDataset::open_in(vfs.clone(), &dir(1))?.len(),
        RaggedDataset::open_in(vfs.clone(), &dir(2))?.len(),
    ])
}

/// The table a reader sees holds the oracle's first `before` or `after`
/// rows (`before` `None`: no table, or one of 0 rows), every column
/// alike; returns how many.
pub(crate) fn check(
    fs: &SimFs,
    vfs: &Arc<dyn Vfs>,
    before: Option<usize>,
    after: usize,
) -> Result<Option<usize>, Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    let rows = read(vfs).map_err(|e| v(format!("the recovered table does not open: {e}")))?;
    let Some(rows) = rows else {
        return if before.is_none() { Ok(None) } else { Err(v("the table is gone".into())) };
    };
    let n = rows.len();
    if Some(n) != before && n != after && !(before.is_none() && n == 0) {
        return Err(v(format!("{n} rows seen, expected {before:?} or {after}")));
    }
    if let Some(i) = (0..n).find(|&i| rows[i] != row(i)) {
        return Err(v(format!("row {i} is not the one written")));
    }
    Ok(Some(n))
}

/// The step that starts at `done` rows: its number.
fn step_at(done: usize) -> usize {
    (0..STEPS.len()).find(|&k| STEPS[..k].iter().sum::<usize>() == done).expect("a step boundary")
}

/// Runs the steps from `first` on (`exists`: a table is there), crashing
/// step `crashed` at its I/O operation `at` (`None`: no crash) and
/// recovering with `persist`; returns that step's I/O operations.
fn run_once(crashed: Option<(usize, u64)>, persist: Persist, seed: u64) -> Result<u64, Violation> {
    let fs = SimFs::new(Rng::new(seed), Faults::default());
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let v = |fs: &SimFs, what: String| Violation { what, trace: fs.trace() };
    let total: usize = STEPS.iter().sum();
    let (mut done, mut ops) = (0usize, 0u64);
    for (k, &n) in STEPS.iter().enumerate() {
        let start = fs.ops();
        let crash_here = crashed.filter(|&(c, _)| c == k);
        fs.arm_crash(crash_here.map(|(_, at)| start + at));
        let result = step(&vfs, k == 0, done, n);
        fs.arm_crash(None);
        ops = fs.ops() - start;
        match (result, crash_here) {
            (Ok(_), None) => done += n,
            (Ok(_), Some(_)) if !fs.crashed() => return Ok(ops),
            (Err(e), None) => return Err(v(&fs, format!("step {k} failed without a crash: {e}"))),
            (_, Some(_)) => {
                fs.reboot(persist);
                return recover(&fs, &vfs, k, done, total).map(|_| 0);
            }
        }
    }
    check(&fs, &vfs, Some(total), total)?;
    Ok(ops)
}

/// After a crash in step `k`, which started at `done` rows: the reader's
/// view, a writer's trim, and the rest of the steps.
fn recover(fs: &SimFs, vfs: &Arc<dyn Vfs>, k: usize, done: usize, total: usize) -> Result<(), Violation> {
    // The create's crash may leave no table, or one of 0 rows.
    let seen = if k == 0 {
        match check(fs, vfs, None, STEPS[0])? {
            Some(0) | None => None,
            Some(n) => Some(n),
        }
    } else {
        check(fs, vfs, Some(done), done + STEPS[k])?
    };
    if let Some(n) = seen {
        trimmed(fs, vfs, n)?;
    }
    finish(fs, vfs, seen, total)
}

/// A writer's open leaves every column holding exactly the `n` committed
/// rows, the oracle's.
pub(crate) fn trimmed(fs: &SimFs, vfs: &Arc<dyn Vfs>, n: usize) -> Result<(), Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    drop(TableWriter::open_in(vfs.clone(), Path::new(ROOT), &opts()).map_err(|e| v(format!("writer open: {e}")))?);
    let held = stored(vfs).map_err(|e| v(format!("a column does not open: {e}")))?;
    if held.iter().any(|&h| h != n as u64) {
        return Err(v(format!("after a writer's open the columns hold {held:?}, committed {n}")));
    }
    check(fs, vfs, Some(n), n).map(|_| ())
}

/// The steps from the committed `seen` rows on (`None`: no table, or an
/// empty one), ending in the whole oracle.
pub(crate) fn finish(fs: &SimFs, vfs: &Arc<dyn Vfs>, seen: Option<usize>, total: usize) -> Result<(), Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    let mut at = seen.unwrap_or(0);
    let exists = seen.is_some() || read(vfs).map_err(|e| v(format!("{e}")))?.is_some();
    let mut first = true;
    while at < total {
        let j = step_at(at);
        step(vfs, first && !exists, at, STEPS[j]).map_err(|e| v(format!("step {j} after recovery failed: {e}")))?;
        (at, first) = (at + STEPS[j], false);
    }
    check(fs, vfs, Some(total), total)?;
    Ok(())
}

/// I/O operations of step `k` without a crash.
fn ops_of(k: usize) -> Result<u64, Violation> {
    let fs = SimFs::new(Rng::new(0), Faults::default());
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let mut done = 0;
    for (j, &n) in STEPS.iter().enumerate() {
        let start = fs.ops();
        step(&vfs, j == 0, done, n).map_err(|e| Violation { what: format!("step {j}: {e}"), trace: fs.trace() })?;
        if j == k {
            return Ok(fs.ops() - start);
        }
        done += n;
    }
    unreachable!("step {k} of {}", STEPS.len())
}

/// Steps before `k` committed, step `k`'s batch appended and left
/// uncommitted (the writer gone, the machine rebooted), then a writer's
/// open crashed at its I/O operation `at` (`None`: no crash) and recovered
/// with `persist`; returns the open's I/O operations.
fn run_trim_once(k: usize, at: Option<u64>, persist: Persist, seed: u64) -> Result<u64, Violation> {
    let fs = SimFs::new(Rng::new(seed), Faults::default());
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let v = |fs: &SimFs, what: String| Violation { what, trace: fs.trace() };
    let done: usize = STEPS[..k].iter().sum();
    for j in 0..k {
        let start = STEPS[..j].iter().sum();
        step(&vfs, j == 0, start, STEPS[j]).map_err(|e| v(&fs, format!("step {j}: {e}")))?;
    }
    drop(append(&vfs, false, done, STEPS[k]).map_err(|e| v(&fs, format!("step {k}'s append: {e}")))?);
    fs.reboot(Persist::Nothing);
    let held = stored(&vfs).map_err(|e| v(&fs, format!("a column does not open: {e}")))?;
    if held.iter().any(|&h| h != (done + STEPS[k]) as u64) {
        return Err(v(&fs, format!("the appended tail is not durable: the columns hold {held:?}")));
    }
    let start = fs.ops();
    fs.arm_crash(at.map(|at| start + at));
    let result = TableWriter::open_in(vfs.clone(), Path::new(ROOT), &opts()).map(drop);
    fs.arm_crash(None);
    let ops = fs.ops() - start;
    match (result, at) {
        (Err(e), _) if !fs.crashed() => return Err(v(&fs, format!("the trim failed without a crash: {e}"))),
        (_, Some(_)) if fs.crashed() => fs.reboot(persist),
        _ => {}
    }
    check(&fs, &vfs, Some(done), done)?;
    trimmed(&fs, &vfs, done)?;
    finish(&fs, &vfs, Some(done), STEPS.iter().sum())?;
    Ok(ops)
}

/// Crashes the trim of every step's uncommitted batch (but the create's)
/// at every I/O operation.
fn run_trim() -> Result<Explored, (String, Violation)> {
    let name = "table: a trim across shards, crashed";
    let mut explored = Explored::default();
    for k in 1..STEPS.len() {
        let total = run_trim_once(k, None, Persist::Nothing, 0).map_err(|v| (format!("{name}, step {k}"), v))?;
        for at in 1..=total {
            for (persist, seed) in CRASH_KEEPS {
                run_trim_once(k, Some(at), persist, seed).map_err(|v| {
                    (format!("{name}: step {k}'s tail, crash at the open's I/O {at}, keeping {persist:?} (#{seed})"), v)
                })?;
                explored.states += 1;
            }
        }
        explored.crash_points += total;
    }
    println!("  {name:<45} {:>4} crash points", explored.crash_points);
    Ok(explored)
}

/// Every sweep of a table: every step's crash points, the trim's, and a
/// parallel write's commit ([`crate::adopt`]).
pub fn run() -> Result<Explored, (String, Violation)> {
    let steps = run_steps()?;
    let trim = run_trim()?;
    let adopt = crate::adopt::run()?;
    Ok(Explored {
        crash_points: steps.crash_points + trim.crash_points + adopt.crash_points,
        states: steps.states + trim.states + adopt.states,
    })
}

/// Crashes every step at every I/O operation.
fn run_steps() -> Result<Explored, (String, Violation)> {
    let name = "table: create, two appends, rolling over";
    let mut explored = Explored::default();
    run_once(None, Persist::Nothing, 0).map_err(|v| (format!("{name} without a crash"), v))?;
    for k in 0..STEPS.len() {
        let total = ops_of(k).map_err(|v| (format!("{name} counting"), v))?;
        for at in 1..=total {
            for (persist, seed) in CRASH_KEEPS {
                run_once(Some((k, at)), persist, seed).map_err(|v| {
                    (format!("{name}: step {k}, crash at its I/O {at}, keeping {persist:?} (#{seed})"), v)
                })?;
                explored.states += 1;
            }
        }
        explored.crash_points += total;
    }
    println!("  {name:<45} {:>4} crash points", explored.crash_points);
    Ok(explored)
}

/// One random crash for a campaign seed: a step, an I/O operation of it
/// (possibly past its end: no crash), and what survives, all from `seed`.
pub fn run_random(seed: u64) -> Result<(), Violation> {
    let mut rng = Rng::new(seed ^ 0x7461_626c_6500);
    let k = rng.below(STEPS.len() as u64) as usize;
    let at = 1 + rng.below(600);
    let persist = [Persist::Nothing, Persist::Everything, Persist::Random][rng.below(3) as usize];
    run_once(Some((k, at)), persist, rng.next_u64()).map(|_| ())
}
