//! Criterion benches of the sampler and the loader:
//!
//! - `sampler`: `Sampler::fill` of one batch (256 and 8192 indices over an
//!   index space of 1,000,000) in each mode, sequential, IID and cyclic;
//! - `loader`: one batch end to end through a two-stream `DataLoader` (a
//!   12,288-byte float32 record and an int64 label per sample, batch 256, 4
//!   workers, IID), for datasets written with zstd and raw: the time per
//!   batch a training loop sees when it asks for the next one.
//!
//! ```text
//! cargo bench -p loaderx --bench criterion_loader [-- FILTER]
//! ```
//!
//! Each group measures for a few seconds (10 samples). The datasets (8,192
//! records, mildly compressible float32: zstd level 3 about 1.1x) are
//! written to a temporary directory before the loader group, untimed. The
//! side-by-side comparison with the reference package is
//! `benches/compare/all.sh`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use loaderx::Codec;
use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
use loaderx::loader::DataLoader;
use loaderx::sampler::{Mode, Sampler};

#[path = "common/mod.rs"]
mod common;

const SAMPLER_LEN: u64 = 1_000_000;
const MODES: [(&str, Mode); 3] = [("sequential", Mode::Sequential), ("iid", Mode::Iid), ("cyclic", Mode::Cyclic)];
const RECORDS: usize = 8192;
const FLOATS: usize = 3072;
const BATCH: usize = 256;
const WORKERS: usize = 4;

fn bench_sampler(c: &mut Criterion) {
    let mut group = c.benchmark_group("sampler");
    for batch in [256usize, 8192] {
        group.throughput(Throughput::Elements(batch as u64));
        for (name, mode) in MODES {
            let sampler = Sampler::new(SAMPLER_LEN, batch, mode, 42).expect("sampler");
            let mut out = vec![0u64; batch];
            let mut step = 0u64;
            group.bench_function(BenchmarkId::new(name, batch), |b| {
                b.iter(|| {
                    sampler.fill(step, &mut out).expect("fill");
                    step += 1;
                    black_box(&out);
                });
            });
        }
    }
    group.finish();
}

fn bench_loader(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let floats = common::float_data(RECORDS, FLOATS);
    let labels: Vec<i64> = (0..RECORDS as i64).collect();
    let mut group = c.benchmark_group("loader");
    group.throughput(Throughput::Bytes((BATCH * (FLOATS * 4 + 8)) as u64));
    for (name, codec) in [("zstd", Codec::Zstd), ("raw", Codec::Raw)] {
        let opts = WriteOptions::codec(codec);
        let (data, label) = (dir.path().join(format!("{name}-data")), dir.path().join(format!("{name}-label")));
        write_dataset(&data, &floats, &[FLOATS], &opts).expect("write data");
        write_dataset(&label, &labels, &[], &opts).expect("write labels");
        let mut loader = DataLoader::builder()
            .stream("data", Dataset::open(&data).expect("open data"))
            .stream("label", Dataset::open(&label).expect("open labels"))
            .batch_size(BATCH)
            .num_workers(WORKERS)
            .mode(Mode::Iid)
            .seed(42)
            .build()
            .expect("loader");
        group.bench_function(BenchmarkId::new(name, format!("{WORKERS} workers")), |b| {
            b.iter(|| black_box(loader.next_batch().expect("batch")));
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
    targets = bench_sampler, bench_loader
}
criterion_main!(benches);
