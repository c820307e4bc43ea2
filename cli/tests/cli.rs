//! Runs the `loaderx` binary against stores written with the library.

use std::path::Path;
use std::process::{Command, Output};

use loaderx::{Codec, Zrecord, default_dict_size};

fn loaderx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_loaderx")).args(args).output().expect("run loaderx")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts a failure with exit code 1 and one line `loaderx: ...` containing `needle`.
fn assert_fails(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.starts_with("loaderx: "), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line, got: {err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

/// Record `k` of the test stores: `k + 1` copies of a letter, then a
/// compressible tail, so lengths and contents differ per record.
fn record(k: usize) -> Vec<u8> {
    let mut r = vec![b'a' + (k % 26) as u8; k + 1];
    r.extend(std::iter::repeat_n(b"tensor ".as_slice(), 20 + k).flatten());
    r
}

/// A store of `n` variable-size records with `codec`; returns the records.
fn make_store(dir: &Path, n: usize, codec: Codec) -> Vec<Vec<u8>> {
    let records: Vec<Vec<u8>> = (0..n).map(record).collect();
    let store = Zrecord::open(dir).unwrap();
    if codec == Codec::ZstdDict {
        let sizes: Vec<usize> = records.iter().map(Vec::len).collect();
        let flat = records.concat();
        store.train_dict(&flat, &sizes, default_dict_size(flat.len())).unwrap();
    }
    let src = records.concat();
    let lens: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
    let mut offsets = Vec::new();
    let mut at = 0u64;
    for &l in &lens {
        offsets.push(at);
        at += u64::from(l);
    }
    store.append_var(&src, &offsets, &lens, codec).unwrap();
    records
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn stats_table() {
    let dir = tempfile::tempdir().unwrap();
    let records = make_store(dir.path(), 10, Codec::Zstd);
    let out = loaderx(&["stats", path_str(dir.path())]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let logical: usize = records.iter().map(Vec::len).sum();
    assert!(text.contains("records        10\n"), "{text}");
    assert!(text.contains(&format!("logical bytes  {logical} (")), "{text}");
    assert!(text.contains("codecs         raw 0, zstd 10, zstd_dict 0\n"), "{text}");
    assert!(text.contains("(logical / live)"), "{text}");
    assert!(text.contains("dictionary     none\n"), "{text}");
    assert!(text.contains("chunks         1\n"), "{text}");
}

#[test]
fn stats_json() {
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 12, Codec::ZstdDict);
    let stats = Zrecord::open_read_only(dir.path()).unwrap().stats().unwrap();
    let out = loaderx(&["stats", path_str(dir.path()), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with('{') && text.trim_end().ends_with('}'), "{text}");
    for want in [
        format!("\"records\":{}", stats.records),
        format!("\"live_bytes\":{}", stats.live_bytes),
        format!("\"logical_bytes\":{}", stats.logical_bytes),
        format!("\"chunk_bytes\":{}", stats.chunk_bytes),
        format!("\"reclaimable\":{}", stats.reclaimable),
        "\"chunks\":1".to_string(),
        format!(
            "\"codec_records\":{{\"raw\":{},\"zstd\":0,\"zstd_dict\":{}}}",
            stats.codec_records[0], stats.codec_records[2]
        ),
        format!("\"dict_bytes\":{}", stats.dict_bytes.unwrap()),
    ] {
        assert!(text.contains(&want), "expected {want} in {text}");
    }
    let ratio = stats.logical_bytes as f64 / stats.live_bytes as f64;
    assert!(text.contains(&format!("\"compression_ratio\":{ratio}")), "{text}");
}

#[test]
fn stats_json_of_an_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    drop(Zrecord::open(dir.path()).unwrap());
    let out = loaderx(&["stats", path_str(dir.path()), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("\"records\":0,"), "{text}");
    assert!(text.contains("\"compression_ratio\":null,\"dict_bytes\":null}"), "{text}");
}

#[test]
fn cat_indices_in_the_order_given() {
    let dir = tempfile::tempdir().unwrap();
    let records = make_store(dir.path(), 8, Codec::Zstd);
    let out = loaderx(&["cat", path_str(dir.path()), "5", "0", "5", "7"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, [&records[5][..], &records[0], &records[5], &records[7]].concat());
}

#[test]
fn cat_everything_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let records = make_store(dir.path(), 8, Codec::Raw);
    let out = loaderx(&["cat", path_str(dir.path())]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout, records.concat());
}

#[test]
fn cat_range() {
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
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let records = make_store(&store, 20, Codec::Zstd);
    let file = dir.path().join("out.bin");
    let out = loaderx(&["cat", path_str(&store), "--range", "3..17", "--out", path_str(&file)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty());
    assert_eq!(std::fs::read(&file).unwrap(), records[3..17].concat());
}

#[test]
fn cat_leaves_the_store_untouched() {
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 5, Codec::Zstd);
    let before: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    let meta = std::fs::read(dir.path().join("meta.zr")).unwrap();
    // A writer holding the store open does not stop a read-only reader.
    let _writer = Zrecord::open(dir.path()).unwrap();
    assert!(loaderx(&["cat", path_str(dir.path())]).status.success());
    assert!(loaderx(&["stats", path_str(dir.path())]).status.success());
    let after: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(before, after);
    assert!(std::fs::read(dir.path().join("meta.zr")).unwrap() == meta);
}

#[test]
fn error_nonexistent_store() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    for args in [vec!["stats", path_str(&missing)], vec!["cat", path_str(&missing), "0"]] {
        let out = loaderx(&args);
        assert_fails(&out, "no store here");
        assert!(out.stdout.is_empty());
    }
    assert!(!missing.exists(), "a read-only command must not create the store");
}

#[test]
fn error_not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("meta.zr"), [0u8; 64]).unwrap();
    assert_fails(&loaderx(&["stats", path_str(dir.path())]), "not a zrecord store");
}

#[test]
fn error_index_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    make_store(&store, 4, Codec::Zstd);
    let p = path_str(&store);

    // Nothing is written before the bad index is found.
    let out = loaderx(&["cat", p, "0", "1", "4"]);
    assert_fails(&out, "index 4 out of range (store holds 4 records)");
    assert!(out.stdout.is_empty());

    let out = loaderx(&["cat", p, "--range", "2..5"]);
    assert_fails(&out, "index 4 out of range");
    assert!(out.stdout.is_empty());

    let out = loaderx(&["cat", p, "--range", "7.."]);
    assert_fails(&out, "out of range");

    let file = dir.path().join("out.bin");
    let out = loaderx(&["cat", p, "9", "--out", path_str(&file)]);
    assert_fails(&out, "index 9 out of range");
    assert!(!file.exists());
}

#[test]
fn error_unwritable_out_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    make_store(&store, 2, Codec::Raw);
    let file = dir.path().join("no-such-dir").join("out.bin");
    let out = loaderx(&["cat", path_str(&store), "--out", path_str(&file)]);
    assert_fails(&out, "cannot create");
}

#[test]
fn error_corrupt_record_removes_partial_output() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    make_store(&store, 30, Codec::Zstd);
    // Damage the stored bytes of the last record (zstd's checksum catches it).
    let chunk = store.join("0.zr");
    let mut bytes = std::fs::read(&chunk).unwrap();
    let n = bytes.len();
    bytes[n - 6] ^= 0xff;
    std::fs::write(&chunk, bytes).unwrap();
    let file = dir.path().join("out.bin");
    let out = loaderx(&["cat", path_str(&store), "--out", path_str(&file)]);
    assert_fails(&out, "record 29");
    assert!(!file.exists(), "a failed --out must not leave a partial file");
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = path_str(dir.path());
    for args in [
        vec!["cat", p, "1", "--range", "0..2"],
        vec!["cat", p, "--range", "5..2"],
        vec!["cat", p, "--range", "x"],
        vec!["cat", p, "-1"],
        vec!["frobnicate"],
        vec![],
    ] {
        let out = loaderx(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn help_documents_exit_codes() {
    for args in [vec!["--help"], vec!["cat", "--help"], vec!["stats", "--help"]] {
        let out = loaderx(&args);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains("Exit status:") && text.contains("  1  ") && text.contains("  2  "), "{text}");
    }
}
