//! The data loader: endless, ordered, resumable batches of named streams.
//!
//! A [`DataLoader`] draws the record indices of step 0, 1, 2, ... from a
//! [`Sampler`] (optionally one host's
//! [shard](crate::sampler::ShardedSampler)), gathers every stream at those
//! indices on `num_workers` threads, applies the transform (the collate
//! step), and hands the batches over **in step order**, whatever the
//! workers' timing. So the batch of step `k` is a function of the seed, `k`
//! and the data alone, and a loader started at step `k`
//! ([`LoaderBuilder::start_step`]) yields exactly what iterating reached at
//! `k`: [`DataLoader::step`] is the checkpoint.
//!
//! A worker failure (a gather error, a transform error, a panic) becomes the
//! error of its step: the consumer gets every batch before it, then the
//! error, and the loader stops; it never hangs. Dropping the loader stops and
//! joins every thread, also mid-way or with every slot full. At most
//! `prefetch` batches exist inside the loader at once (in production or
//! waiting), so memory is about `prefetch` batches plus what the consumer
//! holds. `docs/loader.md` has the design.
//!
//! ```
//! use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
//! use loaderx::loader::DataLoader;
//! use loaderx::sampler::Mode;
//! let dir = tempfile::tempdir()?;
//! let (x, y) = (dir.path().join("x"), dir.path().join("y"));
//! let xs: Vec<f32> = (0..400).map(|v| v as f32).collect(); // 100 records of 4
//! let ys: Vec<i64> = (0..100).collect();
//! write_dataset(&x, &xs, &[4], &WriteOptions::default())?;
//! write_dataset(&y, &ys, &[], &WriteOptions::default())?;
//! let mut loader = DataLoader::builder()
//!     .stream("x", Dataset::open(&x)?)
//!     .stream("y", Dataset::open(&y)?)
//!     .batch_size(8)
//!     .num_workers(2)
//!     .mode(Mode::Cyclic)
//!     .seed(7)
//!     .build()?;
//! let batch = loader.next_batch()?;
//! assert_eq!((batch.step(), loader.step()), (0, 1));
//! assert_eq!(batch.dense("x").unwrap().shape(), &[8, 4]);
//! let labels = batch.dense("y").unwrap().as_slice::<i64>()?;
//! let expect: Vec<i64> = batch.indices().iter().map(|&i| i as i64).collect();
//! assert_eq!(labels, expect);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod batch;
mod error;
mod mixture;
mod pack;
mod skip;
mod state;
mod stats;
mod trace;
mod tune;
mod worker;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

pub use batch::{Batch, Column, Stream};
pub use error::{LoaderError, TransformError};
pub use mixture::Mixture;
pub use pack::{Packed, pack, pack_transform};
pub use skip::{SKIP_TRIES, Skip};
pub use state::{LoaderState, STATE_FORMAT, STATE_ITEMS_MAX, STATE_VERSION, SourceIdentity, StreamIdentity, Weights};
pub use stats::{LoaderStats, WAIT_BUCKETS, WorkerStats};
pub use trace::TRACE_EVENTS_MAX;
pub use tune::{Autotune, CALM_PERIODS, DECISIONS_KEPT, Decision, Setting, Tuning};

use crate::dataset::Pool;
use crate::sampler::{Mode, Sampler};
pub use worker::StatsHandle;
use worker::{Job, Launch, Plan, Workers};

/// A transform: the collate step, a batch in, a batch out, fallible.
pub type Transform = dyn Fn(Batch) -> Result<Batch, TransformError> + Send + Sync;

/// Settings of a [`DataLoader`]; made by [`DataLoader::builder`].
pub struct LoaderBuilder {
    streams: Vec<(String, Stream)>,
    mixture: Option<Mixture>,
    batch_size: usize,
    num_workers: usize,
    prefetch: Option<usize>,
    mode: Mode,
    seed: u64,
    shard: (usize, usize),
    start_step: u64,
    /// A saved state to resume from ([`LoaderBuilder::resume`]).
    resume: Option<LoaderState>,
    transform: Option<Arc<Transform>>,
    reuse_buffers: bool,
    /// `None`: chosen at build ([`LoaderBuilder::inline_gathers`]).
    inline_gathers: Option<bool>,
    statistics: bool,
    autotune: Option<Autotune>,
    trace_path: Option<PathBuf>,
    trace_events_max: usize,
    skip_corrupt: bool,
}

impl Default for LoaderBuilder {
    fn default() -> LoaderBuilder {
        LoaderBuilder {
            streams: Vec::new(),
            mixture: None,
            batch_size: 256,
            num_workers: 4,
            prefetch: None,
            mode: Mode::Iid,
            seed: 42,
            shard: (0, 1),
            start_step: 0,
            resume: None,
            transform: None,
            reuse_buffers: true,
            inline_gathers: None,
            statistics: true,
            autotune: None,
            trace_path: None,
            trace_events_max: TRACE_EVENTS_MAX,
            skip_corrupt: false,
        }
    }
}

impl std::fmt::Debug for LoaderBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoaderBuilder")
            .field("streams", &self.streams.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .field("mixture", &self.mixture.as_ref().map(|m| (m.len(), m.schedule())))
            .field("batch_size", &self.batch_size)
            .field("num_workers", &self.num_workers)
            .field("prefetch", &self.prefetch)
            .field("mode", &self.mode)
            .field("seed", &self.seed)
            .field("shard", &self.shard)
            .field("start_step", &self.start_step)
            .field("transform", &self.transform.is_some())
            .field("trace_path", &self.trace_path)
            .finish()
    }
}

impl LoaderBuilder {
    /// Adds a named stream (a [`Dataset`](crate::dataset::Dataset) or
    /// [`RaggedDataset`](crate::dataset::RaggedDataset), owned or in an `Arc`).
    pub fn stream(mut self, name: impl Into<String>, stream: impl Into<Stream>) -> LoaderBuilder {
        self.streams.push((name.into(), stream.into()));
        self
    }

    /// Draws the streams from the sources of `mixture`, by its weights, in
    /// place of [`stream`](Self::stream)s (a loader takes one or the other).
    /// Each batch says which source each record is from
    /// ([`Batch::source`]).
    pub fn mixture(mut self, mixture: Mixture) -> LoaderBuilder {
        self.mixture = Some(mixture);
        self
    }

    /// Records per batch, across all shards (default 256, as the reference).
    pub fn batch_size(mut self, batch_size: usize) -> LoaderBuilder {
        self.batch_size = batch_size;
        self
    }

    /// Worker threads (default 4; at least 1).
    pub fn num_workers(mut self, num_workers: usize) -> LoaderBuilder {
        self.num_workers = num_workers;
        self
    }

    /// Batches allowed ahead of the consumer, in production or ready
    /// (default `2 * num_workers`; at least 1). Bounds the loader's memory.
    pub fn prefetch(mut self, prefetch: usize) -> LoaderBuilder {
        self.prefetch = Some(prefetch);
        self
    }

    /// Sampler mode (default [`Mode::Iid`], as the reference).
    pub fn mode(mut self, mode: Mode) -> LoaderBuilder {
        self.mode = mode;
        self
    }

    /// Sampler seed (default 42, as the reference).
    pub fn seed(mut self, seed: u64) -> LoaderBuilder {
        self.seed = seed;
        self
    }

    /// This host is shard `index` of `count` (default 0 of 1): it gets the
    /// `index`-th slice of every global batch of `batch_size`.
    pub fn shard(mut self, index: usize, count: usize) -> LoaderBuilder {
        self.shard = (index, count);
        self
    }

    /// The step of the first batch (default 0): a checkpoint's
    /// [`DataLoader::step`].
    pub fn start_step(mut self, step: u64) -> LoaderBuilder {
        self.start_step = step;
        self
    }

    /// Resumes from a saved [`DataLoader::state`]: the loader starts at
    /// its step, after `build` checks that the state fits (the same seed,
    /// mode, global batch size and sources; the sharding may differ), or
    /// fails with [`LoaderError::State`] saying what differs. Overrides
    /// [`start_step`](Self::start_step).
    pub fn resume(mut self, state: &LoaderState) -> LoaderBuilder {
        self.resume = Some(state.clone());
        self
    }

    /// The collate step, applied by the workers to every batch.
    pub fn transform<F>(mut self, f: F) -> LoaderBuilder
    where
        F: Fn(Batch) -> Result<Batch, TransformError> + Send + Sync + 'static,
    {
        self.transform = Some(Arc::new(f));
        self
    }

    /// Recycle the buffers of dropped batches (default true). A recycled
    /// buffer is written whole by the next gather, so it is neither zeroed
    /// nor faulted in again.
    pub fn reuse_buffers(mut self, reuse: bool) -> LoaderBuilder {
        self.reuse_buffers = reuse;
        self
    }

    /// Where a batch's records are decoded. `true`: each worker decodes
    /// its own batch on its own thread (parallelism across batches only).
    /// `false`: the store's gather spreads each batch over the global rayon
    /// pool while the worker waits (parallelism within a batch). Unset (the
    /// default): `true` when there are at least as many workers as the
    /// pool has threads, so the workers alone keep every core busy, and
    /// `false` below that. Inline ran as fast on a quiet machine and up to
    /// 1.7x faster beside other work, where a pooled batch waits for its
    /// slowest piece on a preempted thread (`docs/loader.md`).
    pub fn inline_gathers(mut self, inline: bool) -> LoaderBuilder {
        self.inline_gathers = Some(inline);
        self
    }

    /// Count where the time goes ([`DataLoader::stats`]; default true).
    /// Off, no clock is read and nothing counted: the statistics stay zero.
    /// On, it costs a few clock reads and relaxed atomic adds per batch
    /// (`docs/benchmarks.md`, "Loader statistics").
    pub fn statistics(mut self, on: bool) -> LoaderBuilder {
        self.statistics = on;
        self
    }

    /// Tunes the workers and the window while the loader runs, within
    /// `limits`: the exposed wait near zero, the memory of its batches
    /// within the budget, never more workers than `max_workers`. It starts
    /// every worker once the first batch gives a batch's size;
    /// [`num_workers`](Self::num_workers) and [`prefetch`](Self::prefetch)
    /// are then unused. The batches are the
    /// same as without it. `tune.rs` has the policy;
    /// [`DataLoader::tuning`] its decisions.
    pub fn autotune(mut self, limits: Autotune) -> LoaderBuilder {
        self.autotune = Some(limits);
        self
    }

    /// Record a trace of the stages (`docs/loader.md`, "Trace"): per step,
    /// each worker's `sample`, `gather` and `transform` spans and the
    /// consumer's `wait`, written to `path` as a Chrome Trace Event Format
    /// file (Perfetto, `chrome://tracing`) when the loader is closed or
    /// dropped, and by [`DataLoader::flush_trace`]. At most
    /// [`TRACE_EVENTS_MAX`] spans are kept; the rest are counted in the
    /// file. Unset (the default), nothing is recorded.
    pub fn trace_path(mut self, path: impl Into<PathBuf>) -> LoaderBuilder {
        self.trace_path = Some(path.into());
        self
    }

    /// Replaces a record whose bytes are damaged (a failed checksum, a frame
    /// that does not decode) by the next index that reads, instead of
    /// stopping with [`LoaderError::Gather`] (default off). Deterministic,
    /// so resume stays exact; [`Batch::skipped`] lists each replacement and
    /// [`LoaderStats::skipped`] counts them. See `src/loader/skip.rs`.
    pub fn skip_corrupt(mut self, on: bool) -> LoaderBuilder {
        self.skip_corrupt = on;
        self
    }

    /// The spans a trace keeps at most (default [`TRACE_EVENTS_MAX`]); for tests.
    #[doc(hidden)]
    pub fn trace_events_max(mut self, max: usize) -> LoaderBuilder {
        self.trace_events_max = max;
        self
    }

    /// Checks the settings and starts the workers.
    pub fn build(self) -> Result<DataLoader, LoaderError> {
        if self.num_workers == 0 {
            return Err(LoaderError::InvalidArgument("num_workers must be at least 1".into()));
        }
        let prefetch = self.prefetch.unwrap_or(2 * self.num_workers);
        if prefetch == 0 {
            return Err(LoaderError::InvalidArgument("prefetch must be at least 1".into()));
        }
        let state = self.state();
        if let Some(saved) = &self.resume {
            saved.check_fits(&state)?;
        }
        let start_step = self.resume.as_ref().map_or(self.start_step, |s| s.step);
        let mut launch = self.launch(prefetch, start_step)?;
        let (plan, columns) = match self.mixture {
            Some(_) if !self.streams.is_empty() => {
                return Err(LoaderError::InvalidArgument("a loader takes streams or a mixture, not both".into()));
            }
            Some(mixture) => {
                let mixed = mixture.plan(self.batch_size, self.mode, self.seed)?;
                let mixed = mixed.shard(self.shard.0, self.shard.1)?;
                let columns = mixed.columns();
                (Plan::Mixed(mixed), columns)
            }
            None => {
                let len = check_streams(&self.streams)?;
                let sampler = Sampler::new(len, self.batch_size, self.mode, self.seed)?;
                let sampler = sampler.shard(self.shard.0, self.shard.1)?;
                let columns = self.streams.len();
                (Plan::Streams { streams: self.streams, sampler }, columns)
            }
        };
        let batch_len = plan.batch_len();
        // Tuned, the pools keep what the budget leaves ([`tune`]).
        let keep = if launch.tuner.is_some() { launch.setting.window + 1 } else { launch.slots + 1 };
        let pools = (0..columns).map(|_| self.reuse_buffers.then(|| Pool::new(keep))).collect();
        let job = Job { plan, transform: self.transform, pools, skip_corrupt: self.skip_corrupt };
        launch.inline = self.inline_gathers.unwrap_or(launch.threads >= rayon::current_num_threads());
        launch.trace = self.trace_path.map(|path| trace::Trace::new(path, launch.threads, self.trace_events_max));
        let workers = Workers::start(Arc::new(job), launch)?;
        Ok(DataLoader { workers, batch_len, done: false, state })
    }

    /// How the workers start: fixed (`num_workers`, `prefetch`) or tuned.
    fn launch(&self, prefetch: usize, start: u64) -> Result<Launch, LoaderError> {
        let Some(limits) = self.autotune else {
            let setting = Setting { workers: self.num_workers, window: prefetch };
            let (threads, slots, statistics) = (self.num_workers, prefetch, self.statistics);
            return Ok(Launch { threads, slots, setting, start, inline: false, statistics, tuner: None, trace: None });
        };
        if limits.max_workers == 0 || limits.memory_budget == 0 {
            return Err(LoaderError::InvalidArgument("autotune needs max_workers and memory_budget above 0".into()));
        }
        let slots = limits.max_workers.saturating_mul(4).clamp(8, 1024);
        let tuner = tune::Tuner::new(limits, slots);
        let setting = tuner.setting();
        let threads = limits.max_workers.min(1024);
        Ok(Launch { threads, slots, setting, start, inline: false, statistics: true, tuner: Some(tuner), trace: None })
    }

    /// The state of a loader of these settings (at step 0).
    fn state(&self) -> LoaderState {
        let (sources, schedule) = match &self.mixture {
            Some(mixture) => (mixture.identity(), Some(mixture.schedule().to_vec())),
            None => {
                let streams = self.streams.iter().map(|(n, s)| StreamIdentity::of(n, s)).collect();
                (vec![SourceIdentity { mode: None, streams }], None)
            }
        };
        LoaderState {
            step: 0,
            seed: self.seed,
            mode: self.mode,
            batch_size: self.batch_size,
            shard: self.shard,
            sources,
            schedule,
        }
    }
}

/// A loader's (or a mixture source's) streams: at least one, distinct
/// names, equal lengths. Returns the length.
fn check_streams(streams: &[(String, Stream)]) -> Result<u64, LoaderError> {
    if streams.is_empty() {
        return Err(LoaderError::NoStreams);
    }
    for (k, (name, _)) in streams.iter().enumerate() {
        if streams[..k].iter().any(|(n, _)| n == name) {
            return Err(LoaderError::DuplicateStream(name.clone()));
        }
    }
    let lengths: Vec<(String, u64)> = streams.iter().map(|(n, s)| (n.clone(), s.len())).collect();
    if lengths.iter().any(|(_, l)| *l != lengths[0].1) {
        return Err(LoaderError::LengthMismatch(lengths));
    }
    Ok(lengths[0].1)
}

/// The loader: an endless stream of [`Batch`]es in step order. See the
/// [module docs](self).
#[derive(Debug)]
pub struct DataLoader {
    workers: Workers,
    batch_len: usize,
    /// An error was returned: the iterator is over.
    done: bool,
    /// Its state at step 0 ([`DataLoader::state`] sets the step).
    state: LoaderState,
}

impl DataLoader {
    /// A builder with the reference's defaults (batch 256, 4 workers, IID, seed 42).
    pub fn builder() -> LoaderBuilder {
        LoaderBuilder::default()
    }

    /// The step of the next batch [`next_batch`](Self::next_batch) returns:
    /// save it in a checkpoint, resume with [`LoaderBuilder::start_step`].
    pub fn step(&self) -> u64 {
        self.workers.step()
    }

    /// The checkpoint of this loader: its [`step`](Self::step) and what
    /// its batches depend on. Resume with [`LoaderBuilder::resume`].
    pub fn state(&self) -> LoaderState {
        LoaderState { step: self.step(), ..self.state.clone() }
    }

    /// The statistics since the loader was built: time per stage and
    /// worker, the consumer's exposed wait, the prefetch queue, bytes
    /// ([`LoaderStats`]; a window is the difference of two snapshots).
    pub fn stats(&self) -> LoaderStats {
        self.workers.stats_handle().stats()
    }

    /// The tuner's setting and decisions ([`LoaderBuilder::autotune`]);
    /// `None` without tuning.
    pub fn tuning(&self) -> Option<Tuning> {
        self.workers.stats_handle().tuning()
    }

    /// A reader of [`stats`](Self::stats) for another thread.
    pub fn stats_handle(&self) -> StatsHandle {
        self.workers.stats_handle()
    }

    /// Records per batch on this host.
    pub fn batch_len(&self) -> usize {
        self.batch_len
    }

    /// The batch of [`step`](Self::step), waiting for it if needed. A
    /// worker's failure at this step is returned here, after which the
    /// loader is stopped and every call returns [`LoaderError::Stopped`].
    pub fn next_batch(&mut self) -> Result<Batch, LoaderError> {
        let result = self.workers.next();
        if result.is_err() {
            self.done = true;
        }
        result
    }

    /// Writes the trace ([`LoaderBuilder::trace_path`]) with the spans
    /// recorded so far, replacing the file whole (a temporary file, synced,
    /// renamed); the loader goes on. Nothing to do without a trace.
    pub fn flush_trace(&mut self) -> std::io::Result<()> {
        self.workers.write_trace()
    }

    /// Records a span of a stage above the loader on a track of its own,
    /// named `track` (after the workers' tracks; made at its first span),
    /// when tracing; otherwise does nothing. The Python binding's transform
    /// thread records its `python_transform` spans so.
    pub fn trace_span(&self, track: &str, name: &'static str, step: u64, start: Instant, end: Instant) {
        self.workers.extra_span(track, name, step, start, end);
    }

    /// Stops and joins every thread (as dropping does), then writes the
    /// trace if one was asked for, returning its I/O error (dropping
    /// ignores it).
    pub fn close(mut self) -> std::io::Result<()> {
        self.workers.close()
    }
}

impl Iterator for DataLoader {
    type Item = Result<Batch, LoaderError>;

    /// The next batch; after an error, `None`.
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        Some(self.next_batch())
    }
}
