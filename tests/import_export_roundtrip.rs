//! Export then import gives the same values: a table of every column kind
//! (fixed scalars of several dtypes, a shaped fixed column, ragged columns
//! with and without an item shape, bytes, text) written with
//! `TableWriter`, exported to Parquet and to Arrow IPC (`export_file`:
//! flat `FixedSizeList`s with the `arrow.fixed_shape_tensor` extension,
//! large lists, large binary, large strings), each imported into a new
//! table, and every column's kind, dtype, shape and every value compared.

#![cfg(feature = "arrow")]

use std::path::{Path, PathBuf};

use loaderx::dataset::{DType, WriteOptions};
use loaderx::import::{
    ExportFormat, ExportOptions, ImportOptions, IpcSource, ParquetCodec, ParquetSource, Source, export_file, import,
};
use loaderx::table::{ColumnSpec, ColumnType, Table, TableColumn, TableWriter, Values};

const ROWS: usize = 41;

fn dtype(s: &str) -> DType {
    DType::parse(s).unwrap()
}

fn le<T: bytemuck::Pod>(values: &[T]) -> Vec<u8> {
    bytemuck::cast_slice(values).to_vec()
}

/// The columns, and each row's bytes as the table stores them.
fn columns() -> Vec<(ColumnSpec, Vec<Vec<u8>>)> {
    let text = ["", "a", "é日本", "line\nbreak", "tab\there"];
    let col = |spec: ColumnSpec, value: &dyn Fn(usize) -> Vec<u8>| (spec, (0..ROWS).map(value).collect());
    vec![
        col(ColumnSpec::fixed("flag", dtype("|b1"), &[]), &|i| vec![u8::from(i % 3 == 0)]),
        col(ColumnSpec::fixed("small", dtype("|i1"), &[]), &|i| vec![(i as i8 - 20) as u8]),
        col(ColumnSpec::fixed("byte", dtype("|u1"), &[]), &|i| vec![(i * 7) as u8]),
        col(ColumnSpec::fixed("short", dtype("<i2"), &[]), &|i| le(&[i as i16 * -300])),
        col(ColumnSpec::fixed("count", dtype("<u4"), &[]), &|i| le(&[u32::MAX - i as u32])),
        col(ColumnSpec::fixed("label", dtype("<i8"), &[]), &|i| le(&[i as i64 - 7])),
        col(ColumnSpec::fixed("id", dtype("<u8"), &[]), &|i| le(&[u64::MAX - i as u64])),
        col(ColumnSpec::fixed("half", dtype("<f2"), &[]), &|i| le(&[0x3C00u16 + i as u16])),
        col(ColumnSpec::fixed("score", dtype("<f4"), &[]), &|i| le(&[i as f32 * 0.25])),
        col(ColumnSpec::fixed("wide", dtype("<f8"), &[]), &|i| le(&[i as f64 * -1.5])),
        col(ColumnSpec::fixed("img", dtype("|u1"), &[2, 3, 2]), &|i| (0..12).map(|j| (i * 12 + j) as u8).collect()),
        col(ColumnSpec::fixed("vec", dtype("<f4"), &[3]), &|i| le(&[i as f32, -0.5, 1e30])),
        col(ColumnSpec::ragged("ids", dtype("<i4"), &[]), &|i| {
            le(&(0..(i % 5) as i32).map(|j| j - i as i32).collect::<Vec<_>>())
        }),
        col(ColumnSpec::ragged("tokens", dtype("<u2"), &[]), &|i| le(&vec![i as u16; (i * 3) % 7])),
        col(ColumnSpec::ragged("pts", dtype("<f4"), &[2, 2]), &|i| le(&vec![i as f32; 4 * (i % 3)])),
        col(ColumnSpec::ragged("pairs", dtype("<i8"), &[2]), &|i| le(&vec![-(i as i64); 2 * (i % 4)])),
        col(ColumnSpec::bytes("blob"), &|i| (0..i % 4).map(|j| (i * 7 + j) as u8).collect()),
        col(ColumnSpec::utf8("text"), &|i| text[i % text.len()].as_bytes().to_vec()),
    ]
}

/// A table of `cols`, appended and committed in two parts.
fn write_table(path: &Path, cols: &[(ColumnSpec, Vec<Vec<u8>>)]) {
    let specs: Vec<ColumnSpec> = cols.iter().map(|c| c.0.clone()).collect();
    let mut writer = TableWriter::create(path, &specs, &WriteOptions::default()).unwrap();
    for range in [0..ROWS / 3, ROWS / 3..ROWS] {
        let fixed: Vec<Vec<u8>> = cols.iter().map(|c| c.1[range.clone()].concat()).collect();
        let items: Vec<Vec<&[u8]>> =
            cols.iter().map(|c| c.1[range.clone()].iter().map(Vec::as_slice).collect()).collect();
        let values: Vec<Values> = cols
            .iter()
            .enumerate()
            .map(|(k, c)| match c.0.kind {
                ColumnType::Fixed => Values::Fixed(&fixed[k]),
                _ => Values::Items(&items[k]),
            })
            .collect();
        writer.append(&values).unwrap();
        writer.commit().unwrap();
    }
}

/// A column as it can be compared: kind, dtype, shape (a ragged column's
/// item shape), and every row's bytes.
#[derive(Debug, PartialEq)]
struct Read {
    kind: ColumnType,
    dtype: DType,
    shape: Vec<usize>,
    rows: Vec<Vec<u8>>,
}

fn read(table: &Table) -> Vec<(String, Read)> {
    let all: Vec<u64> = (0..table.rows()).collect();
    table
        .columns()
        .map(|(name, kind, column)| {
            let read = match column {
                TableColumn::Fixed(d) => {
                    let size = d.row_bytes();
                    let mut bytes = vec![0u8; all.len() * size];
                    d.gather_bytes(&all, &mut bytes).unwrap();
                    let rows = bytes.chunks(size.max(1)).map(<[u8]>::to_vec).collect();
                    Read { kind, dtype: d.dtype(), shape: d.shape().to_vec(), rows }
                }
                TableColumn::Ragged(d) => {
                    let batch = d.gather(&all).unwrap();
                    let rows = (0..all.len()).map(|k| batch.record(k).unwrap().to_vec()).collect();
                    Read { kind, dtype: d.dtype(), shape: d.item_shape().to_vec(), rows }
                }
            };
            (name.to_string(), read)
        })
        .collect()
}

fn export_then_import(dir: &Path, file: &str, format: ExportFormat) -> PathBuf {
    let original = Table::open(dir.join("table")).unwrap();
    let out = dir.join(file);
    let summary = export_file(&original, &out, format, &ExportOptions::default(), &mut |_, _| {}).unwrap();
    assert_eq!(summary.rows, ROWS as u64);
    let mut source: Box<dyn Source> = match format {
        ExportFormat::Parquet(_) => Box::new(ParquetSource::open(&[out], 16).unwrap()),
        ExportFormat::Ipc => Box::new(IpcSource::open(&[out]).unwrap()),
    };
    let dest = dir.join(format!("{file}.table"));
    let imported = import(&mut *source, &dest, &ImportOptions::default(), &mut |_| Ok(())).unwrap();
    assert_eq!(imported.table_rows, ROWS as u64);
    dest
}

#[test]
fn export_to_parquet_and_arrow_ipc_then_import_gives_the_same_columns_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let cols = columns();
    write_table(&dir.path().join("table"), &cols);
    let original = read(&Table::open(dir.path().join("table")).unwrap());
    assert_eq!(original.len(), cols.len());
    for ((name, read), (spec, rows)) in original.iter().zip(&cols) {
        assert_eq!((name, &read.rows), (&spec.name, rows), "the table holds what was written");
    }
    let formats = [
        ("t.parquet", ExportFormat::Parquet(ParquetCodec::default())),
        ("t.parquet.zstd", ExportFormat::Parquet(ParquetCodec::parse("zstd").unwrap())),
        ("t.arrow", ExportFormat::Ipc),
    ];
    for (file, format) in formats {
        let dest = export_then_import(dir.path(), file, format);
        let back = read(&Table::open(&dest).unwrap());
        assert_eq!(back.len(), original.len(), "{file}: the columns");
        for ((name, want), (got_name, got)) in original.iter().zip(&back) {
            assert_eq!(got_name, name, "{file}: the column order");
            assert_eq!(got, want, "{file}: column {name}");
        }
    }
}
