//! A table's commit file and columns are input: every damaged one is an
//! error naming what is wrong, for a reader and for a writer, never a
//! panic and never a read past what is there.

use std::path::Path;

use loaderx::dataset::{DType, WriteOptions};
use loaderx::table::{ColumnSpec, Table, TableError, TableWriter, Values};

/// A table of 3 committed rows: `x` (`<u2[2]`) and `s` (text).
fn table(path: &Path) -> String {
    let specs = [ColumnSpec::fixed("x", DType::parse("<u2").unwrap(), &[2]), ColumnSpec::utf8("s")];
    let mut writer = TableWriter::create(path, &specs, &WriteOptions::default()).unwrap();
    let s: [&[u8]; 3] = [b"a", b"bc", b""];
    writer.append(&[Values::Fixed(&[1u8; 12]), Values::Items(&s)]).unwrap();
    writer.commit().unwrap();
    std::fs::read_to_string(path.join("table.json")).unwrap()
}

/// What a case's error must be.
type Expect = fn(&TableError) -> bool;

#[test]
fn damaged_commit_files_are_refused_by_readers_and_writers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let good = table(&path);
    let cases: Vec<(String, Expect)> = vec![
        (good[..good.len() / 2].to_string(), |e| matches!(e, TableError::Commit { .. })),
        (String::new(), |e| matches!(e, TableError::Commit { .. })),
        (good.replace("col-0001", "../../elsewhere"), |e| matches!(e, TableError::Commit { .. })),
        (good.replace("col-0001", "/tmp"), |e| matches!(e, TableError::Commit { .. })),
        // Past a table's most rows (2^44: a column's most shards, full).
        (good.replace("\"rows\": 3", "\"rows\": 17592186044417"), |e| matches!(e, TableError::Commit { .. })),
        (good.replace("\"rows\": 3", "\"rows\": 99999999999"), |e| {
            matches!(e, TableError::ColumnShort { holds: 3, rows: 99_999_999_999, .. })
        }),
        (good.replace("\"rows\": 3", "\"rows\": 4"), |e| {
            matches!(e, TableError::ColumnShort { holds: 3, rows: 4, .. })
        }),
        (good.replace("\"kind\": \"fixed\"", "\"kind\": \"ragged\""), |e| matches!(e, TableError::ColumnKind { .. })),
        (good.replace("\"kind\": \"utf8\"", "\"kind\": \"fixed\""), |e| matches!(e, TableError::ColumnKind { .. })),
        (good.replace("\"name\": \"s\"", "\"name\": \"x\""), |e| matches!(e, TableError::Commit { .. })),
    ];
    for (k, (text, expected)) in cases.iter().enumerate() {
        assert_ne!(text, &good, "case {k} changed nothing");
        std::fs::write(path.join("table.json"), text).unwrap();
        let read = Table::open(&path).map(|_| ()).unwrap_err();
        assert!(expected(&read), "case {k}: a reader got {read:?}");
        let write = TableWriter::open(&path, &WriteOptions::default()).map(|_| ()).unwrap_err();
        assert!(expected(&write), "case {k}: a writer got {write:?}");
        assert!(!read.to_string().is_empty());
    }
    std::fs::write(path.join("table.json"), &good).unwrap();
    assert_eq!(Table::open(&path).unwrap().rows(), 3, "the good file still opens");
    // Still 3 rows everywhere: no writer trimmed on a bad file.
    assert_eq!(Table::open(&path).unwrap().strings("s", &[0, 1, 2]).unwrap(), ["a", "bc", ""]);
}

#[test]
fn a_missing_or_shortened_column_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    table(&path);
    // A column cut back below the commit, behind the table's back.
    let mut store = loaderx::Zrecord::open(path.join("col-0001")).unwrap();
    store.delete(&[2]).unwrap();
    drop(store);
    let e = Table::open(&path).unwrap_err();
    assert!(matches!(e, TableError::ColumnShort { holds: 2, rows: 3, .. }), "{e:?}");
    let e = TableWriter::open(&path, &WriteOptions::default()).map(|_| ()).unwrap_err();
    assert!(matches!(e, TableError::ColumnShort { holds: 2, rows: 3, .. }), "{e:?}");
    std::fs::remove_dir_all(path.join("col-0000")).unwrap();
    assert!(Table::open(&path).is_err());
}

#[test]
fn text_that_is_not_utf8_on_disk_is_refused_when_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    table(&path);
    // Rewrite the text column as bytes that are not UTF-8, in place of row 1.
    let u1 = DType::parse("|u1").unwrap();
    let mut store = loaderx::Zrecord::open(path.join("col-0001")).unwrap();
    store.delete(&[1, 2]).unwrap();
    drop(store);
    let rows: [&[u8]; 2] = [b"\xc3(", b""];
    loaderx::dataset::write_ragged_bytes(path.join("col-0001"), u1, &[], rows, &WriteOptions::default()).unwrap();
    let table = Table::open(&path).unwrap();
    assert_eq!(table.strings("s", &[0]).unwrap(), ["a"]);
    let e = table.strings("s", &[0, 1]).unwrap_err();
    assert!(matches!(e, TableError::NotUtf8 { row: 1, .. }), "{e:?}");
    assert!(table.values("s", &[5]).is_err(), "past the commit");
}
