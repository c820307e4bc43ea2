//! Tuning against a sweep: a loader with `autotune` and loaders with fixed
//! settings (workers 1 to 4, window 2 or 8 batches), on a transform whose
//! cost changes during the run, each side in a fresh process, the sides'
//! order rotating from round to round.
//!
//! ```text
//! cargo bench -p loaderx --bench loader_tune -- [--rounds 5] [--budget-mib 4]
//! ```
//!
//! The workload: 4,096 records of 4 KiB (raw), batches of 64 (256 KiB).
//! The transform (on the workers) burns 300 µs of CPU time a batch for steps 0 to
//! 299, 1,500 µs for 300 to 599 and 100 µs for 600 to 899; the consumer
//! sleeps 500 µs a batch, as a training step on an accelerator does.
//! Each side prints its time for the 900 steps, the most bytes its batches
//! held in the loader (the largest `in_flight_bytes` seen, plus the tuner's
//! window at the budget's limit) and its peak RSS. The summary gives each
//! side's median time, and the median and range of the per-round ratio of
//! `auto` to the round's best fixed side.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
use loaderx::loader::{Autotune, Batch, DataLoader, LoaderBuilder, TransformError};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const RECORDS: usize = 4096;
const RECORD_BYTES: usize = 4096;
const BATCH: usize = 64;
const STEPS: u64 = 900;
const CONSUMER: Duration = Duration::from_micros(500);

/// The transform's cost at `step`.
fn cost(step: u64) -> Duration {
    Duration::from_micros(match step {
        0..300 => 300,
        300..600 => 1500,
        _ => 100,
    })
}

/// Burns `d` of this thread's CPU time (not wall time: a worker that is
/// preempted does not get its work done by waiting).
fn spin(d: Duration) {
    let start = thread_cpu();
    while thread_cpu().saturating_sub(start) < d {
        for _ in 0..64 {
            std::hint::spin_loop();
        }
    }
}

/// This thread's CPU time.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec for the call's duration,
    // and CLOCK_THREAD_CPUTIME_ID is a clock every Linux kernel has.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

fn transform(batch: Batch) -> Result<Batch, TransformError> {
    spin(cost(batch.step()));
    Ok(batch)
}

/// The sides: `auto`, then `fixed:W:P` (W workers, a window of P).
fn sides() -> Vec<String> {
    let mut out = vec!["auto".to_string()];
    for workers in 1..=4 {
        for window in [2, 8] {
            out.push(format!("fixed:{workers}:{window}"));
        }
    }
    out
}

fn builder(side: &str, data: Arc<Dataset>, budget: u64) -> Res<LoaderBuilder> {
    let b = DataLoader::builder().stream("x", data).batch_size(BATCH).seed(1).transform(transform);
    if side == "auto" {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        return Ok(b.autotune(Autotune { memory_budget: budget, max_workers: cores }));
    }
    let mut parts = side.split(':').skip(1).map(str::parse::<usize>);
    let (Some(Ok(workers)), Some(Ok(window))) = (parts.next(), parts.next()) else {
        return Err(format!("bad side {side}").into());
    };
    Ok(b.num_workers(workers).prefetch(window.max(workers)))
}

/// One side, in this process: prints `seconds held_bytes peak_rss_kib`.
fn child(side: &str, dir: &str, budget: u64) -> Res<()> {
    let data = Arc::new(Dataset::open(format!("{dir}/x"))?);
    let mut loader = builder(side, data, budget)?.build()?;
    let (start, mut held) = (Instant::now(), 0u64);
    for _ in 0..STEPS {
        let batch = loader.next_batch()?;
        held = held.max(loader.stats().in_flight_bytes);
        std::thread::sleep(CONSUMER);
        drop(batch);
    }
    let seconds = start.elapsed().as_secs_f64();
    if let Some(t) = loader.tuning() {
        for d in &t.decisions {
            eprintln!("  step {:>3}: {} workers, window {}: {}", d.step, d.setting.workers, d.setting.window, d.reason);
        }
    }
    println!("{seconds} {held} {}", peak_rss_kib());
    Ok(())
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap_or("VmHWM: 0 kB");
    line.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let (mut rounds, mut budget) = (5usize, 4u64 << 20);
    let mut side = None;
    let mut dir = None;
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--rounds" => rounds = value()?.parse()?,
            "--budget-mib" => budget = value()?.parse::<u64>()? << 20,
            "--side" => side = Some(value()?),
            "--dir" => dir = Some(value()?),
            "--bench" => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    if let (Some(side), Some(dir)) = (&side, &dir) {
        return child(side, dir, budget);
    }
    let tmp = tempfile::tempdir()?;
    let bytes: Vec<u8> = (0..RECORDS * RECORD_BYTES).map(|i| (i * 31 % 251) as u8).collect();
    write_dataset(
        tmp.path().join("x"),
        &bytes,
        &[RECORD_BYTES],
        &WriteOptions { codec: loaderx::Codec::Raw, ..WriteOptions::default() },
    )?;
    let sides = sides();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); sides.len()];
    let mut held: Vec<u64> = vec![0; sides.len()];
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let mut this = vec![0.0; sides.len()];
        for k in 0..sides.len() {
            let s = (k + round) % sides.len();
            let out = Command::new(std::env::current_exe()?)
                .args(["--side", &sides[s], "--dir", &tmp.path().to_string_lossy()])
                .args(["--budget-mib", &(budget >> 20).to_string()])
                .output()?;
            if !out.status.success() {
                return Err(format!("side {} failed: {}", sides[s], String::from_utf8_lossy(&out.stderr)).into());
            }
            if s == 0 {
                print!("auto's decisions in round {round}:\n{}", String::from_utf8_lossy(&out.stderr));
            }
            let text = String::from_utf8(out.stdout)?;
            let mut fields = text.split_whitespace();
            let seconds: f64 = fields.next().ok_or("no time")?.parse()?;
            held[s] = held[s].max(fields.next().ok_or("no bytes")?.parse()?);
            this[s] = seconds;
            times[s].push(seconds);
        }
        let best = this[1..].iter().copied().fold(f64::INFINITY, f64::min);
        ratios.push(this[0] / best);
        println!("round {round}: auto {:.3} s, best fixed {best:.3} s, ratio {:.3}", this[0], this[0] / best);
    }
    println!("budget {} MiB; batch {} KiB", budget >> 20, (BATCH * RECORD_BYTES) >> 10);
    for (k, side) in sides.iter().enumerate() {
        println!("{side:>12}: median {:.3} s, most bytes held {} KiB", median(times[k].clone()), held[k] >> 10);
    }
    let (lo, hi) = ratios.iter().fold((f64::INFINITY, 0f64), |(l, h), &r| (l.min(r), h.max(r)));
    println!("auto / best fixed: median {:.3} (range {lo:.3} to {hi:.3})", median(ratios.clone()));
    Ok(())
}
