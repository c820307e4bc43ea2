//! The loader's statistics: where a step's time goes.
//!
//! Workers and the consumer add to relaxed atomic counters (no lock, no
//! allocation per batch); [`LoaderStats`] is a plain snapshot of them.
//! The whole run is one snapshot; a recent window is the difference of two
//! ([`LoaderStats::since`]). A worker reads the clock four times per batch
//! (before sampling, after it, after the gather, after the transform), the consumer
//! twice per batch it asks for.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use super::batch::{Batch, Column};
use crate::ReadStats;

/// Buckets of the wait histogram: bucket `b` holds waits of `2^(b-1)` to
/// `2^b - 1` nanoseconds (bucket 0: zero), so 64 buckets cover every `u64`.
pub const WAIT_BUCKETS: usize = 65;

/// One worker's counters.
#[derive(Debug, Default)]
pub(super) struct WorkerCounters {
    sample_ns: AtomicU64,
    gather_ns: AtomicU64,
    transform_ns: AtomicU64,
    batches: AtomicU64,
    bytes: AtomicU64,
}

/// Every counter of a running loader.
#[derive(Debug)]
pub(super) struct Counters {
    /// Off: nothing is counted and no clock is read (the snapshot stays zero).
    pub(super) enabled: bool,
    started: Instant,
    workers: Vec<WorkerCounters>,
    wait_ns: AtomicU64,
    waits: [AtomicU64; WAIT_BUCKETS],
    taken: AtomicU64,
    /// Damaged records the taken batches replaced (`skip_corrupt`).
    skipped: AtomicU64,
    /// Sum over taken batches of the batches ready at that moment.
    depth_sum: AtomicU64,
    /// Bytes of the batches produced and not yet taken.
    in_flight: AtomicU64,
}

/// The bytes a batch's columns hold.
pub(super) fn batch_bytes(batch: &Batch) -> u64 {
    let column = |c: &Column| match c {
        Column::Dense(t) => t.nbytes() as u64,
        Column::Ragged(r) => (r.values.nbytes() + r.row_splits.len() * 8) as u64,
    };
    batch.columns().map(|(_, c)| column(c)).sum()
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The histogram bucket of a wait of `ns` nanoseconds.
fn bucket(ns: u64) -> usize {
    (u64::BITS - ns.leading_zeros()) as usize
}

impl Counters {
    pub(super) fn new(workers: usize, enabled: bool) -> Counters {
        Counters {
            enabled,
            started: Instant::now(),
            workers: (0..workers).map(|_| WorkerCounters::default()).collect(),
            wait_ns: AtomicU64::new(0),
            waits: std::array::from_fn(|_| AtomicU64::new(0)),
            taken: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            depth_sum: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
        }
    }

    /// Worker `k` produced a batch of `bytes` (0 for a failed step),
    /// spending `[sample, gather, transform]` on its stages.
    pub(super) fn produced(&self, k: usize, [sample, gather, transform]: [Duration; 3], bytes: u64) {
        let Some(w) = self.workers.get(k) else { return };
        w.sample_ns.fetch_add(nanos(sample), Relaxed);
        w.gather_ns.fetch_add(nanos(gather), Relaxed);
        w.transform_ns.fetch_add(nanos(transform), Relaxed);
        w.batches.fetch_add(1, Relaxed);
        w.bytes.fetch_add(bytes, Relaxed);
        self.in_flight.fetch_add(bytes, Relaxed);
    }

    /// The consumer took a batch of `bytes` that replaced `skipped`
    /// damaged records, after waiting `wait`, with `ready` batches (that
    /// one included) done in the window.
    pub(super) fn taken(&self, wait: Duration, ready: usize, bytes: u64, skipped: usize) {
        self.skipped.fetch_add(skipped as u64, Relaxed);
        let ns = nanos(wait);
        self.wait_ns.fetch_add(ns, Relaxed);
        self.waits[bucket(ns)].fetch_add(1, Relaxed);
        self.taken.fetch_add(1, Relaxed);
        self.depth_sum.fetch_add(ready as u64, Relaxed);
        // Saturating: a relaxed reader may see the take before the put.
        let _ = self.in_flight.fetch_update(Relaxed, Relaxed, |v| Some(v.saturating_sub(bytes)));
    }

    /// A snapshot; `ready` is the batches ready in the window now.
    pub(super) fn snapshot(&self, ready: usize) -> LoaderStats {
        LoaderStats {
            elapsed: self.started.elapsed(),
            workers: self
                .workers
                .iter()
                .map(|w| WorkerStats {
                    sample: Duration::from_nanos(w.sample_ns.load(Relaxed)),
                    gather: Duration::from_nanos(w.gather_ns.load(Relaxed)),
                    transform: Duration::from_nanos(w.transform_ns.load(Relaxed)),
                    batches: w.batches.load(Relaxed),
                    bytes: w.bytes.load(Relaxed),
                })
                .collect(),
            wait: Duration::from_nanos(self.wait_ns.load(Relaxed)),
            waits: std::array::from_fn(|b| self.waits[b].load(Relaxed)),
            taken: self.taken.load(Relaxed),
            skipped: self.skipped.load(Relaxed),
            depth_sum: self.depth_sum.load(Relaxed),
            ready,
            in_flight_bytes: self.in_flight.load(Relaxed),
            reads: ReadStats::default(),
        }
    }
}

/// One worker's share of the work, in a [`LoaderStats`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkerStats {
    /// Time drawing a step's record indices (the sampler).
    pub sample: Duration,
    /// Time gathering: reading and decoding every stream at the indices.
    /// [`LoaderStats::reads`] splits the stores' part by where the bytes
    /// came from.
    pub gather: Duration,
    /// Time in the transform (the collate step).
    pub transform: Duration,
    /// Batches produced (failed steps included).
    pub batches: u64,
    /// Bytes of the batches produced, after the transform.
    pub bytes: u64,
}

impl WorkerStats {
    /// Time producing batches.
    pub fn busy(&self) -> Duration {
        self.sample + self.gather + self.transform
    }
}

/// A snapshot of a loader's statistics ([`DataLoader::stats`](super::DataLoader::stats)).
///
/// The counters cover the run since the loader was built; the difference
/// of two snapshots ([`since`](Self::since)) is a window.
#[derive(Clone, Debug, PartialEq)]
pub struct LoaderStats {
    /// Wall time covered.
    pub elapsed: Duration,
    /// Each worker's counters.
    pub workers: Vec<WorkerStats>,
    /// The consumer's exposed wait: time blocked in `next_batch`.
    pub wait: Duration,
    /// Waits per log2 bucket of nanoseconds (see [`WAIT_BUCKETS`]).
    pub waits: [u64; WAIT_BUCKETS],
    /// Batches the consumer took.
    pub taken: u64,
    /// Damaged records the taken batches replaced
    /// ([`LoaderBuilder::skip_corrupt`](super::LoaderBuilder::skip_corrupt)).
    pub skipped: u64,
    /// Sum over the taken batches of the batches ready when each was taken.
    pub depth_sum: u64,
    /// Batches ready in the prefetch window at the snapshot.
    pub ready: usize,
    /// Bytes of the batches produced and not yet taken, at the snapshot.
    pub in_flight_bytes: u64,
    /// What the streams' stores read since the loader was built, by where
    /// the bytes came from: memory (the mapped path) or the device or
    /// network (positional reads), decoding included in each time. The
    /// stores' counters are shared by every reader of the same dataset
    /// handle, so a reader beside the loader is counted too.
    pub reads: ReadStats,
}

impl LoaderStats {
    /// The counters accumulated since `earlier` (a snapshot of the same
    /// loader): a window. The gauges (`ready`, `in_flight_bytes`) are this
    /// snapshot's.
    pub fn since(&self, earlier: &LoaderStats) -> LoaderStats {
        let workers = self
            .workers
            .iter()
            .zip(earlier.workers.iter().chain(std::iter::repeat(&WorkerStats::default())))
            .map(|(a, b)| WorkerStats {
                sample: a.sample.saturating_sub(b.sample),
                gather: a.gather.saturating_sub(b.gather),
                transform: a.transform.saturating_sub(b.transform),
                batches: a.batches.saturating_sub(b.batches),
                bytes: a.bytes.saturating_sub(b.bytes),
            })
            .collect();
        LoaderStats {
            elapsed: self.elapsed.saturating_sub(earlier.elapsed),
            workers,
            wait: self.wait.saturating_sub(earlier.wait),
            waits: std::array::from_fn(|b| self.waits[b].saturating_sub(earlier.waits[b])),
            taken: self.taken.saturating_sub(earlier.taken),
            skipped: self.skipped.saturating_sub(earlier.skipped),
            depth_sum: self.depth_sum.saturating_sub(earlier.depth_sum),
            ready: self.ready,
            in_flight_bytes: self.in_flight_bytes,
            reads: self.reads.since(&earlier.reads),
        }
    }

    /// The wait at quantile `q` (0 to 1) of the taken batches, as the upper
    /// bound of its log2 bucket (within a factor of 2); zero with no batch.
    pub fn wait_quantile(&self, q: f64) -> Duration {
        let total: u64 = self.waits.iter().sum();
        if total == 0 {
            return Duration::ZERO;
        }
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &n) in self.waits.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Duration::from_nanos(if b == 0 { 0 } else { u64::MAX >> (64 - b) });
            }
        }
        Duration::from_nanos(u64::MAX)
    }

    /// Mean batches ready when the consumer took one (the queue depth over time).
    pub fn mean_ready(&self) -> f64 {
        if self.taken == 0 { 0.0 } else { self.depth_sum as f64 / self.taken as f64 }
    }

    /// Worker `k`'s busy fraction of the elapsed time (0 to 1).
    pub fn busy_fraction(&self, k: usize) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        match self.workers.get(k) {
            Some(w) if secs > 0.0 => (w.busy().as_secs_f64() / secs).min(1.0),
            _ => 0.0,
        }
    }

    /// Bytes produced by every worker.
    pub fn bytes(&self) -> u64 {
        self.workers.iter().map(|w| w.bytes).sum()
    }
}

impl LoaderStats {
    /// The statistics in the Prometheus text exposition format (0.0.4),
    /// every metric named `loaderx_...`, seconds and bytes as Prometheus
    /// names them; the wait as a histogram of its log2 buckets.
    pub fn prometheus(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, rows: &[(String, f64)]| {
            let _ = writeln!(out, "# HELP loaderx_{name} {help}\n# TYPE loaderx_{name} {kind}");
            for (labels, value) in rows {
                let _ = writeln!(out, "loaderx_{name}{labels} {value}");
            }
        };
        let per_worker = |f: &dyn Fn(&WorkerStats) -> f64| -> Vec<(String, f64)> {
            self.workers.iter().enumerate().map(|(k, w)| (format!("{{worker=\"{k}\"}}"), f(w))).collect()
        };
        let stage = |f: fn(&WorkerStats) -> Duration| self.workers.iter().map(|w| f(w).as_secs_f64()).sum::<f64>();
        let stages =
            [("sample", stage(|w| w.sample)), ("gather", stage(|w| w.gather)), ("transform", stage(|w| w.transform))];
        let stages: Vec<(String, f64)> = stages.iter().map(|(s, v)| (format!("{{stage=\"{s}\"}}"), *v)).collect();
        metric("stage_seconds_total", "counter", "Worker time per stage, all workers.", &stages);
        metric(
            "worker_busy_seconds_total",
            "counter",
            "Time each worker spent producing batches.",
            &per_worker(&|w| w.busy().as_secs_f64()),
        );
        metric("worker_batches_total", "counter", "Batches each worker produced.", &per_worker(&|w| w.batches as f64));
        metric(
            "read_bytes_total",
            "counter",
            "Bytes of the batches produced.",
            &[(String::new(), self.bytes() as f64)],
        );
        metric("batches_taken_total", "counter", "Batches the consumer took.", &[(String::new(), self.taken as f64)]);
        metric(
            "records_skipped_total",
            "counter",
            "Damaged records the taken batches replaced (skip_corrupt).",
            &[(String::new(), self.skipped as f64)],
        );
        metric(
            "prefetch_ready_batches",
            "gauge",
            "Batches ready in the prefetch queue now.",
            &[(String::new(), self.ready as f64)],
        );
        metric(
            "in_flight_bytes",
            "gauge",
            "Bytes of batches produced and not yet taken.",
            &[(String::new(), self.in_flight_bytes as f64)],
        );
        let r = &self.reads;
        let from = |memory: f64, device: f64| {
            vec![("{from=\"memory\"}".to_string(), memory), ("{from=\"device\"}".to_string(), device)]
        };
        metric(
            "store_read_bytes_total",
            "counter",
            "Bytes the streams' stores gathered, by where they came from (device: or network).",
            &from(r.memory_bytes as f64, r.device_bytes as f64),
        );
        metric(
            "store_read_seconds_total",
            "counter",
            "Time in the stores' gathers, decoding included, by where the bytes came from.",
            &from(r.memory_time.as_secs_f64(), r.device_time.as_secs_f64()),
        );
        metric(
            "elapsed_seconds",
            "gauge",
            "Time since the loader was built.",
            &[(String::new(), self.elapsed.as_secs_f64())],
        );
        let mut buckets = Vec::new();
        let mut seen = 0;
        for (b, &n) in self.waits.iter().enumerate().take(WAIT_BUCKETS - 1) {
            seen += n;
            // Bucket b holds waits below 2^b ns.
            buckets.push((format!("_bucket{{le=\"{:e}\"}}", (1u64 << b) as f64 * 1e-9), seen as f64));
        }
        buckets.push(("_bucket{le=\"+Inf\"}".to_string(), self.taken as f64));
        buckets.push(("_sum".to_string(), self.wait.as_secs_f64()));
        buckets.push(("_count".to_string(), self.taken as f64));
        let mut text = out;
        let _ = writeln!(text, "# HELP loaderx_wait_seconds The consumer's wait for each batch (exposed wait).");
        let _ = writeln!(text, "# TYPE loaderx_wait_seconds histogram");
        for (suffix, value) in buckets {
            let _ = writeln!(text, "loaderx_wait_seconds{suffix} {value}");
        }
        text
    }
}
