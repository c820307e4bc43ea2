//! `loaderx convert`: `.npy` to a dataset that the library and `cat --npy`
//! read back exactly, with each codec; appends; refusals.

mod common;

use common::*;
use loaderx::dataset::Dataset;
use loaderx::{Codec, Zrecord};

/// `n` records of shape (3, 4), smooth enough to compress.
fn values(n: usize) -> Vec<f32> {
    (0..n * 12).map(|i| (i / 5) as f32).collect()
}

#[test]
fn convert_then_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("in.npy");
    let ds = dir.path().join("ds");
    let values = values(100);
    write_npy_f32(&npy, &[100, 3, 4], &values);
    let json = ok_json(&loaderx(&["convert", path_str(&npy), path_str(&ds), "--json"]));
    assert_eq!(json["records_written"], 100);
    assert_eq!(json["records"], 100);
    assert_eq!(json["bytes_written"], 100 * 48);
    assert_eq!(json["schema"]["dtype"], "<f4");
    assert_eq!(json["schema"]["shape"], serde_json::json!([3, 4]));
    assert_eq!(json["schema"]["codec"], "zstd");
    assert!(json["mib_per_s"].as_f64().unwrap() >= 0.0);
    assert!(json["compression_ratio"].as_f64().unwrap() > 1.0, "{json}");

    // The library reads it as a dataset; cat --npy gives the array back.
    let dataset = Dataset::open(&ds).unwrap();
    assert_eq!((dataset.len(), dataset.shape()), (100, &[3usize, 4][..]));
    let out = loaderx(&["cat", path_str(&ds), "--npy"]);
    let (shape, got) = read_npy_f32(&out.stdout);
    assert_eq!(shape, [100, 3, 4]);
    assert_eq!(got, values);
    ok(&loaderx(&["verify", path_str(&ds)]));
}

#[test]
fn convert_with_each_codec() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("in.npy");
    write_npy_f32(&npy, &[200, 3, 4], &values(200));
    for (codec, field) in [("raw", "raw"), ("zstd_dict", "zstd_dict")] {
        let ds = dir.path().join(codec);
        let mut args = vec!["convert", path_str(&npy), path_str(&ds), "--codec", codec];
        if codec == "zstd_dict" {
            args.extend(["--dict-size", "2048"]);
        }
        let text = ok(&loaderx(&args));
        assert!(text.contains(&format!("schema         <f4(3, 4), codec {codec}\n")), "{text}");
        assert!(text.contains("records        200\n"), "{text}");
        assert!(text.contains("throughput     "), "{text}");
        let stats = Zrecord::open_read_only(&ds).unwrap().stats().unwrap();
        let col = ["raw", "zstd", "zstd_dict"].iter().position(|c| *c == field).unwrap();
        if codec == "raw" {
            assert_eq!(stats.codec_records[col], 200);
            assert_eq!(stats.dict_bytes, None);
        } else {
            // Records that zstd cannot shrink stay raw; the rest use the dictionary.
            assert!(stats.codec_records[Codec::ZstdDict as usize] > 0, "{stats:?}");
            assert!(stats.dict_bytes.is_some_and(|b| b <= 2048), "{stats:?}");
        }
        let out = loaderx(&["cat", path_str(&ds), "--npy", "199"]);
        assert_eq!(read_npy_f32(&out.stdout).1, values(200)[199 * 12..]);
    }
}

#[test]
fn convert_appends_to_a_dataset_of_the_same_shape() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("in.npy");
    let ds = dir.path().join("ds");
    write_npy_f32(&npy, &[10, 3, 4], &values(10));
    ok(&loaderx(&["convert", path_str(&npy), path_str(&ds)]));
    let text = ok(&loaderx(&["convert", path_str(&npy), path_str(&ds)]));
    assert!(text.contains("records        10 (appended; 20 in all)\n"), "{text}");
    let out = loaderx(&["cat", path_str(&ds), "--npy"]);
    assert_eq!(read_npy_f32(&out.stdout).1, [values(10), values(10)].concat());

    let other = dir.path().join("other.npy");
    write_npy_f32(&other, &[2, 12], &[0.0; 24]);
    assert_fails(&loaderx(&["convert", path_str(&other), path_str(&ds)]), "cannot append");
}

#[test]
fn convert_refuses_bad_input() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let garbage = dir.path().join("garbage.npy");
    std::fs::write(&garbage, b"this is not numpy").unwrap();
    assert_fails(&loaderx(&["convert", path_str(&garbage), path_str(&ds)]), "garbage.npy");
    let missing = dir.path().join("missing.npy");
    assert_fails(&loaderx(&["convert", path_str(&missing), path_str(&ds)]), "missing.npy");

    let npy = dir.path().join("in.npy");
    write_npy_f32(&npy, &[4, 3, 4], &values(4));
    let truncated = dir.path().join("truncated.npy");
    let bytes = std::fs::read(&npy).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() - 10]).unwrap();
    assert_fails(&loaderx(&["convert", path_str(&truncated), path_str(&ds)]), "truncated");

    // A plain store with records: its layout is unknown, no schema is put over it.
    let plain = dir.path().join("plain");
    let records = make_store(&plain, 3, Codec::Raw);
    assert_fails(&loaderx(&["convert", path_str(&npy), path_str(&plain)]), "no schema.json; refusing");
    assert!(!plain.join("schema.json").exists());
    assert_eq!(read_all(&plain), records);

    assert_usage(&loaderx(&["convert", path_str(&npy), path_str(&ds), "--dict-size", "1000"]));
    assert_usage(&loaderx(&["convert", path_str(&npy), path_str(&ds), "--codec", "lz4"]));
    assert!(!ds.join("meta.zr").exists(), "nothing written on refusal");
}

/// Finding 3 of issue 18: `--codec zstd_dict` on too few records fails
/// before anything is created, and the next convert into the path works.
#[test]
fn an_untrainable_dictionary_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("f32_4.npy");
    let ds = dir.path().join("out.zr");
    write_npy_f32(&npy, &[5, 4], &values(5)[..20]);
    let out = loaderx(&["convert", path_str(&npy), path_str(&ds), "--codec", "zstd_dict"]);
    assert_fails(&out, "cannot train a zstd_dict dictionary on 5 records (80 bytes)");
    assert!(stderr(&out).contains("out.zr"), "{}", stderr(&out));
    assert!(!ds.exists());
    let json = ok_json(&loaderx(&["convert", path_str(&npy), path_str(&ds), "--json"]));
    assert_eq!((json["records"].as_u64(), json["schema"]["codec"].as_str()), (Some(5), Some("zstd")));
}

/// A version 1 `.npy` file with header `descr` and `shape`, then `data`.
fn write_npy_raw(path: &std::path::Path, descr: &str, shape: &str, data: &[u8]) {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

/// Finding 9 of issue 18: each message names the file and says what is
/// wrong with it.
#[test]
fn messages_name_the_file_and_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("in.npy");
    write_npy_f32(&npy, &[5, 4], &values(5)[..20]);
    let input_dir = dir.path().join("a_dir");
    std::fs::create_dir(&input_dir).unwrap();
    let out = dir.path().join("out");
    assert_fails(
        &loaderx(&["convert", path_str(&input_dir), path_str(&out)]),
        "a_dir: is a directory, not a .npy file",
    );
    let file = dir.path().join("a_file");
    std::fs::write(&file, b"x").unwrap();
    assert_fails(&loaderx(&["convert", path_str(&npy), path_str(&file)]), "a_file: exists and is not a directory");
    let missing = dir.path().join("missing");
    assert_fails(&loaderx(&["stats", path_str(&missing)]), "missing: no such directory");
    let object = dir.path().join("object.npy");
    write_npy_raw(&object, "|O", "(2,)", &[0; 16]);
    assert_fails(&loaderx(&["convert", path_str(&object), path_str(&out)]), "object.npy: dtype \"|O\": object");
    let datetime = dir.path().join("when.npy");
    write_npy_raw(&datetime, "<M8[ns]", "(2,)", &[0; 16]);
    assert_fails(
        &loaderx(&["convert", path_str(&datetime), path_str(&out)]),
        "when.npy: dtype \"<M8[ns]\": datetime64 arrays",
    );
    let big = dir.path().join("big.npy");
    write_npy_raw(&big, "<f4", "(1, 300000)", &vec![0; 1_200_000]);
    assert_fails(&loaderx(&["convert", path_str(&big), path_str(&out)]), "big.npy: a sample of 1200000 bytes exceeds");
    let usage = loaderx(&["convert", path_str(&npy), path_str(&out), "--dict-size", "4096"]);
    assert_usage(&usage);
    assert!(stderr(&usage).contains("Usage: loaderx convert [OPTIONS] <INPUT> <OUTPUT>"), "{}", stderr(&usage));
    assert!(!out.exists());
}

#[test]
fn convert_mode_says_what_a_rerun_does() {
    let dir = tempfile::tempdir().unwrap();
    let (small, large) = (dir.path().join("small.npy"), dir.path().join("large.npy"));
    let ds = dir.path().join("ds");
    write_npy_f32(&small, &[10, 3, 4], &values(10));
    write_npy_f32(&large, &[25, 3, 4], &values(25));
    // A first write under `error` is fine: nothing exists yet.
    ok(&loaderx(&["convert", path_str(&small), path_str(&ds), "--mode", "error"]));
    // A rerun without a mode appends, and says so on standard error.
    let out = loaderx(&["convert", path_str(&small), path_str(&ds)]);
    ok(&out);
    assert!(stderr(&out).contains("held 10 records; appended to them (pass --mode append"), "{}", stderr(&out));
    assert_eq!(Dataset::open(&ds).unwrap().len(), 20);
    // An explicit append says nothing.
    let out = loaderx(&["convert", path_str(&small), path_str(&ds), "--mode", "append"]);
    ok(&out);
    assert!(!stderr(&out).contains("appended"), "{}", stderr(&out));
    assert_eq!(Dataset::open(&ds).unwrap().len(), 30);
    // `error` refuses a dataset with records, and leaves it as it was.
    assert_fails(
        &loaderx(&["convert", path_str(&small), path_str(&ds), "--mode", "error"]),
        "a dataset of 30 records exists",
    );
    assert_eq!(Dataset::open(&ds).unwrap().len(), 30);
    // `overwrite` replaces it, and leaves no sibling behind.
    let json = ok_json(&loaderx(&["convert", path_str(&large), path_str(&ds), "--mode", "overwrite", "--json"]));
    assert_eq!((json["records_written"].as_u64(), json["records"].as_u64()), (Some(25), Some(25)));
    let out = loaderx(&["cat", path_str(&ds), "--npy"]);
    assert_eq!(read_npy_f32(&out.stdout).1, values(25));
    let mut names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["ds", "large.npy", "small.npy"]);
}
