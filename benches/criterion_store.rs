//! Criterion benches of the store's operations, one per codec (raw, zstd,
//! zstd_dict) and record size (12,288 bytes, the reference README's workload,
//! and 200 bytes, a small record where per-record costs dominate):
//!
//! - `append`: one call of 256 records (durable when it returns, so an
//!   `fdatasync` and two `msync`s are in the figure), into a store made
//!   fresh for each sample and appended to once before the timed calls;
//! - `gather`: a batch of 256 uniformly random indices into a reused buffer;
//! - `gather_var`: the same with records of varying length (half to 1.5x the
//!   size), packed back to back;
//! - `compact`: a store with 30% of its records deleted, compacted in place
//!   (the store is made in a temporary directory by the untimed setup).
//!
//! ```text
//! cargo bench -p loaderx --bench criterion_store [-- FILTER]
//! ```
//!
//! Each group measures for a few seconds (10 samples), so the whole run takes
//! a few minutes on 2 cores. The data is generated here, deterministically:
//! smooth byte ramps with a slow wave and a little noise (zstd level 3: about
//! 3-7x depending on the size). The side-by-side comparison with the
//! reference package and other stores is `benches/compare/all.sh`.

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use loaderx::{Codec, Zrecord, default_dict_size};
use tempfile::TempDir;

const BATCH: usize = 256;
const SIZES: [usize; 2] = [12_288, 200];
const CODECS: [(&str, Codec); 3] = [("raw", Codec::Raw), ("zstd", Codec::Zstd), ("zstd_dict", Codec::ZstdDict)];
/// Records in a gather store: 48 MiB at 12,288 bytes.
const GATHER_RECORDS: usize = 4096;
/// Records in a compaction store (24 MiB at 12,288 bytes).
const COMPACT_RECORDS: usize = 2048;

/// A deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// Record `i`: a byte ramp of random slope and offset, a slow wave, and
/// noise in the lowest bit.
fn record(rng: &mut Rng, len: usize) -> Vec<u8> {
    let base = rng.below(160) as f64 + 40.0;
    let slope = (rng.below(1000) as f64 / 1000.0 - 0.5) * 64.0 / len as f64;
    let freq = 0.5 + rng.below(1000) as f64 / 1000.0;
    (0..len)
        .map(|k| {
            let t = k as f64;
            let wave = 8.0 * (std::f64::consts::TAU * freq * t / len as f64).sin();
            let noise = (rng.next() >> 63) as f64;
            (base + slope * t + wave + noise).clamp(0.0, 255.0) as u8
        })
        .collect()
}

/// `n` records of `size` bytes back to back.
fn fixed_records(n: usize, size: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng(seed);
    (0..n).flat_map(|_| record(&mut rng, size)).collect()
}

/// `n` records of `size / 2 ..= 3 * size / 2` bytes: bytes, offsets, lengths.
fn var_records(n: usize, size: usize, seed: u64) -> (Vec<u8>, Vec<u64>, Vec<u32>) {
    let mut rng = Rng(seed);
    let (mut bytes, mut offsets, mut lens) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let len = size / 2 + rng.below(size as u64 + 1) as usize;
        offsets.push(bytes.len() as u64);
        lens.push(len as u32);
        bytes.extend(record(&mut rng, len));
    }
    (bytes, offsets, lens)
}

/// Batches of `BATCH` uniformly random indices in `0..n`.
fn index_batches(n: usize, batches: usize) -> Vec<Vec<u64>> {
    let mut rng = Rng(0x5EED);
    (0..batches).map(|_| (0..BATCH).map(|_| rng.below(n as u64)).collect()).collect()
}

/// A new store in a new temporary directory; for zstd_dict with a dictionary
/// trained on `sample` (records of `size` bytes).
fn new_store(codec: Codec, sample: &[u8], size: usize) -> (TempDir, Zrecord) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Zrecord::open(dir.path().join("store")).expect("open");
    if codec == Codec::ZstdDict {
        let sizes = vec![size; sample.len() / size];
        store.train_dict(sample, &sizes, default_dict_size(sample.len())).expect("train_dict");
    }
    (dir, store)
}

/// The dictionary file of a store, to copy into fresh ones.
fn dict_file(store: &Path) -> Vec<u8> {
    std::fs::read(store.join("dict.zr")).expect("dict.zr")
}

fn bench_append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    for size in SIZES {
        let src = fixed_records(BATCH, size, 1);
        // One trained dictionary, installed in each fresh store.
        let (dict_dir, dict_store) = new_store(Codec::ZstdDict, &fixed_records(1024, size, 7), size);
        let dict = dict_file(dict_store.path());
        drop(dict_store);
        group.throughput(Throughput::Bytes(src.len() as u64));
        for (name, codec) in CODECS {
            group.bench_function(BenchmarkId::new(name, size), |b| {
                // Per sample: a fresh store (with the dictionary installed),
                // one untimed append, then `iters` timed appends into it.
                b.iter_custom(|iters| {
                    let dir = tempfile::tempdir().expect("tempdir");
                    let store = Zrecord::open(dir.path().join("store")).expect("open");
                    if codec == Codec::ZstdDict {
                        store.install_dict(dict.clone()).expect("install_dict");
                    }
                    store.append(&src, BATCH, size, codec).expect("append");
                    let start = Instant::now();
                    for _ in 0..iters {
                        black_box(store.append(&src, BATCH, size, codec).expect("append"));
                    }
                    start.elapsed()
                });
            });
        }
        drop(dict_dir);
    }
    group.finish();
}

fn bench_gather(c: &mut Criterion) {
    let mut group = c.benchmark_group("gather");
    for size in SIZES {
        let src = fixed_records(GATHER_RECORDS, size, 2);
        let batches = index_batches(GATHER_RECORDS, 64);
        group.throughput(Throughput::Bytes((BATCH * size) as u64));
        for (name, codec) in CODECS {
            let (_dir, store) = new_store(codec, &src[..1024 * size], size);
            store.append(&src, GATHER_RECORDS, size, codec).expect("append");
            let mut dst = vec![0u8; BATCH * size];
            let mut k = 0;
            group.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| {
                    k = (k + 1) % batches.len();
                    store.gather(&batches[k], &mut dst, size).expect("gather");
                    black_box(&dst);
                });
            });
        }
    }
    group.finish();
}

fn bench_gather_var(c: &mut Criterion) {
    let mut group = c.benchmark_group("gather_var");
    for size in SIZES {
        let (src, offsets, lens) = var_records(GATHER_RECORDS, size, 3);
        let batches = index_batches(GATHER_RECORDS, 64);
        // Each batch's lengths and packed offsets, computed once.
        let layouts: Vec<(Vec<u64>, Vec<u32>)> = batches
            .iter()
            .map(|b| {
                let l: Vec<u32> = b.iter().map(|&i| lens[i as usize]).collect();
                let o = l.iter().scan(0u64, |at, &n| Some(std::mem::replace(at, *at + u64::from(n)))).collect();
                (o, l)
            })
            .collect();
        let mean_batch = layouts.iter().map(|(_, l)| l.iter().map(|&n| u64::from(n)).sum::<u64>()).sum::<u64>()
            / layouts.len() as u64;
        group.throughput(Throughput::Bytes(mean_batch));
        let dict_sample = fixed_records(1024, size, 4);
        for (name, codec) in CODECS {
            let (_dir, store) = new_store(codec, &dict_sample, size);
            store.append_var(&src, &offsets, &lens, codec).expect("append_var");
            let mut dst = vec![0u8; BATCH * size * 3 / 2];
            let mut k = 0;
            group.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| {
                    k = (k + 1) % batches.len();
                    let (o, l) = &layouts[k];
                    store.gather_var(&batches[k], &mut dst, o, l).expect("gather_var");
                    black_box(&dst);
                });
            });
        }
    }
    group.finish();
}

fn bench_compact(c: &mut Criterion) {
    let mut group = c.benchmark_group("compact");
    let size = SIZES[0];
    let src = fixed_records(COMPACT_RECORDS, size, 5);
    // 30% of the records, distinct, in random order.
    let mut rng = Rng(0xDE1E7E);
    let mut order: Vec<u64> = (0..COMPACT_RECORDS as u64).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let deleted = &order[..COMPACT_RECORDS * 3 / 10];
    group.throughput(Throughput::Bytes(((COMPACT_RECORDS - deleted.len()) * size) as u64));
    for (name, codec) in &CODECS[..2] {
        group.bench_function(BenchmarkId::new(*name, size), |b| {
            b.iter_batched(
                || {
                    let (dir, mut store) = new_store(*codec, &[], size);
                    store.append(&src, COMPACT_RECORDS, size, *codec).expect("append");
                    store.delete(deleted).expect("delete");
                    (dir, store)
                },
                |(dir, mut store)| {
                    black_box(store.compact().expect("compact"));
                    (dir, store)
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

fn config() -> Criterion {
    Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3))
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_append, bench_gather, bench_gather_var, bench_compact
}
criterion_main!(benches);
