//! The main job, the reference README's Quick Start in Rust: write a data
//! and a label dataset, load them through a two-stream loader, print what
//! happened.
//!
//! `cargo run --release --example quickstart [-- DIR]` writes
//! `train_data.zr` (20,000 records of 12,288 bytes: 3,072 float32 of a
//! mildly compressible signal each) and `train_label.zr` (20,000 int64
//! labels), datasets with their `schema.json`, into DIR (a temporary
//! directory by default, removed when the program exits; given a DIR they
//! are left there, and the reference package opens them:
//! `loaderx.Dataset(DIR + '/train_data.zr')`). Then a loader over both
//! streams (4 workers, batch 256, IID, seed 42) yields 500 batches, the 499
//! after the first timed (the first waits for the workers to start); the last one is checked against the source bytes, and a second
//! loader started at step 500 is checked to yield what iterating reached
//! there.
//!
//! Run again with the same DIR, it starts afresh: it replaces the two
//! datasets an earlier run left there (appending to them would double
//! them), and refuses to touch anything else at those paths.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Instant;

use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
use loaderx::loader::DataLoader;

const RECORDS: usize = 20_000;
const FLOATS: usize = 3_072; // 12,288 bytes
const BATCH: usize = 256;
const BATCHES: u64 = 500;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Record `k`: a smooth signal with noise in the low bits (zstd: about 1.1x).
fn record(k: usize, out: &mut Vec<f32>) {
    let mut x = (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in 0..FLOATS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push(((i as f32) * 0.01 + k as f32).sin() + (x % 1000) as f32 * 1e-6);
    }
}

/// Prints a failure as its message (`Display`, not the `Debug` a
/// `main` returning `Result` would print) and exits 1.
fn main() -> std::process::ExitCode {
    let given = std::env::args().nth(1).map(PathBuf::from);
    let outcome = tempfile::tempdir().map_err(Into::into).and_then(|temp| -> Result<()> {
        let dir = given.clone().unwrap_or_else(|| temp.path().to_path_buf());
        run(&dir, RECORDS, BATCHES)?;
        if given.is_none() {
            println!(
                "removed   {}: a temporary directory, gone when the program exits (to keep the datasets: -- DIR)",
                dir.display()
            );
        }
        Ok(())
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Removes the datasets an earlier run left at `paths`; anything there
/// that is not one of them is an error, left as it is.
fn start_afresh(paths: &[&Path]) -> Result<()> {
    for &path in paths {
        if !path.exists() {
            continue;
        }
        let earlier = Dataset::open(path).ok().filter(|ds| ds.shape() == [FLOATS] || ds.shape().is_empty());
        if earlier.is_none() {
            return Err(
                format!("{} exists and is not a dataset this example wrote; give another DIR", path.display()).into()
            );
        }
        drop(earlier);
        println!("replacing {} (an earlier run's)", path.display());
        std::fs::remove_dir_all(path)?;
    }
    Ok(())
}

/// The job on `records` records, loading `batches` batches.
fn run(dir: &Path, records: usize, batches: u64) -> Result<()> {
    let (data_path, label_path) = (dir.join("train_data.zr"), dir.join("train_label.zr"));
    start_afresh(&[&data_path, &label_path])?;
    let mib = |bytes: f64, secs: f64| bytes / (1 << 20) as f64 / secs;

    // Write (one-time conversion; here from memory, `write_dataset_npy` for a .npy file).
    let mut data = Vec::with_capacity(records * FLOATS);
    (0..records).for_each(|k| record(k, &mut data));
    let labels: Vec<i64> = (0..records as i64).map(|k| k % 1000).collect();
    let start = Instant::now();
    write_dataset(&data_path, &data, &[FLOATS], &WriteOptions::default())?;
    write_dataset(&label_path, &labels, &[], &WriteOptions::default())?;
    let secs = start.elapsed().as_secs_f64();
    let stats = Dataset::open(&data_path)?.shard(0)?.stats()?;
    println!("datasets  {} and {}", data_path.display(), label_path.display());
    println!(
        "write     {records} x {} B float32 + {records} int64 labels, zstd: {:.1} s, {:.0} MiB/s, ratio {:.2}x",
        FLOATS * 4,
        secs,
        mib((data.len() * 4 + labels.len() * 8) as f64, secs),
        stats.logical_bytes as f64 / stats.live_bytes as f64
    );
    load(&data_path, &label_path, &data, &labels, batches)
}

/// Loads `batches` batches of both datasets, checks the last one against
/// the source (`data`, `labels`) and the resume from a checkpoint.
fn load(data_path: &Path, label_path: &Path, data: &[f32], labels: &[i64], batches: u64) -> Result<()> {
    let mib = |bytes: f64, secs: f64| bytes / (1 << 20) as f64 / secs;
    // Read (the loader layer: read-only, no mutations).
    let build = |start_step| {
        DataLoader::builder()
            .stream("data", Dataset::open(data_path)?)
            .stream("label", Dataset::open(label_path)?)
            .batch_size(BATCH)
            .num_workers(4)
            .start_step(start_step)
            .build()
            .map_err(Box::<dyn Error>::from)
    };
    let mut loader = build(0)?;
    let first = loader.next_batch()?;
    let start = Instant::now();
    let mut last = first.clone();
    let mut bytes = 0usize;
    for _ in 1..batches {
        last = loader.next_batch()?;
        bytes += last.columns().map(|(_, c)| c.as_dense().map_or(0, |t| t.nbytes())).sum::<usize>();
    }
    let secs = start.elapsed().as_secs_f64();
    let (x, y) = (last.dense("data").ok_or("no data")?, last.dense("label").ok_or("no label")?);
    println!("batch     data {}{:?}, label {}{:?}", x.dtype(), x.shape(), y.dtype(), y.shape());
    println!("steps     {} .. {}, loader.step() = {}", first.step(), last.step(), loader.step());
    println!(
        "loader    {batches} batches of {BATCH}, 2 streams, 4 workers; the {} after the first: {:.0} batches/s, {:.0} MiB/s",
        batches - 1,
        (batches - 1) as f64 / secs,
        mib(bytes as f64, secs)
    );

    // Verify the last batch against the source.
    let floats = x.as_slice::<f32>()?;
    for (k, &index) in last.indices().iter().enumerate() {
        let source = data.get(index as usize * FLOATS..).and_then(|s| s.get(..FLOATS));
        let source = source.ok_or_else(|| format!("record {index} is past the {} written", labels.len()))?;
        if bytemuck::cast_slice::<f32, u8>(&floats[k * FLOATS..][..FLOATS]) != bytemuck::cast_slice::<f32, u8>(source) {
            return Err(format!("record {index} differs from the source").into());
        }
        if y.as_slice::<i64>()?[k] != labels[index as usize] {
            return Err(format!("label {index} differs from the source").into());
        }
    }
    println!("verified  step {}: every byte of data and label against the source", last.step());

    // Exact resume: a loader started at the checkpoint yields what iterating reaches.
    let checkpoint = loader.step();
    let next = loader.next_batch()?;
    drop(loader);
    let resumed = build(checkpoint)?.next_batch()?;
    if resumed != next {
        return Err("a loader started at the checkpoint disagrees with iteration".into());
    }
    println!("resumed   at step {checkpoint}: the same batch as iterating");
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Finding 4 of issue 18: run twice into the same DIR, the job starts
    /// afresh (it once appended and then indexed past its source); a path
    /// that is not one of its datasets is left alone.
    #[test]
    fn a_second_run_into_the_same_dir_starts_afresh() {
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..2 {
            super::run(dir.path(), 600, 4).unwrap();
            let ds = loaderx::dataset::Dataset::open(dir.path().join("train_data.zr")).unwrap();
            assert_eq!(ds.len(), 600);
        }
        let other = dir.path().join("other");
        std::fs::create_dir_all(other.join("train_label.zr")).unwrap();
        std::fs::write(other.join("train_label.zr/notes.txt"), b"mine").unwrap();
        let err = super::run(&other, 600, 4).unwrap_err().to_string();
        assert!(err.contains("is not a dataset this example wrote"), "{err}");
        assert_eq!(std::fs::read(other.join("train_label.zr/notes.txt")).unwrap(), b"mine");
    }
}
