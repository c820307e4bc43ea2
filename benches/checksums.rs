//! What checking every record against its checksum (`sums.zr`) costs a
//! gather, the figures `Options::verify_reads`' default is chosen from:
//! warm gathers (the mapped path, pages in memory) with `VerifyReads::Never`
//! against `Always`, and cold gathers (every file of the store evicted
//! with `POSIX_FADV_DONTNEED` first: chunks, table and `sums.zr`) with
//! `Never` against `Device`, on the batched path through the page cache
//! ("cold") and past it (`ReadMode::Direct`, "direct"), on three kinds of
//! record: raw 64 KiB (images), raw 4 KiB (token arrays, small features)
//! and zstd 16 KiB. The first line compares the store's CRC-32C with the
//! `crc32c` crate's.
//!
//! ```text
//! cargo bench -p loaderx --bench checksums -- [--rounds 7] [--mib 256]
//! ```
//!
//! Each measurement runs in a fresh process (this binary again, `--one`)
//! that opens the store, as a user's script does; the sides alternate
//! within a round and their order rotates from round to round. Prints each
//! side's median throughput and the median and range of the per-round
//! ratios of the checking side to `Never`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use loaderx::{Codec, Options, ReadMode, VerifyReads, Zrecord};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// (name, record bytes, codec).
const KINDS: [(&str, usize, Codec); 3] =
    [("raw-64k", 64 << 10, Codec::Raw), ("raw-4k", 4 << 10, Codec::Raw), ("zstd-16k", 16 << 10, Codec::Zstd)];
/// Records per gather.
const BATCH: usize = 64;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).filter(|a| a != "--bench").collect();
    if args.first().map(String::as_str) == Some("--one") {
        return one(&args[1..]);
    }
    let (mut rounds, mut mib) = (7usize, 256usize);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--rounds" => rounds = value.parse()?,
            "--mib" => mib = value.parse()?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    // On the disk, not tmpfs: the cold side reads from the device.
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    println!("{rounds} rounds, {mib} MiB per store, {BATCH} records per gather, a fresh process per measurement");
    crc_speed();
    for (name, bytes, codec) in KINDS {
        let dir = root.path().join(name);
        build(&dir, bytes, codec, mib)?;
        for (temp, check) in [("warm", "always"), ("cold", "device"), ("direct", "device")] {
            let mut rates: [Vec<f64>; 2] = Default::default();
            for round in 0..rounds {
                for k in 0..2 {
                    let side = (round + k) % 2;
                    let verify = if side == 0 { "never" } else { check };
                    rates[side].push(measure(&dir, bytes, temp, verify)?);
                }
            }
            report(name, temp, check, &rates);
        }
    }
    Ok(())
}

/// The CRC-32C the store takes (`crc-fast`'s CRC-32/ISCSI, which
/// `src/store/sums.rs` calls) beside the `crc32c` crate's hardware path
/// (the crc32 instruction), over 64 KiB pieces in cache, alternating.
fn crc_speed() {
    let piece: Vec<u8> = (0..64 << 10).map(|i| (i * 7 % 251) as u8).collect();
    let passes = 4 << 10; // 256 MiB a side a round
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut sums = [0u32; 2];
    for round in 0..6 {
        for side in [round % 2, 1 - round % 2] {
            let start = Instant::now();
            for pass in 0..passes {
                let piece = std::hint::black_box(&piece[..]);
                let crc = if side == 0 { crc_fast::crc32_iscsi(piece) } else { crc32c::crc32c(piece) };
                sums[side] = sums[side].wrapping_add(crc ^ pass);
            }
            let gb = (passes as usize * piece.len()) as f64 / 1e9;
            rates[side].push(gb / start.elapsed().as_secs_f64());
        }
    }
    assert_eq!(sums[0], sums[1], "the two CRCs differ");
    let [store, crate_] = rates.map(median);
    println!(
        "crc32c: the store's {store:.1} GB/s, the crc32c crate's {crate_:.1} GB/s, {:.2}x (64 KiB pieces in cache)",
        store / crate_
    );
}

/// A store of `mib` MiB of `bytes`-byte records (mildly compressible).
fn build(dir: &Path, bytes: usize, codec: Codec, mib: usize) -> Res<()> {
    let n = (mib << 20) / bytes;
    let store = Zrecord::open(dir)?;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let src: Vec<u8> = (0..n * bytes)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (i as u8 / 8).wrapping_add((x % 8) as u8)
        })
        .collect();
    store.append(&src, n, bytes, codec)?;
    store.sync()?;
    Ok(())
}

/// One measurement in a fresh process: MB/s.
fn measure(dir: &Path, bytes: usize, temp: &str, verify: &str) -> Res<f64> {
    let out = Command::new(std::env::current_exe()?)
        .args(["--one", &dir.to_string_lossy(), &bytes.to_string(), temp, verify])
        .output()?;
    if !out.status.success() {
        return Err(format!("measurement failed: {}", String::from_utf8_lossy(&out.stderr)).into());
    }
    Ok(String::from_utf8(out.stdout)?.trim().parse()?)
}

/// The child: `DIR BYTES warm|cold|direct never|device|always`; prints MB/s.
fn one(args: &[String]) -> Res<()> {
    let [dir, bytes, temp, verify] = args else { return Err("--one DIR BYTES TEMP VERIFY".into()) };
    let (dir, bytes) = (PathBuf::from(dir), bytes.parse::<usize>()?);
    let verify_reads = match verify.as_str() {
        "never" => VerifyReads::Never,
        "device" => VerifyReads::Device,
        _ => VerifyReads::Always,
    };
    let read_mode = match temp.as_str() {
        "warm" => ReadMode::Mapped,
        "cold" => ReadMode::Batched,
        _ => ReadMode::Direct,
    };
    let options = Options { read_only: true, read_mode, verify_reads, ..Options::default() };
    let store = Zrecord::open_with(&dir, options)?;
    let n = store.len() as u64;
    let mut out = vec![0u8; BATCH * bytes];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut indices = || -> Vec<u64> {
        (0..BATCH)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x % n
            })
            .collect()
    };
    let gathers = if temp == "warm" {
        // Every page in memory first; then ten passes' worth of gathers.
        let all: Vec<u64> = (0..n).collect();
        for part in all.chunks(BATCH) {
            store.gather(part, &mut out[..part.len() * bytes], bytes)?;
        }
        (10 * n as usize).div_ceil(BATCH)
    } else {
        // The whole store cold, as a user meets it: the chunk files, the
        // table and `sums.zr`, which only the checked side reads.
        for entry in std::fs::read_dir(&dir)?.filter_map(|e| e.ok()) {
            if entry.file_type()?.is_file() {
                loaderx::io::real::evict_page_cache(&entry.path())?;
            }
        }
        // A quarter of the store, so that few records are read twice.
        (n as usize / 4).div_ceil(BATCH)
    };
    let start = Instant::now();
    for _ in 0..gathers {
        store.gather(&indices(), &mut out, bytes)?;
    }
    let seconds = start.elapsed().as_secs_f64();
    println!("{}", (gathers * BATCH * bytes) as f64 / seconds / 1e6);
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Each side's median MB/s, and the checking side's per-round ratio to `never`.
fn report(name: &str, temp: &str, check: &str, rates: &[Vec<f64>; 2]) {
    let ratios: Vec<f64> = rates[1].iter().zip(&rates[0]).map(|(c, n)| c / n).collect();
    let (lo, hi) = ratios.iter().fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
    println!(
        "{name:8} {temp:6}: never {:8.0} MB/s, {check} {:8.0} MB/s, {check}/never median {:.3} (range {lo:.3} to {hi:.3})",
        median(rates[0].clone()),
        median(rates[1].clone()),
        median(ratios),
    );
}
