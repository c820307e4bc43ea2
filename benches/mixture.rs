//! What mixing costs: a loader over one dataset against a loader over a
//! mixture of three datasets of the same records (weights 3, 1, 2), side
//! by side, and the mixture's sampler against one dataset's.
//!
//! ```text
//! cargo bench -p loaderx --bench mixture -- [--rounds 7] [--batches 400] [--codecs raw,zstd]
//! ```
//!
//! Loader: 20,000 records of 4,096 bytes (1,024 mildly compressible
//! float32), batch 256, 4 workers, cyclic; three loaders: the dataset, a
//! mixture of that one dataset (weight 1: the mixture's own machinery), and
//! a mixture of three datasets holding the same records split 10,000 /
//! 3,334 / 6,666. Each round times `--batches` batches of each loader, the
//! order rotating round to round, after a warm-up of 50 batches; the figure
//! is the median per-round ratio of a mixture's time per batch to the
//! single dataset's (and its range), in
//! wall time and in the process's CPU time (all threads: less sensitive
//! to other work on a shared machine).
//! Sampler: `MixedSampler::draw` against `ShardedSampler::fill` of the
//! same batch, ns per sample, in the same alternating rounds.

use std::hint::black_box;
use std::time::Instant;

use loaderx::Codec;
use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
use loaderx::loader::{DataLoader, Mixture};
use loaderx::sampler::{MixedSampler, Mode, Sampler};

#[path = "common/mod.rs"]
mod common;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const RECORDS: usize = 20_000;
const FLOATS: usize = 1024;
const BATCH: usize = 256;
const WEIGHTS: [f64; 3] = [3.0, 1.0, 2.0];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// CPU time (user + system, every thread) of this process so far, seconds.
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage writes the struct it is given and nothing else; a
    // zeroed rusage is a valid value of it.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 * 1e-6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

/// Wall and CPU seconds per batch over `n` batches.
fn time_batches(loader: &mut DataLoader, n: usize) -> Res<(f64, f64)> {
    let (t0, c0) = (Instant::now(), cpu_seconds());
    for _ in 0..n {
        black_box(loader.next_batch()?);
    }
    Ok((t0.elapsed().as_secs_f64() / n as f64, (cpu_seconds() - c0) / n as f64))
}

/// The loaders compared: one dataset, a mixture of that one dataset (the
/// mixture's own machinery), a mixture of three parts of it.
const NAMES: [&str; 3] = ["one dataset", "mixture of 1", "mixture of 3"];

fn loaders(dir: &std::path::Path, codec: Codec) -> Res<Vec<DataLoader>> {
    let data = common::float_data(RECORDS, FLOATS);
    let opts = WriteOptions { codec, ..WriteOptions::default() };
    let whole = dir.join(format!("whole-{codec:?}"));
    write_dataset(&whole, &data, &[FLOATS], &opts)?;
    let cuts = [0, 10_000, 13_334, RECORDS];
    let mut mixture = Mixture::new(WEIGHTS);
    for k in 0..3 {
        let path = dir.join(format!("part{k}-{codec:?}"));
        write_dataset(&path, &data[cuts[k] * FLOATS..cuts[k + 1] * FLOATS], &[FLOATS], &opts)?;
        mixture = mixture.source([("x", Dataset::open(&path)?)]);
    }
    let builder = || DataLoader::builder().batch_size(BATCH).num_workers(4).mode(Mode::Cyclic).seed(3);
    let one = builder().stream("x", Dataset::open(&whole)?).build()?;
    let single = builder().mixture(Mixture::new([1.0]).source([("x", Dataset::open(&whole)?)])).build()?;
    let mixed = builder().mixture(mixture).build()?;
    Ok(vec![one, single, mixed])
}

fn bench_loader(codec: Codec, rounds: usize, batches: usize) -> Res<()> {
    let dir = tempfile::tempdir()?;
    let mut loaders = loaders(dir.path(), codec)?;
    for l in &mut loaders {
        time_batches(l, 50)?;
    }
    // [loader] -> per-round (wall, cpu) seconds per batch.
    let mut times: Vec<Vec<(f64, f64)>> = vec![Vec::new(); loaders.len()];
    for round in 0..rounds {
        // The order rotates: each loader goes first, second and third in turn.
        for k in 0..loaders.len() {
            let at = (round + k) % loaders.len();
            let t = time_batches(&mut loaders[at], batches)?;
            times[at].push(t);
        }
    }
    let range = |v: &[f64]| v.iter().fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
    for (what, pick) in [("wall", 0), ("cpu", 1)] {
        let of = |k: usize| -> Vec<f64> { times[k].iter().map(|t| if pick == 0 { t.0 } else { t.1 }).collect() };
        let mut line = format!("loader {codec:?} {what}: {} {:.0} us/batch", NAMES[0], median(of(0)) * 1e6);
        for (k, name) in NAMES.iter().enumerate().skip(1) {
            let ratios: Vec<f64> = of(k).iter().zip(of(0)).map(|(x, one)| x / one).collect();
            let (lo, hi) = range(&ratios);
            line += &format!(
                "; {name} {:.0} us/batch, / one {:.3} (range {lo:.3}..{hi:.3})",
                median(of(k)) * 1e6,
                median(ratios.clone())
            );
        }
        println!("{line} ({rounds} rounds)");
    }
    Ok(())
}

fn bench_sampler(rounds: usize) -> Res<()> {
    let lens = [10_000u64, 3_334, 6_666];
    let mixed = MixedSampler::new(&lens, &[Mode::Cyclic; 3], 3, BATCH, &[(0, WEIGHTS.to_vec())])?;
    let one = Sampler::new(RECORDS as u64, BATCH, Mode::Cyclic, 3)?.shard(0, 1)?;
    let steps = 20_000u64;
    let mut buf = vec![0u64; BATCH];
    let mut time = |mix: bool| -> Res<f64> {
        let t0 = Instant::now();
        for step in 0..steps {
            if mix {
                black_box(mixed.draw(step)?);
            } else {
                one.fill(step, &mut buf)?;
                black_box(&buf);
            }
        }
        Ok(t0.elapsed().as_secs_f64() * 1e9 / (steps as f64 * BATCH as f64))
    };
    let (mut ones, mut mixes) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        if round % 2 == 0 {
            ones.push(time(false)?);
            mixes.push(time(true)?);
        } else {
            mixes.push(time(true)?);
            ones.push(time(false)?);
        }
    }
    println!(
        "sampler: one dataset {:.2} ns/sample, mixture of 3 {:.2} ns/sample (cyclic, batch {BATCH})",
        median(ones),
        median(mixes)
    );
    Ok(())
}

fn main() -> Res<()> {
    let mut rounds = 7;
    let mut batches = 400;
    let mut codecs = vec![Codec::Raw, Codec::Zstd];
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--rounds" => rounds = value()?.parse()?,
            "--batches" => batches = value()?.parse()?,
            "--codecs" => {
                codecs = value()?
                    .split(',')
                    .map(|c| match c {
                        "raw" => Ok(Codec::Raw),
                        "zstd" => Ok(Codec::Zstd),
                        other => Err(format!("unknown codec {other}")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--bench" => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    bench_sampler(rounds)?;
    for codec in codecs {
        bench_loader(codec, rounds, batches)?;
    }
    Ok(())
}
