//! `loaderx delete`: swap-with-last by index, from arguments, a file or
//! standard input; nothing changes when an index is bad.

mod common;

use common::*;
use loaderx::{Codec, Zrecord};

#[test]
fn delete_by_swap_with_last() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let mut records = make_store(dir.path(), 10, Codec::Zstd);
    let json = ok_json(&loaderx(&["delete", path_str(dir.path()), "2", "9", "2", "0", "--json"]));
    model_delete(&mut records, &[2, 9, 0]);
    assert_eq!(json["deleted"], 3);
    assert_eq!(json["records_before"], 10);
    assert_eq!(json["records"], 7);
    assert!(json["reclaimable"].as_u64().unwrap() > 0);
    assert_eq!(read_all(dir.path()), records);
}

#[test]
fn delete_from_a_file_and_from_stdin() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let mut records = make_store(&store, 12, Codec::Raw);
    let list = dir.path().join("doomed.txt");
    std::fs::write(&list, "# rejected samples\n1 3\n\n5\t7 # and seven\n").unwrap();
    let text = ok(&loaderx(&["delete", path_str(&store), "11", "--from-file", path_str(&list)]));
    model_delete(&mut records, &[11, 1, 3, 5, 7]);
    assert!(text.contains("deleted        5 records (5 indices given)\n"), "{text}");
    assert!(text.contains("records        7 (was 12;"), "{text}");
    assert_eq!(read_all(&store), records);

    ok(&loaderx_stdin(&["delete", path_str(&store), "--from-file", "-"], "0\n6\n"));
    model_delete(&mut records, &[0, 6]);
    assert_eq!(read_all(&store), records);

    // An empty list deletes nothing.
    std::fs::write(&list, "# nothing\n").unwrap();
    let json = ok_json(&loaderx(&["delete", path_str(&store), "--from-file", path_str(&list), "--json"]));
    assert_eq!(json["deleted"], 0);
    assert_eq!(read_all(&store), records);
}

#[test]
fn a_bad_index_changes_nothing() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let records = make_store(&store, 4, Codec::Zstd);
    let p = path_str(&store);
    assert_fails(&loaderx(&["delete", p, "1", "4"]), "index 4 out of range (store holds 4 records)");
    assert_eq!(read_all(&store), records);

    let list = dir.path().join("doomed.txt");
    std::fs::write(&list, "1\n2 two\n").unwrap();
    assert_fails(&loaderx(&["delete", p, "--from-file", path_str(&list)]), "line 2: `two` is not a record index");
    assert_fails(&loaderx(&["delete", p, "--from-file", path_str(&dir.path().join("none"))]), "cannot open");
    assert_eq!(read_all(&store), records);

    let missing = dir.path().join("nope");
    assert_fails(&loaderx(&["delete", path_str(&missing), "0"]), "nope: no such directory");
    assert!(!missing.exists(), "delete must not create a store");

    let _writer = Zrecord::open(&store).unwrap();
    assert_fails(&loaderx(&["delete", p, "0"]), "another writer has the store open");
}

#[test]
fn delete_needs_indices_and_warns_in_help() {
    let dir = tempfile::tempdir().unwrap();
    assert_usage(&loaderx(&["delete", path_str(dir.path())]));
    assert_usage(&loaderx(&["delete", path_str(dir.path()), "x"]));
    let text = ok(&loaderx(&["delete", "--help"]));
    assert!(text.contains("indices are not stable"), "{text}");
}

#[test]
fn delete_finishes_an_interrupted_delete_first() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let records = make_store(dir.path(), 6, Codec::Raw);
    let mut after = pending_delete(dir.path(), &records, 0);
    assert_fails(&loaderx(&["verify", path_str(dir.path())]), "interrupted");
    ok(&loaderx(&["delete", path_str(dir.path()), "1"]));
    model_delete(&mut after, &[1]);
    assert_eq!(read_all(dir.path()), after);
}
