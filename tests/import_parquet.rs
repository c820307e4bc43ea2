//! Parquet into tables: every type of the mapping from files the parquet
//! crate wrote here, values checked exactly against the arrays written;
//! nulls refused and filled; a truncated file; a type change between files.
#![cfg(feature = "arrow")]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{FixedSizeListBuilder, Int16Builder};
use arrow_array::types::{Int32Type, UInt8Type};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, DictionaryArray, FixedSizeBinaryArray, FixedSizeListArray,
    Float32Array, Float64Array, Int8Array, Int32Array, Int64Array, LargeBinaryArray, LargeListArray, LargeStringArray,
    ListArray, RecordBatch, StringArray, StructArray, UInt16Array, UInt64Array,
};
use arrow_schema::{DataType, Field, Schema};
use loaderx::import::{ImportError, ImportOptions, ParquetSource, import};
use loaderx::table::{ColumnType, Table, TableColumn};
use parquet::arrow::ArrowWriter;

fn write_parquet(path: &Path, batches: &[RecordBatch]) {
    let file = std::fs::File::create(path).unwrap();
    let mut writer = ArrowWriter::try_new(file, batches[0].schema(), None).unwrap();
    for b in batches {
        writer.write(b).unwrap();
    }
    writer.close().unwrap();
}

fn run(inputs: &[PathBuf], dest: &Path, opts: &ImportOptions) -> Result<loaderx::import::ImportSummary, ImportError> {
    let mut source = ParquetSource::open(inputs, 3)?;
    import(&mut source, dest, opts, &mut |_| Ok(()))
}

/// Every row of fixed column `name`, back to back.
fn fixed(table: &Table, name: &str) -> Vec<u8> {
    let Some(TableColumn::Fixed(d)) = table.column(name) else { panic!("{name} is not fixed") };
    let indices: Vec<u64> = (0..d.len()).collect();
    let mut out = vec![0u8; indices.len() * d.row_bytes()];
    d.gather_bytes(&indices, &mut out).unwrap();
    out
}

/// Every row of ragged column `name`, each its item bytes.
fn items(table: &Table, name: &str) -> Vec<Vec<u8>> {
    let Some(TableColumn::Ragged(d)) = table.column(name) else { panic!("{name} is not ragged") };
    let indices: Vec<u64> = (0..d.len()).collect();
    let batch = d.gather(&indices).unwrap();
    (0..indices.len()).map(|k| batch.record(k).unwrap().to_vec()).collect()
}

fn le<T: Copy, const N: usize>(values: &[T], to: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to(v)).collect()
}

/// A batch of every mapped type, `n` rows from `start`.
fn all_types(start: usize, n: usize) -> RecordBatch {
    let r: Vec<usize> = (start..start + n).collect();
    let i8s = Int8Array::from(r.iter().map(|&i| i as i8 - 50).collect::<Vec<_>>());
    let u16s = UInt16Array::from(r.iter().map(|&i| (i * 300) as u16).collect::<Vec<_>>());
    let i64s = Int64Array::from(r.iter().map(|&i| i as i64 * -1_000_000_007).collect::<Vec<_>>());
    let u64s = UInt64Array::from(r.iter().map(|&i| u64::MAX - i as u64).collect::<Vec<_>>());
    let f32s = Float32Array::from(r.iter().map(|&i| i as f32 * 0.25).collect::<Vec<_>>());
    let f64s = Float64Array::from(r.iter().map(|&i| i as f64 / 3.0).collect::<Vec<_>>());
    let bools = BooleanArray::from(r.iter().map(|&i| i % 3 == 0).collect::<Vec<_>>());
    let mut vec3 = FixedSizeListBuilder::new(Int16Builder::new(), 3);
    for &i in &r {
        vec3.values().append_slice(&[i as i16, -(i as i16), 7]);
        vec3.append(true);
    }
    let vec3 = vec3.finish();
    let inner = Arc::new(Field::new("item", DataType::Float32, false));
    let flat: Vec<f32> = r.iter().flat_map(|&i| (0..6).map(move |j| (i * 6 + j) as f32)).collect();
    let mat = FixedSizeListArray::new(inner.clone(), 2, Arc::new(Float32Array::from(flat.clone())), None);
    let mat =
        FixedSizeListArray::new(Arc::new(Field::new("item", mat.data_type().clone(), false)), 3, Arc::new(mat), None);
    let tensor = FixedSizeListArray::new(inner, 6, Arc::new(Float32Array::from(flat)), None);
    let tokens = ListArray::from_iter_primitive::<Int32Type, _, _>(
        r.iter().map(|&i| Some((0..i % 5).map(|j| Some((i * 10 + j) as i32)).collect::<Vec<_>>())),
    );
    let pair_field = Arc::new(Field::new("item", DataType::UInt8, false));
    let pairs_flat: Vec<u8> = r.iter().flat_map(|&i| (0..2 * (i % 3)).map(move |j| (i + j) as u8)).collect();
    let pairs_values =
        FixedSizeListArray::new(pair_field, 2, Arc::new(arrow_array::UInt8Array::from(pairs_flat)), None);
    let mut offsets = vec![0i64];
    for &i in &r {
        offsets.push(offsets.last().unwrap() + (i % 3) as i64);
    }
    let pairs = LargeListArray::new(
        Arc::new(Field::new("item", pairs_values.data_type().clone(), false)),
        arrow_buffer::OffsetBuffer::new(offsets.into()),
        Arc::new(pairs_values),
        None,
    );
    let blobs = BinaryArray::from_iter_values(r.iter().map(|&i| vec![i as u8; i % 4]));
    let large_blobs = LargeBinaryArray::from_iter_values(r.iter().map(|&i| vec![(i * 7) as u8; i % 5]));
    let fixed_blobs = FixedSizeBinaryArray::try_from_iter(r.iter().map(|&i| [i as u8, 1, 2, 3])).unwrap();
    let texts = StringArray::from_iter_values(r.iter().map(|&i| format!("row {i} é")));
    let large_texts = LargeStringArray::from_iter_values(r.iter().map(|&i| "日".repeat(i % 3)));
    let labels: DictionaryArray<Int32Type> = r.iter().map(|&i| ["cat", "dog", "eel"][i % 3]).collect();
    let codes: DictionaryArray<UInt8Type> = r.iter().map(|&i| ["x", "yy"][i % 2]).collect();
    let nested = StructArray::from(vec![(
        Arc::new(Field::new("c", DataType::Utf8, false)),
        Arc::new(StringArray::from_iter_values(r.iter().map(|&i| format!("c{i}")))) as ArrayRef,
    )]);
    let meta = StructArray::from(vec![
        (
            Arc::new(Field::new("a", DataType::Int32, false)),
            Arc::new(Int32Array::from(r.iter().map(|&i| i as i32 * 2).collect::<Vec<_>>())) as ArrayRef,
        ),
        (Arc::new(Field::new("b", nested.data_type().clone(), false)), Arc::new(nested) as ArrayRef),
    ]);
    let tensor_meta = HashMap::from([
        ("ARROW:extension:name".to_string(), "arrow.fixed_shape_tensor".to_string()),
        ("ARROW:extension:metadata".to_string(), r#"{"shape":[2,3]}"#.to_string()),
    ]);
    let columns: Vec<(&str, ArrayRef, HashMap<String, String>)> = vec![
        ("i8", Arc::new(i8s), HashMap::new()),
        ("u16", Arc::new(u16s), HashMap::new()),
        ("i64", Arc::new(i64s), HashMap::new()),
        ("u64", Arc::new(u64s), HashMap::new()),
        ("f32", Arc::new(f32s), HashMap::new()),
        ("f64", Arc::new(f64s), HashMap::new()),
        ("flag", Arc::new(bools), HashMap::new()),
        ("vec3", Arc::new(vec3), HashMap::new()),
        ("mat", Arc::new(mat), HashMap::new()),
        ("tensor", Arc::new(tensor), tensor_meta),
        ("tokens", Arc::new(tokens), HashMap::new()),
        ("pairs", Arc::new(pairs), HashMap::new()),
        ("blob", Arc::new(blobs), HashMap::new()),
        ("large_blob", Arc::new(large_blobs), HashMap::new()),
        ("fixed_blob", Arc::new(fixed_blobs), HashMap::new()),
        ("text", Arc::new(texts), HashMap::new()),
        ("large_text", Arc::new(large_texts), HashMap::new()),
        ("label", Arc::new(labels), HashMap::new()),
        ("code", Arc::new(codes), HashMap::new()),
        ("meta", Arc::new(meta), HashMap::new()),
    ];
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, a, m)| Field::new(*name, a.data_type().clone(), false).with_metadata(m.clone()))
        .collect();
    let arrays = columns.into_iter().map(|(_, a, _)| a).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).unwrap()
}

#[test]
fn every_mapped_type_lands_with_its_exact_values() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    write_parquet(&a, &[all_types(0, 7), all_types(7, 4)]);
    write_parquet(&b, &[all_types(11, 9)]);
    let dest = dir.path().join("t");
    let summary = run(&[dir.path().to_path_buf()], &dest, &ImportOptions::default()).unwrap();
    assert_eq!((summary.rows, summary.table_rows, summary.already_done), (20, 20, false));
    let table = Table::open(&dest).unwrap();
    let kinds: Vec<(&str, ColumnType)> = table.columns().map(|(n, k, _)| (n, k)).collect();
    use ColumnType::*;
    assert_eq!(
        kinds,
        [
            ("i8", Fixed),
            ("u16", Fixed),
            ("i64", Fixed),
            ("u64", Fixed),
            ("f32", Fixed),
            ("f64", Fixed),
            ("flag", Fixed),
            ("vec3", Fixed),
            ("mat", Fixed),
            ("tensor", Fixed),
            ("tokens", Ragged),
            ("pairs", Ragged),
            ("blob", Bytes),
            ("large_blob", Bytes),
            ("fixed_blob", Bytes),
            ("text", Utf8),
            ("large_text", Utf8),
            ("label", Utf8),
            ("code", Utf8),
            ("meta.a", Fixed),
            ("meta.b.c", Utf8),
        ]
    );
    let want = all_types(0, 20);
    let col = |name: &str| want.column_by_name(name).unwrap().clone();
    let prim = |name: &str| {
        let data = col(name).to_data();
        let w = data.data_type().primitive_width().unwrap();
        data.buffers()[0].as_slice()[..20 * w].to_vec()
    };
    for name in ["i8", "u16", "i64", "u64", "f32", "f64"] {
        assert_eq!(fixed(&table, name), prim(name), "{name}");
    }
    let r: Vec<usize> = (0..20).collect();
    assert_eq!(fixed(&table, "flag"), r.iter().map(|&i| u8::from(i % 3 == 0)).collect::<Vec<_>>());
    let vec3: Vec<i16> = r.iter().flat_map(|&i| [i as i16, -(i as i16), 7]).collect();
    assert_eq!(fixed(&table, "vec3"), le(&vec3, i16::to_le_bytes));
    let flat: Vec<f32> = (0..120).map(|v| v as f32).collect();
    assert_eq!(fixed(&table, "mat"), le(&flat, f32::to_le_bytes));
    assert_eq!(fixed(&table, "tensor"), le(&flat, f32::to_le_bytes));
    let Some(TableColumn::Fixed(m)) = table.column("mat") else { panic!() };
    assert_eq!(m.shape(), &[3, 2]);
    let Some(TableColumn::Fixed(t)) = table.column("tensor") else { panic!() };
    assert_eq!(t.shape(), &[2, 3]);
    let tokens: Vec<Vec<u8>> =
        r.iter().map(|&i| (0..i % 5).flat_map(|j| ((i * 10 + j) as i32).to_le_bytes()).collect()).collect();
    assert_eq!(items(&table, "tokens"), tokens);
    let pairs: Vec<Vec<u8>> = r.iter().map(|&i| (0..2 * (i % 3)).map(|j| (i + j) as u8).collect()).collect();
    assert_eq!(items(&table, "pairs"), pairs);
    let Some(TableColumn::Ragged(p)) = table.column("pairs") else { panic!() };
    assert_eq!(p.item_shape(), &[2]);
    assert_eq!(items(&table, "blob"), r.iter().map(|&i| vec![i as u8; i % 4]).collect::<Vec<_>>());
    assert_eq!(items(&table, "large_blob"), r.iter().map(|&i| vec![(i * 7) as u8; i % 5]).collect::<Vec<_>>());
    assert_eq!(items(&table, "fixed_blob"), r.iter().map(|&i| vec![i as u8, 1, 2, 3]).collect::<Vec<_>>());
    let strings = |name| table.strings(name, &(0..20).collect::<Vec<u64>>()).unwrap();
    assert_eq!(strings("text"), r.iter().map(|&i| format!("row {i} é")).collect::<Vec<_>>());
    assert_eq!(strings("large_text"), r.iter().map(|&i| "日".repeat(i % 3)).collect::<Vec<_>>());
    assert_eq!(strings("label"), r.iter().map(|&i| ["cat", "dog", "eel"][i % 3]).collect::<Vec<_>>());
    assert_eq!(strings("code"), r.iter().map(|&i| ["x", "yy"][i % 2]).collect::<Vec<_>>());
    assert_eq!(fixed(&table, "meta.a"), le(&r.iter().map(|&i| i as i32 * 2).collect::<Vec<_>>(), i32::to_le_bytes));
    assert_eq!(strings("meta.b.c"), r.iter().map(|&i| format!("c{i}")).collect::<Vec<_>>());
}

fn nullable(values: Vec<Option<i32>>, texts: Vec<Option<&str>>, tokens: Vec<Option<Vec<Option<i32>>>>) -> RecordBatch {
    let schema = Schema::new(vec![
        Field::new("x", DataType::Int32, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("ids", DataType::new_list(DataType::Int32, true), true),
    ]);
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(values)),
        Arc::new(StringArray::from(texts)),
        Arc::new(ListArray::from_iter_primitive::<Int32Type, _, _>(tokens)),
    ];
    RecordBatch::try_new(Arc::new(schema), arrays).unwrap()
}

#[test]
fn a_null_is_refused_naming_column_and_row_and_a_fill_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("n.parquet");
    let ok = nullable(vec![Some(1), Some(2)], vec![Some("a"), Some("b")], vec![Some(vec![Some(1)]), Some(vec![])]);
    let holes = nullable(vec![Some(3), None], vec![None, Some("d")], vec![None, Some(vec![Some(4), Some(5)])]);
    write_parquet(&file, &[ok, holes]);
    let dest = dir.path().join("t");
    let err = run(std::slice::from_ref(&file), &dest, &ImportOptions::default()).unwrap_err();
    assert!(matches!(&err, ImportError::Null { column, row: 2 } if column == "s"), "{err}");
    assert!(err.to_string().contains("--fill-null s="), "{err}");
    assert_eq!(Table::open(&dest).unwrap().rows(), 0, "nothing of the failed import is committed");

    let mut opts = ImportOptions::default();
    opts.columns.fill_null = vec![("x".into(), "-9".into()), ("s".into(), "?".into()), ("ids".into(), "7,8".into())];
    let summary = run(std::slice::from_ref(&file), &dest, &opts).unwrap();
    assert_eq!(summary.table_rows, 4);
    let table = Table::open(&dest).unwrap();
    assert_eq!(fixed(&table, "x"), le(&[1i32, 2, 3, -9], i32::to_le_bytes));
    assert_eq!(table.strings("s", &[0, 1, 2, 3]).unwrap(), ["a", "b", "?", "d"]);
    let ids = |v: &[i32]| le(v, i32::to_le_bytes);
    assert_eq!(items(&table, "ids"), [ids(&[1]), ids(&[]), ids(&[7, 8]), ids(&[4, 5])]);

    let bad = ImportOptions {
        columns: loaderx::import::ColumnOptions { fill_null: vec![("x".into(), "1e99".into())], ..Default::default() },
        ..Default::default()
    };
    let err = run(std::slice::from_ref(&file), &dir.path().join("u"), &bad).unwrap_err();
    assert!(matches!(err, ImportError::InvalidArgument(ref m) if m.contains("--fill-null x=")), "{err}");
}

#[test]
fn a_null_inside_a_list_is_refused_at_its_row() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("n.parquet");
    let batch = nullable(
        vec![Some(1), Some(2), Some(3)],
        vec![Some("a"), Some("b"), Some("c")],
        vec![Some(vec![Some(1)]), Some(vec![]), Some(vec![Some(2), None])],
    );
    write_parquet(&file, &[batch]);
    let err = run(&[file], &dir.path().join("t"), &ImportOptions::default()).unwrap_err();
    assert!(matches!(&err, ImportError::Null { column, row: 2 } if column == "ids"), "{err}");
}

#[test]
fn a_truncated_file_is_bad_input_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cut.parquet");
    write_parquet(&file, &[all_types(0, 50)]);
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();
    let Err(err) = ParquetSource::open(std::slice::from_ref(&file), 16) else { panic!("a truncated file opened") };
    assert!(matches!(&err, ImportError::BadInput { path, .. } if *path == file), "{err}");
    assert!(err.to_string().contains("cut.parquet"), "{err}");
}

#[test]
fn a_column_whose_type_changes_between_files_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let schema = |dt| Arc::new(Schema::new(vec![Field::new("x", dt, false)]));
    let a = RecordBatch::try_new(schema(DataType::Int32), vec![Arc::new(Int32Array::from(vec![1]))]).unwrap();
    let b = RecordBatch::try_new(schema(DataType::Int64), vec![Arc::new(Int64Array::from(vec![2]))]).unwrap();
    write_parquet(&dir.path().join("p-0.parquet"), &[a]);
    write_parquet(&dir.path().join("p-1.parquet"), &[b]);
    let glob = dir.path().join("p-*.parquet");
    let Err(err) = ParquetSource::open(&[glob], 16) else { panic!("files of two types opened") };
    assert!(
        matches!(&err, ImportError::ColumnType { column, reason } if column == "x" && reason.contains("p-1.parquet")),
        "{err}"
    );
}

#[test]
fn an_unmapped_type_names_the_column_and_the_type() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.parquet");
    let schema = Arc::new(Schema::new(vec![Field::new("day", DataType::Date32, false)]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(arrow_array::Date32Array::from(vec![1]))]).unwrap();
    write_parquet(&file, &[batch]);
    let err = run(&[file], &dir.path().join("t"), &ImportOptions::default()).unwrap_err();
    assert!(
        matches!(&err, ImportError::ColumnType { column, reason } if column == "day" && reason.contains("Date32")),
        "{err}"
    );
}

#[test]
fn selection_renaming_and_codecs_shape_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.parquet");
    write_parquet(&file, &[all_types(0, 5)]);
    let dest = dir.path().join("t");
    let mut opts = ImportOptions::default();
    opts.columns.select = Some(vec!["text".into(), "meta.a".into(), "i64".into()]);
    opts.columns.rename = vec![("meta.a".into(), "a".into())];
    opts.columns.codecs = vec![("text".into(), loaderx::Codec::Raw)];
    run(std::slice::from_ref(&file), &dest, &opts).unwrap();
    let table = Table::open(&dest).unwrap();
    let names: Vec<&str> = table.columns().map(|(n, _, _)| n).collect();
    assert_eq!(names, ["text", "a", "i64"]);
    assert_eq!(fixed(&table, "a"), le(&[0i32, 2, 4, 6, 8], i32::to_le_bytes));
    let Some(TableColumn::Ragged(text)) = table.column("text") else { panic!() };
    assert_eq!(text.schema().codec, loaderx::Codec::Raw);
    let Some(TableColumn::Fixed(a)) = table.column("a") else { panic!() };
    assert_eq!(a.schema().codec, loaderx::Codec::Raw);
    opts.columns.select = Some(vec!["nope".into()]);
    let err = run(&[file], &dir.path().join("u"), &opts).unwrap_err();
    assert!(matches!(err, ImportError::InvalidArgument(ref m) if m.contains("\"nope\"")), "{err}");
}

/// Each column of the table at `dest`: its name, kind and codec.
fn codecs(dest: &Path) -> Vec<(String, ColumnType, loaderx::Codec)> {
    let table = Table::open(dest).unwrap();
    let codec = |column: &TableColumn| match column {
        TableColumn::Fixed(d) => d.schema().codec,
        TableColumn::Ragged(d) => d.schema().codec,
    };
    table.columns().map(|(name, kind, column)| (name.to_string(), kind, codec(column))).collect()
}

#[test]
fn a_columns_codec_follows_its_kind_unless_an_option_names_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.parquet");
    write_parquet(&file, &[all_types(0, 5)]);
    run(std::slice::from_ref(&file), &dir.path().join("t"), &ImportOptions::default()).unwrap();
    let by_kind = codecs(&dir.path().join("t"));
    assert!(by_kind.iter().any(|(_, kind, _)| *kind == ColumnType::Utf8), "{by_kind:?}");
    for (name, kind, codec) in &by_kind {
        assert_eq!(*codec, loaderx::import::kind_codec(*kind), "{name}");
        let want = if *kind == ColumnType::Utf8 { loaderx::Codec::Zstd } else { loaderx::Codec::Raw };
        assert_eq!(*codec, want, "{name}: zstd for text, raw for numbers and bytes");
    }
    let mut opts = ImportOptions::default();
    opts.columns.codec = Some(loaderx::Codec::Zstd);
    opts.columns.codecs = vec![("i64".into(), loaderx::Codec::Raw)];
    run(&[file], &dir.path().join("u"), &opts).unwrap();
    for (name, _, codec) in codecs(&dir.path().join("u")) {
        let want = if name == "i64" { loaderx::Codec::Raw } else { loaderx::Codec::Zstd };
        assert_eq!(codec, want, "{name}: the column's own codec, else every column's");
    }
}

#[test]
fn a_batch_of_large_rows_is_cut_to_about_64_mib() {
    // 40 rows of 2 MiB binary (incompressible enough with no codec set):
    // read 8,192 rows at a time, one batch would hold 80 MiB; the footer's
    // sizes cut it to 32 rows (64 MiB), and every row still arrives once.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.parquet");
    let rows: Vec<Vec<u8>> = (0..40u32).map(|i| (0..2u32 << 20).map(|j| (i * 7 + j * 13) as u8).collect()).collect();
    let values = arrow_array::BinaryArray::from_iter_values(rows.iter());
    let schema = Arc::new(Schema::new(vec![Field::new("blob", DataType::Binary, false)]));
    write_parquet(&path, &[RecordBatch::try_new(schema, vec![Arc::new(values)]).unwrap()]);
    let mut source = ParquetSource::open(&[path], loaderx::import::BATCH_ROWS_DEFAULT).unwrap();
    let mut sizes = Vec::new();
    while let Some(batch) = loaderx::import::Source::next_batch(&mut source).unwrap() {
        sizes.push(batch.num_rows());
    }
    assert_eq!(sizes.iter().sum::<usize>(), 40);
    assert!(sizes.iter().all(|&n| n <= 32), "batches of {sizes:?} rows");
}

#[test]
fn the_fingerprint_is_the_files_paths_lengths_and_modification_times() {
    use loaderx::import::Source;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.parquet");
    let batch = RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![1, 2, 3])) as ArrayRef)]).unwrap();
    write_parquet(&path, std::slice::from_ref(&batch));
    let print = || ParquetSource::open(std::slice::from_ref(&path), 3).unwrap().fingerprint();
    let first = print();
    assert!(first.starts_with("parquet files=1 bytes="), "{first}");
    assert_eq!(print(), first, "the same file gives the same fingerprint");
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000)).unwrap();
    drop(file);
    let touched = print();
    assert_ne!(touched, first, "the same bytes with another modification time are another input");
    assert_eq!(print(), touched);
}

/// Files of several row groups, read on 1 to 8 decoding threads from
/// several first rows: the same rows in the same order, whatever the
/// threads, and the progress reaches every byte of the input.
#[test]
fn row_groups_decoded_in_parallel_come_in_order_from_any_first_row() {
    use arrow_array::Int64Array;
    use loaderx::import::Source;
    use parquet::file::properties::WriterProperties;

    let dir = tempfile::tempdir().unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let (mut start, mut paths) = (0i64, Vec::new());
    for (k, (rows, group)) in [(50i64, 7usize), (13, 13), (40, 3)].into_iter().enumerate() {
        let path = dir.path().join(format!("part-{k}.parquet"));
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(group)).build();
        let mut writer =
            ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema.clone(), Some(props)).unwrap();
        let ids = Int64Array::from((start..start + rows).collect::<Vec<_>>());
        writer.write(&RecordBatch::try_new(schema.clone(), vec![Arc::new(ids)]).unwrap()).unwrap();
        writer.close().unwrap();
        (start, paths) = (start + rows, [paths, vec![path]].concat());
    }
    let total_bytes: u64 = paths.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    for threads in [1, 2, 3, 8] {
        for skip in [0u64, 1, 7, 10, 50, 56, 63, 64, 102, 103] {
            let mut source = ParquetSource::open(&paths, 4).unwrap().with_threads(threads);
            source.skip(skip).unwrap();
            let mut ids = Vec::new();
            while let Some(batch) = source.next_batch().unwrap() {
                assert!(batch.num_rows() <= 4, "a batch of {} rows", batch.num_rows());
                let column = batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                ids.extend(column.values().iter().copied());
            }
            assert_eq!(ids, (skip as i64..start).collect::<Vec<_>>(), "{threads} threads from row {skip}");
            assert_eq!(source.bytes_read(), total_bytes, "{threads} threads from row {skip}");
        }
    }
}

/// A footer whose row count is not its row groups' is refused when the
/// source opens, naming the file.
#[test]
fn a_footer_row_count_beside_its_row_groups_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.parquet");
    write_parquet(&path, &[all_types(0, 5)]);
    let good = ParquetSource::open(std::slice::from_ref(&path), 3).unwrap();
    drop(good);
    let mut bytes = std::fs::read(&path).unwrap();
    // The footer's num_rows (field 3 of FileMetaData, an i64 in the compact
    // protocol, zigzag: 5 is 0x0a): its only encoding as "16 0a" (field delta
    // 1 after field 2, type i64 = 6) in this small file's footer.
    let footer_len = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap()) as usize;
    let footer = bytes.len() - 8 - footer_len;
    let at = (footer..bytes.len() - 8).find(|&i| bytes[i] == 0x16 && bytes[i + 1] == 0x0a);
    let Some(at) = at else { panic!("no num_rows of 5 in the footer") };
    bytes[at + 1] = 0x0c;
    std::fs::write(&path, &bytes).unwrap();
    let Err(err) = ParquetSource::open(std::slice::from_ref(&path), 3) else {
        panic!("a footer of 6 rows over 5 opened")
    };
    let text = err.to_string();
    assert!(text.contains("bad.parquet") && text.contains("6 rows") && text.contains("5"), "{text}");
}
