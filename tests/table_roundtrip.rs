//! Tables against an in-memory oracle: every column kind written, reopened
//! and appended to; the rows a reader sees are the committed ones; the
//! columns fed to the `DataLoader`.

use std::path::Path;

use loaderx::dataset::{DType, WriteOptions};
use loaderx::loader::DataLoader;
use loaderx::table::{ColumnSpec, ColumnType, Table, TableColumn, TableError, TableWriter, Values};

/// A row of the oracle: a fixed `<f4[3]`, a ragged `<i8`, bytes and text.
#[derive(Clone, Debug, PartialEq)]
struct Row {
    x: [f32; 3],
    ids: Vec<i64>,
    blob: Vec<u8>,
    text: String,
}

fn row(i: usize) -> Row {
    Row {
        x: [i as f32, -(i as f32), 0.5 * i as f32],
        ids: (0..i % 4).map(|j| (i * 10 + j) as i64 - 7).collect(),
        blob: (0..i % 6).map(|j| (i * 13 + j) as u8).collect(),
        text: ["", "a", "é日本", "../x", "line\nbreak"][i % 5].repeat(1 + i % 2),
    }
}

fn columns() -> Vec<ColumnSpec> {
    let dtype = |s| DType::parse(s).unwrap();
    vec![
        ColumnSpec::fixed("x", dtype("<f4"), &[3]),
        ColumnSpec::ragged("ids", dtype("<i8"), &[]),
        ColumnSpec::bytes("blob"),
        ColumnSpec::utf8("text"),
    ]
}

/// Appends oracle rows `range` as one batch: the ragged, bytes and text
/// values one slice per row for a range from an even row, packed back to
/// back for one from an odd row.
fn append(writer: &mut TableWriter, range: std::ops::Range<usize>) -> Result<u64, TableError> {
    let packed = range.start % 2 == 1;
    let rows: Vec<Row> = range.map(row).collect();
    let x: Vec<u8> = rows.iter().flat_map(|r| bytemuck::cast_slice::<f32, u8>(&r.x).to_vec()).collect();
    let ids: Vec<Vec<u8>> = rows.iter().map(|r| bytemuck::cast_slice::<i64, u8>(&r.ids).to_vec()).collect();
    let ids: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
    let blob: Vec<&[u8]> = rows.iter().map(|r| r.blob.as_slice()).collect();
    let text: Vec<&[u8]> = rows.iter().map(|r| r.text.as_bytes()).collect();
    if !packed {
        return writer.append(&[Values::Fixed(&x), Values::Items(&ids), Values::Items(&blob), Values::Items(&text)]);
    }
    let (ids, blob, text) = (pack(&ids), pack(&blob), pack(&text));
    writer.append(&[Values::Fixed(&x), ids.values(), blob.values(), text.values()])
}

/// Values packed back to back, as `Values::Packed` takes them.
struct Packed(Vec<u8>, Vec<u32>);

impl Packed {
    fn values(&self) -> Values<'_> {
        Values::Packed { data: &self.0, lens: &self.1 }
    }
}

fn pack(items: &[&[u8]]) -> Packed {
    Packed(items.concat(), items.iter().map(|i| i.len() as u32).collect())
}

/// Every row a reader of `path` sees.
fn read(path: &Path) -> Vec<Row> {
    let table = Table::open(path).unwrap();
    let all: Vec<u64> = (0..table.rows()).collect();
    let Some(TableColumn::Fixed(x)) = table.column("x") else { panic!("x is fixed") };
    let Some(TableColumn::Ragged(ids)) = table.column("ids") else { panic!("ids is ragged") };
    let x = x.gather(&all).unwrap();
    let ids = ids.gather(&all).unwrap();
    let blob = table.values("blob", &all).unwrap();
    let text = table.strings("text", &all).unwrap();
    let xs: &[f32] = bytemuck::cast_slice(x.as_bytes());
    (0..all.len())
        .map(|k| Row {
            x: xs[k * 3..][..3].try_into().unwrap(),
            ids: ids.record(k).unwrap().chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect(),
            blob: blob[k].clone(),
            text: text[k].clone(),
        })
        .collect()
}

fn oracle(n: usize) -> Vec<Row> {
    (0..n).map(row).collect()
}

#[test]
fn every_kind_round_trips_through_writes_reopens_and_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let opts = WriteOptions::default();
    let mut writer = TableWriter::create(&path, &columns(), &opts).unwrap();
    assert_eq!(read(&path), oracle(0));
    assert_eq!(append(&mut writer, 0..7).unwrap(), 7);
    assert_eq!((writer.rows(), writer.pending()), (0, 7));
    assert_eq!(read(&path), oracle(0), "appended rows are not seen before the commit");
    assert_eq!(writer.commit().unwrap(), 7);
    append(&mut writer, 7..9).unwrap();
    assert_eq!(writer.commit().unwrap(), 9);
    drop(writer);
    assert_eq!(read(&path), oracle(9));
    let mut writer = TableWriter::open(&path, &opts).unwrap();
    assert_eq!(writer.rows(), 9);
    append(&mut writer, 9..20).unwrap();
    append(&mut writer, 20..21).unwrap();
    writer.commit().unwrap();
    assert_eq!(read(&path), oracle(21));
    let table = Table::open(&path).unwrap();
    let kinds: Vec<(&str, ColumnType)> = table.columns().map(|(n, k, _)| (n, k)).collect();
    let names = [("x", ColumnType::Fixed), ("ids", ColumnType::Ragged), ("blob", ColumnType::Bytes)];
    assert_eq!(kinds[..3], names);
    assert_eq!(kinds[3], ("text", ColumnType::Utf8));
}

#[test]
fn a_numeric_column_is_a_dataset_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let mut writer = TableWriter::create(&path, &columns(), &WriteOptions::default()).unwrap();
    append(&mut writer, 0..5).unwrap();
    writer.commit().unwrap();
    let x = loaderx::dataset::Dataset::open(path.join("col-0000")).unwrap();
    let got: Vec<f32> =
        x.gather(&[4]).unwrap().as_bytes().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(got, row(4).x);
    let ids = loaderx::dataset::RaggedDataset::open(path.join("col-0001")).unwrap();
    assert_eq!(ids.len(), 5);
}

#[test]
fn an_uncommitted_tail_is_not_seen_and_a_writers_open_trims_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let opts = WriteOptions::default();
    let mut writer = TableWriter::create(&path, &columns(), &opts).unwrap();
    append(&mut writer, 0..4).unwrap();
    writer.commit().unwrap();
    append(&mut writer, 4..6).unwrap();
    drop(writer); // as a crash before the commit: every column holds 6
    // and one column more, appended to directly.
    loaderx::dataset::write_ragged_bytes(path.join("col-0002"), DType::parse("|u1").unwrap(), &[], [b"zz"], &opts)
        .unwrap();
    let table = Table::open(&path).unwrap();
    assert_eq!(table.rows(), 4);
    for (name, _, column) in table.columns() {
        assert_eq!(column.len(), 4, "{name}");
    }
    let Some(TableColumn::Fixed(x)) = table.column("x") else { panic!() };
    assert!(x.gather(&[4]).is_err(), "a row past the commit is out of range");
    assert!(table.values("blob", &[6]).is_err());
    drop(table);
    assert_eq!(read(&path), oracle(4));
    let mut writer = TableWriter::open(&path, &opts).unwrap();
    let held = [
        loaderx::dataset::Dataset::open(path.join("col-0000")).unwrap().len(),
        loaderx::dataset::RaggedDataset::open(path.join("col-0002")).unwrap().len(),
    ];
    assert_eq!(held, [4, 4], "the writer's open trimmed every column");
    append(&mut writer, 4..8).unwrap();
    writer.commit().unwrap();
    assert_eq!(read(&path), oracle(8));
}

#[test]
fn batches_of_unequal_or_wrong_values_are_refused_and_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let mut writer = TableWriter::create(&path, &columns(), &WriteOptions::default()).unwrap();
    let x = [0u8; 24]; // two rows of <f4[3]
    let one: [&[u8]; 1] = [b"a"];
    let two: [&[u8]; 2] = [b"a", b"b"];
    let bad_text: [&[u8]; 2] = [b"ok", b"\xff\xfe"];
    let ids: [&[u8]; 2] = [&[0; 8], &[]];
    let unequal = writer.append(&[Values::Fixed(&x), Values::Items(&ids), Values::Items(&one), Values::Items(&two)]);
    assert!(matches!(unequal, Err(TableError::InvalidArgument(_))), "{unequal:?}");
    let not_utf8 =
        writer.append(&[Values::Fixed(&x), Values::Items(&ids), Values::Items(&two), Values::Items(&bad_text)]);
    assert!(matches!(not_utf8, Err(TableError::NotUtf8 { row: 1, .. })), "{not_utf8:?}");
    let short = writer.append(&[Values::Fixed(&x), Values::Items(&ids), Values::Items(&two)]);
    assert!(matches!(short, Err(TableError::InvalidArgument(_))), "{short:?}");
    let kinds = writer.append(&[Values::Items(&two), Values::Items(&two), Values::Items(&two), Values::Items(&two)]);
    assert!(matches!(kinds, Err(TableError::InvalidArgument(_))), "{kinds:?}");
    let ragged_x =
        writer.append(&[Values::Fixed(&x[..20]), Values::Items(&ids), Values::Items(&two), Values::Items(&two)]);
    assert!(matches!(ragged_x, Err(TableError::InvalidArgument(_))), "{ragged_x:?}");
    // ids' items are 8-byte rows: a 1-byte one is refused before any column is written.
    let ids_rows = writer.append(&[Values::Fixed(&x), Values::Items(&two), Values::Items(&two), Values::Items(&two)]);
    assert!(matches!(ids_rows, Err(TableError::InvalidArgument(_))), "{ids_rows:?}");
    // The same, packed: text not UTF-8 at row 1, a 1-byte row of ids, and
    // lengths that do not sum to the bytes given (short, long, overflowing).
    let (ids_packed, two_packed) = (pack(&ids), pack(&two));
    let not_utf8 =
        writer.append(&[Values::Fixed(&x), ids_packed.values(), two_packed.values(), pack(&bad_text).values()]);
    assert!(matches!(not_utf8, Err(TableError::NotUtf8 { row: 1, .. })), "{not_utf8:?}");
    let ids_rows = writer.append(&[Values::Fixed(&x), two_packed.values(), two_packed.values(), two_packed.values()]);
    assert!(matches!(ids_rows, Err(TableError::InvalidArgument(_))), "{ids_rows:?}");
    for lens in [&[8u32, 1][..], &[4, 2][..], &[1][..], &[u32::MAX, u32::MAX, 10][..]] {
        let bad = Values::Packed { data: &[0; 8], lens };
        let sums = writer.append(&[Values::Fixed(&x), bad, two_packed.values(), two_packed.values()]);
        assert!(matches!(&sums, Err(TableError::InvalidArgument(m)) if m.contains("sum")), "{lens:?}: {sums:?}");
    }
    assert_eq!(writer.pending(), 0);
    assert_eq!(
        writer.append(&[Values::Fixed(&x), Values::Items(&ids), Values::Items(&two), Values::Items(&two)]).unwrap(),
        2
    );
    assert_eq!(writer.commit().unwrap(), 2);
    assert_eq!(loaderx::dataset::Dataset::open(path.join("col-0000")).unwrap().len(), 2);
}

#[test]
fn one_writer_at_a_time_and_no_second_create() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let opts = WriteOptions::default();
    let writer = TableWriter::create(&path, &columns(), &opts).unwrap();
    assert!(matches!(TableWriter::open(&path, &opts), Err(TableError::Locked { .. })));
    drop(writer);
    assert!(matches!(TableWriter::create(&path, &columns(), &opts), Err(TableError::Exists { .. })));
    TableWriter::open(&path, &opts).unwrap();
    let missing = dir.path().join("none");
    assert!(matches!(Table::open(&missing), Err(TableError::NotATable { .. })));
    assert!(matches!(TableWriter::open(&missing, &opts), Err(TableError::NotATable { .. })));
}

#[test]
fn bad_column_names_are_refused_and_odd_ones_stay_inside() {
    let dir = tempfile::tempdir().unwrap();
    let opts = WriteOptions::default();
    let long = "n".repeat(256);
    for (k, names) in [vec![""], vec![long.as_str()], vec!["a", "a"], vec!["nul\0"], vec![]].iter().enumerate() {
        let specs: Vec<ColumnSpec> = names.iter().map(|&n| ColumnSpec::bytes(n)).collect();
        let path = dir.path().join(format!("bad{k}"));
        let got = TableWriter::create(&path, &specs, &opts);
        assert!(matches!(got, Err(TableError::InvalidArgument(_))), "{names:?}: {:?}", got.err());
        assert!(!path.join("col-0000").exists(), "{names:?} left a column");
    }
    let path = dir.path().join("inner/t");
    let specs = [ColumnSpec::utf8("../../escape"), ColumnSpec::bytes("/etc/passwd"), ColumnSpec::bytes("..")];
    let mut writer = TableWriter::create(&path, &specs, &opts).unwrap();
    let v: [&[u8]; 1] = [b"v"];
    writer.append(&[Values::Items(&v), Values::Items(&v), Values::Items(&v)]).unwrap();
    writer.commit().unwrap();
    let mut entries: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    entries.sort();
    assert_eq!(entries, ["inner"], "refused creates made nothing, odd names no path");
    assert!(!dir.path().join("escape").exists());
    let table = Table::open(&path).unwrap();
    assert_eq!(table.strings("../../escape", &[0]).unwrap(), ["v"]);
    assert_eq!(table.values("..", &[0]).unwrap(), [b"v".to_vec()]);
}

#[test]
fn table_columns_feed_the_loader() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let mut writer = TableWriter::create(&path, &columns(), &WriteOptions::default()).unwrap();
    append(&mut writer, 0..10).unwrap();
    writer.commit().unwrap();
    append(&mut writer, 10..12).unwrap(); // not committed: the loader never draws it
    let table = Table::open(&path).unwrap();
    let mut builder = DataLoader::builder().batch_size(4).num_workers(1).seed(3);
    for (name, _, column) in table.columns() {
        builder = match column {
            TableColumn::Fixed(d) => builder.stream(name, d.clone()),
            TableColumn::Ragged(d) => builder.stream(name, d.clone()),
        };
    }
    let mut loader = builder.build().unwrap();
    for _ in 0..6 {
        let batch = loader.next_batch().unwrap();
        let xs: &[f32] = bytemuck::cast_slice(batch.dense("x").unwrap().as_bytes());
        let text = batch.ragged("text").unwrap();
        for (k, &i) in batch.indices().iter().enumerate() {
            assert!(i < 10, "index {i} past the commit");
            assert_eq!(xs[k * 3..][..3], row(i as usize).x);
            assert_eq!(text.record(k).unwrap(), row(i as usize).text.as_bytes());
        }
    }
}

#[test]
fn a_mark_is_committed_with_its_rows_and_a_plain_commit_clears_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let opts = WriteOptions::default();
    let mut writer = TableWriter::create(&path, &columns(), &opts).unwrap();
    append(&mut writer, 0..5).unwrap();
    assert_eq!(writer.commit_marked(Some("took 5".into())).unwrap(), 5);
    // A mark alone (no rows pending) is committed too.
    assert_eq!(writer.commit_marked(Some("took 5, file 2".into())).unwrap(), 5);
    append(&mut writer, 5..7).unwrap();
    drop(writer);
    // The rows appended after the mark were never committed: the reopen
    // trims them and finds the mark of the last commit.
    let table = Table::open(&path).unwrap();
    assert_eq!((table.rows(), table.mark()), (5, Some("took 5, file 2")));
    drop(table); // a reader would hold off the trim of the tail
    let mut writer = TableWriter::open(&path, &opts).unwrap();
    assert_eq!(writer.mark(), Some("took 5, file 2"));
    let huge = "m".repeat(loaderx::format::TABLE_MARK_BYTES_MAX + 1);
    assert!(matches!(writer.commit_marked(Some(huge)), Err(TableError::InvalidArgument(_))));
    append(&mut writer, 5..6).unwrap();
    assert_eq!(writer.commit().unwrap(), 6);
    assert_eq!(writer.mark(), None);
    drop(writer);
    let table = Table::open(&path).unwrap();
    assert_eq!((table.rows(), table.mark()), (6, None));
    assert_eq!(read(&path), oracle(6));
}
