//! `loaderx verify`: a good store passes; each kind of damage is found and
//! reported with its record index and exit code 3; the list is capped.

mod common;

use common::*;
use loaderx::dataset::{WriteOptions, write_dataset, write_ragged};
use loaderx::format::{ENTRY_BYTES, entry_offset};
use loaderx::{Codec, Zrecord};
use serde_json::Value;

/// Runs `verify --json`, asserts exit code 3, returns the report.
fn verify_fails(dir: &std::path::Path) -> Value {
    let out = loaderx(&["verify", path_str(dir), "--json"]);
    assert_eq!(out.status.code(), Some(3), "stdout: {}\nstderr: {}", stdout(&out), stderr(&out));
    let json: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["ok"], false);
    json
}

/// `(index, kind)` of every listed problem.
fn problems(json: &Value) -> Vec<(Option<u64>, String)> {
    json["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["index"].as_u64(), p["kind"].as_str().unwrap().to_string()))
        .collect()
}

#[test]
fn a_good_store_and_a_good_dataset_pass() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    make_store(&store, 10, Codec::ZstdDict);
    let text = ok(&loaderx(&["verify", path_str(&store)]));
    assert_eq!(text, format!("{}: ok: 10 records checked\n", store.display()));
    let json = ok_json(&loaderx(&["verify", path_str(&store), "--json"]));
    assert_eq!(json["ok"], true);
    assert_eq!(json["records"], 10);
    assert_eq!(json["problems_total"], 0);
    assert_eq!(json["problems"], serde_json::json!([]));

    let ds = dir.path().join("ds");
    write_dataset(&ds, &[0.5f32; 24], &[2, 3], &WriteOptions::default()).unwrap();
    let text = ok(&loaderx(&["verify", path_str(&ds)]));
    assert!(text.ends_with("ok: 4 records checked, schema <f4(2, 3)\n"), "{text}");
}

#[test]
fn flipped_bytes_in_a_chunk() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 10, Codec::Zstd);
    let (offset, phys) = stored_extent(dir.path(), 6);
    flip_byte(&dir.path().join("0.zr"), offset + phys / 2);
    let json = verify_fails(dir.path());
    assert_eq!(problems(&json), [(Some(6), "decode".to_string())]);
    assert_eq!(json["problems_total"], 1);

    let out = loaderx(&["verify", path_str(dir.path())]);
    assert_eq!(out.status.code(), Some(3));
    let text = stdout(&out);
    assert!(text.starts_with("record 6: stored record failed to decode"), "{text}");
    assert!(text.ends_with(&format!("{}: 1 problem in 10 records\n", dir.path().display())), "{text}");
}

#[test]
fn an_entry_pointing_past_the_chunk_end() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 10, Codec::Raw);
    poke(&dir.path().join("meta.zr"), entry_offset(4), &(1u32 << 30).to_le_bytes());
    let json = verify_fails(dir.path());
    assert_eq!(problems(&json), [(Some(4), "past_chunk_end".to_string())]);
    let message = json["problems"][0]["message"].as_str().unwrap();
    assert!(message.contains("past the end of 0.zr"), "{message}");
}

#[test]
fn a_truncated_chunk() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 10, Codec::Zstd);
    let (offset, _) = stored_extent(dir.path(), 7);
    let chunk = std::fs::OpenOptions::new().write(true).open(dir.path().join("0.zr")).unwrap();
    chunk.set_len(offset + 1).unwrap();
    let json = verify_fails(dir.path());
    let want: Vec<(Option<u64>, String)> = (7..10).map(|i| (Some(i), "past_chunk_end".to_string())).collect();
    assert_eq!(problems(&json), want);
}

#[test]
fn overlapping_entries_and_an_unknown_codec() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 10, Codec::Zstd);
    let meta = dir.path().join("meta.zr");
    // Entry 3 claims entry 2's bytes; entry 5 gets an unknown codec.
    poke(&meta, entry_offset(3), &entry_bytes(dir.path(), 2));
    poke(&meta, entry_offset(5) + 14, &[7]);
    let json = verify_fails(dir.path());
    // Entry 3's sum fails (its entry, not its bytes, is wrong), and the
    // overlap check names the record whose bytes it points into.
    let want = [(Some(3), "checksum"), (Some(5), "unknown_codec"), (Some(3), "overlap")];
    assert_eq!(problems(&json), want.map(|(i, k)| (i, k.to_string())));
    assert!(json["problems"][0]["message"].as_str().unwrap().contains("entry"), "{json}");
    assert!(json["problems"][2]["message"].as_str().unwrap().contains("record 2"), "{json}");
}

#[test]
fn a_missing_dictionary() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 12, Codec::ZstdDict);
    let stats = Zrecord::open_read_only(dir.path()).unwrap().stats().unwrap();
    assert_eq!(stats.codec_records[Codec::ZstdDict as usize], 12);
    std::fs::remove_file(dir.path().join("dict.zr")).unwrap();
    let json = verify_fails(dir.path());
    let want: Vec<(Option<u64>, String)> = (0..12).map(|i| (Some(i), "no_dictionary".to_string())).collect();
    assert_eq!(problems(&json), want);
}

#[test]
fn a_truncated_meta_file_is_a_finding() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 5, Codec::Raw);
    let meta = std::fs::OpenOptions::new().write(true).open(dir.path().join("meta.zr")).unwrap();
    meta.set_len(10).unwrap();
    let json = verify_fails(dir.path());
    assert_eq!(problems(&json), [(None, "meta_truncated".to_string())]);
}

#[test]
fn a_fully_corrupt_table_lists_the_first_thousand_and_counts_the_rest() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let n = 1500u32;
    let store = Zrecord::open(dir.path()).unwrap();
    store.append(&vec![1u8; n as usize], n as usize, 1, Codec::Raw).unwrap();
    drop(store);
    let meta = dir.path().join("meta.zr");
    let mut table = std::fs::read(&meta).unwrap()[entry_offset(0) as usize..entry_offset(n) as usize].to_vec();
    for entry in table.chunks_mut(ENTRY_BYTES as usize) {
        entry[14] = 9; // no such codec
    }
    poke(&meta, entry_offset(0), &table);

    let json = verify_fails(dir.path());
    assert_eq!(json["problems_total"], 1500);
    let listed = problems(&json);
    assert_eq!(listed.len(), 1000);
    assert_eq!(listed[999], (Some(999), "unknown_codec".to_string()));

    let out = loaderx(&["verify", path_str(dir.path())]);
    assert_eq!(out.status.code(), Some(3));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1002, "1000 problems, the rest counted, the summary");
    assert!(text.contains("\n... and 500 more problems (the first 1000 are listed)\n"), "{text}");
}

#[test]
fn a_record_that_does_not_fit_the_schema() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    write_dataset(dir.path(), &[1.0f32; 8], &[2], &WriteOptions::default()).unwrap();
    Zrecord::open(dir.path()).unwrap().append(&[0u8; 5], 1, 5, Codec::Raw).unwrap();
    let json = verify_fails(dir.path());
    assert_eq!(problems(&json), [(Some(4), "schema_length".to_string())]);
    assert_eq!(json["schema"]["shape"], serde_json::json!([2]));
    let text = stdout(&loaderx(&["verify", path_str(dir.path())]));
    assert!(text.starts_with("record 4: 5 bytes, but a record of <f4(2,) is 8 bytes (schema.json)\n"), "{text}");
}

#[test]
fn a_ragged_record_of_a_partial_row() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Vec<i32>> = vec![vec![1, 2, 3], vec![], vec![4, 5, 6, 7, 8, 9]];
    write_ragged(dir.path(), &[3], &rows, &WriteOptions::default()).unwrap();
    ok(&loaderx(&["verify", path_str(dir.path())]));
    Zrecord::open(dir.path()).unwrap().append(&[0u8; 14], 1, 14, Codec::Zstd).unwrap();
    let json = verify_fails(dir.path());
    assert_eq!(problems(&json), [(Some(3), "schema_length".to_string())]);
}

#[test]
fn an_unreadable_schema() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 3, Codec::Raw);
    std::fs::write(dir.path().join("schema.json"), r#"{"format": "loaderx-zrecord", "version": 1}"#).unwrap();
    let json = verify_fails(dir.path());
    assert_eq!(problems(&json), [(None, "schema".to_string())]);
    assert!(json["problems"][0]["message"].as_str().unwrap().contains("missing key"), "{json}");
}

#[test]
fn verify_cannot_run_without_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let out = loaderx(&["verify", path_str(&missing)]);
    assert_fails(&out, "nope: no such directory");
    assert!(out.stdout.is_empty());
    assert!(!missing.exists());
}
