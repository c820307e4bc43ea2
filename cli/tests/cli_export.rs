//! `loaderx export`: a table to Parquet and Arrow IPC, byte for byte the
//! file the library's `export_file` writes with the same options (whose
//! values `tests/export_roundtrip.rs` checks); the summary; refusals.

mod common;

use std::path::Path;

use common::*;
use loaderx::dataset::{DType, WriteOptions};
use loaderx::import::{ExportFormat, ExportOptions, ParquetCodec, export_file};
use loaderx::table::{ColumnSpec, Table, TableWriter, Values};

/// A table of 40 rows: a `<i8` label, a `<f4` (2, 2) tensor, ragged
/// `<i4` tokens and text.
fn write_table(path: &Path) {
    let _guard = exclusive();
    let dtype = |s| DType::parse(s).unwrap();
    let specs = [
        ColumnSpec::fixed("label", dtype("<i8"), &[]),
        ColumnSpec::fixed("x", dtype("<f4"), &[2, 2]),
        ColumnSpec::ragged("tokens", dtype("<i4"), &[]),
        ColumnSpec::utf8("text"),
    ];
    let mut writer = TableWriter::create(path, &specs, &WriteOptions::default()).unwrap();
    let label: Vec<u8> = (0..40i64).flat_map(|i| i.to_le_bytes()).collect();
    let x: Vec<u8> = (0..160).flat_map(|i| (i as f32 / 3.0).to_le_bytes()).collect();
    let tokens: Vec<Vec<u8>> = (0..40i32).map(|i| (0..i % 7).flat_map(|t| (t * i).to_le_bytes()).collect()).collect();
    let tokens: Vec<&[u8]> = tokens.iter().map(Vec::as_slice).collect();
    let text: Vec<String> = (0..40).map(|i| "ab".repeat(i % 3)).collect();
    let text: Vec<&[u8]> = text.iter().map(|t| t.as_bytes()).collect();
    writer.append(&[Values::Fixed(&label), Values::Fixed(&x), Values::Items(&tokens), Values::Items(&text)]).unwrap();
    writer.commit().unwrap();
}

/// The file the library writes for `opts` and `format`.
fn library_export(table: &Path, dest: &Path, format: ExportFormat, opts: &ExportOptions) -> Vec<u8> {
    export_file(&Table::open(table).unwrap(), dest, format, opts, &mut |_, _| {}).unwrap();
    std::fs::read(dest).unwrap()
}

#[test]
fn export_to_parquet_and_arrow() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t");
    write_table(&t);
    let pq = dir.path().join("out.parquet");
    let json = ok_json(&loaderx(&["export", path_str(&t), path_str(&pq), "--json"]));
    assert_eq!((json["rows"].as_u64(), json["columns"].as_u64()), (Some(40), Some(4)), "{json}");
    assert_eq!(json["format"], "parquet (zstd level 1)");
    let bytes = std::fs::read(&pq).unwrap();
    assert_eq!(json["bytes"].as_u64(), Some(bytes.len() as u64));
    assert!(bytes.starts_with(b"PAR1") && bytes.ends_with(b"PAR1"));
    assert!(!dir.path().join("out.parquet.tmp").exists());
    let opts = ExportOptions::default();
    let lib = library_export(&t, &dir.path().join("lib.parquet"), ExportFormat::of_path(&pq).unwrap(), &opts);
    assert_eq!(bytes, lib);

    let arrow = dir.path().join("out.arrow");
    let args = ["export", path_str(&t), path_str(&arrow), "--columns", "text,label", "--batch-rows", "7"];
    let text = ok(&loaderx(&args));
    assert!(text.contains("rows           40 of 2 columns\n"), "{text}");
    assert!(text.contains("(arrow ipc)"), "{text}");
    let bytes = std::fs::read(&arrow).unwrap();
    assert!(bytes.starts_with(b"ARROW1") && bytes.ends_with(b"ARROW1"));
    let opts = ExportOptions { columns: Some(vec!["text".into(), "label".into()]), batch_rows: 7, ..opts };
    assert_eq!(bytes, library_export(&t, &dir.path().join("lib.arrow"), ExportFormat::Ipc, &opts));

    let snappy = dir.path().join("s.parquet");
    let json = ok_json(&loaderx(&["export", path_str(&t), path_str(&snappy), "--compression", "snappy", "--json"]));
    assert_eq!(json["format"], "parquet (snappy)");
    let format = ExportFormat::Parquet(ParquetCodec::Snappy);
    let lib = library_export(&t, &dir.path().join("lib-s.parquet"), format, &ExportOptions::default());
    assert_eq!(std::fs::read(&snappy).unwrap(), lib);
}

#[test]
fn export_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t");
    write_table(&t);
    let out = |name: &str| dir.path().join(name);
    let run = |args: &[&str]| loaderx(args);
    assert_fails(&run(&["export", path_str(&t), path_str(&out("x.csv"))]), "name the output .parquet or .arrow");
    let bad_column = run(&["export", path_str(&t), path_str(&out("x.parquet")), "--columns", "label,nope"]);
    assert_fails(&bad_column, "no column \"nope\"");
    let bad_codec = run(&["export", path_str(&t), path_str(&out("x.parquet")), "--compression", "brotli"]);
    assert_fails(&bad_codec, "unknown Parquet codec \"brotli\"");
    let ipc_codec = run(&["export", path_str(&t), path_str(&out("x.arrow")), "--compression", "zstd"]);
    assert_fails(&ipc_codec, "--compression applies to a .parquet output only");
    assert_fails(&run(&["export", path_str(&out("none")), path_str(&out("x.parquet"))]), "none");
    assert_usage(&run(&["export", path_str(&t), path_str(&out("x.parquet")), "--batch-rows", "0"]));
    for name in ["x.csv", "x.parquet", "x.parquet.tmp", "x.arrow", "x.arrow.tmp"] {
        assert!(!out(name).exists(), "{name} was left behind");
    }
}
