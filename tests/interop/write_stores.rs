//! The writer half of the interop test (`tests/interop/run.sh`): writes
//! stores with this crate for the reference package (loaderx 0.7.3) to read.
//!
//! Usage: `cargo run --release --example interop_write -- OUTDIR`
//!
//! Writes `OUTDIR/stores/NAME/` (a store) and, outside the store directory,
//! `OUTDIR/expected/NAME.bin` (every record's bytes, back to back, in index
//! order), `OUTDIR/expected/NAME.lens` (one record length per line) and
//! `OUTDIR/expected/NAME.stats` (this crate's `records`, `live_bytes` and
//! `chunk_bytes`, which the reference's `stats()` must repeat). The
//! expected bytes come from an in-memory model of the store (a `Vec` of
//! records, deletes applied as swap-with-last in descending order), never
//! from reading the store back, so a bug in this crate cannot hide itself.
//! Before writing the sidecars the store is also read back with this crate
//! and compared with the model.
//!
//! Zero-length records: the reference 0.7.3 refuses to *write* them
//! (`reference-behaviour.md`), but reads them; the stores `zero_len_raw` and
//! `zero_len_zstd` check that it reads what this crate writes.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use loaderx::{Codec, Zrecord, default_dict_size};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// xorshift64*: deterministic test data without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A smooth float32 signal (compresses well, like image rows): `n` floats.
fn smooth_f32(rng: &mut Rng, n: usize) -> Vec<u8> {
    let phase = rng.below(1000) as f32 / 100.0;
    let freq = 1.0 + rng.below(8) as f32;
    let scale = (1 + rng.below(4)) as f32 / 4.0;
    (0..n)
        .flat_map(|i| {
            let x = i as f32 / n as f32;
            // Quantised, as real sensor or pixel data is.
            let v = ((x * freq * std::f32::consts::TAU + phase).sin() * scale * 64.0).round() / 64.0;
            v.to_le_bytes()
        })
        .collect()
}

/// A token sequence: little-endian i32 from a small vocabulary with
/// recurring phrases (what a dictionary captures).
fn tokens(rng: &mut Rng, count: usize) -> Vec<u8> {
    const PHRASES: [&[i32]; 4] =
        [&[101, 2023, 2003, 1037], &[7592, 2088, 999], &[1996, 3899, 1997, 1996, 2047], &[102]];
    let mut out = Vec::with_capacity(count * 4);
    while out.len() < count * 4 {
        if rng.below(3) == 0 {
            out.extend_from_slice(&(rng.below(30000) as i32).to_le_bytes());
        } else {
            for t in PHRASES[rng.below(PHRASES.len() as u64) as usize] {
                out.extend_from_slice(&t.to_le_bytes());
            }
        }
    }
    out.truncate(count * 4);
    out
}

/// A store and the model of what it holds.
struct Written {
    name: &'static str,
    store: Zrecord,
    model: Vec<Vec<u8>>,
}

impl Written {
    fn new(root: &Path, name: &'static str) -> Result<Written> {
        let dir = root.join("stores").join(name);
        Ok(Written { name, store: Zrecord::open(&dir)?, model: Vec::new() })
    }

    /// Appends equal-size records with one `append` call.
    fn append_fixed(&mut self, records: &[Vec<u8>], codec: Codec) -> Result<()> {
        let item_len = records[0].len();
        assert!(records.iter().all(|r| r.len() == item_len));
        let src: Vec<u8> = records.concat();
        let first = self.store.append(&src, records.len(), item_len, codec)?;
        assert_eq!(first, self.model.len() as u64, "{}: append returned the wrong first index", self.name);
        self.model.extend_from_slice(records);
        Ok(())
    }

    /// Appends variable-size records with one `append_var` call (given out
    /// of order in `src`, so the offsets are not simply increasing).
    fn append_var(&mut self, records: &[Vec<u8>], codec: Codec) -> Result<()> {
        let mut src = Vec::new();
        let mut offsets = vec![0u64; records.len()];
        for k in (0..records.len()).rev() {
            offsets[k] = src.len() as u64;
            src.extend_from_slice(&records[k]);
        }
        let lens: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
        let first = self.store.append_var(&src, &offsets, &lens, codec)?;
        assert_eq!(first, self.model.len() as u64, "{}: append_var returned the wrong first index", self.name);
        self.model.extend_from_slice(records);
        Ok(())
    }

    /// Trains the store's dictionary on `samples`.
    fn train(&mut self, samples: &[Vec<u8>]) -> Result<usize> {
        let sizes: Vec<usize> = samples.iter().map(Vec::len).collect();
        let flat = samples.concat();
        Ok(self.store.train_dict(&flat, &sizes, default_dict_size(flat.len()))?)
    }

    /// Deletes `indices` from store and model (swap-with-last, descending).
    fn delete(&mut self, indices: &[u64]) -> Result<()> {
        self.store.delete(indices)?;
        let mut doomed = indices.to_vec();
        doomed.sort_unstable_by(|a, b| b.cmp(a));
        doomed.dedup();
        for d in doomed {
            self.model.swap_remove(d as usize);
        }
        Ok(())
    }

    /// Checks the store against the model with this crate, then writes the
    /// sidecar files from the model.
    fn finish(self, root: &Path) -> Result<()> {
        let n = self.model.len();
        assert_eq!(self.store.len() as usize, n, "{}: length", self.name);
        let indices: Vec<u64> = (0..n as u64).collect();
        let mut lens = vec![0u32; n];
        self.store.lengths(&indices, &mut lens)?;
        let want_lens: Vec<u32> = self.model.iter().map(|r| r.len() as u32).collect();
        assert_eq!(lens, want_lens, "{}: lengths differ from the model", self.name);
        let mut offsets = Vec::with_capacity(n);
        let mut at = 0u64;
        for &l in &lens {
            offsets.push(at);
            at += u64::from(l);
        }
        let mut got = vec![0u8; at as usize];
        self.store.gather_var(&indices, &mut got, &offsets, &lens)?;
        let want = self.model.concat();
        assert!(got == want, "{}: this crate reads back different bytes than it wrote", self.name);

        let stats = self.store.stats()?;
        let expected = root.join("expected");
        fs::write(expected.join(format!("{}.bin", self.name)), &want)?;
        let lines: String = want_lens.iter().map(|l| format!("{l}\n")).collect();
        fs::write(expected.join(format!("{}.lens", self.name)), lines)?;
        let stats_line = format!(
            "records={} live_bytes={} chunk_bytes={}\n",
            stats.records, stats.live_bytes, stats.chunk_file_bytes
        );
        fs::write(expected.join(format!("{}.stats", self.name)), stats_line)?;
        println!(
            "wrote {:<22} {:>5} records, {:>8} logical bytes, codecs raw/zstd/dict {:?}, dict {:?}",
            self.name, n, stats.logical_bytes, stats.codec_records, stats.dict_bytes
        );
        Ok(())
    }
}

fn write_all(root: &Path) -> Result<usize> {
    fs::create_dir_all(root.join("stores"))?;
    fs::create_dir_all(root.join("expected"))?;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut count = 0;

    // Fixed-size float32 records (64 floats), one store per codec.
    let fixed: Vec<Vec<u8>> = (0..600).map(|_| smooth_f32(&mut rng, 64)).collect();
    for (name, codec) in [("fixed_raw", Codec::Raw), ("fixed_zstd", Codec::Zstd)] {
        let mut w = Written::new(root, name)?;
        // Two appends, the second with some incompressible records mixed in
        // (stored raw inside a zstd append).
        w.append_fixed(&fixed[..400], codec)?;
        let mut mixed = fixed[400..].to_vec();
        for r in mixed.iter_mut().step_by(7) {
            let n = r.len();
            *r = rng.bytes(n);
        }
        w.append_fixed(&mixed, codec)?;
        w.finish(root)?;
        count += 1;
    }
    {
        let mut w = Written::new(root, "fixed_zstd_dict")?;
        w.train(&fixed)?;
        w.append_fixed(&fixed, Codec::ZstdDict)?;
        // Plain zstd records in a store that has a dictionary.
        w.append_fixed(&fixed[..50], Codec::Zstd)?;
        w.finish(root)?;
        count += 1;
    }

    // Variable-size records: token sequences of 1..=700 tokens, plus a few
    // large ones (up to the 1 MiB limit) and some incompressible ones.
    let var: Vec<Vec<u8>> = (0..500)
        .map(|k| match k % 97 {
            13 => {
                let n = 1 + rng.below(3000) as usize;
                rng.bytes(n)
            }
            41 => {
                let n = 1 + rng.below(60_000) as usize;
                smooth_f32(&mut rng, n)
            }
            _ => {
                let n = 1 + rng.below(700) as usize;
                tokens(&mut rng, n)
            }
        })
        .collect();
    let biggest = smooth_f32(&mut rng, 1 << 18); // exactly 1 MiB
    for (name, codec) in [("var_raw", Codec::Raw), ("var_zstd", Codec::Zstd)] {
        let mut w = Written::new(root, name)?;
        w.append_var(&var[..300], codec)?;
        w.append_var(std::slice::from_ref(&biggest), codec)?;
        w.append_var(&var[300..], codec)?;
        w.finish(root)?;
        count += 1;
    }
    {
        let mut w = Written::new(root, "var_zstd_dict")?;
        w.train(&var[..300])?;
        w.append_var(&var, Codec::ZstdDict)?;
        w.finish(root)?;
        count += 1;
    }

    // Delete (duplicates, the last index, index 0) then compact, then append
    // more: the frontier after compaction must be where the reference expects.
    {
        let mut w = Written::new(root, "deleted_var_zstd")?;
        w.append_var(&var, Codec::Zstd)?;
        w.delete(&[0, 5, 5, 499, 123, 498, 200, 0, 250, 251, 252])?;
        w.store.compact()?;
        w.append_var(&var[..40], Codec::Zstd)?;
        w.delete(&[w.model.len() as u64 - 1, 17, 17])?;
        w.store.compact()?;
        w.finish(root)?;
        count += 1;
    }
    {
        let mut w = Written::new(root, "deleted_fixed_dict")?;
        w.train(&fixed)?;
        w.append_fixed(&fixed, Codec::ZstdDict)?;
        let last = w.model.len() as u64 - 1;
        w.delete(&[last, last, 1, 2, 3, 300, 599 - 1, 42])?;
        w.store.compact()?;
        w.finish(root)?;
        count += 1;
    }

    // Zero-length records, which the reference refuses to write but reads.
    // Record 0 is empty, so its entry is the all-zero-but-`reserved` one.
    for (name, codec) in [("zero_len_raw", Codec::Raw), ("zero_len_zstd", Codec::Zstd)] {
        let mut w = Written::new(root, name)?;
        let records: Vec<Vec<u8>> =
            (0..30).map(|k| if k % 3 == 0 { Vec::new() } else { tokens(&mut rng, k * 5) }).collect();
        w.append_var(&records, codec)?;
        w.append_fixed(&[Vec::new(), Vec::new()], codec)?;
        w.finish(root)?;
        count += 1;
    }

    // A store that was created and never written.
    Written::new(root, "empty")?.finish(root)?;
    count += 1;
    Ok(count)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let [_, out] = &args[..] else {
        eprintln!("usage: interop_write OUTDIR");
        return ExitCode::from(2);
    };
    let root = PathBuf::from(out);
    match write_all(&root) {
        Ok(n) => {
            println!("interop_write: {n} stores written to {}", root.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("interop_write: {e}");
            ExitCode::FAILURE
        }
    }
}
