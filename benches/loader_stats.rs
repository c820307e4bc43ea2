//! The cost of the loader's statistics and trace: time per batch with
//! neither (`statistics(false)`), with the statistics (the default) and
//! with both (`trace_path`), in rounds whose order rotates, on two
//! workloads: small batches (32 records of 256 bytes, where the per-batch
//! cost weighs most) and the loader benchmark's records (256 records of
//! 12,288 bytes, raw).
//!
//! ```text
//! cargo bench -p loaderx --bench loader_stats -- [--rounds 9] [--batches 2000] [--workers 2]
//! ```
//!
//! Per round and workload: one loader per setting, 100 batches pulled
//! first, then `--batches` timed (each dropped before the next; a trace is
//! written when its loader is dropped, after the timing). Prints each
//! setting's median time per batch and the median and range of the
//! per-round ratios to `off`.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
use loaderx::loader::DataLoader;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Args {
    rounds: usize,
    batches: usize,
    workers: usize,
}

fn parse_args() -> Res<Args> {
    let mut a = Args { rounds: 9, batches: 2000, workers: 2 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--rounds" => a.rounds = value()?.parse()?,
            "--batches" => a.batches = value()?.parse()?,
            "--workers" => a.workers = value()?.parse()?,
            "--bench" => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(a)
}

/// What a loader counts: nothing, the statistics, the statistics and a trace.
const SETTINGS: [&str; 3] = ["off", "stats", "stats+trace"];

/// Seconds per batch of `batches` batches after a warm-up, with setting
/// `SETTINGS[setting]` (a trace goes to `trace`).
fn run(data: &Arc<Dataset>, batch: usize, a: &Args, setting: usize, trace: &Path) -> Res<f64> {
    let mut builder = DataLoader::builder()
        .stream("x", data.clone())
        .batch_size(batch)
        .num_workers(a.workers)
        .statistics(setting > 0);
    if setting == 2 {
        builder = builder.trace_path(trace);
    }
    let mut loader = builder.build()?;
    let batches = a.batches;
    for _ in 0..100 {
        loader.next_batch()?;
    }
    let start = Instant::now();
    for _ in 0..batches {
        loader.next_batch()?;
    }
    Ok(start.elapsed().as_secs_f64() / batches as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Res<()> {
    let a = parse_args()?;
    let dir = tempfile::tempdir()?;
    let raw = WriteOptions { codec: loaderx::Codec::Raw, ..WriteOptions::default() };
    let small: Vec<f32> = (0..20_000 * 64).map(|v| (v as f32 * 0.1).sin()).collect();
    write_dataset(dir.path().join("small"), &small, &[64], &raw)?;
    let large: Vec<f32> = (0..5_000 * 3072).map(|v| (v as f32 * 0.1).sin()).collect();
    write_dataset(dir.path().join("large"), &large, &[3072], &raw)?;
    drop((small, large));
    println!("workers {}, {} rounds of {} batches, order rotating", a.workers, a.rounds, a.batches);
    let trace = dir.path().join("trace.json");
    for (name, batch) in [("small", 32), ("large", 256)] {
        let data = Arc::new(Dataset::open(dir.path().join(name))?);
        let mut times: [Vec<f64>; 3] = Default::default();
        for round in 0..a.rounds {
            for k in 0..SETTINGS.len() {
                let setting = (round + k) % SETTINGS.len();
                times[setting].push(run(&data, batch, &a, setting, &trace)?);
            }
        }
        report(name, batch, &times);
    }
    Ok(())
}

/// Each setting's median time per batch and its per-round ratio to `off`.
fn report(name: &str, batch: usize, times: &[Vec<f64>; 3]) {
    for (setting, t) in SETTINGS.iter().zip(times) {
        let ratios: Vec<f64> = t.iter().zip(&times[0]).map(|(x, off)| x / off).collect();
        let (lo, hi) = ratios.iter().fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
        println!(
            "{name:5} batch {batch:3} {setting:11}: {:8.1} us/batch, / off median {:.4} (range {lo:.4} to {hi:.4})",
            median(t.clone()) * 1e6,
            median(ratios),
        );
    }
}
