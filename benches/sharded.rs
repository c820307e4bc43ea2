//! Sharded datasets: a dataset of 2^24 + 1,000 uint8 scalars (one full
//! store and a second shard) written, opened and its records past 2^24 read
//! back; then the gather cost per record of a sharded dataset against one
//! store of the same records, side by side in alternating rounds.
//!
//! ```text
//! cargo bench -p loaderx --bench sharded            # in a temporary directory
//! LOADERX_BENCH_DIR=/path cargo bench -p loaderx --bench sharded
//! ```

use std::time::Instant;

use loaderx::Codec;
use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
use loaderx::sampler::{Mode, Sampler};

/// Records past one store's capacity.
const PAST: usize = 1000;
/// The gather comparison: records, bytes each, records per shard, batch.
const RECORDS: usize = 1 << 20;
const RECORD_BYTES: usize = 64;
const SHARD_RECORDS: u64 = 1 << 17;
const BATCH: usize = 256;
/// Alternating rounds of 1,000 batches each.
const ROUNDS: u64 = 20;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn scale(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let n = (1usize << 24) + PAST;
    let data: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
    let path = dir.join("scalars");
    let t0 = Instant::now();
    write_dataset(&path, &data, &[], &WriteOptions::default())?;
    let write = t0.elapsed();
    let mut opens = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let ds = Dataset::open(&path)?;
        opens.push(t.elapsed().as_secs_f64());
        assert_eq!((ds.len(), ds.shards()), (n as u64, 2));
    }
    let ds = Dataset::open(&path)?;
    let past: Vec<u64> = ((1u64 << 24) - 5..n as u64).collect();
    let mut got = vec![0u8; past.len()];
    let t = Instant::now();
    ds.gather_into(&past, &mut got)?;
    let read = t.elapsed();
    let want: Vec<u8> = past.iter().map(|&i| data[i as usize]).collect();
    assert!(got == want, "records past 2^24 differ");
    println!(
        "scale: {n} uint8 records (zstd) written in {:.2} s, 2 shards; open {:.3} ms (median of 5, first {:.3} ms); \
         the {} records from 2^24 - 5 read back exactly in {:.3} ms",
        write.as_secs_f64(),
        median(opens.clone()) * 1e3,
        opens[0] * 1e3,
        past.len(),
        read.as_secs_f64() * 1e3
    );
    Ok(())
}

/// Nanoseconds per record of `batches` random batches from `ds`.
fn gather_ns(ds: &Dataset, sampler: &Sampler, steps: std::ops::Range<u64>) -> Result<f64, Box<dyn std::error::Error>> {
    let mut idx = vec![0u64; BATCH];
    let mut dst = vec![0u8; BATCH * RECORD_BYTES];
    let t = Instant::now();
    for step in steps.clone() {
        sampler.fill(step, &mut idx)?;
        ds.gather_bytes(&idx, &mut dst)?;
        std::hint::black_box(&dst);
    }
    Ok(t.elapsed().as_nanos() as f64 / ((steps.end - steps.start) as f64 * BATCH as f64))
}

fn gather(dir: &std::path::Path) -> Result<(), Box<dyn std::error::Error>> {
    let data: Vec<u8> = (0..RECORDS * RECORD_BYTES).map(|i| ((i / 7) % 253) as u8).collect();
    let (one, many) = (dir.join("one"), dir.join("many"));
    write_dataset(&one, &data, &[RECORD_BYTES], &WriteOptions::codec(Codec::Zstd))?;
    let opts = WriteOptions { shard_records: Some(SHARD_RECORDS), ..WriteOptions::codec(Codec::Zstd) };
    write_dataset(&many, &data, &[RECORD_BYTES], &opts)?;
    let (one, many) = (Dataset::open(&one)?, Dataset::open(&many)?);
    assert_eq!((one.shards(), many.shards()), (1, RECORDS / SHARD_RECORDS as usize));
    let sampler = Sampler::new(RECORDS as u64, BATCH, Mode::Iid, 7)?;
    // Warm: every page in memory, every shard open.
    gather_ns(&one, &sampler, 0..2000)?;
    gather_ns(&many, &sampler, 0..2000)?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let steps = round * 1000..(round + 1) * 1000;
        if round % 2 == 0 {
            a.push(gather_ns(&one, &sampler, steps.clone())?);
            b.push(gather_ns(&many, &sampler, steps)?);
        } else {
            b.push(gather_ns(&many, &sampler, steps.clone())?);
            a.push(gather_ns(&one, &sampler, steps)?);
        }
    }
    let ratios: Vec<f64> = a.iter().zip(&b).map(|(x, y)| y / x).collect();
    println!(
        "gather: {BATCH} random {RECORD_BYTES}-byte zstd records of {RECORDS}: one store {:.1} ns/record, {} shards {:.1} ns/record; \
         sharded / one, median of {ROUNDS} alternating rounds: {:.3}x (rounds {:.3}..{:.3})",
        median(a.clone()),
        many.shards(),
        median(b.clone()),
        median(ratios.clone()),
        ratios.iter().copied().fold(f64::MAX, f64::min),
        ratios.iter().copied().fold(0.0, f64::max),
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp;
    let dir = match std::env::var_os("LOADERX_BENCH_DIR") {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    scale(&dir)?;
    gather(&dir)?;
    Ok(())
}
