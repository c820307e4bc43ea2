//! A campaign: seeds of the random workload split over a few threads (one
//! seed's simulation always runs on one thread, so it stays deterministic),
//! and the one-line summary that the binary and the tests print.

use std::fmt;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::workload::{Settings, Tally, Violation, run_seed};

/// What a run explored, as one line:
/// `simulation: S seeds, C crashes, P exhaustive crash points, V violations`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Seeds of the random workload run.
    pub seeds: u64,
    /// Crashes (power losses) those seeds injected.
    pub crashes: u64,
    /// Exhaustive crash points (each recovered several ways).
    pub crash_points: u64,
    /// Seeds or exhaustive workloads that found a violation.
    pub violations: u64,
}

impl Summary {
    /// Seeded crashes plus exhaustive crash points.
    pub fn crash_total(&self) -> u64 {
        self.crashes + self.crash_points
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "simulation: {} seeds, {} crashes, {} exhaustive crash points, {} violations",
            self.seeds, self.crashes, self.crash_points, self.violations
        )
    }
}

/// The outcome of a range of seeds.
#[derive(Debug, Default)]
pub struct SeedRun {
    /// Seeds run.
    pub seeds: u64,
    /// Their counters, summed over the seeds that passed.
    pub tally: Tally,
    /// The seeds that found a violation, in seed order.
    pub violations: Vec<(u64, Violation)>,
}

/// Runs one seed, turning a panic into a violation.
pub fn run_guarded(seed: u64, settings: &Settings) -> Result<(Tally, u64), Violation> {
    // Every fourth seed also crashes a table's steps once, at random, and
    // every fourth another an import (and maybe its rerun). Odd seeds run
    // the Windows model of the filesystem.
    let mut settings = settings.clone();
    settings.faults.windows |= seed % 2 == 1;
    let settings = &settings;
    let run = || {
        run_seed(seed, settings).and_then(|r| match seed % 4 {
            0 => crate::table::run_random(seed).map(|_| r),
            #[cfg(feature = "import")]
            2 => crate::import::run_random(seed).map(|_| r),
            _ => Ok(r),
        })
    };
    match std::panic::catch_unwind(run) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(Violation { what: format!("panic: {what}"), trace: Vec::new() })
        }
    }
}

/// Runs `seeds` on `threads` threads, each taking the next seed in turn.
pub fn run_seeds(seeds: Range<u64>, settings: &Settings, threads: usize) -> SeedRun {
    let next = AtomicU64::new(seeds.start);
    let total = Mutex::new(Tally::default());
    let violations = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= seeds.end {
                        break;
                    }
                    match run_guarded(seed, settings) {
                        Ok((tally, _)) => total.lock().unwrap().add(&tally),
                        Err(v) => violations.lock().unwrap().push((seed, v)),
                    }
                }
            });
        }
    });
    let mut violations = violations.into_inner().unwrap();
    violations.sort_by_key(|(seed, _)| *seed);
    SeedRun { seeds: seeds.end.saturating_sub(seeds.start), tally: total.into_inner().unwrap(), violations }
}
