//! Export against an oracle: a table of every column kind (several dtypes,
//! big-endian ones, shapes, empty rows, empty strings) written with
//! `TableWriter`, exported as Arrow batches, Parquet (every codec) and
//! Arrow IPC, read back with the parquet crate and arrow-ipc, and every
//! value compared exactly; the Arrow types and the tensor extension; a
//! column selection; an empty table; batch bounds; the file's temporary.

#![cfg(feature = "arrow")]

use std::fs::File;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;
use loaderx::dataset::{DType, WriteOptions};
use loaderx::import::{
    ExportFormat, ExportOptions, ImportError, ParquetCodec, TENSOR_EXTENSION, TableBatches, export_file,
};
use loaderx::table::{ColumnSpec, Table, TableWriter, Values};

const ROWS: usize = 50;

/// A column of the oracle: its spec, each row's elements as this machine
/// stores them, and the element size (to write big-endian dtypes swapped).
struct Col {
    spec: ColumnSpec,
    native: Vec<Vec<u8>>,
    swap: Option<usize>,
}

fn dtype(s: &str) -> DType {
    DType::parse(s).unwrap()
}

fn col(spec: ColumnSpec, swap: Option<usize>, value: impl Fn(usize) -> Vec<u8>) -> Col {
    Col { spec, native: (0..ROWS).map(value).collect(), swap }
}

fn le<T: bytemuck::Pod>(values: &[T]) -> Vec<u8> {
    bytemuck::cast_slice(values).to_vec()
}

fn oracle() -> Vec<Col> {
    let text = ["", "a", "é日本", "line\nbreak", "../x"];
    vec![
        col(ColumnSpec::fixed("flag", dtype("|b1"), &[]), None, |i| vec![u8::from(i % 3 == 0)]),
        col(ColumnSpec::fixed("small", dtype("|i1"), &[]), None, |i| vec![(i as i8 - 20) as u8]),
        col(ColumnSpec::fixed("be16", dtype(">u2"), &[]), Some(2), |i| le(&[(i * 1297 + 1) as u16])),
        col(ColumnSpec::fixed("half", dtype("<f2"), &[]), None, |i| le(&[0x3C00u16 + i as u16])),
        col(ColumnSpec::fixed("wide", dtype("<f8"), &[]), None, |i| le(&[i as f64 * -1.5])),
        col(ColumnSpec::fixed("id", dtype("<u8"), &[]), None, |i| le(&[u64::MAX - i as u64])),
        col(ColumnSpec::fixed("img", dtype("|u1"), &[2, 3, 2]), None, |i| {
            (0..12).map(|j| (i * 12 + j) as u8).collect()
        }),
        col(ColumnSpec::fixed("vec", dtype(">f4"), &[3]), Some(4), |i| le(&[i as f32, -0.5, 1e30])),
        col(ColumnSpec::fixed("word", dtype("|S3"), &[]), None, |i| format!("{:03}", i).into_bytes()),
        col(ColumnSpec::ragged("ids", dtype("<i4"), &[]), None, |i| {
            le(&(0..(i % 5) as i32).map(|j| j - i as i32).collect::<Vec<_>>())
        }),
        col(ColumnSpec::ragged("pts", dtype("<f4"), &[2, 2]), None, |i| le(&vec![i as f32; 4 * (i % 3)])),
        col(ColumnSpec::ragged("be_ids", dtype(">i8"), &[]), Some(8), |i| le(&vec![-(i as i64); i % 2])),
        col(ColumnSpec::bytes("blob"), None, |i| (0..i % 4).map(|j| (i * 7 + j) as u8).collect()),
        col(ColumnSpec::utf8("text"), None, move |i| text[i % text.len()].as_bytes().to_vec()),
    ]
}

/// The bytes of one row as the table stores them (big-endian swapped).
fn stored(c: &Col, i: usize) -> Vec<u8> {
    let mut bytes = c.native[i].clone();
    if let Some(size) = c.swap {
        bytes.chunks_exact_mut(size).for_each(<[u8]>::reverse);
    }
    bytes
}

/// A table of `cols`' rows `0..rows`, appended in two batches.
fn write_table(path: &Path, cols: &[Col], rows: usize) {
    let specs: Vec<ColumnSpec> = cols.iter().map(|c| c.spec.clone()).collect();
    let mut writer = TableWriter::create(path, &specs, &WriteOptions::default()).unwrap();
    for range in [0..rows / 3, rows / 3..rows] {
        let rows_of: Vec<Vec<Vec<u8>>> = cols.iter().map(|c| range.clone().map(|i| stored(c, i)).collect()).collect();
        let fixed: Vec<Vec<u8>> = rows_of.iter().map(|r| r.concat()).collect();
        let items: Vec<Vec<&[u8]>> = rows_of.iter().map(|r| r.iter().map(Vec::as_slice).collect()).collect();
        let values: Vec<Values> = cols
            .iter()
            .enumerate()
            .map(|(k, c)| match c.spec.kind {
                loaderx::table::ColumnType::Fixed => Values::Fixed(&fixed[k]),
                _ => Values::Items(&items[k]),
            })
            .collect();
        writer.append(&values).unwrap();
        writer.commit().unwrap();
    }
}

/// Row `row` of `array` as its leaf elements' bytes in this machine's order.
fn cell(array: &dyn Array, row: usize) -> Vec<u8> {
    match array.data_type() {
        DataType::LargeList(_) => flatten(array.as_list::<i64>().value(row).as_ref()),
        DataType::FixedSizeList(..) => flatten(array.as_fixed_size_list().value(row).as_ref()),
        DataType::LargeBinary => array.as_binary::<i64>().value(row).to_vec(),
        DataType::LargeUtf8 => array.as_string::<i64>().value(row).as_bytes().to_vec(),
        DataType::FixedSizeBinary(_) => array.as_fixed_size_binary().value(row).to_vec(),
        DataType::Boolean => vec![u8::from(array.as_boolean().value(row))],
        t => {
            let data = array.to_data();
            let width = t.primitive_width().unwrap_or_else(|| panic!("unexpected type {t}"));
            let start = (data.offset() + row) * width;
            data.buffers()[0].as_slice()[start..start + width].to_vec()
        }
    }
}

fn flatten(array: &dyn Array) -> Vec<u8> {
    (0..array.len()).flat_map(|row| cell(array, row)).collect()
}

/// Checks `batches` hold exactly rows `0..rows` of `cols` (in that order).
fn assert_rows(batches: &[RecordBatch], cols: &[&Col], rows: usize) {
    assert_eq!(batches.iter().map(RecordBatch::num_rows).sum::<usize>(), rows);
    for (k, c) in cols.iter().enumerate() {
        let mut row = 0;
        for batch in batches {
            assert_eq!(batch.schema().field(k).name(), &c.spec.name);
            let array = batch.column(k);
            assert_eq!(array.null_count(), 0);
            for r in 0..batch.num_rows() {
                assert_eq!(cell(array.as_ref(), r), c.native[row], "column {}, row {row}", c.spec.name);
                row += 1;
            }
        }
    }
}

#[test]
fn the_types_map_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let cols = oracle();
    write_table(&dir.path().join("t"), &cols, ROWS);
    let table = Table::open(dir.path().join("t")).unwrap();
    let schema = TableBatches::new(&table, &ExportOptions::default()).unwrap().schema();
    let types: Vec<String> = schema.fields().iter().map(|f| f.data_type().to_string()).collect();
    let expect = [
        "Boolean",
        "Int8",
        "UInt16",
        "Float16",
        "Float64",
        "UInt64",
        "FixedSizeList(12 x UInt8)",
        "FixedSizeList(3 x Float32)",
        "FixedSizeBinary(3)",
        "LargeList(Int32)",
        "LargeList(FixedSizeList(2 x FixedSizeList(2 x Float32)))",
        "LargeList(Int64)",
        "LargeBinary",
        "LargeUtf8",
    ];
    assert_eq!(types, expect);
    assert!(schema.fields().iter().all(|f| !f.is_nullable()));
    let img = schema.field_with_name("img").unwrap().metadata();
    assert_eq!(img.get("ARROW:extension:name").map(String::as_str), Some(TENSOR_EXTENSION));
    assert_eq!(img.get("ARROW:extension:metadata").map(String::as_str), Some("{\"shape\":[2,3,2]}"));
    let vec = schema.field_with_name("vec").unwrap().metadata();
    assert_eq!(vec.get("ARROW:extension:metadata").map(String::as_str), Some("{\"shape\":[3]}"));
    assert!(schema.field_with_name("ids").unwrap().metadata().is_empty());
}

fn all(cols: &[Col]) -> Vec<&Col> {
    cols.iter().collect()
}

fn read_parquet(path: &Path) -> Vec<RecordBatch> {
    let builder = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap());
    builder.unwrap().build().unwrap().map(Result::unwrap).collect()
}

fn read_ipc(path: &Path) -> Vec<RecordBatch> {
    let reader = arrow_ipc::reader::FileReader::try_new(File::open(path).unwrap(), None).unwrap();
    reader.map(Result::unwrap).collect()
}

fn export(table: &Table, dest: &Path, format: ExportFormat, opts: &ExportOptions) -> u64 {
    let mut calls = Vec::new();
    let summary = export_file(table, dest, format, opts, &mut |rows, bytes| calls.push((rows, bytes))).unwrap();
    assert_eq!(summary.bytes, std::fs::metadata(dest).unwrap().len());
    assert!(!dest.with_extension(format!("{}.tmp", dest.extension().unwrap().to_str().unwrap())).exists());
    assert!(calls.windows(2).all(|w| w[0].0 < w[1].0), "progress rows ascend: {calls:?}");
    assert_eq!(calls.last().map_or(0, |c| c.0), summary.rows);
    summary.rows
}

#[test]
fn batches_hold_every_value_in_row_order() {
    let dir = tempfile::tempdir().unwrap();
    let cols = oracle();
    write_table(&dir.path().join("t"), &cols, ROWS);
    let table = Table::open(dir.path().join("t")).unwrap();
    let opts = ExportOptions { batch_rows: 7, ..ExportOptions::default() };
    let batches: Vec<RecordBatch> = TableBatches::new(&table, &opts).unwrap().map(Result::unwrap).collect();
    assert_eq!(batches.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(), [7, 7, 7, 7, 7, 7, 7, 1]);
    assert_rows(&batches, &all(&cols), ROWS);
}

#[test]
fn parquet_with_every_codec_reads_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let cols = oracle();
    write_table(&dir.path().join("t"), &cols, ROWS);
    let table = Table::open(dir.path().join("t")).unwrap();
    let opts = ExportOptions { batch_rows: 16, ..ExportOptions::default() };
    for codec in ["none", "snappy", "zstd", "zstd:9", "lz4", "gzip"] {
        let dest = dir.path().join(format!("out-{codec}.parquet"));
        let rows = export(&table, &dest, ExportFormat::Parquet(ParquetCodec::parse(codec).unwrap()), &opts);
        assert_eq!(rows, ROWS as u64);
        let batches = read_parquet(&dest);
        let exported = TableBatches::new(&table, &opts).unwrap().schema();
        assert_eq!(batches[0].schema().fields(), exported.fields(), "{codec}: the schema, metadata included");
        assert_rows(&batches, &all(&cols), ROWS);
    }
}

#[test]
fn arrow_ipc_reads_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let cols = oracle();
    write_table(&dir.path().join("t"), &cols, ROWS);
    let table = Table::open(dir.path().join("t")).unwrap();
    let dest = dir.path().join("out.arrow");
    assert_eq!(ExportFormat::of_path(&dest).unwrap(), ExportFormat::Ipc);
    let rows = export(&table, &dest, ExportFormat::Ipc, &ExportOptions { batch_rows: 9, ..ExportOptions::default() });
    assert_eq!(rows, ROWS as u64);
    let batches = read_ipc(&dest);
    assert_eq!(batches.len(), 6);
    assert_eq!(batches[0].schema(), TableBatches::new(&table, &ExportOptions::default()).unwrap().schema());
    assert_rows(&batches, &all(&cols), ROWS);
}

#[test]
fn a_selection_exports_those_columns_in_its_order() {
    let dir = tempfile::tempdir().unwrap();
    let cols = oracle();
    write_table(&dir.path().join("t"), &cols, ROWS);
    let table = Table::open(dir.path().join("t")).unwrap();
    let names = ["text", "img", "ids"];
    let opts = ExportOptions { columns: Some(names.map(String::from).to_vec()), ..ExportOptions::default() };
    let dest = dir.path().join("sel.parquet");
    export(&table, &dest, ExportFormat::of_path(&dest).unwrap(), &opts);
    let batches = read_parquet(&dest);
    assert_eq!(batches[0].num_columns(), 3);
    let picked: Vec<&Col> = names.iter().map(|n| cols.iter().find(|c| c.spec.name == *n).unwrap()).collect();
    assert_rows(&batches, &picked, ROWS);

    for (bad, says) in [(vec!["nope"], "no column \"nope\""), (vec!["ids", "ids"], "selected twice")] {
        let opts = ExportOptions { columns: Some(bad.iter().map(|s| s.to_string()).collect()), ..opts.clone() };
        let dest = dir.path().join("bad.parquet");
        let err = export_file(&table, &dest, ExportFormat::Ipc, &opts, &mut |_, _| {}).unwrap_err();
        assert!(matches!(err, ImportError::InvalidArgument(_)) && err.to_string().contains(says), "{err}");
        assert!(!dest.exists() && !dir.path().join("bad.parquet.tmp").exists());
    }
}

#[test]
fn an_empty_table_exports_its_schema_and_no_row() {
    let dir = tempfile::tempdir().unwrap();
    let cols = oracle();
    write_table(&dir.path().join("t"), &cols, 0);
    let table = Table::open(dir.path().join("t")).unwrap();
    assert_eq!(table.rows(), 0);
    assert_eq!(TableBatches::new(&table, &ExportOptions::default()).unwrap().count(), 0);
    let schema = TableBatches::new(&table, &ExportOptions::default()).unwrap().schema();
    let pq = dir.path().join("e.parquet");
    assert_eq!(export(&table, &pq, ExportFormat::of_path(&pq).unwrap(), &ExportOptions::default()), 0);
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(File::open(&pq).unwrap());
    let reader = reader.unwrap();
    assert_eq!(reader.metadata().file_metadata().num_rows(), 0);
    assert_eq!(reader.schema().fields(), schema.fields());
    let ipc = dir.path().join("e.arrow");
    assert_eq!(export(&table, &ipc, ExportFormat::Ipc, &ExportOptions::default()), 0);
    let reader = arrow_ipc::reader::FileReader::try_new(File::open(&ipc).unwrap(), None).unwrap();
    assert_eq!(reader.schema(), schema);
    assert_eq!(reader.count(), 0);
}

#[test]
fn a_batch_stays_within_its_bytes_unless_one_row_is_larger() {
    let dir = tempfile::tempdir().unwrap();
    let cols = oracle();
    write_table(&dir.path().join("t"), &cols, ROWS);
    let table = Table::open(dir.path().join("t")).unwrap();
    // Bytes of values per row, as the table holds them.
    let row_bytes: Vec<usize> = (0..ROWS).map(|i| cols.iter().map(|c| c.native[i].len()).sum()).collect();
    for budget in [1, 64, 200, 1000] {
        let opts = ExportOptions { batch_bytes: budget, batch_rows: 1000, ..ExportOptions::default() };
        let mut start = 0;
        for batch in TableBatches::new(&table, &opts).unwrap() {
            let n = batch.unwrap().num_rows();
            let bytes: usize = row_bytes[start..start + n].iter().sum();
            assert!(n == 1 || bytes <= budget, "budget {budget}: {n} rows of {bytes} bytes");
            // Greedy: the next row would not have fit.
            if start + n < ROWS {
                assert!(bytes + row_bytes[start + n] > budget, "budget {budget}: the batch at {start} stopped early");
            }
            start += n;
        }
        assert_eq!(start, ROWS);
    }
    let zero = ExportOptions { batch_rows: 0, ..ExportOptions::default() };
    assert!(matches!(TableBatches::new(&table, &zero), Err(ImportError::InvalidArgument(_))));
}

#[test]
fn a_stale_temporary_is_replaced_and_the_name_only_appears_complete() {
    let dir = tempfile::tempdir().unwrap();
    let cols = oracle();
    write_table(&dir.path().join("t"), &cols, ROWS);
    let table = Table::open(dir.path().join("t")).unwrap();
    let dest = dir.path().join("out.parquet");
    let tmp = dir.path().join("out.parquet.tmp");
    std::fs::write(&tmp, vec![0xAB; 1 << 21]).unwrap(); // a killed export's half file
    std::fs::write(&dest, b"an older export").unwrap();
    export(&table, &dest, ExportFormat::of_path(&dest).unwrap(), &ExportOptions::default());
    assert!(!tmp.exists());
    assert_rows(&read_parquet(&dest), &all(&cols), ROWS);
    assert!(ExportFormat::of_path(Path::new("x.csv")).is_err());
    assert_eq!(ExportFormat::of_path(Path::new("x.PQ")).unwrap(), ExportFormat::Parquet(ParquetCodec::Zstd(1)));
    assert!(ParquetCodec::parse("zstd:0").is_err() && ParquetCodec::parse("brotli").is_err());
}

#[test]
fn text_not_utf8_on_disk_fails_the_export_naming_the_row_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let cols = vec![
        col(ColumnSpec::fixed("n", dtype("<i4"), &[]), None, |i| le(&[i as i32])),
        col(ColumnSpec::utf8("s"), None, |i| format!("row {i}").into_bytes()),
    ];
    write_table(&path, &cols, 30);
    // Rows 20.. of the text column rewritten, row 20 not UTF-8.
    let mut store = loaderx::Zrecord::open(path.join("col-0001")).unwrap();
    store.delete(&(20..30).collect::<Vec<u64>>()).unwrap();
    drop(store);
    let mut rows: Vec<&[u8]> = vec![b"\xc3("];
    rows.extend(std::iter::repeat_n(&b"ok"[..], 9));
    let u1 = dtype("|u1");
    loaderx::dataset::write_ragged_bytes(path.join("col-0001"), u1, &[], rows, &WriteOptions::default()).unwrap();
    let table = Table::open(&path).unwrap();
    let opts = ExportOptions { batch_rows: 8, ..ExportOptions::default() };
    let mut batches = TableBatches::new(&table, &opts).unwrap();
    assert_eq!(batches.by_ref().take(2).filter(Result::is_ok).count(), 2, "rows 0..16 are fine");
    let e = batches.next().unwrap().unwrap_err();
    assert!(matches!(&e, ImportError::Table(loaderx::table::TableError::NotUtf8 { row: 20, .. })), "{e:?}");
    assert!(e.to_string().contains("\"s\""), "{e}");
    assert!(batches.next().is_none(), "nothing after an error");
    for name in ["bad.parquet", "bad.arrow"] {
        let dest = dir.path().join(name);
        let format = ExportFormat::of_path(&dest).unwrap();
        let e = export_file(&table, &dest, format, &opts, &mut |_, _| {}).unwrap_err();
        assert!(matches!(e, ImportError::Table(loaderx::table::TableError::NotUtf8 { row: 20, .. })), "{e:?}");
        assert!(!dest.exists() && !dir.path().join(format!("{name}.tmp")).exists(), "{name} left behind");
    }
}
