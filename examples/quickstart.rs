//! The main job: write a store, gather random batches, print what happened.
//!
//! `cargo run --release --example quickstart [-- DIR]` writes 20,000 records
//! of 12,288 bytes (mildly compressible float data, the reference README's
//! workload) into DIR (a temporary directory by default; given a DIR, the
//! store is left there), then gathers 500 random batches of 256 and checks
//! every byte of the last one.

use std::time::Instant;

use loaderx::{Codec, Zrecord};

const RECORDS: usize = 20_000;
const RECORD_BYTES: usize = 12_288;
const BATCH: usize = 256;
const BATCHES: usize = 500;

/// Record `k`: 3,072 float32 of a smooth signal with noise in the low bits.
fn record(k: usize) -> Vec<u8> {
    let mut x = (k as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..RECORD_BYTES / 4)
        .flat_map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = ((i as f32) * 0.01 + k as f32).sin() + (x % 1000) as f32 * 1e-6;
            v.to_le_bytes()
        })
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let temp;
    let dir = match std::env::args().nth(1) {
        Some(dir) => std::path::PathBuf::from(dir),
        None => {
            temp = tempfile::tempdir()?;
            temp.path().join("train_data.zr")
        }
    };
    let mib = |bytes: usize, secs: f64| bytes as f64 / (1 << 20) as f64 / secs;

    let data: Vec<u8> = (0..RECORDS).flat_map(record).collect();
    let store = Zrecord::open(&dir)?;
    let start = Instant::now();
    let first = store.append(&data, RECORDS, RECORD_BYTES, Codec::Zstd)?;
    let secs = start.elapsed().as_secs_f64();
    let stats = store.stats()?;
    println!("store     {}", dir.display());
    println!(
        "append    {RECORDS} records x {RECORD_BYTES} B from index {first}, zstd: {:.0} MiB/s, ratio {:.2}x",
        mib(data.len(), secs),
        stats.logical_bytes as f64 / stats.live_bytes as f64
    );

    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut batch = vec![0u8; BATCH * RECORD_BYTES];
    let mut indices = vec![0u64; BATCH];
    let start = Instant::now();
    for _ in 0..BATCHES {
        for index in &mut indices {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            *index = rng % store.len() as u64;
        }
        store.gather(&indices, &mut batch, RECORD_BYTES)?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "gather    {BATCHES} random batches of {BATCH}: {:.0} batches/s, {:.0} MiB/s",
        BATCHES as f64 / secs,
        mib(BATCHES * batch.len(), secs)
    );
    for (slot, &index) in batch.chunks(RECORD_BYTES).zip(&indices) {
        assert!(slot == &record(index as usize)[..], "record {index} differs");
    }
    println!("verified  the last batch, byte for byte");
    println!("stats     {stats:?}");
    Ok(())
}
