//! A writer overwriting a dataset, killed at random moments, leaves the old
//! or the new dataset, never a mix or neither (`WriteMode::Overwrite`).
//! Its own test binary: the children it spawns inherit, until they exec,
//! the descriptors other tests of a binary hold, the writer flock of
//! `meta.zr` with them, which would make those tests' writes `Locked`.

use std::path::Path;
use std::time::Duration;

mod common;

use common::write_mode::{opts, siblings, values};
use loaderx::dataset::{WriteMode, WriteOptions, recover_overwrite, write_dataset};

const A: [u32; 3] = [1, 1, 1];
const B: [u32; 5] = [2, 2, 2, 2, 2];

/// The child: overwrites the dataset with A and B in turn, forever.
#[test]
fn child_overwrite_entry_point() {
    let Ok(dir) = std::env::var("LOADERX_OVERWRITE_CHILD") else { return };
    let ds = Path::new(&dir).join("ds");
    loop {
        write_dataset(&ds, &A, &[], &opts(WriteMode::Overwrite)).unwrap();
        write_dataset(&ds, &B, &[], &opts(WriteMode::Overwrite)).unwrap();
    }
}

#[test]
fn an_overwrite_killed_at_any_moment_leaves_the_old_or_the_new() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    write_dataset(&ds, &A, &[], &WriteOptions::default()).unwrap();
    let mut seen_missing = 0;
    for round in 0..24u64 {
        let mut child = common::this_test_binary()
            .args(["--exact", "child_overwrite_entry_point", "--nocapture", "--test-threads=1"])
            .env("LOADERX_OVERWRITE_CHILD", dir.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20 + (round * 37) % 90));
        child.kill().unwrap();
        child.wait().unwrap();
        // Without recovery: the path holds A or B whole, or it is missing
        // with both siblings there, the new one complete.
        let (new, old) = siblings(&ds);
        if ds.exists() {
            let v = values(&ds);
            assert!(v == A || v == B, "round {round}: {v:?}");
        } else {
            seen_missing += 1;
            assert!(old.exists() && new.exists(), "round {round}: neither the dataset nor both siblings");
            let v = values(&new);
            assert!(v == A || v == B, "round {round}: {v:?}");
        }
        recover_overwrite(&ds).unwrap();
        let v = values(&ds);
        assert!(v == A || v == B, "round {round}: {v:?}");
        assert!(!new.exists() && !old.exists(), "round {round}");
    }
    eprintln!("{seen_missing} of 24 kills came between the two renames");
}
