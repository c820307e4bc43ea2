//! Tables whose columns roll over into shards (a small `shard_records`),
//! against an in-memory oracle: written past shard boundaries, reopened,
//! an uncommitted tail that spans a rollover trimmed by a writer's open,
//! and read back; and the dataset layer's [`DatasetAppender`] against the
//! `write_*` functions it serves.

use std::path::Path;
use std::sync::Arc;

use loaderx::Codec;
use loaderx::dataset::{
    DType, Dataset, DatasetAppender, RaggedDataset, ShardTable, WriteOptions, write_dataset_bytes, write_ragged_bytes,
};
use loaderx::format::column_dir_name;
use loaderx::io::real::RealFs;
use loaderx::table::{ColumnSpec, Table, TableColumn, TableWriter, Values};

/// Row `i` of the oracle: a fixed `<u4[2]`, a ragged `<u2`, text.
fn row(i: usize) -> [Vec<u8>; 3] {
    let x: Vec<u8> = [i as u32, (i * 7 + 1) as u32].iter().flat_map(|v| v.to_le_bytes()).collect();
    let ids: Vec<u8> = (0..i % 5).flat_map(|j| ((i * 3 + j) as u16).to_le_bytes()).collect();
    let text = format!("row {i} é").repeat(i % 3).into_bytes();
    [x, ids, text]
}

fn columns() -> Vec<ColumnSpec> {
    let dtype = |s| DType::parse(s).unwrap();
    vec![
        ColumnSpec::fixed("x", dtype("<u4"), &[2]),
        ColumnSpec::ragged("ids", dtype("<u2"), &[]),
        ColumnSpec::utf8("text").with_codec(Codec::Raw),
    ]
}

/// Five rows a shard.
fn sharded() -> WriteOptions {
    WriteOptions { shard_records: Some(5), ..WriteOptions::default() }
}

fn append(writer: &mut TableWriter, range: std::ops::Range<usize>) {
    let rows: Vec<[Vec<u8>; 3]> = range.map(row).collect();
    let x: Vec<u8> = rows.iter().flat_map(|r| r[0].clone()).collect();
    let ids: Vec<&[u8]> = rows.iter().map(|r| r[1].as_slice()).collect();
    let text: Vec<&[u8]> = rows.iter().map(|r| r[2].as_slice()).collect();
    writer.append(&[Values::Fixed(&x), Values::Items(&ids), Values::Items(&text)]).unwrap();
}

/// Every row a reader of `path` sees.
fn read(path: &Path) -> Vec<[Vec<u8>; 3]> {
    let table = Table::open(path).unwrap();
    let all: Vec<u64> = (0..table.rows()).collect();
    let Some(TableColumn::Fixed(x)) = table.column("x") else { panic!("x is fixed") };
    let Some(TableColumn::Ragged(ids)) = table.column("ids") else { panic!("ids is ragged") };
    for (name, _, column) in table.columns() {
        assert_eq!(column.len(), table.rows(), "column {name}");
    }
    assert!(x.gather(&[table.rows()]).is_err(), "a row past the commit is out of range");
    let xs = x.gather(&all).unwrap();
    let ids = ids.gather(&all).unwrap();
    let text = table.strings("text", &all).unwrap();
    (0..all.len())
        .map(|k| [xs.as_bytes()[k * 8..][..8].to_vec(), ids.record(k).unwrap().to_vec(), text[k].clone().into_bytes()])
        .collect()
}

/// What each column's dataset holds, past the commit included.
fn held(path: &Path) -> [u64; 3] {
    let dir = |k| path.join(column_dir_name(k));
    [
        Dataset::open(dir(0)).unwrap().len(),
        RaggedDataset::open(dir(1)).unwrap().len(),
        RaggedDataset::open(dir(2)).unwrap().len(),
    ]
}

fn oracle(n: usize) -> Vec<[Vec<u8>; 3]> {
    (0..n).map(row).collect()
}

#[test]
fn a_table_past_shard_boundaries_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let mut writer = TableWriter::create(&path, &columns(), &sharded()).unwrap();
    for (start, n) in [(0, 3), (3, 4), (7, 9), (16, 1)] {
        append(&mut writer, start..start + n);
        assert_eq!(writer.commit().unwrap(), (start + n) as u64);
    }
    drop(writer);
    assert_eq!(read(&path), oracle(17));
    for k in 0..3 {
        let shards = ShardTable::read(&RealFs, &path.join(column_dir_name(k))).unwrap().unwrap();
        assert_eq!(shards.sealed, [5, 5, 5], "column {k}");
    }
    // Reopened for append: nothing to trim, the next rows continue.
    let mut writer = TableWriter::open(&path, &sharded()).unwrap();
    append(&mut writer, 17..31);
    writer.commit().unwrap();
    drop(writer);
    assert_eq!(read(&path), oracle(31));
    assert_eq!(held(&path), [31; 3]);
}

#[test]
fn an_uncommitted_tail_across_a_rollover_is_trimmed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let mut writer = TableWriter::create(&path, &columns(), &sharded()).unwrap();
    append(&mut writer, 0..7);
    writer.commit().unwrap();
    // 9 rows past the commit: shard 1 filled, shards 2 and 3 started.
    append(&mut writer, 7..16);
    drop(writer);
    assert_eq!(held(&path), [16; 3]);
    assert_eq!(read(&path), oracle(7), "a reader sees the committed rows only");
    let writer = TableWriter::open(&path, &sharded()).unwrap();
    assert_eq!((writer.rows(), writer.pending()), (7, 0));
    drop(writer);
    assert_eq!(held(&path), [7; 3], "the tail is trimmed in every column");
    assert_eq!(read(&path), oracle(7));
    let mut writer = TableWriter::open(&path, &sharded()).unwrap();
    append(&mut writer, 7..20);
    writer.commit().unwrap();
    drop(writer);
    assert_eq!(read(&path), oracle(20));
    assert_eq!(held(&path), [20; 3]);
}

#[test]
fn a_tail_reaching_into_sealed_shards_is_trimmed_and_the_table_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let mut writer = TableWriter::create(&path, &columns(), &sharded()).unwrap();
    append(&mut writer, 0..3);
    writer.commit().unwrap();
    // The tail fills shard 0, seals shard 1 and starts shard 2.
    append(&mut writer, 3..13);
    drop(writer);
    let writer = TableWriter::open(&path, &sharded()).unwrap();
    drop(writer);
    assert_eq!(held(&path), [3; 3]);
    for k in 0..3 {
        let shards = ShardTable::read(&RealFs, &path.join(column_dir_name(k))).unwrap().unwrap();
        assert_eq!((shards.sealed, shards.pending), (vec![3, 0], None), "column {k}: the emptied shards stay");
    }
    assert_eq!(read(&path), oracle(3));
    let mut writer = TableWriter::open(&path, &sharded()).unwrap();
    append(&mut writer, 3..14);
    writer.commit().unwrap();
    drop(writer);
    assert_eq!(read(&path), oracle(14));
    assert_eq!(held(&path), [14; 3]);
}

/// The same records through the appender, batch after batch, and through
/// one call of the write function: the same datasets.
#[test]
fn the_appender_writes_what_the_write_functions_write() {
    let dir = tempfile::tempdir().unwrap();
    let u4 = DType::parse("<u4").unwrap();
    let values: Vec<u32> = (0..600u32).map(|i| i.wrapping_mul(2_654_435_761) % 1000).collect();
    let bytes: &[u8] = bytemuck::cast_slice(&values);
    let opts = WriteOptions { shard_records: Some(64), ..WriteOptions::codec(Codec::ZstdDict) };
    let (whole, batched) = (dir.path().join("whole"), dir.path().join("batched"));
    assert_eq!(write_dataset_bytes(&whole, u4, &[3], bytes, &opts).unwrap(), 200);
    let mut appender = DatasetAppender::fixed_in(Arc::new(RealFs), &batched, u4, &[3], &opts).unwrap();
    for batch in bytes.chunks(12 * 17) {
        assert_eq!(appender.append_fixed(batch).unwrap(), (batch.len() / 12) as u64);
    }
    assert_eq!(appender.len(), 200);
    assert!(appender.append_fixed(&bytes[..11]).is_err(), "a partial record is refused");
    assert!(appender.append_items(&[&bytes[..4]]).is_err(), "items for a fixed dataset are refused");
    assert_eq!(appender.len(), 200, "a refused append writes nothing");
    drop(appender);
    let all: Vec<u64> = (0..200).collect();
    let (a, b) = (Dataset::open(&whole).unwrap(), Dataset::open(&batched).unwrap());
    assert_eq!((a.len(), a.shards()), (b.len(), b.shards()));
    assert_eq!((b.len(), b.shards()), (200, 4));
    assert_eq!(a.gather(&all).unwrap().as_bytes(), bytes);
    assert_eq!(b.gather(&all).unwrap().as_bytes(), bytes);
    assert_eq!(a.schema(), b.schema());

    let items: Vec<Vec<u8>> = (0..150usize).map(|i| (0..i % 9).flat_map(|j| [(i + j) as u8, 7]).collect()).collect();
    let u2 = DType::parse("<u2").unwrap();
    let (whole, batched) = (dir.path().join("ragged_whole"), dir.path().join("ragged_batched"));
    assert_eq!(write_ragged_bytes(&whole, u2, &[], &items, &opts).unwrap(), 150);
    let mut appender = DatasetAppender::ragged_in(Arc::new(RealFs), &batched, u2, &[], &opts).unwrap();
    for batch in items.chunks(40) {
        let batch: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
        appender.append_items(&batch).unwrap();
    }
    assert!(appender.append_items(&[&[1u8, 2], &[3u8]]).is_err(), "an odd byte of a <u2 row is refused");
    assert!(appender.append_fixed(&[0u8; 2]).is_err(), "fixed records for a ragged dataset are refused");
    assert_eq!(appender.len(), 150);
    // The appender's own truncate: the last 100, across shards.
    assert_eq!(appender.truncate(50).unwrap(), 100);
    assert_eq!((appender.len(), appender.truncate(50).unwrap()), (50, 0));
    drop(appender);
    let all: Vec<u64> = (0..150).collect();
    let a = RaggedDataset::open(&whole).unwrap().gather(&all).unwrap();
    let b = RaggedDataset::open(&batched).unwrap().gather(&all[..50]).unwrap();
    for (k, item) in items.iter().enumerate() {
        assert_eq!(a.record(k).unwrap(), item.as_slice(), "record {k}");
        if k < 50 {
            assert_eq!(b.record(k).unwrap(), item.as_slice(), "record {k}");
        }
    }
    assert_eq!(RaggedDataset::open(&batched).unwrap().len(), 50);
}
