//! `loaderx compact`: reclaims what deletes left, keeps every record, and a
//! compaction killed at any point finishes when run again.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::*;
use loaderx::{Codec, Zrecord};

/// A store of `n` records with every third deleted; returns the model.
fn store_with_holes(dir: &std::path::Path, n: usize, codec: Codec) -> Vec<Vec<u8>> {
    let mut records = make_store(dir, n, codec);
    let doomed: Vec<u64> = (0..n as u64).filter(|i| i % 3 == 1).collect();
    Zrecord::open(dir).unwrap().delete(&doomed).unwrap();
    model_delete(&mut records, &doomed);
    records
}

#[test]
fn compact_reclaims_and_keeps_every_record() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let records = store_with_holes(dir.path(), 300, Codec::Zstd);
    let before = Zrecord::open_read_only(dir.path()).unwrap().stats().unwrap();
    assert!(before.reclaimable > 0);

    let json = ok_json(&loaderx(&["compact", path_str(dir.path()), "--json"]));
    let after = Zrecord::open_read_only(dir.path()).unwrap().stats().unwrap();
    assert_eq!(json["records"], 200);
    assert_eq!(json["bytes_before"], before.chunk_file_bytes);
    assert_eq!(json["bytes_after"], after.chunk_file_bytes);
    assert_eq!(json["reclaimed_bytes"], before.chunk_file_bytes - after.chunk_file_bytes);
    assert_eq!(json["reclaimable_bytes"], after.reclaimable);
    assert_eq!(json["remaining_bytes"], 0);
    // Records of varied sizes: the fill frees space, and what it leaves the
    // repack takes back.
    assert!(after.reclaimable < before.reclaimable, "{before:?} -> {after:?}");
    assert!(json["moved_records"].as_u64().unwrap() > 0, "{json}");
    assert!(json["seconds"].as_f64().unwrap() >= 0.0);
    assert_eq!(read_all(dir.path()), records);
    ok(&loaderx(&["verify", path_str(dir.path())]));
    ok(&loaderx(&["compact", path_str(dir.path()), "--repack"]));
    let repacked = Zrecord::open_read_only(dir.path()).unwrap().stats().unwrap();
    assert_eq!((repacked.reclaimable, repacked.chunk_file_bytes), (0, repacked.live_bytes));
    assert_eq!(read_all(dir.path()), records);

    // Nothing left to do: a second run reclaims nothing and moves nothing.
    let text = ok(&loaderx(&["compact", path_str(dir.path())]));
    assert!(text.contains("reclaimed      0 B\n"), "{text}");
    assert!(text.contains("moved          0 records, 0 B\n"), "{text}");
    assert_eq!(read_all(dir.path()), records);
}

#[test]
fn compact_summary_for_people() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    store_with_holes(dir.path(), 60, Codec::Raw);
    let before = Zrecord::open_read_only(dir.path()).unwrap().stats().unwrap();
    let out = loaderx(&["compact", path_str(dir.path()), "--repack"]);
    let text = ok(&out);
    assert!(text.contains(&format!("reclaimed      {} (", before.reclaimable)), "{text}");
    assert!(text.contains("records        40\n"), "{text}");
    assert!(text.contains("time           "), "{text}");
    assert!(stderr(&out).is_empty(), "no progress bar off a terminal: {}", stderr(&out));
}

#[test]
fn compact_dry_run_and_a_budget() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Vec<u8>> = (0..3000).map(|k| vec![(k % 251) as u8; 1000]).collect();
    let store = Zrecord::open(dir.path()).unwrap();
    append_records(&store, &records, Codec::Raw);
    drop(store);
    let mut records = records;
    let doomed: Vec<u64> = (0..3000).filter(|i| i % 10 == 3).collect();
    Zrecord::open(dir.path()).unwrap().delete(&doomed).unwrap();
    model_delete(&mut records, &doomed);
    let p = path_str(dir.path());
    let before = Zrecord::open_read_only(dir.path()).unwrap().stats().unwrap();
    let plan = ok_json(&loaderx(&["compact", p, "--dry-run", "--json"]));
    assert_eq!(plan["dry_run"], true);
    assert_eq!(plan["freed_bytes"], before.reclaimable);
    assert!(plan["move_bytes"].as_u64().unwrap() <= before.reclaimable, "{plan}");
    let text = ok(&loaderx(&["compact", p, "--dry-run"]));
    assert!(text.contains("would move"), "{text}");
    assert_eq!(Zrecord::open_read_only(dir.path()).unwrap().stats().unwrap(), before, "a dry run changes nothing");
    // A budget of 50 KiB: several runs, each moving at most that, each
    // saying what is left, until nothing is.
    let mut runs = 0;
    loop {
        let json = ok_json(&loaderx(&["compact", p, "--max-bytes", "50K", "--json"]));
        assert!(json["moved_bytes"].as_u64().unwrap() <= 50 << 10, "{json}");
        runs += 1;
        if json["remaining_bytes"] == 0 {
            break;
        }
        assert!(runs < 20, "{json}");
    }
    assert!(runs > 2, "{runs} runs");
    assert_eq!(Zrecord::open_read_only(dir.path()).unwrap().stats().unwrap().reclaimable, 0);
    assert_eq!(read_all(dir.path()), records);
    assert_usage(&loaderx(&["compact", p, "--max-bytes", "12Q"]));
    assert_usage(&loaderx(&["compact", p, "--max-bytes", "1", "--repack"]));
}

#[test]
fn compact_killed_at_any_point_then_run_again_finishes() {
    let _x = exclusive();
    // The kill lands wherever it lands; whatever state it leaves must read
    // back every record, and a second run must finish the compaction.
    for delay_ms in [0u64, 5, 20, 60] {
        let dir = tempfile::tempdir().unwrap();
        let records = {
            let mut records: Vec<Vec<u8>> =
                (0..2000).map(|k| (0..4096).map(|i| ((i * 7 + k * 13) % 251) as u8).collect()).collect();
            let store = Zrecord::open(dir.path()).unwrap();
            append_records(&store, &records, Codec::Raw);
            let doomed: Vec<u64> = (0..2000).filter(|i| i % 2 == 0).collect();
            drop(store);
            Zrecord::open(dir.path()).unwrap().delete(&doomed).unwrap();
            model_delete(&mut records, &doomed);
            records
        };
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_loaderx"))
            .args(["compact", path_str(dir.path())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay_ms));
        let _ = child.kill();
        child.wait().unwrap();
        ok(&loaderx(&["compact", path_str(dir.path())]));
        assert_eq!(read_all(dir.path()), records, "killed after {delay_ms} ms");
        let stats = Zrecord::open_read_only(dir.path()).unwrap().stats().unwrap();
        assert_eq!(stats.reclaimable, 0, "killed after {delay_ms} ms");
        ok(&loaderx(&["verify", path_str(dir.path())]));
    }
}

#[test]
fn compact_errors() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    assert_fails(&loaderx(&["compact", path_str(&missing)]), "nope: no such directory");
    assert!(!missing.exists(), "compact must not create a store");

    let store = dir.path().join("store");
    make_store(&store, 5, Codec::Zstd);
    let _writer = Zrecord::open(&store).unwrap();
    assert_fails(&loaderx(&["compact", path_str(&store)]), "another writer has the store open");
}

#[test]
fn compact_help_says_it_is_safe_to_interrupt() {
    let text = ok(&loaderx(&["compact", "--help"]));
    assert!(text.contains("Safe to interrupt"), "{text}");
    assert!(text.contains("again finishes the job"), "{text}");
}

#[test]
fn compact_finishes_an_interrupted_delete_first() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let records = make_store(dir.path(), 8, Codec::Zstd);
    let after = pending_delete(dir.path(), &records, 2);
    // Read-only commands cannot finish it, and say so.
    assert_fails(&loaderx(&["stats", path_str(dir.path())]), "open the store for writing once");
    let json = ok_json(&loaderx(&["compact", path_str(dir.path()), "--json"]));
    assert_eq!(json["records"], 7);
    assert_eq!(read_all(dir.path()), after);
    ok(&loaderx(&["verify", path_str(dir.path())]));
}
