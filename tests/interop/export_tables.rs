//! The writer half of the pyarrow export check (`tests/interop/export_pyarrow.sh`):
//! a table of every column kind, exported as Parquet and Arrow IPC, for
//! `export_pyarrow.py` to read with pyarrow and compare with the values
//! it computes from the same formulas.
//!
//! `cargo run --release --features arrow --example export_tables -- OUTDIR`
//!     writes `OUTDIR/table` (40 rows) and exports it as `OUTDIR/t.parquet`
//!     and `OUTDIR/t.arrow`.
//!
//! Row `i`: `flag` `|b1` `i % 3 == 0`; `half` `<f2` `i / 4`; `be` `>i4`
//! `-1000 * i`; `img` `|u1` (2, 3) `(6 i + j) % 256`; `tokens` ragged `<i8`
//! `[i * 10 + j for j in range(i % 5)]`; `pts` ragged `<f4` (2,)
//! `[[i, -i]] * (i % 3)`; `blob` bytes `bytes([i]) * (i % 4)`; `text` utf8
//! `"é" * (i % 3)`.

use std::path::Path;

use loaderx::dataset::{DType, WriteOptions};
use loaderx::import::{ExportFormat, ExportOptions, export_file};
use loaderx::table::{ColumnSpec, Table, TableWriter, Values};

const ROWS: usize = 40;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).ok_or("usage: export_tables OUTDIR")?;
    let out = Path::new(&out);
    let dtype = |s| DType::parse(s).unwrap();
    let specs = [
        ColumnSpec::fixed("flag", dtype("|b1"), &[]),
        ColumnSpec::fixed("half", dtype("<f2"), &[]),
        ColumnSpec::fixed("be", dtype(">i4"), &[]),
        ColumnSpec::fixed("img", dtype("|u1"), &[2, 3]),
        ColumnSpec::ragged("tokens", dtype("<i8"), &[]),
        ColumnSpec::ragged("pts", dtype("<f4"), &[2]),
        ColumnSpec::bytes("blob"),
        ColumnSpec::utf8("text"),
    ];
    let rows = 0..ROWS;
    let flag: Vec<u8> = rows.clone().map(|i| u8::from(i % 3 == 0)).collect();
    // f16 of i / 4 for i < 40: exponent and mantissa by hand (exact).
    let half: Vec<u8> = rows.clone().flat_map(|i| f16_bits(i as f32 / 4.0).to_le_bytes()).collect();
    let be: Vec<u8> = rows.clone().flat_map(|i| (-1000 * i as i32).to_be_bytes()).collect();
    let img: Vec<u8> = rows.clone().flat_map(|i| (0..6).map(move |j| ((6 * i + j) % 256) as u8)).collect();
    let tokens: Vec<Vec<u8>> =
        rows.clone().map(|i| (0..i % 5).flat_map(|j| ((i * 10 + j) as i64).to_le_bytes()).collect()).collect();
    let pts: Vec<Vec<u8>> = rows
        .clone()
        .map(|i| (0..i % 3).flat_map(|_| [i as f32, -(i as f32)]).flat_map(f32::to_le_bytes).collect())
        .collect();
    let blob: Vec<Vec<u8>> = rows.clone().map(|i| vec![i as u8; i % 4]).collect();
    let text: Vec<Vec<u8>> = rows.clone().map(|i| "é".repeat(i % 3).into_bytes()).collect();
    let (tokens, pts, blob, text) = (as_items(&tokens), as_items(&pts), as_items(&blob), as_items(&text));
    let table_dir = out.join("table");
    let mut writer = TableWriter::create(&table_dir, &specs, &WriteOptions::default())?;
    writer.append(&[
        Values::Fixed(&flag),
        Values::Fixed(&half),
        Values::Fixed(&be),
        Values::Fixed(&img),
        Values::Items(&tokens),
        Values::Items(&pts),
        Values::Items(&blob),
        Values::Items(&text),
    ])?;
    writer.commit()?;
    drop(writer);
    let table = Table::open(&table_dir)?;
    let opts = ExportOptions { batch_rows: 16, ..ExportOptions::default() };
    for name in ["t.parquet", "t.arrow"] {
        let dest = out.join(name);
        export_file(&table, &dest, ExportFormat::of_path(&dest)?, &opts, &mut |_, _| {})?;
    }
    Ok(())
}

/// One byte string per row, as `Values::Items` takes them.
fn as_items(rows: &[Vec<u8>]) -> Vec<&[u8]> {
    rows.iter().map(Vec::as_slice).collect()
}

/// The IEEE half-precision bits of `x`, a non-negative multiple of 1/4 below 2048.
fn f16_bits(x: f32) -> u16 {
    if x == 0.0 {
        return 0;
    }
    let exp = x.log2().floor() as i32;
    let mantissa = ((x / 2f32.powi(exp) - 1.0) * 1024.0) as u16;
    (((exp + 15) as u16) << 10) | mantissa
}
