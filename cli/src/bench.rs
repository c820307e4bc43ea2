//! `bench`: the two read workloads on the store at hand. Random-batch
//! gather: IID batches of record indices (the loader's default sampler),
//! each decoded with one `gather_var` into one buffer. Loader: a
//! `DataLoader` over the dataset (it needs schema.json), batches taken as
//! fast as the consumer can. `--cold`: the chunk files are evicted from the
//! page cache before each workload is timed, and the batches are cyclic (no
//! record twice, so none comes from the cache). Figures only;
//! `docs/benchmarks.md` has the controlled comparison.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loaderx::ReadMode;
use loaderx::format::chunk_id_of;
use loaderx::io::real::evict_page_cache;
use loaderx::loader::{Column, DataLoader, LoaderStats, Stream};
use loaderx::sampler::{Mode, Sampler};

use crate::CliResult;
use crate::out::{CliError, Json, MIB, is_remote, per_second, print, table};
use crate::records::Records;

/// What `bench` was asked for.
pub struct Options {
    pub batch_size: usize,
    pub batches: u64,
    pub seconds: Option<f64>,
    pub workers: Option<u32>,
    pub seed: u64,
    pub cold: bool,
    pub read_mode: ReadModeArg,
    /// Where to write the loader's trace (`--trace`).
    pub trace: Option<PathBuf>,
}

/// `--read-mode`: how the store's reads reach records (`ReadMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadModeArg {
    /// Mapped when the batch's records are in memory, batched otherwise.
    Auto,
    /// Through the chunk mappings.
    Mapped,
    /// Batched reads with many in flight, through the page cache.
    Batched,
    /// Batched reads past the page cache (O_DIRECT).
    Direct,
}

impl ReadModeArg {
    fn mode(self) -> ReadMode {
        match self {
            ReadModeArg::Auto => ReadMode::Auto,
            ReadModeArg::Mapped => ReadMode::Mapped,
            ReadModeArg::Batched => ReadMode::Batched,
            ReadModeArg::Direct => ReadMode::Direct,
        }
    }
}

impl Options {
    /// The sampler mode of both workloads.
    fn mode(&self) -> Mode {
        if self.cold { Mode::Cyclic } else { Mode::Iid }
    }
}

/// Evicts the store's chunk files (every shard's) from the page cache.
fn evict(path: &Path) -> CliResult<()> {
    if crate::records::is_sharded(path) {
        return crate::records::shard_dirs(path)?.iter().try_for_each(|dir| evict_store(dir));
    }
    evict_store(path)
}

/// Evicts one store's chunk files from the page cache.
fn evict_store(path: &Path) -> CliResult<()> {
    for entry in std::fs::read_dir(path)? {
        let file = entry?.path();
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if chunk_id_of(name).is_some() {
            evict_page_cache(&file)?;
        }
    }
    Ok(())
}

/// `N`, or `N in K shards`.
fn records_line(len: u64, shards: usize) -> String {
    if shards > 1 { format!("{len} in {shards} shards") } else { len.to_string() }
}

/// `--seconds`: a positive, finite number of seconds.
pub fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1e9 => Ok(v),
        _ => Err(format!("`{s}` is not a positive number of seconds")),
    }
}

fn sampler_name(opts: &Options) -> &'static str {
    if opts.cold { "cyclic" } else { "IID" }
}

fn cache_line(opts: &Options, store: &Records) -> String {
    let (engine, mode) = (store.read_engine().name(), opts.read_mode.mode().name());
    if opts.cold {
        format!("cold: chunk files evicted before each workload (read mode {mode}, engine {engine})")
    } else {
        format!("as found (read mode {mode}, engine {engine})")
    }
}

/// One workload's measurement.
struct Run {
    batches: u64,
    records: u64,
    bytes: u64,
    elapsed: Duration,
    /// The loader's statistics over the timed batches (the loader only).
    stats: Option<LoaderStats>,
}

/// The loader's statistics as JSON: where its time went.
fn stats_json(s: &LoaderStats) -> Json {
    let stage = |f: fn(&loaderx::loader::WorkerStats) -> Duration| -> f64 {
        s.workers.iter().map(|w| f(w).as_secs_f64()).sum()
    };
    let busy: Vec<f64> = (0..s.workers.len()).map(|k| s.busy_fraction(k)).collect();
    Json::object()
        .field("batches", s.taken)
        .field("sample_s", stage(|w| w.sample))
        .field("read_decode_s", stage(|w| w.gather))
        .field("collate_s", stage(|w| w.transform))
        .field("wait_s", s.wait.as_secs_f64())
        .field("wait_p50_s", s.wait_quantile(0.5).as_secs_f64())
        .field("wait_p99_s", s.wait_quantile(0.99).as_secs_f64())
        .field("mean_ready", s.mean_ready())
        .field("worker_busy", busy)
}

/// The loader's statistics as one line.
fn stats_line(s: &LoaderStats) -> String {
    let stage = |f: fn(&loaderx::loader::WorkerStats) -> Duration| -> f64 {
        s.workers.iter().map(|w| f(w).as_secs_f64()).sum()
    };
    let busy = (0..s.workers.len()).map(|k| s.busy_fraction(k)).sum::<f64>() / s.workers.len().max(1) as f64;
    format!(
        "worker time: sampling {:.3} s, reading and decoding {:.3} s; exposed wait {:.3} s (p50 {:.1} us, p99 {:.1} us); {:.1} batches ready on average; workers {:.0}% busy",
        stage(|w| w.sample),
        stage(|w| w.gather),
        s.wait.as_secs_f64(),
        s.wait_quantile(0.5).as_secs_f64() * 1e6,
        s.wait_quantile(0.99).as_secs_f64() * 1e6,
        s.mean_ready(),
        busy * 100.0
    )
}

impl Run {
    fn json(&self) -> Json {
        let mib = self.bytes as f64 / MIB;
        Json::object()
            .field("batches", self.batches)
            .field("records", self.records)
            .field("bytes", self.bytes)
            .field("seconds", self.elapsed.as_secs_f64())
            .field("mib_per_s", per_second(mib, self.elapsed))
            .field("records_per_s", per_second(self.records as f64, self.elapsed))
            .field("batches_per_s", per_second(self.batches as f64, self.elapsed))
    }

    fn line(&self) -> String {
        format!(
            "{:.1} MiB/s, {:.0} records/s, {:.1} batches/s ({} batches in {:.3} s)",
            per_second(self.bytes as f64 / MIB, self.elapsed),
            per_second(self.records as f64, self.elapsed),
            per_second(self.batches as f64, self.elapsed),
            self.batches,
            self.elapsed.as_secs_f64()
        )
    }
}

/// Runs `batch(step)` (returning records and bytes) once to warm up, then
/// (after evicting the store at `path` if `--cold`) for steps
/// `1..=batches`, stopping early after `seconds`.
fn measure(opts: &Options, path: &Path, mut batch: impl FnMut(u64) -> CliResult<(u64, u64)>) -> CliResult<Run> {
    batch(0)?;
    if opts.cold {
        evict(path)?;
    }
    let deadline = opts.seconds.map(Duration::from_secs_f64);
    let mut run = Run { batches: 0, records: 0, bytes: 0, elapsed: Duration::ZERO, stats: None };
    let started = Instant::now();
    for step in 1..=opts.batches {
        let (records, bytes) = batch(step)?;
        run.batches += 1;
        run.records += records;
        run.bytes += bytes;
        if deadline.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
    }
    run.elapsed = started.elapsed();
    Ok(run)
}

pub fn run(path: &Path, opts: &Options, json: bool) -> CliResult<()> {
    let read_mode = opts.read_mode.mode();
    if opts.cold && is_remote(path) {
        return Err(CliError::new(format!(
            "{}: --cold evicts a local store's page cache; a remote store has none",
            path.display()
        ))
        .into());
    }
    let store = Records::open(path, read_mode)?;
    let len = store.len();
    if len == 0 {
        return Err(CliError::new(format!("{}: the store is empty: nothing to read", path.display())).into());
    }
    let gather = bench_gather(&store, opts)?;
    let workers =
        opts.workers.map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), |w| w as usize);
    let loader = match store.schema() {
        Ok(None) => Err("no schema.json (the loader reads datasets)".to_string()),
        Err(e) => Err(format!("schema.json unreadable: {e}")),
        Ok(Some(schema)) => bench_loader(path, store.stream(&schema, read_mode)?, workers, opts).map(Ok)?,
    };
    let batch = opts.batch_size.min(len as usize);
    let text = if json {
        let (loader_json, skipped) = match &loader {
            Ok(run) => (run.json().field("workers", workers as u64).finish(), None),
            Err(reason) => ("null".to_string(), Some(reason.as_str())),
        };
        let loader_stats = match &loader {
            Ok(Run { stats: Some(s), .. }) => stats_json(s).finish(),
            _ => "null".to_string(),
        };
        let mut text = Json::object()
            .field("store", path.to_string_lossy().as_ref())
            .field("records", len)
            .field("shards", store.shards() as u64)
            .field("batch_size", batch as u64)
            .field("seed", opts.seed)
            .field("cold", opts.cold)
            .field("read_engine", store.read_engine().name())
            .field("read_mode", read_mode.name())
            .raw("gather", &gather.json().finish())
            .raw("loader", &loader_json)
            .field("loader_skipped", skipped)
            .raw("loader_stats", &loader_stats)
            .finish();
        text.push('\n');
        text
    } else {
        let stats = match &loader {
            Ok(Run { stats: Some(s), .. }) => stats_line(s),
            _ => "-".to_string(),
        };
        let loader = match &loader {
            Ok(run) => format!("{} with {workers} workers", run.line()),
            Err(reason) => format!("skipped: {reason}"),
        };
        table(&[
            ("store", path.display().to_string()),
            ("records", records_line(len, store.shards())),
            ("batch", format!("{batch} records, {} indices, seed {}", sampler_name(opts), opts.seed)),
            ("cache", cache_line(opts, &store)),
            ("gather", gather.line()),
            ("loader", loader),
            ("loader time", stats),
        ])
    };
    print(&text)?;
    Ok(())
}

/// Random-batch gather: the sampler's IID batches, each decoded with one
/// `gather_var` into a reused buffer.
fn bench_gather(store: &Records, opts: &Options) -> CliResult<Run> {
    let sampler = Sampler::new(store.len(), opts.batch_size, opts.mode(), opts.seed)?;
    let n = sampler.batch_len();
    let mut indices = vec![0u64; n];
    let mut lens = vec![0u32; n];
    let mut offsets = vec![0u64; n];
    let mut dst: Vec<u8> = Vec::new();
    measure(opts, store.path(), |step| {
        sampler.fill(step, &mut indices)?;
        store.lengths(&indices, &mut lens)?;
        let mut at = 0u64;
        for (offset, &l) in offsets.iter_mut().zip(&lens) {
            *offset = at;
            at += u64::from(l);
        }
        dst.resize(at as usize, 0);
        store.gather_var(&indices, &mut dst, &offsets, &lens)?;
        Ok((n as u64, at))
    })
}

/// The loader workload: one stream, IID batches, `workers` threads;
/// traced to `--trace` if given.
fn bench_loader(path: &Path, stream: Stream, workers: usize, opts: &Options) -> CliResult<Run> {
    let mut builder = DataLoader::builder()
        .stream("data", stream)
        .batch_size(opts.batch_size)
        .num_workers(workers)
        .mode(opts.mode())
        .seed(opts.seed);
    if let Some(trace) = &opts.trace {
        builder = builder.trace_path(trace);
    }
    let mut loader = builder.build()?;
    let mut before = None;
    let mut run = measure(opts, path, |step| {
        if step == 1 {
            before = Some(loader.stats());
        }
        let batch = loader.next_batch()?;
        let bytes = match batch.get("data") {
            Some(Column::Dense(t)) => t.nbytes(),
            Some(Column::Ragged(r)) => r.values.nbytes(),
            _ => 0,
        };
        Ok((batch.indices().len() as u64, bytes as u64))
    })?;
    run.stats = before.map(|b| loader.stats().since(&b));
    if let Err(e) = loader.close()
        && let Some(trace) = &opts.trace
    {
        return Err(CliError::with_source(format!("{}: could not write the trace", trace.display()), e).into());
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::parse_seconds;

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("1.5"), Ok(1.5));
        for bad in ["0", "-1", "nan", "inf", "x", "1e300"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
    }
}
