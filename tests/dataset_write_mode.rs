//! `WriteMode`: append (the default), error (refuses records), overwrite
//! (replaces, crash-safely): each state between two steps of an overwrite,
//! made by hand, recovers to the old or the new dataset. The kill test is
//! `dataset_write_mode_kill.rs`, a binary of its own: a child spawned while
//! another test of the binary holds a store open inherits its descriptors
//! until it execs, and with them the store's writer flock.

use std::path::Path;

mod common;

use common::write_mode::{opts, siblings, values};
use loaderx::dataset::{
    Dataset, DatasetError, RaggedDataset, WriteMode, WriteOptions, existing_records, recover_overwrite, write_dataset,
    write_ragged,
};

#[test]
fn append_is_the_default_and_error_refuses_records() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    assert_eq!(WriteOptions::default().mode, WriteMode::Append);
    assert_eq!(existing_records(&ds).unwrap(), 0);
    write_dataset(&ds, &[1u32, 2, 3], &[], &opts(WriteMode::Error)).unwrap();
    write_dataset(&ds, &[4u32], &[], &WriteOptions::default()).unwrap();
    assert_eq!(values(&ds), [1, 2, 3, 4]);
    assert_eq!(existing_records(&ds).unwrap(), 4);
    let err = write_dataset(&ds, &[5u32], &[], &opts(WriteMode::Error)).unwrap_err();
    assert!(matches!(err, DatasetError::Exists { records: 4, .. }), "{err:?}");
    assert!(err.to_string().contains("pass mode \"append\""), "{err}");
    assert_eq!(values(&ds), [1, 2, 3, 4]);
    // A ragged dataset the same way.
    let rg = dir.path().join("rg");
    write_ragged(&rg, &[], [vec![1u8, 2], vec![3]], &opts(WriteMode::Error)).unwrap();
    let err = write_ragged(&rg, &[], [vec![1u8]], &opts(WriteMode::Error)).unwrap_err();
    assert!(matches!(err, DatasetError::Exists { records: 2, .. }), "{err:?}");
    assert_eq!(WriteMode::parse("overwrite").unwrap(), WriteMode::Overwrite);
    assert_eq!(WriteMode::parse(WriteMode::Error.name()).unwrap(), WriteMode::Error);
    assert!(WriteMode::parse("replace").is_err());
}

#[test]
fn overwrite_replaces_and_leaves_nothing_beside() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    // Overwriting nothing creates.
    write_dataset(&ds, &[1u32, 2, 3], &[], &opts(WriteMode::Overwrite)).unwrap();
    assert_eq!(values(&ds), [1, 2, 3]);
    write_dataset(&ds, &[7u32, 8], &[], &opts(WriteMode::Overwrite)).unwrap();
    assert_eq!(values(&ds), [7, 8]);
    // Another dtype replaces too (an append would be refused).
    write_ragged(&ds, &[], [vec![1u8, 2], vec![]], &opts(WriteMode::Overwrite)).unwrap();
    assert_eq!(RaggedDataset::open(&ds).unwrap().len(), 2);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["ds"]);
}

#[test]
fn each_state_an_overwrite_can_crash_in_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("ds");
    let (new, old) = siblings(&ds);
    let fresh = |p: &Path, v: &[u32]| {
        let _ = std::fs::remove_dir_all(p);
        write_dataset(p, v, &[], &WriteOptions::default()).unwrap();
    };
    // Crashed while writing the new one: the old stays, the partial new goes.
    fresh(&ds, &[1, 2]);
    std::fs::create_dir_all(&new).unwrap();
    std::fs::write(new.join("meta.zr"), b"partial").unwrap();
    recover_overwrite(&ds).unwrap();
    assert_eq!((values(&ds), new.exists()), (vec![1, 2], false));
    // Crashed between the two renames: the new one is complete, so it goes in.
    fresh(&old, &[1, 2]);
    fresh(&new, &[3, 4, 5]);
    std::fs::remove_dir_all(&ds).unwrap();
    assert!(matches!(Dataset::open(&ds), Err(DatasetError::NoDataset { .. })));
    recover_overwrite(&ds).unwrap();
    assert_eq!((values(&ds), new.exists(), old.exists()), (vec![3, 4, 5], false, false));
    // Crashed before removing the old one: it goes.
    fresh(&old, &[1, 2]);
    recover_overwrite(&ds).unwrap();
    assert_eq!((values(&ds), old.exists()), (vec![3, 4, 5], false));
    // Every write recovers first, an append included.
    fresh(&old, &[1, 2]);
    fresh(&new, &[6]);
    std::fs::remove_dir_all(&ds).unwrap();
    write_dataset(&ds, &[9u32], &[], &WriteOptions::default()).unwrap();
    assert_eq!(values(&ds), [6, 9]);
}

#[test]
fn a_write_under_a_file_names_the_path_given() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    let ds = file.join("ds");
    let err = write_dataset(&ds, &[1u32], &[], &WriteOptions::default()).unwrap_err().to_string();
    assert!(err.contains(&ds.display().to_string()), "{err}");
    assert!(!err.contains("overwrite-"), "an overwrite's sibling is not the caller's path: {err}");
}
