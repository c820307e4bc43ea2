//! Exhaustive crash points: short workloads crashed at every I/O operation,
//! with several choices of what the crash keeps.

use crate::fs::{Faults, Persist};
use crate::rng::Rng;
use loaderx::CompactOptions;

use crate::workload::{Harness, Op, Settings, Violation, record};

/// A short workload: a name and how to build its operations.
pub struct Workload {
    /// What it exercises.
    pub name: &'static str,
    /// Start near the end of chunk 0, so appends roll over.
    pub near_rollover: bool,
    /// Its operations, built from a fixed generator.
    pub ops: fn(&mut Rng) -> Vec<Op>,
}

fn append(rng: &mut Rng, codec: u8, sizes: &[usize]) -> Op {
    Op::Append { codec, records: sizes.iter().map(|&n| record(rng, n)).collect(), fixed: false }
}

/// The workloads of `--exhaustive`.
pub fn workloads() -> Vec<Workload> {
    vec![
        Workload { name: "create + append", near_rollover: false, ops: |r| vec![append(r, 1, &[100, 0, 700, 30])] },
        Workload {
            name: "append raw + zstd",
            near_rollover: false,
            ops: |r| vec![append(r, 0, &[64; 6]), append(r, 1, &[0, 900, 12])],
        },
        Workload {
            name: "append across a chunk boundary",
            near_rollover: true,
            ops: |r| vec![append(r, 1, &[800, 900, 1000, 1100, 1200, 50])],
        },
        Workload {
            name: "dictionary install + zstd_dict append",
            near_rollover: false,
            ops: |r| vec![append(r, 1, &[300; 4]), Op::TrainDict, append(r, 2, &[300, 280, 0])],
        },
        Workload {
            name: "delete with duplicates and the last index",
            near_rollover: false,
            ops: |r| vec![append(r, 1, &[40; 20]), Op::Delete(vec![3, 3, 19, 7, 0])],
        },
        Workload {
            name: "delete + fill with several moves",
            near_rollover: false,
            ops: |r| {
                let sizes: Vec<usize> = (0..24).map(|k| 30 + (k * 53) % 400).collect();
                vec![append(r, 1, &sizes), Op::Delete(vec![0, 4, 5, 11, 17, 2]), Op::Compact]
            },
        },
        Workload {
            name: "fill across chunks (moves into chunk 0)",
            near_rollover: true,
            ops: |r| vec![append(r, 0, &[700, 800, 900, 1000, 600, 500]), Op::Delete(vec![0, 1]), Op::Compact],
        },
        Workload {
            name: "fill of many holes under a budget, then the rest",
            near_rollover: false,
            ops: |r| {
                let budget = CompactOptions { max_bytes: Some(700), repack: false };
                let doomed = vec![1, 3, 5, 8, 9, 12, 20, 21];
                vec![append(r, 0, &[120; 28]), Op::Delete(doomed), Op::CompactWith(budget), Op::Compact]
            },
        },
        Workload {
            name: "repack with an evacuation",
            near_rollover: false,
            ops: |r| {
                let sizes: Vec<usize> = (0..16).map(|k| if k % 2 == 0 { 20 } else { 300 }).collect();
                let repack = CompactOptions { repack: true, ..CompactOptions::default() };
                vec![append(r, 1, &sizes), Op::Delete(vec![0, 2, 4]), Op::CompactWith(repack)]
            },
        },
    ]
}

/// What an exhaustive run explored.
#[derive(Debug, Default)]
pub struct Explored {
    /// I/O operations at which a crash was injected.
    pub crash_points: u64,
    /// Recovered states checked.
    pub states: u64,
}

fn quiet(windows: bool) -> Settings {
    Settings { ops: 0, crash: 0.0, crash_in_recovery: 0.0, faults: Faults { windows, ..Faults::default() } }
}

/// Runs `w` to the end with a crash armed at absolute I/O operation `at`
/// (`None`: no crash), recovering with `persist`, on the Windows model of
/// the filesystem or not; returns the I/O operations it made.
fn run_once(w: &Workload, at: Option<u64>, persist: Persist, seed: u64, windows: bool) -> Result<u64, Violation> {
    let mut h = Harness::with_crash(seed, quiet(windows), at, Some(persist))?;
    if w.near_rollover {
        h.near_rollover()?;
    }
    let mut ops_rng = Rng::new(42);
    for op in (w.ops)(&mut ops_rng) {
        h.step_with_crash(op, None)?;
    }
    let ops = h.fs.ops();
    h.final_check()?;
    Ok(ops)
}

/// Crashes every workload at every I/O operation (store creation
/// included), with nothing, everything and three random subsets of the
/// unsynced state kept.
/// What a crash at each point keeps of the unsynced writes, each point
/// crashed once per entry: nothing, everything, and three random subsets.
pub(crate) const CRASH_KEEPS: [(Persist, u64); 5] =
    [(Persist::Nothing, 1), (Persist::Everything, 1), (Persist::Random, 1), (Persist::Random, 2), (Persist::Random, 3)];

pub fn run() -> Result<Explored, (String, Violation)> {
    let mut explored = Explored::default();
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a one-thread pool");
    pool.install(|| {
        // Every workload, then again on the Windows model those that clear
        // an intent (delete and compaction: meta.zr is not shrunk there).
        let windows =
            workloads().into_iter().filter(|w| ["delete", "fill", "repack"].iter().any(|k| w.name.contains(k)));
        let runs = workloads().into_iter().map(|w| (w, false)).chain(windows.map(|w| (w, true)));
        for (w, windows) in runs {
            let name = if windows { format!("windows: {}", w.name) } else { w.name.to_string() };
            let total =
                run_once(&w, None, Persist::Nothing, 0, windows).map_err(|v| (format!("{name} without a crash"), v))?;
            for at in 1..=total {
                for (persist, seed) in CRASH_KEEPS {
                    run_once(&w, Some(at), persist, seed, windows)
                        .map_err(|v| (format!("{name}: crash at I/O {at}, keeping {persist:?} (#{seed})"), v))?;
                    explored.states += 1;
                }
            }
            explored.crash_points += total;
            println!("  {name:<45} {total:>4} crash points");
        }
        let sharded = crate::sharded::run()?;
        explored.crash_points += sharded.crash_points;
        explored.states += sharded.states;
        let table = crate::table::run()?;
        explored.crash_points += table.crash_points;
        explored.states += table.states;
        #[cfg(feature = "import")]
        {
            let import = crate::import::run()?;
            explored.crash_points += import.crash_points;
            explored.states += import.states;
        }
        Ok(explored)
    })
}
