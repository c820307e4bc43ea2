//! The dataset half of the interop test (`tests/interop/run.sh`): datasets
//! (a store plus `schema.json`) both ways between this crate and the
//! reference package loaderx 0.7.3.
//!
//! `cargo run --release --example interop_datasets -- write OUTDIR`
//!     writes datasets with `write_dataset` / `write_dataset_npy` /
//!     `write_ragged` into `OUTDIR/datasets/NAME`, and the arrays they hold,
//!     as `.npy` files written by npyz, outside them:
//!     `OUTDIR/expected/NAME.npy` (fixed-shape: the whole array), or
//!     `NAME.values.npy` and `NAME.splits.npy` (ragged: every row, and the
//!     int64 row splits). `reference_datasets.py read` opens them with the
//!     reference's `Dataset` / `RaggedDataset`.
//! `cargo run --release --example interop_datasets -- check INDIR`
//!     opens every dataset the reference wrote (`reference_datasets.py
//!     write`) with [`Dataset`] / [`RaggedDataset`] and compares it with the
//!     NumPy arrays it was written from (same layout of sidecars), and checks
//!     that its `schema.json` is byte for byte what this crate writes for it;
//!     then reads the header of every `.npy` file NumPy wrote into
//!     `INDIR/npy/` with [`read_npy_header`] and compares it with what
//!     NumPy's reader says (`expect.json`: dtype, shape, data offset, or a
//!     word of the reason to refuse it), and converts each readable one with
//!     [`write_dataset_npy`], whose records must be the file's data.
//!
//! Prints `ok NAME ...` or `FAIL NAME: ...` per dataset; exits 1 on a mismatch.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use loaderx::Codec;
use loaderx::dataset::{
    DType, Dataset, RaggedDataset, Schema, WriteOptions, pad_bytes, read_npy_header, write_dataset, write_dataset_npy,
    write_ragged,
};
use npyz::WriterBuilder;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// An `.npy` file's dtype string, shape and raw data bytes.
fn read_npy(path: &Path) -> Result<(String, Vec<usize>, Vec<u8>)> {
    let npy = npyz::NpyFile::new(std::io::BufReader::new(fs::File::open(path)?))?;
    let dtype = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => return Err(format!("{}: unexpected dtype {}", path.display(), other.descr()).into()),
    };
    let shape = npy.shape().iter().map(|&d| d as usize).collect();
    let mut bytes = Vec::new();
    npy.into_inner().read_to_end(&mut bytes)?;
    Ok((dtype, shape, bytes))
}

fn write_npy<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[usize], data: &[T]) -> Result<()> {
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let file = std::io::BufWriter::new(fs::File::create(path)?);
    let mut w = npyz::WriteOptions::new().default_dtype().shape(&shape).writer(file).begin_nd()?;
    w.extend(data.iter().copied())?;
    w.finish()?;
    Ok(())
}

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
}

fn smooth(n: usize, per: usize, rng: &mut Rng) -> Vec<f32> {
    let mut out = Vec::with_capacity(n * per);
    for _ in 0..n {
        let (f, p) = (1.0 + rng.below(8) as f32, rng.below(100) as f32 / 10.0);
        out.extend(
            (0..per).map(|i| ((i as f32 / per as f32 * f * std::f32::consts::TAU + p).sin() * 64.0).round() / 64.0),
        );
    }
    out
}

fn seqs(n: usize, max_rows: u64, row: usize, zero_every: usize, rng: &mut Rng) -> Vec<Vec<i32>> {
    (0..n)
        .map(|k| {
            let rows = if zero_every > 0 && k % zero_every == 0 { 0 } else { 1 + rng.below(max_rows) as usize };
            (0..rows * row).map(|_| rng.below(50) as i32).collect()
        })
        .collect()
}

fn write_all(out: &Path) -> Result<usize> {
    let (ds, exp) = (out.join("datasets"), out.join("expected"));
    fs::create_dir_all(&ds)?;
    fs::create_dir_all(&exp)?;
    let mut rng = Rng(0x0DDB_1A5E_5BAD_5EED);
    let mut count = 0;
    let fixed = smooth(700, 12, &mut rng);
    for codec in [Codec::Zstd, Codec::Raw, Codec::ZstdDict] {
        let name = format!("ours_f32_{}", codec.name());
        write_dataset(ds.join(&name), &fixed, &[4, 3], &WriteOptions::codec(codec))?;
        write_npy(&exp.join(format!("{name}.npy")), &[700, 4, 3], &fixed)?;
        count += 1;
    }
    // Appended in two calls.
    let more = smooth(300, 12, &mut rng);
    write_dataset(ds.join("ours_f32_appended"), &fixed, &[12], &WriteOptions::default())?;
    write_dataset(ds.join("ours_f32_appended"), &more, &[12], &WriteOptions::default())?;
    write_npy(&exp.join("ours_f32_appended.npy"), &[1000, 12], &[fixed.clone(), more].concat())?;
    count += 1;
    // Scalars, and a .npy converted (streamed, 7 records per call).
    let labels: Vec<i64> = (0..500).map(|_| rng.below(10) as i64 - 3).collect();
    write_dataset(ds.join("ours_labels_i8"), &labels, &[], &WriteOptions::default())?;
    write_npy(&exp.join("ours_labels_i8.npy"), &[500], &labels)?;
    count += 1;
    let pixels: Vec<u8> = (0..60 * 8 * 8 * 3).map(|_| rng.below(256) as u8).collect();
    let source = out.join("pixels-source.npy");
    write_npy(&source, &[60, 8, 8, 3], &pixels)?;
    let opts = WriteOptions { chunk_bytes: 7 * 192, ..WriteOptions::default() };
    write_dataset_npy(ds.join("ours_u1_from_npy"), &source, &opts)?;
    fs::copy(&source, exp.join("ours_u1_from_npy.npy"))?;
    count += 1;
    // Ragged, with zero-length records (which the reference reads but cannot write).
    for (name, row_shape, row, codec) in
        [("ours_ragged_i4", vec![], 1usize, Codec::Zstd), ("ours_ragged_i4x3_dict", vec![3usize], 3, Codec::ZstdDict)]
    {
        let records = seqs(400, 200, row, 9, &mut rng);
        write_ragged(ds.join(name), &row_shape, &records, &WriteOptions::codec(codec))?;
        let values: Vec<i32> = records.concat();
        let mut splits = vec![0i64];
        for r in &records {
            splits.push(splits.last().unwrap() + (r.len() / row) as i64);
        }
        let mut shape = vec![values.len() / row];
        shape.extend(&row_shape);
        write_npy(&exp.join(format!("{name}.values.npy")), &shape, &values)?;
        write_npy(&exp.join(format!("{name}.splits.npy")), &[splits.len()], &splits)?;
        count += 1;
    }
    Ok(count)
}

/// Checks one reference-written dataset against its sidecars.
fn check_one(root: &Path, name: &str) -> Result<String> {
    let path = root.join("datasets").join(name);
    let exp = root.join("expected");
    let text = fs::read_to_string(path.join("schema.json"))?;
    let schema = Schema::parse(&text, &path)?;
    if schema.to_json() != text {
        return Err(format!("schema.json is not byte for byte what this crate writes for it:\n{text}").into());
    }
    if !schema.is_ragged() {
        let (dtype, shape, bytes) = read_npy(&exp.join(format!("{name}.npy")))?;
        let ds = Dataset::open(&path)?;
        if ds.dtype() != DType::parse(&dtype)? || ds.shape() != &shape[1..] || ds.len() != shape[0] as u64 {
            return Err(
                format!("opened as {}{:?} x {}, numpy has {dtype}{shape:?}", ds.dtype(), ds.shape(), ds.len()).into()
            );
        }
        let n = shape[0] as u64;
        let forward: Vec<u64> = (0..n).collect();
        if ds.gather(&forward)?.as_bytes() != &bytes[..] {
            return Err("gather of every record differs from numpy's array".into());
        }
        let rb = ds.row_bytes();
        let backward: Vec<u64> = (0..n).rev().collect();
        let got = ds.gather(&backward)?;
        for (k, &i) in backward.iter().enumerate() {
            if got.record(k) != Some(&bytes[i as usize * rb..][..rb]) {
                return Err(format!("record {i} differs in a descending gather").into());
            }
        }
        return Ok(format!("{n} records {}{:?}, {}, schema byte-exact", ds.dtype(), ds.shape(), schema.codec.name()));
    }
    let (_, vshape, values) = read_npy(&exp.join(format!("{name}.values.npy")))?;
    let (_, _, splits) = read_npy(&exp.join(format!("{name}.splits.npy")))?;
    let splits: Vec<u64> = splits.chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u64).collect();
    let rds = RaggedDataset::open(&path)?;
    let n = splits.len() as u64 - 1;
    if rds.len() != n || rds.item_shape() != &vshape[1..] {
        return Err(format!(
            "opened as {} records of {:?} rows, numpy has {n} of {:?}",
            rds.len(),
            rds.item_shape(),
            &vshape[1..]
        )
        .into());
    }
    let all: Vec<u64> = (0..n).collect();
    let packed = rds.gather(&all)?;
    if packed.values.as_bytes() != &values[..] || packed.row_splits != splits {
        return Err("packed gather differs from numpy's values / row splits".into());
    }
    let zero = vec![0u8; rds.dtype().itemsize()];
    let padded = rds.gather_padded_bytes(&all, None, &zero)?;
    if padded != pad_bytes(&packed.values, &packed.row_splits, None, &zero)? {
        return Err("the fused padded gather differs from pad(gather)".into());
    }
    Ok(format!("{n} ragged records {}{:?}, {}, schema byte-exact", rds.dtype(), rds.item_shape(), schema.codec.name()))
}

fn check_all(root: &Path) -> Result<usize> {
    let mut names: Vec<String> = fs::read_dir(root.join("datasets"))?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_>>()?;
    names.sort();
    let mut failed = 0;
    for name in &names {
        match check_one(root, name) {
            Ok(summary) => println!("ok   {name:<22} {summary}"),
            Err(e) => {
                failed += 1;
                println!("FAIL {name:<22} {e}");
            }
        }
    }
    let (files, npy_failed) = check_npy_headers(&root.join("npy"))?;
    if failed + npy_failed > 0 {
        return Err(format!("{failed} of {} datasets, {npy_failed} of {files} .npy files differ", names.len()).into());
    }
    Ok(names.len())
}

/// Every `.npy` file NumPy wrote into `dir`, read as `expect.json` says
/// NumPy reads it; prints `ok`/`FAIL` per file; (files, failures).
fn check_npy_headers(dir: &Path) -> Result<(usize, usize)> {
    let expect: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&fs::read_to_string(dir.join("expect.json"))?)?;
    let mut failed = 0;
    for (file, want) in &expect {
        match check_npy_header(&dir.join(file), want) {
            Ok(summary) => println!("ok   {file:<22} {summary}"),
            Err(e) => {
                failed += 1;
                println!("FAIL {file:<22} {e}");
            }
        }
    }
    Ok((expect.len(), failed))
}

fn check_npy_header(path: &Path, want: &serde_json::Value) -> Result<String> {
    let got = read_npy_header(path);
    if let Some(reason) = want["refused"].as_str() {
        return match got {
            Err(e) if e.to_string().contains(reason) => Ok(format!("refused: {e}")),
            other => Err(format!("expected a refusal naming {reason:?}, got {other:?}").into()),
        };
    }
    let header = got?;
    let shape: Vec<u64> = want["shape"].as_array().ok_or("no shape")?.iter().filter_map(|d| d.as_u64()).collect();
    let ours: Vec<u64> = std::iter::once(header.count).chain(header.record_shape.iter().map(|&d| d as u64)).collect();
    let descr = want["descr"].as_str().ok_or("no descr")?;
    if header.dtype != DType::parse(descr)? || ours != shape || Some(header.data_offset) != want["offset"].as_u64() {
        return Err(format!("read as {header:?}; NumPy: {want}").into());
    }
    let out = tempfile::tempdir()?;
    let count = write_dataset_npy(out.path().join("ds"), path, &WriteOptions::default())?;
    let ds = Dataset::open(out.path().join("ds"))?;
    let all: Vec<u64> = (0..count).collect();
    let data = &fs::read(path)?[header.data_offset as usize..];
    if count != header.count || ds.gather(&all)?.as_bytes() != data {
        return Err("the converted records differ from the file's data".into());
    }
    Ok(format!("{descr}{shape:?} at byte {}, converted", header.data_offset))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let result = match &args[1..] {
        [cmd, dir] if cmd == "write" => write_all(&PathBuf::from(dir)).map(|n| format!("{n} datasets written")),
        [cmd, dir] if cmd == "check" => check_all(&PathBuf::from(dir)).map(|n| format!("{n} datasets checked")),
        _ => {
            eprintln!("usage: interop_datasets write OUTDIR | check INDIR");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(summary) => {
            println!("interop_datasets: {summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("interop_datasets: {e}");
            ExitCode::FAILURE
        }
    }
}
