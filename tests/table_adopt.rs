//! `adopt_tables`: staged tables adopted as new shards of a table's
//! columns in one commit; into a new table and an existing one (single
//! store and sharded columns); refused whole on a column mismatch; a
//! crash between the column shard tables and the commit left as the old
//! rows, and the next adoption past it; unlisted shard directories removed.

// Lists of row ranges, one range a list like any other.
#![allow(clippy::single_range_in_vec_init)]

use std::path::{Path, PathBuf};

use loaderx::dataset::{DType, WriteOptions};
use loaderx::table::{ColumnSpec, Commit, Table, TableColumn, TableError, TableWriter, Values, adopt_tables};

fn specs() -> Vec<ColumnSpec> {
    vec![ColumnSpec::fixed("x", DType::parse("<i8").unwrap(), &[2]), ColumnSpec::utf8("text")]
}

fn text(i: i64) -> String {
    format!("row {i}").repeat((i % 3) as usize)
}

/// A table at `path` of rows `range` (row `i`: `[i, -i]` and `text(i)`),
/// each column sharded every `shard` rows.
fn write(path: &Path, range: std::ops::Range<i64>, specs: &[ColumnSpec], shard: Option<u64>) {
    let opts = WriteOptions { shard_records: shard, ..WriteOptions::default() };
    let mut w = TableWriter::create(path, specs, &opts).unwrap();
    for i in range {
        let x: Vec<u8> = [i, -i].iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = text(i);
        w.append(&[Values::Fixed(&x), Values::Items(&[t.as_bytes()])]).unwrap();
    }
    w.commit().unwrap();
}

/// Every row of the table at `path`: `(x[0], text)`, checking `x[1]`.
fn read(path: &Path) -> Vec<(i64, String)> {
    let table = Table::open(path).unwrap();
    let all: Vec<u64> = (0..table.rows()).collect();
    let Some(TableColumn::Fixed(x)) = table.column("x") else { panic!("x is fixed") };
    let x = x.gather(&all).unwrap();
    let xs: &[i64] = bytemuck::cast_slice(x.as_bytes());
    let texts = table.strings("text", &all).unwrap();
    xs.chunks(2).zip(texts).map(|(p, t)| (assert_eq!(p[1], -p[0]), (p[0], t)).1).collect()
}

fn expect(ranges: &[std::ops::Range<i64>]) -> Vec<(i64, String)> {
    ranges.iter().flat_map(|r| r.clone().map(|i| (i, text(i)))).collect()
}

fn stage(dir: &Path, ranges: &[std::ops::Range<i64>]) -> Vec<PathBuf> {
    let paths: Vec<PathBuf> = (0..ranges.len()).map(|k| dir.join(format!("stage/{k}"))).collect();
    for (p, r) in paths.iter().zip(ranges) {
        write(p, r.clone(), &specs(), None);
    }
    paths
}

#[test]
fn adopts_into_a_new_table_then_appends() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t");
    let staged = stage(dir.path(), &[0..5, 5..5, 5..12]);
    assert_eq!(adopt_tables(&dest, &staged, &WriteOptions::default()).unwrap(), 12);
    assert_eq!(read(&dest), expect(&[0..12]));
    let staged = stage(&dir.path().join("again"), &[100..103, 200..201]);
    assert_eq!(adopt_tables(&dest, &staged, &WriteOptions::default()).unwrap(), 16);
    assert_eq!(read(&dest), expect(&[0..12, 100..103, 200..201]));
    // A writer of the table appends after the adopted shards.
    let mut w = TableWriter::open(&dest, &WriteOptions::default()).unwrap();
    let x: Vec<u8> = [7i64, -7].iter().flat_map(|v| v.to_le_bytes()).collect();
    w.append(&[Values::Fixed(&x), Values::Items(&[text(7).as_bytes()])]).unwrap();
    w.commit().unwrap();
    drop(w);
    assert_eq!(read(&dest), expect(&[0..12, 100..103, 200..201, 7..8]));
}

#[test]
fn adopts_into_a_sharded_table() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t");
    write(&dest, 0..10, &specs(), Some(4));
    let staged = stage(dir.path(), &[10..13, 13..20]);
    assert_eq!(adopt_tables(&dest, &staged, &WriteOptions::default()).unwrap(), 20);
    assert_eq!(read(&dest), expect(&[0..20]));
}

#[test]
fn a_mismatch_is_refused_before_anything_moves() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t");
    write(&dest, 0..3, &specs(), None);
    let staged = stage(dir.path(), &[3..5]);
    let other = dir.path().join("other");
    let specs = vec![ColumnSpec::fixed("x", DType::parse("<i4").unwrap(), &[2]), ColumnSpec::utf8("text")];
    let mut w = TableWriter::create(&other, &specs, &WriteOptions::default()).unwrap();
    w.append(&[Values::Fixed(&[0u8; 8]), Values::Items(&[b"a"])]).unwrap();
    w.commit().unwrap();
    drop(w);
    let e = adopt_tables(&dest, &[staged[0].clone(), other], &WriteOptions::default()).unwrap_err();
    assert!(matches!(e, TableError::ColumnKind { .. }), "{e}");
    assert!(staged[0].join("col-0000").exists(), "nothing moved");
    assert_eq!(read(&dest), expect(&[0..3]));
    let staged = stage(&dir.path().join("b"), &[5..6]);
    let renamed = dir.path().join("renamed");
    let specs = vec![ColumnSpec::fixed("y", DType::parse("<i8").unwrap(), &[2]), ColumnSpec::utf8("text")];
    write(&renamed, 0..1, &specs, None);
    let e = adopt_tables(&dest, &[staged[0].clone(), renamed], &WriteOptions::default()).unwrap_err();
    assert!(matches!(e, TableError::InvalidArgument(ref m) if m.contains("\"y\"")), "{e}");
    assert!(staged[0].join("col-0000").exists(), "nothing moved");
    assert_eq!(read(&dest), expect(&[0..3]));
}

#[test]
fn a_crash_before_the_commit_leaves_the_old_rows() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t");
    write(&dest, 0..4, &specs(), None);
    let old = Commit::read(&loaderx::io::real::RealFs, &dest).unwrap();
    let staged = stage(dir.path(), &[4..6, 6..9]);
    adopt_tables(&dest, &staged, &WriteOptions::default()).unwrap();
    // Every column's shard table replaced (A3), the commit (A4) not: as a
    // crash between them leaves it.
    old.write(&loaderx::io::real::RealFs, &dest).unwrap();
    // And a directory an earlier crash left unlisted.
    std::fs::create_dir_all(dest.join("col-0001/shard-000009")).unwrap();
    assert_eq!(read(&dest), expect(&[0..4]));
    let staged = stage(&dir.path().join("b"), &[50..52]);
    assert_eq!(adopt_tables(&dest, &staged, &WriteOptions::default()).unwrap(), 6);
    assert_eq!(read(&dest), expect(&[0..4, 50..52]));
    assert!(!dest.join("col-0001/shard-000009").exists());
}

#[test]
fn a_crash_between_the_renames_and_the_shard_tables_is_cleared_by_gc() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t");
    write(&dest, 0..4, &specs(), Some(2));
    // A staged column renamed into a shard slot (A2), its shard table not
    // yet replaced (A3): as a crash between them leaves it.
    let staged = stage(dir.path(), &[4..7]);
    let slot = dest.join("col-0000/shard-000002");
    std::fs::rename(staged[0].join("col-0000"), &slot).unwrap();
    assert_eq!(read(&dest), expect(&[0..4]));
    // A plain append that rolls over into that slot refuses it.
    let opts = WriteOptions { shard_records: Some(2), ..WriteOptions::default() };
    let append = |range: std::ops::Range<i64>| -> Result<u64, TableError> {
        let mut w = TableWriter::open(&dest, &opts)?;
        for i in range {
            let x: Vec<u8> = [i, -i].iter().flat_map(|v| v.to_le_bytes()).collect();
            w.append(&[Values::Fixed(&x), Values::Items(&[text(i).as_bytes()])])?;
        }
        w.commit()
    };
    assert!(append(4..7).is_err());
    assert_eq!(read(&dest), expect(&[0..4]));
    // gc removes it (under the writer lock), and the append then works.
    let removed = loaderx::table::remove_unlisted_shards(&dest, &opts).unwrap().unwrap();
    assert_eq!(removed, vec![slot.clone()]);
    assert!(!slot.exists());
    assert_eq!(append(4..7).unwrap(), 7);
    assert_eq!(read(&dest), expect(&[0..7]));
    // Nothing is left to remove; a held writer lock is reported, not waited on.
    assert_eq!(loaderx::table::remove_unlisted_shards(&dest, &opts).unwrap(), Some(vec![]));
    let held = TableWriter::open(&dest, &opts).unwrap();
    assert_eq!(loaderx::table::remove_unlisted_shards(&dest, &opts).unwrap(), None);
    drop(held);
}
