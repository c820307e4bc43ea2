//! Every subcommand on a sharded dataset: stats, verify, cat, convert and
//! bench on the whole dataset by global index; delete and compact shard by
//! shard, with a line per shard; verify's findings in a damaged shard.

mod common;

use std::path::Path;

use common::*;
use loaderx::dataset::{Dataset, WriteOptions, shard_dir, write_dataset};
use loaderx::{Codec, Options, Zrecord};

/// 25 records of two u32 (record `i` is `[2i, 2i + 1]`) in shards of 10, 10 and 5.
fn make(path: &Path) -> Vec<u32> {
    let data: Vec<u32> = (0..50).collect();
    let opts = WriteOptions { shard_records: Some(10), ..WriteOptions::codec(Codec::Zstd) };
    write_dataset(path, &data, &[2], &opts).unwrap();
    data
}

fn records_of(path: &Path) -> Vec<u32> {
    let ds = Dataset::open(path).unwrap();
    let all: Vec<u64> = (0..ds.len()).collect();
    let mut out = vec![0u32; all.len() * 2];
    ds.gather_into(&all, &mut out).unwrap();
    out
}

#[test]
fn stats_verify_and_cat_see_the_whole_dataset() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let json = ok_json(&loaderx(&["stats", path_str(dir.path()), "--json"]));
    assert_eq!((json["records"].as_u64(), json["shards"].as_u64()), (Some(25), Some(3)));
    assert_eq!(json["shard_records"], serde_json::json!([10, 10, 5]));
    let text = ok(&loaderx(&["stats", path_str(dir.path())]));
    assert!(text.contains("25 in 3 shards (10, 10, 5)"), "{text}");
    let text = ok(&loaderx(&["verify", path_str(dir.path())]));
    assert!(text.contains("ok: 25 records checked, schema <u4(2,), 3 shards"), "{text}");
    let out = loaderx(&["cat", path_str(dir.path()), "9", "10", "24", "--to-terminal"]);
    ok(&out);
    let words: Vec<u32> = out.stdout.chunks(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect();
    assert_eq!(words, [18, 19, 20, 21, 48, 49]);
    let npy = dir.path().join("all.npy");
    ok(&loaderx(&["cat", path_str(dir.path()), "--range", "5..15", "--out", path_str(&npy)]));
    assert!(std::fs::read(&npy).unwrap().len() > 80);
    assert_fails(&loaderx(&["cat", path_str(dir.path()), "25", "--to-terminal"]), "out of range");
    let json = ok_json(&loaderx(&["bench", path_str(dir.path()), "--batches", "3", "--batch-size", "8", "--json"]));
    assert_eq!((json["records"].as_u64(), json["shards"].as_u64()), (Some(25), Some(3)));
}

#[test]
fn verify_names_the_shard_of_a_problem() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    // Shard 1 one record short of what the shard table records.
    Zrecord::open_with(shard_dir(dir.path(), 1), Options::default()).unwrap().delete(&[0]).unwrap();
    let out = loaderx(&["verify", path_str(dir.path()), "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["problems"][0]["kind"], "shard_length", "{json}");
    assert!(json["problems"][0]["message"].as_str().unwrap().starts_with("shard 1: holds 9"), "{json}");
    // A missing shard.
    std::fs::rename(shard_dir(dir.path(), 1), dir.path().join("away")).unwrap();
    let out = loaderx(&["verify", path_str(dir.path())]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stdout(&out).contains("shard 1:"), "{}", stdout(&out));
}

#[test]
fn delete_by_global_index_and_by_shard() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let mut data = make(dir.path());
    let json = ok_json(&loaderx(&["delete", path_str(dir.path()), "3", "12", "24", "--json"]));
    assert_eq!((json["deleted"].as_u64(), json["records"].as_u64()), (Some(3), Some(22)));
    let shards: Vec<u64> = json["shards"].as_array().unwrap().iter().map(|s| s["shard"].as_u64().unwrap()).collect();
    assert_eq!(shards, [0, 1, 2]);
    // The model: swap-with-last within each shard.
    let mut per: Vec<Vec<[u32; 2]>> =
        data.chunks(2).map(|c| [c[0], c[1]]).collect::<Vec<_>>().chunks(10).map(<[_]>::to_vec).collect();
    for (k, local) in [(0usize, 3usize), (1, 2), (2, 4)] {
        let last = per[k].pop().unwrap();
        if local < per[k].len() {
            per[k][local] = last;
        }
    }
    data = per.concat().concat();
    assert_eq!(records_of(dir.path()), data);
    // --shard K: shard 1's own index 0.
    let text = ok(&loaderx(&["delete", path_str(dir.path()), "--shard", "1", "0"]));
    assert!(text.contains("shard 1") && text.contains("9 -> 8"), "{text}");
    assert_eq!(Dataset::open(dir.path()).unwrap().len(), 21);
    assert_fails(&loaderx(&["delete", path_str(dir.path()), "21"]), "out of range");
    assert_fails(&loaderx(&["delete", path_str(dir.path()), "--shard", "3", "0"]), "shard 3 of 3");
    assert_eq!(Dataset::open(dir.path()).unwrap().len(), 21);
    ok(&loaderx(&["verify", path_str(dir.path())]));
}

#[test]
fn compact_every_shard_or_one() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    ok(&loaderx(&["delete", path_str(dir.path()), "0", "11", "20"]));
    let before = records_of(dir.path());
    let plan = ok_json(&loaderx(&["compact", path_str(dir.path()), "--dry-run", "--json"]));
    assert_eq!(plan["shards"].as_array().unwrap().len(), 3);
    let json = ok_json(&loaderx(&["compact", path_str(dir.path()), "--json"]));
    assert_eq!(json["shards"].as_array().unwrap().len(), 3);
    assert!(json["reclaimed_bytes"].as_u64().unwrap() > 0, "{json}");
    assert_eq!(records_of(dir.path()), before);
    let json = ok_json(&loaderx(&["compact", path_str(dir.path()), "--shard", "2", "--json"]));
    assert_eq!(json["shards"][0]["shard"], 2);
    assert_eq!(json["reclaimed_bytes"], 0);
    ok(&loaderx(&["verify", path_str(dir.path())]));
}

#[test]
fn convert_writes_shards() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("in.npy");
    let values: Vec<f32> = (0..90).map(|i| i as f32).collect();
    write_npy_f32(&npy, &[30, 3], &values);
    let out = dir.path().join("out");
    let json = ok_json(&loaderx(&["convert", path_str(&npy), path_str(&out), "--shard-records", "8", "--json"]));
    assert_eq!((json["records_written"].as_u64(), json["records"].as_u64()), (Some(30), Some(30)));
    let ds = Dataset::open(&out).unwrap();
    assert_eq!((ds.len(), ds.shards()), (30, 4));
    let mut got = vec![0f32; 90];
    ds.gather_into(&(0..30).collect::<Vec<u64>>(), &mut got).unwrap();
    assert_eq!(got, values);
    assert_usage(&loaderx(&["convert", path_str(&npy), path_str(&out), "--shard-records", "0"]));
}
