//! Tuning within a budget: how many workers produce, and how many batches
//! the window holds, while the loader runs.
//!
//! The [`Tuner`] is the policy; the workers (`worker.rs`) apply what it
//! decides. It runs on the consumer's thread, in `next_batch`.
//!
//! - **The start.** One worker produces the first batch, which gives a
//!   batch's size. Then every core given works, with two batches each in
//!   the window, as far as the budget allows.
//! - **Then, once per period** (at least [`PERIOD_BATCHES`] batches and
//!   [`PERIOD`] of time), it looks at the period's statistics:
//!   - **the exposed wait**, the share of the period the consumer waited
//!     for a batch. Above [`WAIT_HIGH`], the loader is the bottleneck. If
//!     the workers were busy, it adds workers (doubling while the consumer
//!     waited most of the time, else one), up to the cores given. If they
//!     were not (they waited for room while a slow step held the window's
//!     head), it widens the window.
//!   - **idle workers.** When the consumer never waited (below
//!     [`WAIT_LOW`]) and the workers but one would have been busy less than
//!     [`RETIRE_BUSY`] of the time, it retires a worker, which gives a core
//!     back. After workers were added, none is retired for
//!     [`CALM_PERIODS`] periods.
//! - **The budget.** The window holds at most `budget / batch_bytes - 1`
//!   batches, where `batch_bytes` is the mean size of the batches produced
//!   so far. The last one is left for the free buffers kept for reuse:
//!   batches in production or ready, plus kept buffers, stay within the
//!   budget. Workers never exceed the window, nor the cores given.
//!
//! Each decision is recorded with its reason ([`Decision`]). Tuning changes
//! only who produces a step and when: a step's batch is a function of
//! the step, so the batches and their order are the same whatever it does.

use std::time::{Duration, Instant};

use super::stats::LoaderStats;

/// A period lasts at least this many batches...
pub const PERIOD_BATCHES: u64 = 8;
/// ... and at least this long.
pub const PERIOD: Duration = Duration::from_millis(25);
/// The consumer waited more than this share of a period: the loader is
/// the bottleneck.
pub const WAIT_HIGH: f64 = 0.02;
/// The consumer waited less than this share: the loader keeps up.
pub const WAIT_LOW: f64 = 0.002;
/// Workers busy less than this share of a period are not the bottleneck
/// (the consumer's wait then comes from the window).
pub const BUSY_LOW: f64 = 0.5;
/// A worker is retired when the others would have been busy less than
/// this share of the period: well below saturation, so that a burst does
/// not make the consumer wait.
pub const RETIRE_BUSY: f64 = 0.3;
/// Periods after workers were added before one may be retired: the
/// hysteresis that keeps a noisy period from undoing a decision.
pub const CALM_PERIODS: u32 = 8;
/// The decisions kept (the latest; the count of all is kept too).
pub const DECISIONS_KEPT: usize = 256;

/// The limits of tuning ([`LoaderBuilder::autotune`](super::LoaderBuilder::autotune)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Autotune {
    /// Bytes of batches the loader may hold: in production, ready, and
    /// kept for reuse.
    pub memory_budget: u64,
    /// The most workers (the cores given).
    pub max_workers: usize,
}

/// What the workers run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Setting {
    /// Workers that produce.
    pub workers: usize,
    /// Batches the window holds: in production or ready.
    pub window: usize,
}

/// One decision of the tuner.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The step the consumer was at.
    pub step: u64,
    /// The setting from then on.
    pub setting: Setting,
    /// Why, with the figures of the period.
    pub reason: String,
}

/// The tuning of a running loader: its setting and decisions so far.
#[derive(Clone, Debug, PartialEq)]
pub struct Tuning {
    /// The limits it tunes within.
    pub limits: Autotune,
    /// The setting now.
    pub setting: Option<Setting>,
    /// The budget's limit on the window now (`None` before a batch was measured).
    pub window_limit: Option<usize>,
    /// The latest decisions, oldest first (at most [`DECISIONS_KEPT`]).
    pub decisions: Vec<Decision>,
    /// Decisions made in all.
    pub decided: u64,
}

/// The tuning policy; see the [module docs](self).
#[derive(Debug)]
pub(super) struct Tuner {
    limits: Autotune,
    /// The most batches the window can hold (the workers' slots).
    max_window: usize,
    setting: Setting,
    /// Periods left before a worker may be retired (after one was added).
    calm: u32,
    /// The snapshot at the start of the period.
    start: Option<LoaderStats>,
    /// Batches taken since the period started, and when it started: a
    /// snapshot is taken only once a period may be over.
    taken: u64,
    started: Instant,
    tuning: Tuning,
}

/// The period's figures the policy looks at.
struct Period {
    wait: f64,
    busy: f64,
    batch_bytes: Option<u64>,
}

impl Tuner {
    /// A tuner starting with one worker and a window of one, until the
    /// first batch says how large a batch is.
    pub(super) fn new(limits: Autotune, max_window: usize) -> Tuner {
        let setting = Setting { workers: 1, window: 1 };
        Tuner {
            limits,
            max_window,
            setting,
            calm: 0,
            start: None,
            taken: 0,
            started: Instant::now(),
            tuning: Tuning { limits, setting: Some(setting), window_limit: None, decisions: Vec::new(), decided: 0 },
        }
    }

    /// Counts a batch taken; true when a period may be over, so that
    /// [`observe`](Self::observe) is worth a snapshot.
    pub(super) fn due(&mut self) -> bool {
        self.taken += 1;
        self.start.is_none() || (self.taken >= PERIOD_BATCHES && self.started.elapsed() >= PERIOD)
    }

    /// Free buffers a column's pool may keep: what the budget leaves
    /// beside the window (at least one).
    pub(super) fn kept_buffers(&self) -> usize {
        let limit = self.tuning.window_limit.unwrap_or(self.setting.window) + 1;
        limit.saturating_sub(self.setting.window).max(1)
    }

    pub(super) fn setting(&self) -> Setting {
        self.setting
    }

    pub(super) fn tuning(&self) -> Tuning {
        self.tuning.clone()
    }

    /// The budget's limit on the window now.
    pub(super) fn tuning_limit(&self) -> Option<usize> {
        self.tuning.window_limit
    }

    /// The latest decision.
    pub(super) fn last_decision(&self) -> Option<&Decision> {
        self.tuning.decisions.last()
    }

    /// Looks at the statistics `now`; a new setting if the policy changes
    /// it: at the first batch (the start), or once a period is over.
    pub(super) fn observe(&mut self, step: u64, now: LoaderStats) -> Option<Setting> {
        let batch_bytes = mean_batch_bytes(&now);
        let Some(start) = &self.start else {
            self.start = Some(now);
            (self.taken, self.started) = (0, Instant::now());
            let (setting, reason) = self.first(batch_bytes?)?;
            return Some(self.apply(step, setting, reason));
        };
        let period = now.since(start);
        if period.taken < PERIOD_BATCHES || period.elapsed < PERIOD {
            return None;
        }
        (self.taken, self.started) = (0, Instant::now());
        let figures = Period {
            wait: period.wait.as_secs_f64() / period.elapsed.as_secs_f64(),
            busy: busy(&period, self.setting.workers),
            batch_bytes,
        };
        self.start = Some(now);
        self.calm = self.calm.saturating_sub(1);
        let (setting, reason) = self.decide(&figures)?;
        Some(self.apply(step, setting, reason))
    }

    /// The start, once the first batch gives its size: the cores given,
    /// two batches each in the window, within the budget.
    fn first(&mut self, batch_bytes: u64) -> Option<(Setting, String)> {
        let limit = self.window_limit(Some(batch_bytes));
        self.tuning.window_limit = Some(limit);
        let workers = self.limits.max_workers.min(limit);
        let setting = Setting { workers, window: (2 * workers).min(limit) };
        let reason = format!("a batch holds {batch_bytes} bytes, the window at most {limit}: start");
        (setting != self.setting).then_some((setting, reason))
    }

    fn apply(&mut self, step: u64, setting: Setting, reason: String) -> Setting {
        self.setting = setting;
        self.tuning.setting = Some(setting);
        self.tuning.decided += 1;
        if self.tuning.decisions.len() == DECISIONS_KEPT {
            self.tuning.decisions.remove(0);
        }
        self.tuning.decisions.push(Decision { step, setting, reason });
        setting
    }

    /// The policy: the next setting and why, or `None` to keep this one.
    fn decide(&mut self, p: &Period) -> Option<(Setting, String)> {
        let limit = self.window_limit(p.batch_bytes);
        self.tuning.window_limit = Some(limit);
        let Setting { workers, window } = self.setting;
        let figures = format!("waited {:.1}%, workers busy {:.0}%", p.wait * 100.0, p.busy * 100.0);
        // The busy share the workers but one would have had.
        let busy_after = p.busy * workers as f64 / (workers.max(2) - 1) as f64;
        let (next, why) = if window > limit || workers > limit {
            let w = window.min(limit);
            (Setting { workers: workers.min(w), window: w }, format!("the budget holds {limit} batches and a buffer"))
        } else if p.wait > WAIT_HIGH && p.busy >= BUSY_LOW && workers < self.limits.max_workers {
            let add = if p.wait > 0.5 { workers } else { 1 };
            let w = (workers + add).min(self.limits.max_workers).min(limit);
            let grown = Setting { workers: w, window: window.max(w + 1).min(limit) };
            self.calm = CALM_PERIODS;
            (grown, format!("{figures}: more workers"))
        } else if p.wait > WAIT_HIGH && p.busy < BUSY_LOW && window < limit {
            (Setting { workers, window: window + 1 }, format!("{figures}: a wider window"))
        } else if p.wait < WAIT_LOW && busy_after < RETIRE_BUSY && workers > 1 && self.calm == 0 {
            (Setting { workers: workers - 1, window }, format!("{figures}: a worker idles"))
        } else {
            return None;
        };
        (next != self.setting).then_some((next, why))
    }

    /// The most batches the window may hold within the budget (at least 1).
    fn window_limit(&self, batch_bytes: Option<u64>) -> usize {
        let Some(bytes) = batch_bytes.filter(|&b| b > 0) else {
            return self.setting.window.max(2).min(self.max_window);
        };
        let batches = self.limits.memory_budget / bytes;
        usize::try_from(batches.saturating_sub(1)).unwrap_or(usize::MAX).clamp(1, self.max_window)
    }
}

/// The share of the period the `workers` producing were busy.
/// The mean bytes of a batch produced so far (`None` before the first).
fn mean_batch_bytes(now: &LoaderStats) -> Option<u64> {
    let batches: u64 = now.workers.iter().map(|w| w.batches).sum();
    (batches > 0).then(|| now.bytes() / batches)
}

fn busy(period: &LoaderStats, workers: usize) -> f64 {
    let busy: f64 = period.workers.iter().map(|w| w.busy().as_secs_f64()).sum();
    let capacity = period.elapsed.as_secs_f64() * workers.max(1) as f64;
    if capacity > 0.0 { (busy / capacity).min(1.0) } else { 0.0 }
}
