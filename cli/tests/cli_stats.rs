//! `loaderx stats`: the table and the JSON object, with and without a schema.

mod common;

use common::*;
use loaderx::dataset::{WriteOptions, write_dataset, write_ragged};
use loaderx::{Codec, Zrecord};

#[test]
fn stats_table() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let records = make_store(dir.path(), 10, Codec::Zstd);
    let text = ok(&loaderx(&["stats", path_str(dir.path())]));
    let logical: usize = records.iter().map(Vec::len).sum();
    assert!(text.contains("records        10\n"), "{text}");
    assert!(text.contains(&format!("logical bytes  {logical} (")), "{text}");
    assert!(text.contains("codecs         raw 0, zstd 10, zstd_dict 0\n"), "{text}");
    assert!(text.contains("(logical / live)"), "{text}");
    assert!(text.contains("dictionary     none\n"), "{text}");
    assert!(text.contains("chunks         1\n"), "{text}");
    assert!(text.contains("schema         none (a plain store, no schema.json)\n"), "{text}");
}

#[test]
fn stats_json_matches_the_library() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 12, Codec::ZstdDict);
    let mut store = Zrecord::open(dir.path()).unwrap();
    store.delete(&[3, 4]).unwrap();
    let stats = store.stats().unwrap();
    drop(store);
    let json = ok_json(&loaderx(&["stats", path_str(dir.path()), "--json"]));
    assert_eq!(json["store"], path_str(dir.path()));
    assert_eq!(json["records"], 10);
    assert_eq!(json["live_bytes"], stats.live_bytes);
    assert_eq!(json["logical_bytes"], stats.logical_bytes);
    assert_eq!(json["chunk_bytes"], stats.chunk_file_bytes);
    assert_eq!(json["reclaimable"], stats.reclaimable);
    assert!(stats.reclaimable > 0);
    assert_eq!(json["chunks"], 1);
    assert_eq!(json["codec_records"]["raw"], stats.codec_records[0]);
    assert_eq!(json["codec_records"]["zstd"], 0);
    assert_eq!(json["codec_records"]["zstd_dict"], stats.codec_records[2]);
    assert_eq!(json["dictionary"], true);
    assert_eq!(json["dict_bytes"], stats.dict_bytes.unwrap());
    let ratio = stats.logical_bytes as f64 / stats.live_bytes as f64;
    assert_eq!(json["compression_ratio"].as_f64(), Some(ratio));
    assert!(json["schema"].is_null() && json["schema_error"].is_null(), "{json}");
    assert_eq!(json["read_engine"], loaderx::io::real::read_engine().name());
}

#[test]
fn stats_json_of_an_empty_store() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    drop(Zrecord::open(dir.path()).unwrap());
    let json = ok_json(&loaderx(&["stats", path_str(dir.path()), "--json"]));
    assert_eq!(json["records"], 0);
    assert!(json["compression_ratio"].is_null(), "{json}");
    assert!(json["dict_bytes"].is_null(), "{json}");
    assert_eq!(json["dictionary"], false);
}

#[test]
fn stats_shows_a_fixed_schema() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..60).map(|v| v as f32).collect();
    write_dataset(dir.path(), &values, &[3, 4], &WriteOptions::codec(Codec::Raw)).unwrap();
    let p = path_str(dir.path());
    let text = ok(&loaderx(&["stats", p]));
    assert!(text.contains("schema         <f4(3, 4), codec raw\n"), "{text}");
    let json = ok_json(&loaderx(&["stats", p, "--json"]));
    assert_eq!(json["records"], 5);
    assert_eq!(json["schema"]["dtype"], "<f4");
    assert_eq!(json["schema"]["shape"], serde_json::json!([3, 4]));
    assert_eq!(json["schema"]["ragged"], false);
    assert_eq!(json["schema"]["codec"], "raw");
}

#[test]
fn stats_shows_a_ragged_schema() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Vec<i64>> = vec![vec![1, 2], vec![], vec![3, 4, 5, 6]];
    write_ragged(dir.path(), &[2], &rows, &WriteOptions::default()).unwrap();
    let json = ok_json(&loaderx(&["stats", path_str(dir.path()), "--json"]));
    assert_eq!(json["schema"]["dtype"], "<i8");
    assert_eq!(json["schema"]["ragged"], true);
    assert_eq!(json["schema"]["item_shape"], serde_json::json!([2]));
    assert!(json["schema"].get("shape").is_none(), "{json}");
}

#[test]
fn stats_reports_an_unreadable_schema_without_failing() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 3, Codec::Raw);
    std::fs::write(dir.path().join("schema.json"), "{not json").unwrap();
    let p = path_str(dir.path());
    let text = ok(&loaderx(&["stats", p]));
    assert!(text.contains("schema         unreadable: "), "{text}");
    let json = ok_json(&loaderx(&["stats", p, "--json"]));
    assert!(json["schema"].is_null());
    assert!(json["schema_error"].as_str().unwrap().contains("not valid JSON"), "{json}");
}

#[test]
fn stats_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    assert_fails(&loaderx(&["stats", path_str(&missing)]), "nope: no such directory");
    assert!(!missing.exists(), "a read-only command must not create the store");
    std::fs::create_dir(&missing).unwrap();
    assert_fails(&loaderx(&["stats", path_str(&missing)]), "nope: no store here (meta.zr is missing)");
    assert_eq!(std::fs::read_dir(&missing).unwrap().count(), 0);
    std::fs::write(dir.path().join("meta.zr"), [0u8; 64]).unwrap();
    assert_fails(&loaderx(&["stats", path_str(dir.path())]), "not a zrecord store");
}

/// Records a compressing codec could not shrink are stored raw: `stats`
/// says so beside the schema's codec, in the table and the JSON; a raw
/// schema has none, and a plain store cannot tell (its appends name their
/// own codec).
#[test]
fn stats_says_raw_records_did_not_shrink() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<u64> = (0..40 * 64)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        })
        .collect();
    let incompressible = dir.path().join("noise");
    write_dataset(&incompressible, &noise, &[64], &WriteOptions::codec(Codec::Zstd)).unwrap();
    let p = path_str(&incompressible);
    let text = ok(&loaderx(&["stats", p]));
    assert!(
        text.contains(
            "codecs         raw 40, zstd 0, zstd_dict 0 (raw 40: stored raw because compression did not pay)\n"
        ),
        "{text}"
    );
    assert!(text.contains(", codec zstd\n"), "{text}");
    let json = ok_json(&loaderx(&["stats", p, "--json"]));
    assert_eq!(json["codec_records"]["raw"], 40);
    assert_eq!(json["codec_records"]["zstd"], 0);
    assert_eq!(json["raw_compression_did_not_pay"], 40);

    let zeros = dir.path().join("zeros");
    write_dataset(&zeros, &vec![0u64; 40 * 64], &[64], &WriteOptions::codec(Codec::Zstd)).unwrap();
    let text = ok(&loaderx(&["stats", path_str(&zeros)]));
    assert!(text.contains("codecs         raw 0, zstd 40, zstd_dict 0\n"), "{text}");
    let json = ok_json(&loaderx(&["stats", path_str(&zeros), "--json"]));
    assert_eq!(json["raw_compression_did_not_pay"], 0);

    let raw = dir.path().join("raw");
    write_dataset(&raw, &noise, &[64], &WriteOptions::codec(Codec::Raw)).unwrap();
    let text = ok(&loaderx(&["stats", path_str(&raw)]));
    assert!(text.contains("codecs         raw 40, zstd 0, zstd_dict 0\n"), "{text}");
    let json = ok_json(&loaderx(&["stats", path_str(&raw), "--json"]));
    assert_eq!(json["raw_compression_did_not_pay"], 0);

    let plain = dir.path().join("plain");
    make_store(&plain, 3, Codec::Raw);
    let json = ok_json(&loaderx(&["stats", path_str(&plain), "--json"]));
    assert!(json["raw_compression_did_not_pay"].is_null(), "{json}");
}
