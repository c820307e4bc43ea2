//! The cost of the loader's statistics: batches/s with
//! `LoaderBuilder::statistics(true)` against `false`, in alternating rounds
//! (the order flipping each round), on two workloads: small batches (32
//! records of 256 bytes, where the per-batch cost weighs most) and the
//! loader benchmark's records (256 records of 12,288 bytes, raw).
//!
//! ```text
//! cargo bench -p loaderx --bench loader_stats -- [--rounds 9] [--batches 2000] [--workers 2]
//! ```
//!
//! Per round and workload: one loader per setting, 100 batches pulled
//! first, then `--batches` timed (each dropped before the next). Prints each
//! setting's median time per batch and the median and range of the
//! per-round ratios on / off.

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

/// Seconds per batch of `batches` batches after a warm-up.
fn run(data: &Arc<Dataset>, batch: usize, workers: usize, batches: usize, statistics: bool) -> Res<f64> {
    let mut loader = DataLoader::builder()
        .stream("x", data.clone())
        .batch_size(batch)
        .num_workers(workers)
        .statistics(statistics)
        .build()?;
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
    println!("workers {}, {} rounds of {} batches, on/off alternating", a.workers, a.rounds, a.batches);
    for (name, batch) in [("small", 32), ("large", 256)] {
        let data = Arc::new(Dataset::open(dir.path().join(name))?);
        let (mut on, mut off, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..a.rounds {
            let first = round % 2 == 0;
            let x = run(&data, batch, a.workers, a.batches, first)?;
            let y = run(&data, batch, a.workers, a.batches, !first)?;
            let (t_on, t_off) = if first { (x, y) } else { (y, x) };
            on.push(t_on);
            off.push(t_off);
            ratios.push(t_on / t_off);
        }
        let (lo, hi) = ratios.iter().fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
        println!(
            "{name:5} batch {batch:3}: on {:8.1} us/batch, off {:8.1} us/batch, on/off median {:.4} (range {lo:.4} to {hi:.4})",
            median(on) * 1e6,
            median(off) * 1e6,
            median(ratios),
        );
    }
    Ok(())
}
