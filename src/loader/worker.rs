//! The worker threads and the ordered hand-over.
//!
//! One mutex guards a window of slots, slot `i` holding the result of step
//! `next + i` once a worker has produced it. A worker claims the next
//! unclaimed step only while it lies inside the window's current width
//! (`window`, at most the slots; so at most `window` batches exist inside
//! the loader), produces it without the lock, and puts it into its slot.
//! The consumer takes slot 0 when it is full, which moves the window on by
//! one and wakes a worker. Results are handed over in step order, whatever
//! order they were produced in.
//!
//! Tuning (`tune.rs`) changes the window's width and how many workers
//! claim (`workers`: worker `k` claims only while `k < workers`), under the
//! same lock; the consumer then wakes every worker, since one woken alone
//! might be one that may not claim.
//!
//! Stopping: `stop` is set (on drop, or after an error was handed over),
//! both condition variables are notified, and every worker leaves at its next
//! look at the state: before claiming, or after producing (its result is
//! dropped). Joining therefore waits for at most one batch per worker.

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Instant;

use super::Transform;
use super::batch::{Batch, Stream};
use super::error::LoaderError;
use super::mixture::Mixed;
use super::skip;
use super::stats::{Counters, LoaderStats, batch_bytes};
use super::trace::Trace;
use super::tune::{Setting, Tuner, Tuning};
use crate::ReadStats;
use crate::dataset::Pool;
use crate::sampler::ShardedSampler;

/// Where a step's records come from: the loader's streams, or a mixture.
pub(super) enum Plan {
    /// Every stream gathered at the sampler's indices.
    Streams { streams: Vec<(String, Stream)>, sampler: ShardedSampler },
    /// The sources of a mixture.
    Mixed(Mixed),
}

impl Plan {
    /// Every distinct stream (a dataset given twice counted once).
    fn streams(&self) -> Vec<Stream> {
        let all: Vec<&Stream> = match self {
            Plan::Streams { streams, .. } => streams.iter().map(|(_, s)| s).collect(),
            Plan::Mixed(mixed) => mixed.streams(),
        };
        let mut out: Vec<Stream> = Vec::with_capacity(all.len());
        for s in all {
            if !out.iter().any(|o| o.same(s)) {
                out.push(s.clone());
            }
        }
        out
    }

    /// Records per batch on this host.
    pub(super) fn batch_len(&self) -> usize {
        match self {
            Plan::Streams { sampler, .. } => sampler.batch_len(),
            Plan::Mixed(mixed) => mixed.sampler.batch_len(),
        }
    }

    /// The batch of `step`, before the transform; one pool per column.
    /// Sets `sampled` to the time the indices were drawn. With `skip`,
    /// damaged records are replaced ([`skip`](super::skip)).
    fn gather(
        &self,
        step: u64,
        pools: &[Option<Arc<Pool>>],
        sampled: &mut Instant,
        skip: bool,
    ) -> Result<Batch, LoaderError> {
        let (streams, sampler) = match self {
            Plan::Mixed(mixed) => return mixed.gather(step, pools, sampled, skip),
            Plan::Streams { streams, sampler } => (streams, sampler),
        };
        let mut indices = vec![0u64; sampler.batch_len()];
        sampler.fill(step, &mut indices)?;
        *sampled = Instant::now();
        let len = streams[0].1.len(); // every stream's (checked at build)
        let readable = |_: usize, index: u64| {
            for (name, stream) in streams {
                if !skip::judge(stream.gather(&[index], None), step, name)? {
                    return Ok(false);
                }
            }
            Ok(true)
        };
        let gather = |indices: &[u64]| gather_streams(streams, pools, step, indices);
        let (batch, skipped) = skip::gather_skipping(skip, &mut indices, gather, |_| len, readable)?;
        Ok(Batch::with_indices(batch, indices).with_skipped(skipped))
    }
}

/// Every stream's column at `indices`.
fn gather_streams(
    streams: &[(String, Stream)],
    pools: &[Option<Arc<Pool>>],
    step: u64,
    indices: &[u64],
) -> Result<Batch, LoaderError> {
    let mut batch = Batch::new(step, Vec::new());
    for ((name, stream), pool) in streams.iter().zip(pools) {
        let column = stream.gather(indices, pool.as_ref()).map_err(|source| LoaderError::Gather {
            step,
            stream: name.clone(),
            source,
        })?;
        batch.insert(name.clone(), column);
    }
    Ok(batch)
}

/// Every distinct stream of a loader, and what their stores had read when
/// it was built: [`LoaderStats::reads`] is what they read since.
#[derive(Debug)]
struct ReadSources {
    streams: Vec<Stream>,
    baseline: ReadStats,
}

impl ReadSources {
    fn new(streams: Vec<Stream>) -> ReadSources {
        let baseline = sum_reads(&streams);
        ReadSources { streams, baseline }
    }

    fn since_build(&self) -> ReadStats {
        sum_reads(&self.streams).since(&self.baseline)
    }
}

fn sum_reads(streams: &[Stream]) -> ReadStats {
    streams.iter().fold(ReadStats::default(), |sum, s| sum.plus(&s.read_stats()))
}

/// What every worker needs to produce the batch of a step.
pub(super) struct Job {
    pub(super) plan: Plan,
    pub(super) transform: Option<Arc<Transform>>,
    /// One buffer pool per column (`None`: no reuse).
    pub(super) pools: Vec<Option<Arc<Pool>>>,
    /// Replace damaged records ([`LoaderBuilder::skip_corrupt`](super::LoaderBuilder::skip_corrupt)).
    pub(super) skip_corrupt: bool,
}

impl Job {
    /// The batch of `step`, timed into worker `k`'s counters and traced
    /// (whichever is on; neither: no clock is read).
    fn produce_timed(&self, step: u64, k: usize, shared: &Shared) -> Result<Batch, LoaderError> {
        let (counters, trace) = (&shared.counters, shared.trace.as_ref());
        if !counters.enabled && trace.is_none() {
            return self.produce(step);
        }
        let start = Instant::now();
        let mut sampled = start;
        let batch = self.plan.gather(step, &self.pools, &mut sampled, self.skip_corrupt);
        let gathered = Instant::now();
        let result = match (batch, &self.transform) {
            (Ok(batch), Some(f)) => f(batch).map_err(|source| LoaderError::Transform { step, source }),
            (batch, _) => batch,
        };
        let done = Instant::now();
        if counters.enabled {
            let bytes = result.as_ref().map(batch_bytes).unwrap_or(0);
            counters.produced(k, [sampled - start, gathered - sampled, done - gathered], bytes);
        }
        if let Some(trace) = trace {
            trace.stages(k, step, [start, sampled, gathered, done]);
        }
        result
    }

    /// The batch of `step`, untimed.
    fn produce(&self, step: u64) -> Result<Batch, LoaderError> {
        let batch = self.plan.gather(step, &self.pools, &mut Instant::now(), self.skip_corrupt)?;
        match &self.transform {
            None => Ok(batch),
            Some(f) => f(batch).map_err(|source| LoaderError::Transform { step, source }),
        }
    }

    /// [`Job::produce_timed`], a panic turned into [`LoaderError::Panic`].
    fn produce_caught(&self, step: u64, k: usize, shared: &Shared) -> Result<Batch, LoaderError> {
        catch_unwind(AssertUnwindSafe(|| self.produce_timed(step, k, shared))).unwrap_or_else(|payload| {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(a non-string panic payload)".to_string());
            Err(LoaderError::Panic { step, message })
        })
    }
}

#[derive(Debug)]
struct State {
    /// The step of `slots[0]`: the next one handed to the consumer.
    next: u64,
    /// The next step no worker has claimed yet.
    claim: u64,
    /// Results of steps `next..next + prefetch`.
    slots: VecDeque<Option<Result<Batch, LoaderError>>>,
    /// Set on drop and after an error: workers leave.
    stop: bool,
    /// Workers `0..workers` claim steps; the others wait (tuning).
    workers: usize,
    /// Steps claimed ahead of `next` (in production or ready) stay below
    /// this; at most `slots.len()`.
    window: usize,
    /// Workers still running (decremented as each leaves, panic or not).
    alive: usize,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Workers wait here for room in the window.
    room: Condvar,
    /// The consumer waits here for slot 0.
    ready: Condvar,
    /// The statistics, outside the lock.
    counters: Counters,
    /// The trace, if one was asked for (outside the lock).
    trace: Option<Trace>,
    /// The streams' stores, for the read statistics.
    reads: ReadSources,
    /// The tuning as of the tuner's last change, for readers on other
    /// threads (its own lock: the tuner publishes, readers copy).
    tuning: Mutex<Option<Tuning>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // No code panics while holding the lock; if one did, the state is
        // still consistent (every change is a single assignment).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn stop(&self) {
        self.lock().stop = true;
        self.room.notify_all();
        self.ready.notify_all();
    }
}

/// Decrements `alive` when a worker leaves, however it leaves.
struct Leaving<'a>(&'a Shared);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        self.0.lock().alive -= 1;
        self.0.ready.notify_all();
    }
}

fn work(k: usize, shared: &Shared, job: &Job) {
    let _leaving = Leaving(shared);
    loop {
        let step = {
            let mut state = shared.lock();
            loop {
                if state.stop {
                    return;
                }
                if k < state.workers && state.claim.wrapping_sub(state.next) < state.window as u64 {
                    break;
                }
                state = shared.room.wait(state).unwrap_or_else(|e| e.into_inner());
            }
            let step = state.claim;
            state.claim = step.wrapping_add(1);
            step
        };
        let result = job.produce_caught(step, k, shared);
        let mut state = shared.lock();
        if state.stop {
            return;
        }
        let slot = step.wrapping_sub(state.next) as usize;
        state.slots[slot] = Some(result);
        if slot == 0 {
            shared.ready.notify_one();
        }
    }
}

/// Batches ready at the front of the window (the prefetch queue's depth).
fn ready(state: &State) -> usize {
    state.slots.iter().take_while(|s| s.is_some()).count()
}

/// Reads a loader's statistics from any thread, also after the loader
/// was moved (into a thread of its own, say) or dropped.
#[derive(Clone, Debug)]
pub struct StatsHandle {
    shared: Arc<Shared>,
}

impl StatsHandle {
    /// A snapshot of the statistics (see [`LoaderStats`]).
    pub fn stats(&self) -> LoaderStats {
        let ready = ready(&self.shared.lock());
        let mut stats = self.shared.counters.snapshot(ready);
        stats.reads = self.shared.reads.since_build();
        stats
    }

    /// The tuner's setting and decisions (`None` without tuning), as of
    /// its last decision.
    pub fn tuning(&self) -> Option<Tuning> {
        self.shared.tuning.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The running workers; stops and joins them when dropped.
#[derive(Debug)]
pub(super) struct Workers {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    /// With inline gathers, worker `k`'s one-thread pool (its thread is `threads[k]`).
    pools: Vec<rayon::ThreadPool>,
    /// The tuner, run by the consumer after each take.
    tuner: Option<Tuner>,
    /// The job's buffer pools, which the tuner sizes.
    buffers: Vec<Arc<Pool>>,
    /// The trace's spans offered when it was last written (`None`: never):
    /// the drop writes it again only if there is more.
    trace_written: Option<u64>,
}

/// Starts worker `k`. With `inline`, the worker is the one thread of its own
/// rayon pool, so the store's parallel gather runs on the worker's own thread
/// (its pieces one after the other) instead of being handed to the global
/// pool while the worker waits.
fn spawn(
    k: usize,
    inline: bool,
    shared: Arc<Shared>,
    job: Arc<Job>,
) -> std::io::Result<(JoinHandle<()>, Option<rayon::ThreadPool>)> {
    let name = format!("loaderx-worker-{k}");
    if !inline {
        let handle = std::thread::Builder::new().name(name).spawn(move || work(k, &shared, &job))?;
        return Ok((handle, None));
    }
    let mut handle = None;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .spawn_handler(|thread| {
            handle = Some(std::thread::Builder::new().name(name.clone()).spawn(move || thread.run())?);
            Ok(())
        })
        .build()
        .map_err(std::io::Error::other)?;
    let handle = handle.ok_or_else(|| std::io::Error::other("rayon started no thread"))?;
    pool.spawn(move || work(k, &shared, &job));
    Ok((handle, Some(pool)))
}

/// How the workers start: the threads, the slots of the window, and what
/// runs at first (all of it without tuning).
#[derive(Debug)]
pub(super) struct Launch {
    /// Worker threads started (the most that may produce).
    pub(super) threads: usize,
    /// The window's slots (the widest window).
    pub(super) slots: usize,
    /// The workers producing and the window at first.
    pub(super) setting: Setting,
    /// The first step.
    pub(super) start: u64,
    /// Gathers on the workers' own threads ([`spawn`]).
    pub(super) inline: bool,
    /// Count statistics (tuning needs them).
    pub(super) statistics: bool,
    /// The tuner, if tuning.
    pub(super) tuner: Option<Tuner>,
    /// The trace, if asked for.
    pub(super) trace: Option<Trace>,
}

impl Workers {
    pub(super) fn start(job: Arc<Job>, launch: Launch) -> Result<Workers, LoaderError> {
        let count = launch.threads;
        debug_assert!(launch.setting.window <= launch.slots && launch.setting.workers <= count);
        let state = State {
            next: launch.start,
            claim: launch.start,
            slots: (0..launch.slots).map(|_| None).collect(),
            stop: false,
            workers: launch.setting.workers,
            window: launch.setting.window,
            alive: count,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            room: Condvar::new(),
            ready: Condvar::new(),
            counters: Counters::new(count, launch.statistics),
            trace: launch.trace,
            tuning: Mutex::new(launch.tuner.as_ref().map(Tuner::tuning)),
            reads: ReadSources::new(job.plan.streams()),
        });
        let mut workers = Workers {
            shared: shared.clone(),
            threads: Vec::with_capacity(count),
            pools: Vec::new(),
            tuner: launch.tuner,
            buffers: job.pools.iter().flatten().cloned().collect(),
            trace_written: None,
        };
        for k in 0..count {
            match spawn(k, launch.inline, shared.clone(), job.clone()) {
                Ok((handle, pool)) => {
                    workers.threads.push(handle);
                    workers.pools.extend(pool);
                }
                Err(e) => {
                    // The workers not started never run: count them out.
                    workers.shared.lock().alive -= count - k;
                    return Err(LoaderError::Spawn(e)); // `workers` drops: stops and joins the started ones
                }
            }
        }
        Ok(workers)
    }

    /// Publishes the tuner's state for [`StatsHandle::tuning`].
    fn publish_tuning(&self) {
        let tuning = self.tuner.as_ref().map(Tuner::tuning);
        *self.shared.tuning.lock().unwrap_or_else(|e| e.into_inner()) = tuning;
    }

    /// After a take: lets the tuner look, and applies what it decides.
    fn tune(&mut self, step: u64) {
        let Some(tuner) = self.tuner.as_mut() else { return };
        if !tuner.due() {
            return;
        }
        let limit = tuner.tuning_limit();
        let decided = tuner.observe(step, self.shared.counters.snapshot(0));
        let changed = decided.is_some() || tuner.tuning_limit() != limit;
        let keep = tuner.kept_buffers();
        for pool in &self.buffers {
            pool.set_keep(keep);
        }
        if changed {
            self.publish_tuning();
        }
        let Some(setting) = decided else { return };
        let tuner = self.tuner.as_ref().expect("tuning");
        if let (Some(trace), Some(decision)) = (&self.shared.trace, tuner.last_decision()) {
            trace.decision(Instant::now(), decision);
        }
        let mut state = self.shared.lock();
        debug_assert!(setting.window <= state.slots.len() && setting.workers <= self.threads.len());
        state.workers = setting.workers;
        state.window = setting.window;
        drop(state);
        self.shared.room.notify_all();
    }

    /// The step the consumer gets next.
    pub(super) fn step(&self) -> u64 {
        self.shared.lock().next
    }

    /// A reader of the statistics, which may outlive the borrow.
    pub(super) fn stats_handle(&self) -> StatsHandle {
        StatsHandle { shared: self.shared.clone() }
    }

    /// The result of the next step, in order; waits for it.
    pub(super) fn next(&mut self) -> Result<Batch, LoaderError> {
        let result = self.take();
        if let Ok(batch) = &result {
            self.tune(batch.step());
        }
        result
    }

    /// The result of the next step, in order; waits for it.
    fn take(&self) -> Result<Batch, LoaderError> {
        let (counters, trace) = (&self.shared.counters, self.shared.trace.as_ref());
        let start = (counters.enabled || trace.is_some()).then(Instant::now);
        let mut state = self.shared.lock();
        loop {
            if state.stop {
                return Err(LoaderError::Stopped);
            }
            if let Some(result) = state.slots[0].take() {
                if let Some(start) = start {
                    let now = Instant::now();
                    if counters.enabled {
                        let depth = 1 + state.slots.iter().skip(1).take_while(|s| s.is_some()).count();
                        let bytes = result.as_ref().map(batch_bytes).unwrap_or(0);
                        let skipped = result.as_ref().map_or(0, |b| b.skipped().len());
                        counters.taken(now - start, depth, bytes, skipped);
                    }
                    if let Some(trace) = trace {
                        trace.wait(state.next, start, now);
                    }
                }
                state.slots.pop_front();
                state.slots.push_back(None);
                if result.is_err() {
                    state.stop = true;
                    drop(state);
                    self.shared.room.notify_all();
                    return result;
                }
                state.next = state.next.wrapping_add(1);
                drop(state);
                if self.tuner.is_some() {
                    // Workers over the tuned count wait on `room` too: one
                    // woken alone might be one of them, and the wake lost.
                    self.shared.room.notify_all();
                } else {
                    self.shared.room.notify_one();
                }
                return result;
            }
            if state.alive == 0 {
                // Cannot happen (workers leave only when stopped), but a
                // consumer must never wait on nobody.
                state.stop = true;
                return Err(LoaderError::Stopped);
            }
            state = self.shared.ready.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Writes the trace with what was recorded so far (nothing without
    /// one). Failed or not, the drop writes it again only if more came.
    pub(super) fn write_trace(&mut self) -> std::io::Result<()> {
        let Some(trace) = &self.shared.trace else { return Ok(()) };
        self.trace_written = Some(trace.offered());
        trace.write()
    }

    /// Records a span on a track of its own, after the workers' (tracing only).
    pub(super) fn extra_span(&self, track: &str, name: &'static str, step: u64, start: Instant, end: Instant) {
        if let Some(trace) = &self.shared.trace {
            trace.extra_span(track, name, step, start, end);
        }
    }

    /// Stops and joins every thread, then writes the trace (if any).
    pub(super) fn close(&mut self) -> std::io::Result<()> {
        self.join();
        self.write_trace()
    }

    /// Stops and joins every thread (once; later calls do nothing).
    fn join(&mut self) {
        self.shared.stop();
        // A pool's thread exits once its pool is dropped and its job (the
        // worker loop, which sees `stop`) has returned.
        self.pools.clear();
        for thread in self.threads.drain(..) {
            // A worker's panics are caught per step; a join error would be a
            // panic in the hand-over itself, which there is no one to tell.
            let _ = thread.join();
        }
    }
}

impl Drop for Workers {
    /// Stops and joins every thread, then writes the trace if it has spans
    /// not written yet, ignoring an I/O error (there is no one to tell).
    fn drop(&mut self) {
        self.join();
        let unwritten = match (&self.shared.trace, self.trace_written) {
            (Some(trace), Some(written)) => trace.offered() != written,
            (Some(_), None) => true,
            (None, _) => false,
        };
        if unwritten {
            let _ = self.write_trace();
        }
    }
}
