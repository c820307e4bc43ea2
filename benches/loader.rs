//! The loader benchmark: end-to-end batches/s of [`loaderx::loader::DataLoader`]
//! on the reference README's workload (20,000 records of 12,288 bytes of
//! mildly compressible float32, plus 20,000 int64 labels; two streams, batch
//! 256, 4 workers, IID), for codecs zstd and raw; and the sampler's cost
//! per batch in each mode.
//!
//! ```text
//! cargo bench -p loaderx --bench loader -- [--data DIR] [--work DIR] [--json OUT]
//!     [--batches 1000] [--warmup 100] [--reps 3] [--workers 4] [--batch 256]
//!     [--codecs zstd,raw] [--variants] [--no-sampler] [--no-loader]
//!     [--sampler-lens 1000000,20000] [--sampler-batches 256,8192]
//! ```
//!
//! `--data DIR`: convert `DIR/float.npy` (as `benches/compare/make_data.py`
//! writes it) with `write_dataset_npy`; without it the same kind of data is
//! generated here. `benches/compare/loader.sh` runs this beside the
//! reference's DataLoader on the same `.npy` and prints both with ratios.
//! `--variants` also runs buffer reuse off, gathers inline on the workers'
//! threads (`inline_gathers(true)`), and 1, 2 workers. `--inline BOOL`
//! sets `inline_gathers` in the main configuration. `--min-saving F`
//! adds a zstd dataset written with `Options::min_saving = F` (records that
//! zstd shrinks by less than F are stored raw).
//!
//! Method. Loader: one loader per configuration, `--warmup` batches pulled
//! first, then `--reps` timed runs of `--batches` batches each (every batch
//! is dropped before the next is asked for, as a training step would);
//! batches/s of the median run. Sampler: `fill` of consecutive steps into one
//! buffer, over index spaces of 1,000,000 and 20,000 at batches 256 and 8192
//! (`--sampler-lens`, `--sampler-batches`);
//! the three modes side by side in 9 rounds of one 60 ms run each (the order
//! rotating), a mode's figure its median run in ns/index, and cyclic / IID
//! the median (and range) of the per-round ratios. `--no-loader` runs the
//! sampler part alone.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loaderx::dataset::{Dataset, WriteOptions, write_dataset, write_dataset_npy};
use loaderx::loader::DataLoader;
use loaderx::sampler::{Mode, Sampler};

#[path = "common/mod.rs"]
mod common;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const RECORDS: usize = 20_000;
const FLOATS: usize = 3072;
const MIB: f64 = (1u64 << 20) as f64;

struct Args {
    data: Option<PathBuf>,
    work: Option<PathBuf>,
    json: Option<PathBuf>,
    batches: usize,
    warmup: usize,
    reps: usize,
    workers: usize,
    batch: usize,
    codecs: Vec<String>,
    variants: bool,
    sampler: bool,
    loader: bool,
    probe: bool,
    /// Also a zstd dataset written with `Options::min_saving` = this.
    min_saving: Option<f64>,
    /// Force `inline_gathers` in the main configuration.
    inline: Option<bool>,
    /// Index spaces and batch sizes of the sampler part.
    sampler_lens: Vec<u64>,
    sampler_batches: Vec<usize>,
}

fn parse_args() -> Res<Args> {
    let mut a = Args {
        data: None,
        work: None,
        json: None,
        batches: 1000,
        warmup: 100,
        reps: 3,
        workers: 4,
        batch: 256,
        codecs: vec!["zstd".into(), "raw".into()],
        variants: false,
        sampler: true,
        loader: true,
        probe: false,
        min_saving: None,
        inline: None,
        sampler_lens: vec![1_000_000, 20_000],
        sampler_batches: vec![256, 8192],
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--data" => a.data = Some(value()?.into()),
            "--work" => a.work = Some(value()?.into()),
            "--json" => a.json = Some(value()?.into()),
            "--batches" => a.batches = value()?.parse()?,
            "--warmup" => a.warmup = value()?.parse()?,
            "--reps" => a.reps = value()?.parse()?,
            "--workers" => a.workers = value()?.parse()?,
            "--batch" => a.batch = value()?.parse()?,
            "--codecs" => a.codecs = value()?.split(',').filter(|c| !c.is_empty()).map(str::to_string).collect(),
            "--variants" => a.variants = true,
            "--inline" => a.inline = Some(value()?.parse()?),
            "--no-sampler" => a.sampler = false,
            "--no-loader" => a.loader = false,
            "--probe" => a.probe = true,
            "--min-saving" => a.min_saving = Some(value()?.parse()?),
            "--sampler-lens" => a.sampler_lens = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?,
            "--sampler-batches" => {
                a.sampler_batches = value()?.split(',').map(str::parse).collect::<Result<_, _>>()?;
            }
            "--bench" => {} // cargo bench passes it
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(a)
}

struct Row {
    name: String,
    workers: usize,
    reuse: bool,
    runs: Vec<f64>,
    batch_bytes: usize,
    /// Median CPU time of the whole process per batch (all threads), ms.
    cpu_ms: f64,
}

/// CPU time (user + system) of this process so far, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses): utime is the 12th, stime the 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<f64> = rest.split_whitespace().skip(11).take(2).filter_map(|f| f.parse().ok()).collect();
    fields.iter().sum::<f64>() / 100.0
}

impl Row {
    fn median(&self) -> f64 {
        let mut s = self.runs.clone();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    }
}

fn bench_loader(
    a: &Args,
    data: &Path,
    label: &Path,
    name: &str,
    workers: usize,
    reuse: bool,
    inline: Option<bool>,
) -> Res<Row> {
    let mut builder = DataLoader::builder();
    if let Some(inline) = inline {
        builder = builder.inline_gathers(inline);
    }
    let mut loader = builder
        .stream("data", Dataset::open(data)?)
        .stream("label", Dataset::open(label)?)
        .batch_size(a.batch)
        .num_workers(workers)
        .reuse_buffers(reuse)
        .mode(Mode::Iid)
        .seed(42)
        .build()?;
    let mut batch_bytes = 0;
    for _ in 0..a.warmup {
        let b = loader.next_batch()?;
        batch_bytes = b.columns().map(|(_, c)| c.as_dense().map_or(0, |t| t.nbytes())).sum();
    }
    let mut runs = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..a.reps {
        let (start, cpu_start) = (Instant::now(), cpu_seconds());
        for _ in 0..a.batches {
            let b = loader.next_batch()?;
            std::hint::black_box(&b);
        }
        runs.push(a.batches as f64 / start.elapsed().as_secs_f64());
        cpu.push((cpu_seconds() - cpu_start) / a.batches as f64 * 1e3);
    }
    cpu.sort_by(f64::total_cmp);
    let name = match inline {
        Some(true) => format!("{name} (inline gathers)"),
        Some(false) => format!("{name} (pooled gathers)"),
        None => name.to_string(),
    };
    let row = Row { name, workers, reuse, runs, batch_bytes, cpu_ms: cpu[cpu.len() / 2] };
    println!(
        "loader  {:<6} workers {} reuse {:<5} {:>8.1} batches/s  {:>7.3} ms/batch  cpu {:>6.3} ms/batch  {:>8.0} MiB/s  (runs {:?})",
        row.name,
        workers,
        reuse,
        row.median(),
        1e3 / row.median(),
        row.cpu_ms,
        row.median() * row.batch_bytes as f64 / MIB,
        row.runs.iter().map(|r| r.round()).collect::<Vec<_>>()
    );
    Ok(row)
}

/// The store's gather alone: one thread (calls small enough to stay inline)
/// and the parallel gather of whole batches.
fn probe(data: &Path) -> Res<()> {
    let ds = Dataset::open(data)?;
    let sampler = Sampler::new(ds.len(), 256, Mode::Iid, 1)?;
    let mut buf = vec![0u8; 256 * ds.row_bytes()];
    for (name, inline) in [("1 thread", true), ("rayon", false)] {
        let start = Instant::now();
        let n = 300;
        for step in 0..n {
            let idx = sampler.batch(step);
            if inline {
                for (i, dst) in idx.chunks(8).zip(buf.chunks_mut(8 * ds.row_bytes())) {
                    ds.gather_bytes(i, dst)?;
                }
            } else {
                ds.gather_bytes(&idx, &mut buf)?;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "probe   gather {name:<8} {:>8.1} batches/s {:>8.0} MiB/s",
            n as f64 / secs,
            n as f64 * buf.len() as f64 / MIB / secs
        );
    }
    Ok(())
}

/// One timed run of `fill` over consecutive steps from `first`: seconds per
/// batch, and the step after the last one filled.
fn sampler_run(sampler: &Sampler, out: &mut [u64], first: u64, budget: Duration) -> Res<(f64, u64)> {
    let start = Instant::now();
    let mut step = first;
    while start.elapsed() < budget {
        for _ in 0..16 {
            sampler.fill(step, out)?;
            std::hint::black_box(&mut *out);
            step += 1;
        }
    }
    Ok((start.elapsed().as_secs_f64() / (step - first) as f64, step))
}

/// The sampler's modes side by side in this process: `SAMPLER_ROUNDS`
/// rounds, each one timed run of every mode (the order rotating from round
/// to round), each mode continuing from the step where its last run stopped.
/// Per mode the median run in ns/index, and per round cyclic / IID.
struct SamplerRow {
    len: u64,
    batch: usize,
    /// Median ns/index of sequential, IID, cyclic.
    ns: [f64; 3],
    /// Cyclic / IID per index: median and range over the rounds.
    ratio: (f64, f64, f64),
}

const SAMPLER_MODES: [(&str, Mode); 3] =
    [("sequential", Mode::Sequential), ("iid", Mode::Iid), ("cyclic", Mode::Cyclic)];
const SAMPLER_ROUNDS: usize = 9;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn bench_sampler(len: u64, batch: usize) -> Res<SamplerRow> {
    let samplers: Vec<Sampler> =
        SAMPLER_MODES.iter().map(|&(_, mode)| Sampler::new(len, batch, mode, 42)).collect::<Result<_, _>>()?;
    let mut out = vec![0u64; batch];
    let mut steps = [0u64; 3];
    let mut runs: [Vec<f64>; 3] = Default::default();
    let mut ratios = Vec::new();
    for m in 0..3 {
        // Warm-up.
        steps[m] = sampler_run(&samplers[m], &mut out, 0, Duration::from_millis(20))?.1;
    }
    for round in 0..SAMPLER_ROUNDS {
        let mut ns = [0.0; 3];
        for k in 0..3 {
            let m = (round + k) % 3;
            let (secs, next) = sampler_run(&samplers[m], &mut out, steps[m], Duration::from_millis(60))?;
            steps[m] = next;
            ns[m] = secs * 1e9 / batch as f64;
            runs[m].push(ns[m]);
        }
        ratios.push(ns[2] / ns[1]);
    }
    let (lo, hi) = ratios.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    Ok(SamplerRow { len, batch, ns: runs.map(median), ratio: (median(ratios), lo, hi) })
}

fn main() -> Res<()> {
    let a = parse_args()?;
    let mut json = String::from("{\"side\": \"crate\", \"loader\": [");
    if a.loader {
        let temp = tempfile::tempdir()?;
        let work = a.work.clone().unwrap_or_else(|| temp.path().to_path_buf());
        let generated;
        let floats: Option<&[f32]> = if a.data.is_none() {
            generated = common::float_data(RECORDS, FLOATS);
            Some(&generated)
        } else {
            None
        };
        let mut first = true;
        let mut codecs: Vec<(String, f64)> = a.codecs.iter().map(|c| (c.clone(), 0.0)).collect();
        if let Some(m) = a.min_saving {
            codecs.push((format!("zstd, min_saving {m}"), m));
        }
        for (codec_name, min_saving) in &codecs {
            let codec = loaderx::dataset::parse_codec(codec_name.split(',').next().unwrap_or(""))?;
            let dir = work.join(format!("loader-{}", codec_name.replace([',', ' '], "")));
            let (data, label) = (dir.join("data"), dir.join("label"));
            if !data.join("schema.json").exists() {
                let mut opts = WriteOptions::codec(codec);
                opts.store.min_saving = *min_saving;
                let start = Instant::now();
                match (&a.data, floats) {
                    (Some(d), _) => write_dataset_npy(&data, d.join("float.npy"), &opts)?,
                    (None, Some(f)) => write_dataset(&data, f, &[FLOATS], &opts)?,
                    _ => unreachable!(),
                };
                // One label per record of the data (20,000 unless --data holds another count).
                let labels: Vec<i64> = (0..Dataset::open(&data)?.len() as i64).collect();
                write_dataset(&label, &labels, &[], &opts)?;
                let stats = Dataset::open(&data)?.shard(0)?.stats()?;
                println!(
                    "write   {codec_name:<6} {:.1} s, ratio {:.3}x, codecs raw/zstd/dict {:?}",
                    start.elapsed().as_secs_f64(),
                    stats.logical_bytes as f64 / stats.live_bytes.max(1) as f64,
                    stats.codec_records
                );
            }
            if a.probe {
                probe(&data)?;
            }
            let mut configs = vec![(a.workers, true, a.inline)];
            if a.variants {
                configs.extend([
                    (a.workers, false, None),
                    (a.workers, true, Some(true)),
                    (1, true, None),
                    (2, true, None),
                    (2, true, Some(true)),
                ]);
            }
            for (workers, reuse, inline) in configs {
                let row = bench_loader(&a, &data, &label, codec_name, workers, reuse, inline)?;
                if !first {
                    json.push_str(", ");
                }
                first = false;
                let _ = write!(
                    json,
                    "{{\"codec\": \"{}\", \"workers\": {}, \"reuse\": {}, \"batches_s\": {:.2}, \"mib_s\": {:.1}, \"cpu_ms\": {:.3}, \"runs\": {:?}}}",
                    row.name,
                    row.workers,
                    row.reuse,
                    row.median(),
                    row.median() * row.batch_bytes as f64 / MIB,
                    row.cpu_ms,
                    row.runs
                );
            }
        }
        if a.work.is_some() {
            // Left for the next run (`--work` reuses them).
        }
    }
    json.push_str("], \"sampler\": [");
    if a.sampler {
        let mut first = true;
        for &len in &a.sampler_lens {
            for &batch in &a.sampler_batches {
                let row = bench_sampler(len, batch)?;
                for (m, (name, _)) in SAMPLER_MODES.iter().enumerate() {
                    println!(
                        "sampler len {:>9} batch {:>5} {name:<10} {:>9.2} us/batch {:>6.2} ns/index",
                        row.len,
                        row.batch,
                        row.ns[m] * row.batch as f64 / 1e3,
                        row.ns[m]
                    );
                    if !first {
                        json.push_str(", ");
                    }
                    first = false;
                    let _ = write!(
                        json,
                        "{{\"mode\": \"{name}\", \"len\": {}, \"batch\": {}, \"us_per_batch\": {:.3}}}",
                        row.len,
                        row.batch,
                        row.ns[m] * row.batch as f64 / 1e3
                    );
                }
                println!(
                    "sampler len {:>9} batch {:>5} cyclic / iid per index {:.2}x (rounds {:.2}-{:.2})",
                    row.len, row.batch, row.ratio.0, row.ratio.1, row.ratio.2
                );
            }
        }
    }
    json.push_str("]}\n");
    if let Some(path) = &a.json {
        std::fs::write(path, json)?;
    }
    Ok(())
}
