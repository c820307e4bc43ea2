//! Delete (swap-with-last) and compaction against the naive model.

mod common;

use common::{append_all, assert_matches, model_delete, record};
use loaderx::{Codec, Error, Zrecord};

fn filled(dir: &std::path::Path, n: usize, codec: Codec) -> (Zrecord, Vec<Vec<u8>>) {
    let store = Zrecord::open(dir).unwrap();
    let model: Vec<Vec<u8>> = (0..n).map(|k| record(k as u64, 100 + (k * 37) % 900)).collect();
    append_all(&store, &model, codec);
    (store, model)
}

#[test]
fn delete_matches_swap_remove_with_duplicates_and_the_last_index() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut model) = filled(dir.path(), 50, Codec::Zstd);
    for batch in [vec![49u64, 3, 3, 10], vec![0], vec![44, 45, 1, 2, 40], vec![]] {
        store.delete(&batch).unwrap();
        model_delete(&mut model, &batch);
        assert_matches(&store, &model);
    }
    drop(store);
    let store = Zrecord::open(dir.path()).unwrap();
    assert_matches(&store, &model);
    let meta = std::fs::metadata(dir.path().join("meta.zr")).unwrap();
    assert_eq!(meta.len(), loaderx::format::META_BYTES, "no intent is left behind");
}

#[test]
fn delete_out_of_range_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, model) = filled(dir.path(), 10, Codec::Raw);
    let err = store.delete(&[1, 10]).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { index: 10, len: 10, .. }), "{err}");
    let err = store.delete(&[1 << 40]).unwrap_err();
    assert!(matches!(err, Error::IndexOutOfRange { .. }), "{err}");
    assert_matches(&store, &model);
}

#[test]
fn delete_everything_then_append_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, _) = filled(dir.path(), 20, Codec::Zstd);
    store.delete(&(0..20).collect::<Vec<_>>()).unwrap();
    assert_eq!(store.len(), 0);
    let model = vec![record(99, 64)];
    append_all(&store, &model, Codec::Raw);
    assert_matches(&store, &model);
}

#[test]
fn compact_reclaims_space_and_keeps_every_record() {
    for codec in [Codec::Raw, Codec::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, mut model) = filled(dir.path(), 400, codec);
        let doomed: Vec<u64> = (0..400).filter(|k| k % 3 == 0).collect();
        store.delete(&doomed).unwrap();
        model_delete(&mut model, &doomed);
        let before = store.stats().unwrap();
        assert!(before.reclaimable > 0);
        let report = store.compact().unwrap();
        assert!(report.moved_records > 0 && report.rounds > 0, "{report:?}");
        let after = store.stats().unwrap();
        assert_eq!(after.reclaimable, 0, "{codec:?}: {after:?}");
        assert_eq!(after.chunk_bytes, after.live_bytes);
        assert_eq!(report.bytes_before - report.bytes_after, before.reclaimable);
        assert_matches(&store, &model);
        let chunk0 = std::fs::metadata(dir.path().join("0.zr")).unwrap().len();
        assert_eq!(chunk0, after.live_bytes, "the chunk file is trimmed to its data");
        // Compacting a compact store moves nothing; appending afterwards works.
        let again = store.compact().unwrap();
        assert_eq!(again.moved_records, 0);
        let more: Vec<Vec<u8>> = (0..5).map(|k| record(1000 + k, 333)).collect();
        append_all(&store, &more, codec);
        model.extend(more);
        drop(store);
        let store = Zrecord::open(dir.path()).unwrap();
        assert_matches(&store, &model);
    }
}

#[test]
fn compact_variable_sizes_many_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    // Alternating small and large records: deleting the small ones leaves
    // holes too small for the large ones to move into in one round.
    let mut model: Vec<Vec<u8>> = (0..200).map(|k| record(k, if k % 2 == 0 { 50 } else { 5000 })).collect();
    append_all(&store, &model, Codec::Raw);
    let mut store = store;
    let doomed: Vec<u64> = (0..200).filter(|k| k % 2 == 0).collect();
    store.delete(&doomed).unwrap();
    model_delete(&mut model, &doomed);
    let report = store.compact().unwrap();
    assert!(report.rounds > 1, "{report:?}");
    assert_matches(&store, &model);
    let stats = store.stats().unwrap();
    assert!(stats.reclaimable < 5000, "at most one record's worth stays: {stats:?}");
}

#[test]
fn read_only_store_refuses_mutation() {
    let dir = tempfile::tempdir().unwrap();
    drop(filled(dir.path(), 5, Codec::Raw));
    let mut store = Zrecord::open_read_only(dir.path()).unwrap();
    assert!(matches!(store.delete(&[0]), Err(Error::ReadOnly { .. })));
    assert!(matches!(store.compact(), Err(Error::ReadOnly { .. })));
    assert!(matches!(store.append(b"x", 1, 1, Codec::Raw), Err(Error::ReadOnly { .. })));
}

#[test]
fn a_few_small_holes_take_a_few_rounds_not_one_per_record() {
    // Sliding 2,000 small records down behind a hole of 3 takes a round per
    // 3 records; evacuating them past the live data and back takes two,
    // and reuses one area past the frontier, so the store never grows by
    // what it moves.
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut model) = filled(dir.path(), 2000, Codec::Raw);
    let doomed = [5u64, 6, 7];
    store.delete(&doomed).unwrap();
    model_delete(&mut model, &doomed);
    let report = store.compact().unwrap();
    assert!(report.rounds <= 4, "{report:?}");
    assert!(report.moved_records >= 1990, "{report:?}");
    let after = store.stats().unwrap();
    assert_eq!(after.chunk_bytes, after.live_bytes);
    assert_matches(&store, &model);
    drop(store);
    assert_matches(&Zrecord::open(dir.path()).unwrap(), &model);
}
