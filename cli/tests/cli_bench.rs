//! `loaderx bench`: runs the requested number of batches of each workload
//! and reports what it read (the rates themselves are not asserted).

mod common;

use common::*;
use loaderx::Zrecord;
use loaderx::dataset::{WriteOptions, write_dataset, write_ragged};

#[test]
fn bench_a_plain_store_gathers_only() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    store.append(&vec![7u8; 500 * 64], 500, 64, loaderx::Codec::Zstd).unwrap();
    drop(store);
    let json = ok_json(&loaderx(&["bench", path_str(dir.path()), "--batches", "3", "--batch-size", "32", "--json"]));
    assert_eq!(json["records"], 500);
    assert_eq!(json["batch_size"], 32);
    assert_eq!(json["gather"]["batches"], 3);
    assert_eq!(json["gather"]["records"], 96);
    assert_eq!(json["gather"]["bytes"], 96 * 64);
    assert!(json["gather"]["mib_per_s"].as_f64().unwrap() > 0.0, "{json}");
    assert!(json["loader"].is_null());
    assert!(json["loader_skipped"].as_str().unwrap().contains("no schema.json"), "{json}");

    // A broken schema skips the loader, not the gather.
    std::fs::write(dir.path().join("schema.json"), "[]").unwrap();
    let json = ok_json(&loaderx(&["bench", path_str(dir.path()), "--batches", "1", "--json"]));
    assert_eq!(json["gather"]["batches"], 1);
    assert!(json["loader_skipped"].as_str().unwrap().contains("schema.json unreadable"), "{json}");
}

#[test]
fn bench_a_dataset_runs_the_loader_too() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..40 * 12).map(|v| v as f32).collect();
    write_dataset(dir.path(), &values, &[12], &WriteOptions::default()).unwrap();
    let p = path_str(dir.path());
    let args = ["bench", p, "--batches", "4", "--batch-size", "16", "--workers", "2", "--seed", "3", "--json"];
    let json = ok_json(&loaderx(&args));
    assert_eq!(json["gather"]["bytes"], 4 * 16 * 48);
    assert_eq!(json["loader"]["batches"], 4);
    assert_eq!(json["loader"]["records"], 64);
    assert_eq!(json["loader"]["bytes"], 64 * 48);
    assert_eq!(json["loader"]["workers"], 2);
    assert!(json["loader_skipped"].is_null());
    let stats = &json["loader_stats"];
    assert_eq!(stats["batches"], 4, "{json}");
    assert_eq!(stats["worker_busy"].as_array().unwrap().len(), 2, "{json}");
    assert!(stats["wait_p50_s"].as_f64().unwrap() <= stats["wait_p99_s"].as_f64().unwrap(), "{json}");
    // The statistics cover the timed batches only: when the workers made
    // all four ahead, before the clock, no worker time falls inside it.
    let busy: f64 = stats["worker_busy"].as_array().unwrap().iter().map(|b| b.as_f64().unwrap()).sum();
    let read = stats["read_decode_s"].as_f64().unwrap();
    assert!(read >= 0.0 && (busy == 0.0 || read > 0.0), "{json}");

    let text = ok(&loaderx(&["bench", p, "--batches", "2", "--batch-size", "8"]));
    assert!(text.contains("batch          8 records, IID indices, seed 42\n"), "{text}");
    assert!(text.contains("batches/s (2 batches in "), "{text}");
    assert!(text.contains(" workers\n"), "{text}");
}

#[test]
fn bench_a_ragged_dataset_and_a_small_store() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<Vec<i16>> = (0..5).map(|k| vec![k as i16; 2 * k]).collect();
    write_ragged(dir.path(), &[2], &rows, &WriteOptions::default()).unwrap();
    // A batch larger than the store holds every record once.
    let json = ok_json(&loaderx(&["bench", path_str(dir.path()), "--batches", "2", "--json"]));
    assert_eq!(json["batch_size"], 5);
    assert_eq!(json["gather"]["records"], 10);
    assert_eq!(json["gather"]["bytes"], 2 * 2 * 2 * (0..5).sum::<u64>());
    assert_eq!(json["loader"]["records"], 10);
}

#[test]
fn bench_stops_at_the_time_limit() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 50, loaderx::Codec::Zstd);
    // A tiny limit: the first measured batch passes it, so exactly one runs.
    let json = ok_json(&loaderx(&["bench", path_str(dir.path()), "--batches", "1000", "--seconds", "1e-9", "--json"]));
    assert_eq!(json["gather"]["batches"], 1);
}

#[test]
fn bench_errors() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    drop(Zrecord::open(dir.path()).unwrap());
    let p = path_str(dir.path());
    assert_fails(&loaderx(&["bench", p]), "the store is empty");
    assert_fails(&loaderx(&["bench", path_str(&dir.path().join("nope"))]), "nope: no such directory");
    for bad in [["--batches", "0"], ["--batch-size", "0"], ["--seconds", "0"], ["--workers", "0"]] {
        assert_usage(&loaderx(&["bench", p, bad[0], bad[1]]));
    }
}

#[test]
fn bench_cold_evicts_and_draws_no_record_twice() {
    let _x = exclusive();
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let values: Vec<f32> = (0..400 * 256).map(|v| v as f32).collect();
    write_dataset(dir.path(), &values, &[256], &WriteOptions::default()).unwrap();
    let p = path_str(dir.path());
    let json = ok_json(&loaderx(&["bench", p, "--batches", "3", "--batch-size", "64", "--cold", "--json"]));
    assert_eq!(json["cold"], true);
    assert_eq!(json["read_engine"], loaderx::io::real::read_engine().name());
    assert_eq!(json["gather"]["records"], 3 * 64);
    assert_eq!(json["loader"]["records"], 3 * 64);
    let text = ok(&loaderx(&["bench", p, "--batches", "2", "--batch-size", "8", "--cold"]));
    assert!(text.contains("batch          8 records, cyclic indices, seed 42\n"), "{text}");
    assert!(text.contains("cache          cold: chunk files evicted before each workload"), "{text}");
    for mode in ["mapped", "batched", "direct", "auto"] {
        let json = ok_json(&loaderx(&[
            "bench",
            p,
            "--batches",
            "2",
            "--batch-size",
            "32",
            "--cold",
            "--read-mode",
            mode,
            "--json",
        ]));
        assert_eq!(json["read_mode"], mode);
        assert_eq!(json["gather"]["records"], 2 * 32);
        assert_eq!(json["loader"]["records"], 2 * 32);
    }
    assert_usage(&loaderx(&["bench", p, "--read-mode", "fast"]));
}

#[test]
fn bench_trace_writes_the_loaders_stages() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let values: Vec<f32> = (0..40 * 12).map(|v| v as f32).collect();
    write_dataset(&data, &values, &[12], &WriteOptions::default()).unwrap();
    let trace = dir.path().join("trace.json");
    let (p, t) = (path_str(&data), path_str(&trace));
    ok_json(&loaderx(&["bench", p, "--batches", "4", "--batch-size", "8", "--workers", "2", "--trace", t, "--json"]));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let count = |name: &str| events.iter().filter(|e| e["ph"] == "X" && e["name"] == name).count();
    // A warm-up batch and 4 timed ones.
    assert_eq!(count("wait"), 5, "{json}");
    assert!(count("gather") >= 5, "{json}");
    assert_eq!(json["otherData"]["dropped_events"], 0);

    let missing = dir.path().join("missing").join("trace.json");
    let args = ["bench", p, "--batches", "2", "--trace", path_str(&missing)];
    assert_fails(&loaderx(&args), "could not write the trace");
}
