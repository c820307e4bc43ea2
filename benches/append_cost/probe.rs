//! One side of `benches/append_cost/run.sh`: appends `MIB` MiB of
//! `BYTES`-byte records with `CODEC` into a new store at `DIR`, in calls of
//! 256 records (each durable when it returns), and prints MB/s. Uses only
//! the API that every version compared has, so the same source builds
//! against each.
//!
//! ```text
//! probe DIR MIB BYTES raw|zstd
//! ```

use std::time::Instant;

use loaderx::{Codec, Zrecord};

const CALL: usize = 256;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [dir, mib, bytes, codec] = &args[..] else { return Err("probe DIR MIB BYTES raw|zstd".into()) };
    let (mib, bytes): (usize, usize) = (mib.parse()?, bytes.parse()?);
    let codec = if codec == "raw" { Codec::Raw } else { Codec::Zstd };
    let n = (mib << 20) / bytes;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    // Mildly compressible: zstd has work to do, as on real features.
    let src: Vec<u8> = (0..CALL * bytes)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (i as u8 / 8).wrapping_add((x % 8) as u8)
        })
        .collect();
    let store = Zrecord::open(dir)?;
    let start = Instant::now();
    let mut done = 0;
    while done < n {
        let k = CALL.min(n - done);
        store.append(&src, k, bytes, codec)?;
        done += k;
    }
    let secs = start.elapsed().as_secs_f64();
    println!("{:.1}", (n * bytes) as f64 / secs / 1e6);
    Ok(())
}
