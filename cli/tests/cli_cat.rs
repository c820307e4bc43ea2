//! `loaderx cat`: raw bytes by index and by range, to stdout or a file, and
//! `.npy` output for datasets.

mod common;

use common::*;
use loaderx::dataset::{WriteOptions, write_dataset, write_ragged};
use loaderx::{Codec, Zrecord};

#[test]
fn cat_indices_in_the_order_given() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let records = make_store(dir.path(), 8, Codec::Zstd);
    let out = loaderx(&["cat", path_str(dir.path()), "5", "0", "5", "7"]);
    ok(&out);
    assert_eq!(out.stdout, [&records[5][..], &records[0], &records[5], &records[7]].concat());
}

#[test]
fn cat_everything_by_default() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let records = make_store(dir.path(), 8, Codec::Raw);
    let out = loaderx(&["cat", path_str(dir.path())]);
    ok(&out);
    assert_eq!(out.stdout, records.concat());
}

#[test]
fn cat_range() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let records = make_store(dir.path(), 9, Codec::ZstdDict);
    let p = path_str(dir.path());
    for (range, want) in [
        ("2..5", records[2..5].concat()),
        ("0..9", records.concat()),
        ("6..", records[6..].concat()),
        ("..3", records[..3].concat()),
        ("4..4", Vec::new()),
        ("9..", Vec::new()),
    ] {
        let out = loaderx(&["cat", p, "--range", range]);
        assert!(out.status.success(), "{range}: {}", stderr(&out));
        assert_eq!(out.stdout, want, "--range {range}");
    }
}

#[test]
fn cat_out_file() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let records = make_store(&store, 20, Codec::Zstd);
    let file = dir.path().join("out.bin");
    let out = loaderx(&["cat", path_str(&store), "--range", "3..17", "--out", path_str(&file)]);
    assert!(ok(&out).is_empty());
    assert_eq!(std::fs::read(&file).unwrap(), records[3..17].concat());
}

#[test]
fn cat_leaves_the_store_untouched() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 5, Codec::Zstd);
    let before: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    let meta = std::fs::read(dir.path().join("meta.zr")).unwrap();
    // A writer holding the store open does not stop a read-only reader.
    let _writer = Zrecord::open(dir.path()).unwrap();
    ok(&loaderx(&["cat", path_str(dir.path())]));
    ok(&loaderx(&["stats", path_str(dir.path())]));
    let after: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(before, after);
    assert!(std::fs::read(dir.path().join("meta.zr")).unwrap() == meta);
}

#[test]
fn cat_npy_of_a_fixed_dataset() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..60).map(|v| v as f32 * 0.5).collect(); // 5 records of (3, 4)
    write_dataset(dir.path(), &values, &[3, 4], &WriteOptions::default()).unwrap();
    let out = loaderx(&["cat", path_str(dir.path()), "--npy", "4", "1"]);
    ok(&out);
    let (shape, got) = read_npy_f32(&out.stdout);
    assert_eq!(shape, [2, 3, 4]);
    assert_eq!(got, [&values[48..60], &values[12..24]].concat());

    // `--out x.npy` implies --npy; a range.
    let file = dir.path().join("x.npy");
    ok(&loaderx(&["cat", path_str(dir.path()), "--range", "1..5", "--out", path_str(&file)]));
    let (shape, got) = read_npy_f32(&std::fs::read(&file).unwrap());
    assert_eq!(shape, [4, 3, 4]);
    assert_eq!(got, values[12..]);
}

#[test]
fn cat_npy_of_one_ragged_record() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Vec<f32>> = vec![vec![1.0, 2.0], vec![3.0, 4.0, 5.0, 6.0, 7.0, 8.0]];
    write_ragged(dir.path(), &[2], &rows, &WriteOptions::default()).unwrap();
    let p = path_str(dir.path());
    let out = loaderx(&["cat", p, "--npy", "1"]);
    let (shape, got) = read_npy_f32(&out.stdout);
    assert_eq!(shape, [3, 2]);
    assert_eq!(got, rows[1]);
    let out = loaderx(&["cat", p, "--npy", "0", "1"]);
    assert_fails(&out, "give one INDEX");
    assert!(out.stdout.is_empty());
}

#[test]
fn cat_npy_needs_a_schema_and_matching_lengths() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    make_store(&store, 4, Codec::Raw);
    let out = loaderx(&["cat", path_str(&store), "--npy"]);
    assert_fails(&out, "no schema.json");
    assert!(out.stdout.is_empty());

    // A record appended behind the schema's back: named, nothing written.
    let ds = dir.path().join("ds");
    write_dataset(&ds, &[1.0f32; 8], &[2], &WriteOptions::default()).unwrap();
    Zrecord::open(&ds).unwrap().append(&[0u8; 5], 1, 5, Codec::Raw).unwrap();
    let file = dir.path().join("out.npy");
    let out = loaderx(&["cat", path_str(&ds), "--out", path_str(&file)]);
    assert_fails(&out, "record 4 is 5 bytes");
    assert!(!file.exists());
}

#[test]
fn cat_errors() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    make_store(&store, 4, Codec::Zstd);
    let p = path_str(&store);

    assert_fails(&loaderx(&["cat", path_str(&dir.path().join("nope")), "0"]), "nope: no such directory");

    // Nothing is written before the bad index is found.
    let out = loaderx(&["cat", p, "0", "1", "4"]);
    assert_fails(&out, "index 4 out of range (store holds 4 records)");
    assert!(out.stdout.is_empty());
    let out = loaderx(&["cat", p, "--range", "2..5"]);
    assert_fails(&out, "index 4 out of range");
    assert!(out.stdout.is_empty());
    assert_fails(&loaderx(&["cat", p, "--range", "7.."]), "out of range");
    let file = dir.path().join("out.bin");
    assert_fails(&loaderx(&["cat", p, "9", "--out", path_str(&file)]), "index 9 out of range");
    assert!(!file.exists());

    let unwritable = dir.path().join("no-such-dir").join("out.bin");
    assert_fails(&loaderx(&["cat", p, "--out", path_str(&unwritable)]), "cannot create");
}

#[test]
fn cat_corrupt_record_removes_partial_output() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    make_store(&store, 30, Codec::Zstd);
    // Damage the stored bytes of the last record (zstd's checksum catches it).
    let (offset, phys) = stored_extent(&store, 29);
    flip_byte(&store.join("0.zr"), offset + phys - 6);
    let file = dir.path().join("out.bin");
    let out = loaderx(&["cat", path_str(&store), "--out", path_str(&file)]);
    assert_fails(&out, "record 29");
    assert!(!file.exists(), "a failed --out must not leave a partial file");
}

/// `loaderx ARGS` with standard output a terminal (through util-linux
/// `script`): its exit code and what the terminal showed.
fn on_a_terminal(args: &[&str]) -> (Option<i32>, String) {
    let mut line = String::from(env!("CARGO_BIN_EXE_loaderx"));
    for arg in args {
        line.push_str(&format!(" '{arg}'"));
    }
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux script runs");
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Finding 10 of issue 18: binary records are not dumped on a terminal
/// unless asked for; a pipe or --out gets them as before.
#[test]
fn cat_refuses_a_terminal_without_to_terminal() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 3, Codec::Raw);
    let (code, shown) = on_a_terminal(&["cat", path_str(dir.path())]);
    assert_eq!(code, Some(1), "{shown}");
    assert!(shown.contains("refusing to write binary records to a terminal"), "{shown}");
    let (code, shown) = on_a_terminal(&["cat", path_str(dir.path()), "--to-terminal"]);
    assert_eq!(code, Some(0), "{shown}");
    let file = dir.path().join("out.bin");
    let (code, shown) = on_a_terminal(&["cat", path_str(dir.path()), "--out", path_str(&file)]);
    assert_eq!(code, Some(0), "{shown}");
    assert_eq!(std::fs::read(&file).unwrap(), read_all(dir.path()).concat());
}

/// `--text` on a fixed-shape dataset: one `INDEX<TAB>VALUE` line per record,
/// the values by dtype nested as the shape; `--range A..B` stops before B.
#[test]
fn cat_text_prints_a_datasets_values() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..20).map(|v| v as f32 * 0.5 - 2.0).collect();
    write_dataset(dir.path(), &values, &[2, 2], &WriteOptions::codec(Codec::Zstd)).unwrap();
    let text = ok(&loaderx(&["cat", path_str(dir.path()), "--text", "--range", "1..3"]));
    assert_eq!(text, "1\t[[0.0, 0.5], [1.0, 1.5]]\n2\t[[2.0, 2.5], [3.0, 3.5]]\n");
    let scalars = dir.path().join("labels");
    write_dataset(&scalars, &[-3i64, 7, 9], &[], &WriteOptions::default()).unwrap();
    let text = ok(&loaderx(&["cat", path_str(&scalars), "--text", "2", "0"]));
    assert_eq!(text, "2\t9\n0\t-3\n");
}

/// A ragged record prints as its rows; a plain store's bytes as escaped text.
#[test]
fn cat_text_prints_ragged_rows_and_escaped_bytes() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Vec<i32>> = vec![vec![1, 2, 3, 4, 5, 6], vec![], vec![-7, 8]];
    let ragged = dir.path().join("ragged");
    write_ragged(&ragged, &[2], &rows, &WriteOptions::default()).unwrap();
    let text = ok(&loaderx(&["cat", path_str(&ragged), "--text"]));
    assert_eq!(text, "0\t[[1, 2], [3, 4], [5, 6]]\n1\t[]\n2\t[[-7, 8]]\n");

    let plain = dir.path().join("plain");
    let store = Zrecord::open(&plain).unwrap();
    let records = [b"hello world".to_vec(), b"tab\there\nnl \\ \"q\"".to_vec(), vec![0, 0xff, b'A']];
    append_records(&store, &records, Codec::Raw);
    drop(store);
    let text = ok(&loaderx(&["cat", path_str(&plain), "--text"]));
    assert_eq!(text, "0\thello world\n1\ttab\\there\\nnl \\\\ \\\"q\\\"\n2\t\\x00\\xffA\n");
}

/// A record whose length does not fit the schema is an error naming it, and
/// `--text` with `--npy` is bad usage.
#[test]
fn cat_text_refuses_records_that_do_not_fit() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &[1u32, 2, 3, 4], &[2], &WriteOptions::codec(Codec::Raw)).unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    append_records(&store, &[vec![1, 2, 3]], Codec::Raw);
    drop(store);
    let p = path_str(dir.path());
    assert_eq!(ok(&loaderx(&["cat", p, "--text", "--range", "..2"])), "0\t[1, 2]\n1\t[3, 4]\n");
    assert_fails(&loaderx(&["cat", p, "--text"]), "record 2 is 3 bytes, not the schema's 8");
    assert_usage(&loaderx(&["cat", p, "--text", "--npy"]));
}

/// `--help` says that a range excludes its end.
#[test]
fn cat_help_says_the_range_excludes_its_end() {
    let help = ok(&loaderx(&["cat", "--help"]));
    assert!(help.contains("B excluded"), "{help}");
}

#[test]
fn cat_text_prints_a_table_text_column_as_its_strings() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"id\": 1, \"caption\": \"h\u{e9}llo\"}\n{\"id\": 2, \"caption\": \"two\\nlines\"}\n")
        .unwrap();
    let table = dir.path().join("t");
    ok(&loaderx(&["import", path_str(&input), path_str(&table)]));
    let caption = (0..2).map(|k| table.join(format!("col-{k:04}"))).find(|c| {
        let schema = std::fs::read_to_string(c.join("schema.json")).unwrap();
        !schema.contains("<i8")
    });
    let caption = caption.expect("a text column");
    let text = ok(&loaderx(&["cat", path_str(&caption), "--text"]));
    assert_eq!(text, "0\th\u{e9}llo\n1\ttwo\\nlines\n");
    // The bytes, as before, without --text.
    let out = loaderx(&["cat", path_str(&caption), "1"]);
    assert_eq!(out.stdout, b"two\nlines");
}
