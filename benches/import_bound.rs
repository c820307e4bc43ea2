//! The import benchmark's bound (docs/benchmarks.md, "Import"): the input
//! read and decoded alone, and the same bytes written alone. An import can
//! go no faster than the slower of the two.
//!
//!     cargo bench --features arrow --bench import_bound -- read-parquet DIR
//!     cargo bench --features arrow --bench import_bound -- read-tar DIR
//!     cargo bench --features arrow --bench import_bound -- write BYTES DIR
//!
//! `read-parquet` decodes every `*.parquet` file of DIR into Arrow arrays
//! (the parquet crate's arrow reader, batches of 4,096 rows), a file per
//! thread on as many threads as the import uses (`LOADERX_BOUND_THREADS`,
//! default 2); `read-tar` reads every member of every `*.tar` into memory;
//! both print the bytes of values they produced. `write` writes BYTES into
//! 64 MiB files under DIR and fsyncs them: the store's own write pattern
//! without encoding. Each prints one JSON line.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rayon::prelude::*;

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == ext))
        .collect();
    out.sort();
    out
}

/// Bytes of the values an array holds (its buffers, children included).
fn value_bytes(batch: &RecordBatch) -> u64 {
    batch.columns().iter().map(|c| c.to_data().get_slice_memory_size().unwrap_or(0) as u64).sum()
}

fn read_parquet(dir: &Path) -> (u64, u64) {
    files(dir, "parquet")
        .par_iter()
        .map(|path| {
            let file = File::open(path).unwrap();
            let reader = ParquetRecordBatchReaderBuilder::try_new(file).unwrap().with_batch_size(4096).build().unwrap();
            let (mut rows, mut bytes) = (0u64, 0u64);
            for batch in reader {
                let batch = batch.unwrap();
                rows += batch.num_rows() as u64;
                bytes += value_bytes(&batch);
            }
            (rows, bytes)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

fn read_tar(dir: &Path) -> (u64, u64) {
    files(dir, "tar")
        .par_iter()
        .map(|path| {
            let mut archive = tar::Archive::new(std::io::BufReader::with_capacity(1 << 20, File::open(path).unwrap()));
            let (mut members, mut bytes) = (0u64, 0u64);
            let mut buf = Vec::new();
            for member in archive.entries().unwrap() {
                let mut member = member.unwrap();
                buf.clear();
                member.read_to_end(&mut buf).unwrap();
                members += 1;
                bytes += buf.len() as u64;
            }
            (members, bytes)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
}

fn write(bytes: u64, dir: &Path) {
    const FILE_BYTES: u64 = 64 << 20;
    std::fs::create_dir_all(dir).unwrap();
    let block = vec![0x5au8; 1 << 20];
    let (mut left, mut k) = (bytes, 0);
    let start = Instant::now();
    while left > 0 {
        let path = dir.join(format!("{k}.bound"));
        let mut file = File::create(&path).unwrap();
        let mut in_file = left.min(FILE_BYTES);
        left -= in_file;
        while in_file > 0 {
            let n = in_file.min(block.len() as u64) as usize;
            file.write_all(&block[..n]).unwrap();
            in_file -= n as u64;
        }
        file.sync_all().unwrap();
        k += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"bound\": \"write\", \"bytes\": {bytes}, \"seconds\": {secs:.3}, \"mb_s\": {:.1}}}",
        bytes as f64 / secs / 1e6
    );
    std::fs::remove_dir_all(dir).unwrap();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    let threads = std::env::var("LOADERX_BOUND_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(2);
    rayon::ThreadPoolBuilder::new().num_threads(threads).build_global().unwrap();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["write", bytes, dir] => write(bytes.parse().expect("BYTES"), Path::new(dir)),
        [what @ ("read-parquet" | "read-tar"), dir] => {
            let start = Instant::now();
            let (rows, bytes) =
                if *what == "read-parquet" { read_parquet(Path::new(dir)) } else { read_tar(Path::new(dir)) };
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{{\"bound\": \"{what}\", \"rows\": {rows}, \"bytes\": {bytes}, \"seconds\": {secs:.3}, \"mb_s\": {:.1}}}",
                bytes as f64 / secs / 1e6
            );
        }
        _ => {
            eprintln!("usage: import_bound read-parquet DIR | read-tar DIR | write BYTES DIR");
            std::process::exit(2);
        }
    }
}
