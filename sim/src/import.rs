//! An import crashed at every I/O operation: an Arrow IPC stream of
//! [`BATCHES`] small batches (a fixed `<u4[2]` column, a ragged `<u2`
//! column and a UTF-8 column) is written, durably, into the simulated
//! filesystem, then imported into a table that commits every
//! [`COMMIT_ROWS`] rows (so every few batches) and rolls its columns over
//! every [`SHARD_RECORDS`] rows. A crash is injected at each I/O operation
//! of the import; after the reboot a reader must see the oracle's first
//! rows up to a commit of the import's schedule ([`schedule`]): the last
//! one the import confirmed, or the one in flight. A rerun of the import
//! on the rebooted filesystem must then skip exactly the rows seen and
//! end with exactly the input's rows (none lost, none twice), and a rerun
//! after that must be a no-op. The campaign ([`run_random`]) crashes the
//! import at a random operation, and may crash its rerun too.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, ListBuilder, StringBuilder, UInt16Builder, UInt32Builder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_ipc::writer::StreamWriter;
use loaderx::dataset::WriteOptions;
use loaderx::import::{ImportError, ImportOptions, ImportSummary, IpcSource, Progress, import_in};
use loaderx::io::{OpenMode, SyncKind, Vfs, write_all_at};
use loaderx::table::{Table, TableColumn, TableError};

use crate::exhaustive::{CRASH_KEEPS, Explored};
use crate::fs::{Faults, Persist, SimFs};
use crate::rng::Rng;
use crate::workload::Violation;

/// The input's directory and file on the simulated filesystem.
const INPUT_DIR: &str = "/input";
const INPUT: &str = "/input/rows.arrow";
/// The table imported into.
const DEST: &str = "/data/imported";
/// Rows of each batch of the input, in order (one empty, one of one row).
const BATCHES: [u64; 14] = [17, 9, 23, 0, 31, 12, 1, 26, 19, 8, 33, 14, 22, 25];
/// The import's commit cadence in rows: a commit every two or three batches.
const COMMIT_ROWS: u64 = 40;
/// Rows per shard of every column: the import rolls each over several times.
const SHARD_RECORDS: u64 = 96;

/// Rows of the input in all.
fn total() -> u64 {
    BATCHES.iter().sum()
}

/// Row `i` of the oracle: its fixed, ragged and UTF-8 values, as stored.
fn row(i: u64) -> [Vec<u8>; 3] {
    let x: Vec<u8> = [i as u32, (i * 7) as u32].iter().flat_map(|v| v.to_le_bytes()).collect();
    let tokens: Vec<u8> = (0..i % 5).flat_map(|j| ((i * 3 + j) as u16).to_le_bytes()).collect();
    let text = format!("row {i} é").repeat((i % 3) as usize).into_bytes();
    [x, tokens, text]
}

/// The rows `start..start + n` of the oracle as an Arrow batch.
fn batch(start: u64, n: u64) -> RecordBatch {
    let mut x = FixedSizeListBuilder::new(UInt32Builder::new(), 2);
    let mut tokens = ListBuilder::new(UInt16Builder::new());
    let mut text = StringBuilder::new();
    for i in start..start + n {
        x.values().append_slice(&[i as u32, (i * 7) as u32]);
        x.append(true);
        let t: Vec<u16> = (0..i % 5).map(|j| (i * 3 + j) as u16).collect();
        tokens.values().append_slice(&t);
        tokens.append(true);
        text.append_value(format!("row {i} é").repeat((i % 3) as usize));
    }
    let columns: Vec<(&str, ArrayRef)> =
        vec![("x", Arc::new(x.finish())), ("tokens", Arc::new(tokens.finish())), ("text", Arc::new(text.finish()))];
    RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, a)| (n, a, false))).expect("a batch")
}

/// The input as an Arrow IPC stream, in memory.
fn input_bytes() -> Vec<u8> {
    let first = batch(0, BATCHES[0]);
    let mut writer = StreamWriter::try_new(Vec::new(), &first.schema()).expect("a stream writer");
    let mut start = 0;
    for &n in &BATCHES {
        writer.write(&batch(start, n)).expect("a batch written");
        start += n;
    }
    writer.into_inner().expect("the stream finished")
}

/// The row counts the import commits at, in order, when `from` rows were
/// committed before it (a resumed import's): after a batch that brings
/// [`COMMIT_ROWS`] rows since the last commit, and at the end (marked done).
fn schedule(from: u64) -> Vec<u64> {
    let (mut at, mut since, mut commits) = (0u64, 0u64, Vec::new());
    for &n in &BATCHES {
        at += n;
        if at <= from {
            continue;
        }
        since += n;
        if since >= COMMIT_ROWS {
            commits.push(at);
            since = 0;
        }
    }
    commits.push(total());
    commits
}

fn options() -> ImportOptions {
    ImportOptions {
        write: WriteOptions { shard_records: Some(SHARD_RECORDS), ..WriteOptions::default() },
        commit_rows: COMMIT_ROWS,
        commit_bytes: u64::MAX,
        ..ImportOptions::default()
    }
}

/// A simulated filesystem holding the input, synced (no crash loses it).
fn machine(seed: u64) -> Result<SimFs, Violation> {
    let fs = SimFs::new(Rng::new(seed), Faults::default());
    let v = |what: String| Violation { what, trace: fs.trace() };
    let bytes = input_bytes();
    let dir = Path::new(INPUT_DIR);
    let written = fs.create_dir_all(dir).and_then(|()| fs.sync_dir(Path::new("/"))).and_then(|()| {
        let file = fs.open(Path::new(INPUT), OpenMode::Create)?;
        write_all_at(&*file, &bytes, 0)?;
        file.sync(SyncKind::All)?;
        fs.sync_dir(dir)
    });
    written.map_err(|e| v(format!("writing the input: {e}")))?;
    Ok(fs)
}

/// One import of the input into the table: its summary or error, and the
/// last commit it confirmed through its progress (`None`: none yet).
fn import_once(vfs: &Arc<dyn Vfs>) -> (Result<ImportSummary, ImportError>, Option<u64>) {
    let mut confirmed = None;
    let result = IpcSource::open_in(vfs.clone(), &[INPUT.into()]).and_then(|mut source| {
        let mut progress = |p: &Progress| {
            confirmed = Some(p.committed);
            Ok(())
        };
        import_in(vfs.clone(), &mut source, Path::new(DEST), &options(), &mut progress)
    });
    (result, confirmed)
}

/// The rows a reader sees (`None`: no table), every column checked to
/// show the table's rows.
fn read(vfs: &Arc<dyn Vfs>) -> Result<Option<Vec<[Vec<u8>; 3]>>, TableError> {
    let table = match Table::open_in(vfs.clone(), Path::new(DEST)) {
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
    if let Some((name, _, c)) = table.columns().find(|(_, _, c)| c.len() != table.rows()) {
        return Err(TableError::InvalidArgument(format!("column {name} shows {} rows of {}", c.len(), table.rows())));
    }
    let rows = (0..all.len())
        .map(|k| {
            [
                x.as_bytes()[k * 8..][..8].to_vec(),
                tokens.record(k).expect("a record").to_vec(),
                text[k].clone().into_bytes(),
            ]
        })
        .collect();
    Ok(Some(rows))
}

/// The rows a reader sees are the oracle's first `n`; returns `n`
/// (`None`: no table).
fn seen(fs: &SimFs, vfs: &Arc<dyn Vfs>) -> Result<Option<u64>, Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    let Some(rows) = read(vfs).map_err(|e| v(format!("the table does not open: {e}")))? else {
        return Ok(None);
    };
    if let Some(i) = (0..rows.len()).find(|&i| rows[i] != row(i as u64)) {
        return Err(v(format!("row {i} of {} is not the input's row {i}", rows.len())));
    }
    Ok(Some(rows.len() as u64))
}

/// After a crash of an import that began at `from` committed rows
/// (`None`: no table) and confirmed the commit `confirmed`: a reader sees
/// that commit or the next of the schedule, never rows between; returns
/// the rows seen (`None`: no table yet).
fn check_crashed(
    fs: &SimFs,
    vfs: &Arc<dyn Vfs>,
    from: Option<u64>,
    confirmed: Option<u64>,
) -> Result<Option<u64>, Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    let n = seen(fs, vfs)?;
    let last = confirmed.or(from);
    let next = schedule(last.unwrap_or(0)).into_iter().find(|&c| c > last.unwrap_or(0));
    let ok = match (n, last) {
        (None, None) => true,
        (None, Some(_)) => false,
        // A create crashed after its commit of 0 rows.
        (Some(0), None) => true,
        (Some(n), _) => Some(n) == last || Some(n) == next,
    };
    if !ok {
        return Err(v(format!(
            "{n:?} rows seen after a crash; the import had confirmed {last:?}, next commit {next:?}"
        )));
    }
    Ok(n)
}

/// A rerun after a table of `before` rows (`None`: no table) was seen:
/// it skips them, adds the rest (none, if the crash kept the commit that
/// marked the import done), and the table holds exactly the input.
fn check_rerun(fs: &SimFs, vfs: &Arc<dyn Vfs>, before: Option<u64>) -> Result<(), Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    let (result, _) = import_once(vfs);
    let summary = result.map_err(|e| v(format!("the rerun failed: {e}")))?;
    let before = before.unwrap_or(0);
    let want = (before, total() - before, total());
    // The crash kept the last commit, marked done: nothing is left to do.
    let done = summary.already_done && before == total();
    if (summary.already_done || (summary.skipped, summary.rows, summary.table_rows) != want) && !done {
        return Err(v(format!("rerun after {before} rows: {summary:?}, expected skipped, added, held {want:?}")));
    }
    check_whole(fs, vfs)
}

/// The table holds exactly the input's rows; a rerun does nothing.
fn check_whole(fs: &SimFs, vfs: &Arc<dyn Vfs>) -> Result<(), Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    if seen(fs, vfs)? != Some(total()) {
        return Err(v(format!("the imported table does not hold the input's {} rows", total())));
    }
    let (result, _) = import_once(vfs);
    let summary = result.map_err(|e| v(format!("the rerun of a finished import failed: {e}")))?;
    if !summary.already_done || summary.rows != 0 || summary.table_rows != total() {
        return Err(v(format!("the rerun of a finished import was no no-op: {summary:?}")));
    }
    match seen(fs, vfs)? {
        Some(n) if n == total() => Ok(()),
        n => Err(v(format!("after a no-op rerun the table shows {n:?} rows"))),
    }
}

/// Imports the input with a crash at its I/O operation `at` (`None`: no
/// crash), recovered with `persist`; then, unless `rerun_at` crashes the
/// rerun likewise, the checks of the rerun. Returns the import's I/O
/// operations.
fn run_once(at: Option<u64>, rerun_at: Option<u64>, persist: Persist, seed: u64) -> Result<u64, Violation> {
    let fs = machine(seed)?;
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let (ops, from) = match crashed_import(&fs, &vfs, None, at, persist)? {
        Crashed::No(ops) => return check_whole(&fs, &vfs).map(|()| ops),
        Crashed::Seen(ops, n) => (ops, n),
    };
    if let Some(rerun_at) = rerun_at {
        match crashed_import(&fs, &vfs, from, Some(rerun_at), persist)? {
            Crashed::No(_) => return check_whole(&fs, &vfs).map(|()| ops),
            Crashed::Seen(_, n) => return check_rerun(&fs, &vfs, n).map(|()| ops),
        }
    }
    check_rerun(&fs, &vfs, from).map(|()| ops)
}

/// How an import with a crash armed ended.
enum Crashed {
    /// It finished before the crash point: its I/O operations.
    No(u64),
    /// It crashed: its I/O operations, and the rows seen after the reboot.
    Seen(u64, Option<u64>),
}

/// An import (of a table holding `from` rows) with a crash armed at its
/// I/O operation `at`; after the crash, a reboot keeping `persist` and the
/// reader's check.
fn crashed_import(
    fs: &SimFs,
    vfs: &Arc<dyn Vfs>,
    from: Option<u64>,
    at: Option<u64>,
    persist: Persist,
) -> Result<Crashed, Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    let start = fs.ops();
    fs.arm_crash(at.map(|at| start + at));
    let (result, confirmed) = import_once(vfs);
    fs.arm_crash(None);
    let ops = fs.ops() - start;
    if !fs.crashed() {
        let summary = result.map_err(|e| v(format!("the import failed without a crash: {e}")))?;
        let want = total() - from.unwrap_or(0);
        if summary.rows != want || summary.table_rows != total() {
            return Err(v(format!("the import added {} rows, expected {want}: {summary:?}", summary.rows)));
        }
        return Ok(Crashed::No(ops));
    }
    if result.is_ok() {
        return Err(v("the import succeeded through a crash".into()));
    }
    fs.reboot(persist);
    Ok(Crashed::Seen(ops, check_crashed(fs, vfs, from, confirmed)?))
}

/// Crashes the import at every I/O operation.
pub fn run() -> Result<Explored, (String, Violation)> {
    let name = "import: an IPC stream, committed every 40 rows";
    let mut explored = Explored::default();
    let total = run_once(None, None, Persist::Nothing, 0).map_err(|v| (format!("{name} without a crash"), v))?;
    for at in 1..=total {
        for (persist, seed) in CRASH_KEEPS {
            run_once(Some(at), None, persist, seed)
                .map_err(|v| (format!("{name}: crash at its I/O {at}, keeping {persist:?} (#{seed})"), v))?;
            explored.states += 1;
        }
    }
    explored.crash_points += total;
    println!("  {name:<45} {:>4} crash points", explored.crash_points);
    Ok(explored)
}

/// One random crash for a campaign seed: an I/O operation of the import
/// (possibly past its end: no crash), for half the seeds one of its rerun
/// too, and what survives, all from `seed`.
pub fn run_random(seed: u64) -> Result<(), Violation> {
    let mut rng = Rng::new(seed ^ 0x696d_706f_7274);
    let at = 1 + rng.below(1200);
    let rerun_at = rng.chance(0.5).then(|| 1 + rng.below(1000));
    let persist = [Persist::Nothing, Persist::Everything, Persist::Random][rng.below(3) as usize];
    run_once(Some(at), rerun_at, persist, rng.next_u64()).map(|_| ())
}
