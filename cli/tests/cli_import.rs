//! `loaderx import`: Parquet and Arrow IPC into a table the library reads
//! back exactly; column options; a rerun that resumes or does nothing;
//! refusals that name the file, column or row.

mod common;

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use common::*;
use loaderx::table::{ColumnType, Table, TableColumn};

fn batch(start: i64, n: i64, null_at: Option<i64>) -> RecordBatch {
    let schema = Schema::new(vec![Field::new("id", DataType::Int64, true), Field::new("text", DataType::Utf8, false)]);
    let ids: Int64Array = (start..start + n).map(|i| (Some(i) != null_at).then_some(i)).collect();
    let texts = StringArray::from_iter_values((start..start + n).map(|i| format!("t{i}")));
    let arrays: Vec<ArrayRef> = vec![Arc::new(ids), Arc::new(texts)];
    RecordBatch::try_new(Arc::new(schema), arrays).unwrap()
}

fn write_parquet(path: &Path, batches: &[RecordBatch]) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batches[0].schema(), None).unwrap();
    batches.iter().for_each(|b| w.write(b).unwrap());
    w.close().unwrap();
}

fn ids(dest: &Path, column: &str) -> Vec<i64> {
    let table = Table::open(dest).unwrap();
    let Some(TableColumn::Fixed(d)) = table.column(column) else { panic!("no fixed {column}") };
    let all: Vec<u64> = (0..d.len()).collect();
    let mut bytes = vec![0u8; all.len() * 8];
    d.gather_bytes(&all, &mut bytes).unwrap();
    bytes.chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn import_parquet_files_then_a_rerun_does_nothing() {
    let dir = tempfile::tempdir().unwrap();
    write_parquet(&dir.path().join("a.parquet"), &[batch(0, 10, None)]);
    write_parquet(&dir.path().join("b.parquet"), &[batch(10, 5, None)]);
    let dest = dir.path().join("t");
    let glob = dir.path().join("*.parquet");
    let json = ok_json(&loaderx(&["import", path_str(&glob), path_str(&dest), "--json"]));
    assert_eq!((json["rows"].as_u64(), json["table_rows"].as_u64()), (Some(15), Some(15)));
    assert!(json["bytes"].as_u64().unwrap() > 0);
    assert_eq!(ids(&dest, "id"), (0..15).collect::<Vec<_>>());
    let table = Table::open(&dest).unwrap();
    assert_eq!(table.strings("text", &[0, 14]).unwrap(), ["t0", "t14"]);
    let text = ok(&loaderx(&["import", path_str(&glob), path_str(&dest)]));
    assert!(text.contains("imported already") && text.contains("15 rows"), "{text}");
    assert_eq!(Table::open(&dest).unwrap().rows(), 15);
}

#[test]
fn import_options_select_rename_set_codecs_and_fill_nulls() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.parquet");
    write_parquet(&file, &[batch(0, 6, Some(4))]);
    let dest = dir.path().join("t");
    let out = loaderx(&["import", path_str(&file), path_str(&dest)]);
    assert_fails(&out, "column \"id\", row 4: a null");
    assert_eq!(Table::open(&dest).unwrap().rows(), 0, "nothing of the failed import is committed");
    let dest = dir.path().join("u");
    let out = loaderx(&[
        "import",
        path_str(&file),
        path_str(&dest),
        "--columns",
        "text,id",
        "--rename",
        "id=key",
        "--codec",
        "zstd",
        "--codec",
        "text=raw",
        "--fill-null",
        "id=-1",
        "--batch-rows",
        "2",
    ]);
    let line = ok(&out);
    assert!(line.starts_with("imported 6 rows") && line.lines().count() == 1, "{line}");
    let table = Table::open(&dest).unwrap();
    let columns: Vec<(&str, ColumnType)> = table.columns().map(|(n, k, _)| (n, k)).collect();
    assert_eq!(columns, [("text", ColumnType::Utf8), ("key", ColumnType::Fixed)]);
    let Some(TableColumn::Fixed(key)) = table.column("key") else { panic!() };
    assert_eq!(key.schema().codec, loaderx::Codec::Zstd, "--codec CODEC is every column's");
    let Some(TableColumn::Ragged(text)) = table.column("text") else { panic!() };
    assert_eq!(text.schema().codec, loaderx::Codec::Raw, "--codec COLUMN=CODEC is that column's");
    assert_eq!(ids(&dest, "key"), [0, 1, 2, 3, -1, 5]);
}

#[test]
fn import_arrow_ipc_appends_to_an_existing_table() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.arrow");
    let b = batch(0, 4, None);
    let mut w = arrow_ipc::writer::FileWriter::try_new(std::fs::File::create(&file).unwrap(), &b.schema()).unwrap();
    w.write(&b).unwrap();
    w.finish().unwrap();
    let parquet = dir.path().join("in.parquet");
    write_parquet(&parquet, &[batch(100, 3, None)]);
    let dest = dir.path().join("t");
    ok(&loaderx(&["import", path_str(&file), path_str(&dest)]));
    ok(&loaderx(&["import", path_str(&parquet), path_str(&dest)]));
    assert_eq!(ids(&dest, "id"), [0, 1, 2, 3, 100, 101, 102]);
}

#[test]
fn import_refuses_bad_input_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cut.parquet");
    write_parquet(&file, &[batch(0, 100, None)]);
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() - 10]).unwrap();
    assert_fails(&loaderx(&["import", path_str(&file), path_str(&dir.path().join("t"))]), "cut.parquet");
    let odd = dir.path().join("data.bin");
    std::fs::write(&odd, b"x").unwrap();
    assert_fails(&loaderx(&["import", path_str(&odd), path_str(&dir.path().join("u"))]), "--format");
    assert_fails(
        &loaderx(&["import", path_str(&file), path_str(&dir.path().join("v")), "--codec", "lz9"]),
        "unknown codec",
    );
    assert_usage(&loaderx(&["import", path_str(&file)]));
}

#[test]
fn import_killed_at_any_point_then_rerun_gives_exactly_the_input_rows() {
    let dir = tempfile::tempdir().unwrap();
    let n = 40_000i64;
    for k in 0..4 {
        let batches: Vec<RecordBatch> = (0..10).map(|b| batch(k * n + b * n / 10, n / 10, None)).collect();
        write_parquet(&dir.path().join(format!("part-{k}.parquet")), &batches);
    }
    let dest = dir.path().join("t");
    let args = [
        "import",
        path_str(dir.path()),
        path_str(&dest),
        "--commit-rows",
        "5000",
        "--batch-rows",
        "1000",
        "--codec",
        "raw",
    ];
    let killed_with_rows =
        import_killed_at(&args, &dest, &[(0, 2), (5_000, 0), (20_000, 3), (45_000, 1), (90_000, 7), (130_000, 0)]);
    assert!(killed_with_rows[5] < 4 * n as u64, "the last run was to be killed before its end: {killed_with_rows:?}");
    let json = ok_json(&loaderx(&[&args[..], &["--json"]].concat()));
    let rows = json["table_rows"].as_u64().unwrap();
    assert_eq!(rows, 4 * n as u64, "killed with {killed_with_rows:?}");
    assert_eq!(json["skipped"].as_u64().unwrap() + json["rows"].as_u64().unwrap(), rows);
    assert_eq!(ids(&dest, "id"), (0..4 * n).collect::<Vec<_>>(), "killed with {killed_with_rows:?}");
    let table = Table::open(&dest).unwrap();
    let last = rows - 1;
    assert_eq!(table.strings("text", &[0, last]).unwrap(), ["t0".to_string(), format!("t{last}")]);
}
