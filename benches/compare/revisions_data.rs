//! The stores `benches/compare/revisions.sh` measures: `DIR/raw.zr` and
//! `DIR/zstd.zr`, each 40,000 records of 3,072 `u8` (half compressible),
//! written as datasets so that `loaderx bench` runs its loader too.
//!
//! `cargo run --release --example revisions_data -- DIR`

use loaderx::Codec;
use loaderx::dataset::{WriteOptions, write_dataset};

const RECORDS: usize = 40_000;
const RECORD_BYTES: usize = 3072;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).ok_or("usage: revisions_data DIR")?);
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let data: Vec<u8> = (0..RECORDS * RECORD_BYTES)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if i % 2 == 0 { (i / RECORD_BYTES) as u8 } else { x as u8 }
        })
        .collect();
    for (name, codec) in [("raw.zr", Codec::Raw), ("zstd.zr", Codec::Zstd)] {
        let opts = WriteOptions { codec, ..WriteOptions::default() };
        write_dataset(dir.join(name), &data, &[RECORD_BYTES], &opts)?;
    }
    Ok(())
}
