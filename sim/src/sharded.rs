//! Shard rollovers crashed at every I/O operation: a sharded dataset is
//! written and appended to through the dataset layer (`write_dataset`,
//! `write_ragged` on [`SimFs`]), a crash is injected at each I/O operation
//! of one write in turn, and the recovered dataset must open and hold
//! exactly the records before that write or a longer prefix of the oracle
//! (each store append is all or nothing; a rollover adds none), with every
//! sealed shard full. A rollover write (one record into a full store) must
//! leave exactly the records before it or after it. Then the rest is
//! written by a new writer and the whole dataset checked again.

use std::path::Path;
use std::sync::Arc;

use loaderx::Codec;
use loaderx::dataset::{
    DType, Dataset, DatasetError, RaggedDataset, ShardedMutation, WriteOptions, write_dataset_bytes_in,
    write_ragged_results_in,
};
use loaderx::io::Vfs;

use crate::exhaustive::CRASH_KEEPS;
use crate::exhaustive::Explored;
use crate::fs::{Faults, Persist, SimFs};
use crate::rng::Rng;
use crate::workload::Violation;

/// The dataset's root on the simulated filesystem.
const ROOT: &str = "/data/sharded";
/// Records per shard.
const SHARD_RECORDS: u64 = 4;
/// Bytes of a fixed record.
const RECORD_BYTES: usize = 24;

/// A sharded workload: its writes, each a number of records.
struct Workload {
    name: &'static str,
    ragged: bool,
    codec: Codec,
    /// Records per write, in order.
    writes: &'static [usize],
    /// Records per append call of a write.
    per_call: usize,
}

fn workloads() -> Vec<Workload> {
    vec![
        Workload {
            name: "sharded: fill, then a rollover of one record",
            ragged: false,
            codec: Codec::Zstd,
            writes: &[4, 1],
            per_call: 8,
        },
        Workload {
            name: "sharded: writes across two rollovers",
            ragged: false,
            codec: Codec::Raw,
            writes: &[3, 7, 3],
            per_call: 2,
        },
        Workload {
            name: "sharded: ragged across a rollover",
            ragged: true,
            codec: Codec::Zstd,
            writes: &[3, 4],
            per_call: 3,
        },
    ]
}

/// Record `i` of the oracle: self-describing bytes (a ragged record's length varies).
fn record(i: usize, ragged: bool) -> Vec<u8> {
    let len = if ragged { (i * 5) % 9 * 2 } else { RECORD_BYTES };
    (0..len).map(|j| (i * 31 + j) as u8).collect()
}

fn options(w: &Workload) -> WriteOptions {
    let unit = if w.ragged { 1 } else { RECORD_BYTES };
    WriteOptions { shard_records: Some(SHARD_RECORDS), chunk_bytes: unit * w.per_call, ..WriteOptions::codec(w.codec) }
}

/// Writes oracle records `range` in one write call.
fn write(vfs: &Arc<dyn Vfs>, w: &Workload, range: std::ops::Range<usize>) -> Result<u64, DatasetError> {
    let root = Path::new(ROOT);
    let u8s = DType::parse("|u1").expect("a dtype");
    if w.ragged {
        let records = range.map(|i| Ok(record(i, true)));
        write_ragged_results_in(vfs.clone(), root, u8s, &[], records, &options(w))
    } else {
        let data: Vec<u8> = range.flat_map(|i| record(i, false)).collect();
        write_dataset_bytes_in(vfs.clone(), root, u8s, &[RECORD_BYTES], &data, &options(w))
    }
}

/// The dataset's records and shard counts, read through a fresh open.
fn read(vfs: &Arc<dyn Vfs>, w: &Workload) -> Result<(Vec<Vec<u8>>, Vec<u64>), DatasetError> {
    let root = Path::new(ROOT);
    if vfs
        .kind(&root.join(loaderx::format::SCHEMA_FILE))
        .map_err(|e| DatasetError::Io { path: root.into(), op: "stat", source: e })?
        .is_none()
    {
        return Ok((Vec::new(), Vec::new()));
    }
    if w.ragged {
        let ds = RaggedDataset::open_in(vfs.clone(), root)?;
        let all: Vec<u64> = (0..ds.len()).collect();
        let batch = ds.gather(&all)?;
        let records = (0..batch.len()).map(|k| batch.record(k).expect("in the batch").to_vec()).collect();
        Ok((records, (0..ds.shards()).map(|k| ds.shard_extent(k).expect("a shard").1).collect()))
    } else {
        let ds = Dataset::open_in(vfs.clone(), root)?;
        let all: Vec<u64> = (0..ds.len()).collect();
        let bytes = ds.gather(&all)?;
        let records = bytes.as_bytes().chunks(RECORD_BYTES).map(<[u8]>::to_vec).collect();
        Ok((records, (0..ds.shards()).map(|k| ds.shard_extent(k).expect("a shard").1).collect()))
    }
}

/// The recovered dataset: a prefix of the oracle of `before..=after`
/// records (exactly one of the two when `exact`), every shard but the last full.
fn check(
    fs: &SimFs,
    vfs: &Arc<dyn Vfs>,
    w: &Workload,
    before: usize,
    after: usize,
    exact: bool,
) -> Result<usize, Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    let (records, counts) = read(vfs, w).map_err(|e| v(format!("the recovered dataset does not open: {e}")))?;
    let n = records.len();
    if n < before || n > after || (exact && n != before && n != after) {
        return Err(v(format!("{n} records recovered, expected {before} or {after}")));
    }
    if let Some(k) = (0..n).find(|&i| records[i] != record(i, w.ragged)) {
        return Err(v(format!("record {k} is not the one written")));
    }
    if let Some(k) = counts.iter().rev().skip(1).position(|&c| c != SHARD_RECORDS) {
        return Err(v(format!(
            "sealed shard {} holds {} records: {counts:?}",
            counts.len() - 2 - k,
            counts[counts.len() - 2 - k]
        )));
    }
    Ok(n)
}

/// Runs `w` with a crash at I/O operation `at` of write `crashed` (`None`:
/// no crash), recovering with `persist`; returns that write's I/O operations.
fn run_once(w: &Workload, crashed: Option<(usize, u64)>, persist: Persist, seed: u64) -> Result<u64, Violation> {
    let fs = SimFs::new(Rng::new(seed), Faults::default());
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let v = |fs: &SimFs, what: String| Violation { what, trace: fs.trace() };
    let total: usize = w.writes.iter().sum();
    let (mut done, mut ops) = (0usize, 0u64);
    for (k, &n) in w.writes.iter().enumerate() {
        let start = fs.ops();
        let crash_here = crashed.filter(|&(c, _)| c == k);
        fs.arm_crash(crash_here.map(|(_, at)| start + at));
        let result = write(&vfs, w, done..done + n);
        fs.arm_crash(None);
        match (result, crash_here) {
            (Ok(_), None) => done += n,
            (Ok(_), Some(_)) if !fs.crashed() => return Ok(fs.ops() - start),
            (Err(e), None) => return Err(v(&fs, format!("write {k} failed without a crash: {e}"))),
            (_, Some(_)) => {
                fs.reboot(persist);
                let exact = n == 1;
                done = check(&fs, &vfs, w, done, done + n, exact)?;
                // A new writer finishes the workload from what survived.
                write(&vfs, w, done..total).map_err(|e| v(&fs, format!("the write after recovery failed: {e}")))?;
                check(&fs, &vfs, w, total, total, true)?;
                return Ok(0);
            }
        }
        ops = fs.ops() - start;
        if crashed.is_none() && k + 1 == w.writes.len() {
            check(&fs, &vfs, w, total, total, true)?;
        }
    }
    Ok(ops)
}

/// I/O operations of write `k` without a crash.
fn ops_of(w: &Workload, k: usize) -> Result<u64, Violation> {
    let fs = SimFs::new(Rng::new(0), Faults::default());
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let mut done = 0;
    for (j, &n) in w.writes.iter().enumerate() {
        let start = fs.ops();
        write(&vfs, w, done..done + n).map_err(|e| Violation { what: format!("write {j}: {e}"), trace: fs.trace() })?;
        if j == k {
            return Ok(fs.ops() - start);
        }
        done += n;
    }
    unreachable!("write {k} of {}", w.writes.len())
}

/// The deletes of the delete sweep: in sealed shards 0 and 1 and the last, 2.
const DOOMED: [u64; 3] = [1, 6, 9];

/// The fixed oracle after the deletes of the first `j` shards of [`DOOMED`]
/// (swap-with-last within each shard of 4).
fn after_deletes(j: usize) -> Vec<Vec<u8>> {
    let w = &workloads()[1];
    let mut shards: Vec<Vec<Vec<u8>>> =
        (0..3).map(|k| (k * 4..k * 4 + 4).map(|i| record(i, w.ragged)).collect()).collect();
    for &i in DOOMED.iter().take(j) {
        let (k, local) = (i as usize / 4, i as usize % 4);
        let last = shards[k].pop().expect("a record");
        if local < shards[k].len() {
            shards[k][local] = last;
        }
    }
    shards.concat()
}

/// A 3-shard dataset, then a delete in each shard crashed at I/O
/// operation `at` (`None`: no crash): the recovered dataset is the one
/// after the deletes of the first `j` shards, for some `j`, and stays so
/// once a writer has opened it (a pending mark resolved).
fn run_delete(at: Option<u64>, persist: Persist, seed: u64) -> Result<u64, Violation> {
    let w = &workloads()[1];
    let fs = SimFs::new(Rng::new(seed), Faults::default());
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let v = |fs: &SimFs, what: String| Violation { what, trace: fs.trace() };
    write(&vfs, w, 0..12).map_err(|e| v(&fs, format!("setup: {e}")))?;
    let start = fs.ops();
    fs.arm_crash(at.map(|a| start + a));
    let deleted = ShardedMutation::open_in(vfs.clone(), Path::new(ROOT), false).and_then(|mut m| m.delete(&DOOMED));
    fs.arm_crash(None);
    let ops = fs.ops() - start;
    match deleted {
        Ok(_) if !fs.crashed() => return expect_deletes(&fs, &vfs, w, &[3]).map(|_| ops),
        Err(e) if !fs.crashed() => return Err(v(&fs, format!("the delete failed without a crash: {e}"))),
        _ => fs.reboot(persist),
    }
    // A reader sees a before-or-after state, unless a shard's store needs
    // its writer's open to finish a delete (as a single store does).
    let seen = match read(&vfs, w) {
        Err(DatasetError::Store(loaderx::Error::RecoveryNeeded { .. })) => None,
        _ => Some(expect_deletes(&fs, &vfs, w, &[0, 1, 2, 3])?),
    };
    ShardedMutation::open_in(vfs.clone(), Path::new(ROOT), false).map_err(|e| v(&fs, format!("writer open: {e}")))?;
    let all = [0, 1, 2, 3];
    let allowed = seen.as_ref().map_or(&all[..], std::slice::from_ref);
    expect_deletes(&fs, &vfs, w, allowed)?;
    Ok(ops)
}

/// The dataset is [`after_deletes`] of one of `allowed`; returns which.
fn expect_deletes(fs: &SimFs, vfs: &Arc<dyn Vfs>, w: &Workload, allowed: &[usize]) -> Result<usize, Violation> {
    let v = |what: String| Violation { what, trace: fs.trace() };
    let (records, _) = read(vfs, w).map_err(|e| v(format!("the dataset does not open after the delete: {e}")))?;
    allowed.iter().copied().find(|&j| records == after_deletes(j)).ok_or_else(|| {
        v(format!("{} records, none of the states after the deletes of shards {allowed:?}", records.len()))
    })
}

/// Crashes every write of every sharded workload at every I/O operation,
/// then a delete across sealed shards and the last at every I/O operation.
pub fn run() -> Result<Explored, (String, Violation)> {
    let mut explored = Explored::default();
    for w in workloads() {
        run_once(&w, None, Persist::Nothing, 0).map_err(|v| (format!("{} without a crash", w.name), v))?;
        let mut points = 0;
        for k in 0..w.writes.len() {
            let total = ops_of(&w, k).map_err(|v| (format!("{} counting", w.name), v))?;
            for at in 1..=total {
                for (persist, seed) in CRASH_KEEPS {
                    run_once(&w, Some((k, at)), persist, seed).map_err(|v| {
                        (format!("{}: write {k}, crash at its I/O {at}, keeping {persist:?} (#{seed})", w.name), v)
                    })?;
                    explored.states += 1;
                }
            }
            points += total;
        }
        explored.crash_points += points;
        println!("  {:<45} {points:>4} crash points", w.name);
    }
    let name = "sharded: a delete in three shards";
    let total = run_delete(None, Persist::Nothing, 0).map_err(|v| (format!("{name} without a crash"), v))?;
    for at in 1..=total {
        for (persist, seed) in CRASH_KEEPS {
            run_delete(Some(at), persist, seed)
                .map_err(|v| (format!("{name}: crash at its I/O {at}, keeping {persist:?} (#{seed})"), v))?;
            explored.states += 1;
        }
    }
    explored.crash_points += total;
    println!("  {name:<45} {total:>4} crash points");
    Ok(explored)
}
