//! Delete (swap-with-last) and compaction against the naive model.

mod common;

use common::{append_all, assert_matches, model_delete, record};
use loaderx::{Codec, CompactOptions, Error, Zrecord};

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
    // Windows erases an intent in place where a mapping stops the truncation.
    assert!(cfg!(windows) || meta.len() == loaderx::format::META_BYTES, "an intent is left behind");
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

/// A store of `n` records of `len` bytes, one in `every` deleted.
fn holed(dir: &std::path::Path, n: u64, len: usize, every: u64, codec: Codec) -> (Zrecord, Vec<Vec<u8>>) {
    let store = Zrecord::open(dir).unwrap();
    let mut model: Vec<Vec<u8>> = (0..n).map(|k| record(k, len)).collect();
    append_all(&store, &model, codec);
    let mut store = store;
    let doomed: Vec<u64> = (0..n).filter(|k| k % every == 0).collect();
    store.delete(&doomed).unwrap();
    model_delete(&mut model, &doomed);
    (store, model)
}

#[test]
fn the_fill_of_equal_records_frees_every_byte_and_moves_no_more() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut model) = holed(dir.path(), 600, 1000, 3, Codec::Raw);
    let before = store.stats().unwrap();
    let plan = store.compact_plan(CompactOptions::default()).unwrap();
    let report = store.compact().unwrap();
    let after = store.stats().unwrap();
    assert_eq!(after.reclaimable, 0, "{after:?}");
    assert_eq!(report.bytes_before - report.bytes_after, before.reclaimable);
    // A hole of one record in three, filled from the tail: each moved
    // byte frees one, and the holes in the tail come back for nothing.
    assert!(report.moved_bytes > 0 && report.moved_bytes <= before.reclaimable, "{report:?} {before:?}");
    assert_eq!((plan.move_bytes, plan.move_records), (report.moved_bytes, report.moved_records));
    assert_eq!((plan.bytes_after, plan.removed_chunks), (report.bytes_after, report.removed_chunks));
    assert_matches(&store, &model);
    let chunk0 = std::fs::metadata(dir.path().join("0.zr")).unwrap().len();
    assert_eq!(chunk0, after.live_bytes, "the chunk file is trimmed to its data");
    // Compacting a compact store moves nothing; appending afterwards works.
    assert_eq!(store.compact().unwrap().moved_records, 0);
    let more: Vec<Vec<u8>> = (0..5).map(|k| record(1000 + k, 1000)).collect();
    append_all(&store, &more, Codec::Raw);
    model.extend(more);
    drop(store);
    assert_matches(&Zrecord::open(dir.path()).unwrap(), &model);
}

#[test]
fn the_fill_of_varied_sizes_stops_where_no_hole_holds_the_tail() {
    for codec in [Codec::Raw, Codec::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, mut model) = filled(dir.path(), 400, codec);
        let doomed: Vec<u64> = (0..400).filter(|k| k % 3 == 0).collect();
        store.delete(&doomed).unwrap();
        model_delete(&mut model, &doomed);
        let before = store.stats().unwrap();
        let report = store.compact().unwrap();
        assert!(report.moved_records > 0 && report.rounds > 0, "{report:?}");
        let after = store.stats().unwrap();
        assert!(after.reclaimable < before.reclaimable, "{codec:?}: {before:?} -> {after:?}");
        assert_eq!(report.bytes_before - report.bytes_after, before.reclaimable - after.reclaimable);
        assert_matches(&store, &model);
        // The fill is at its fixed point: planned again, it moves nothing.
        let again = store.compact_plan(CompactOptions::default()).unwrap();
        assert_eq!((again.move_bytes, again.bytes_after), (0, after.chunk_file_bytes), "{codec:?}: {again:?}");
        // The repack then takes back all the rest.
        let repacked = store.compact_with(CompactOptions { repack: true, ..Default::default() }, |_, _| {}).unwrap();
        assert!(repacked.moved_records > 0 || after.reclaimable == 0, "{repacked:?}");
        let last = store.stats().unwrap();
        assert_eq!((last.reclaimable, last.chunk_file_bytes), (0, last.live_bytes), "{codec:?}: {last:?}");
        assert_matches(&store, &model);
        drop(store);
        assert_matches(&Zrecord::open(dir.path()).unwrap(), &model);
    }
}

#[test]
fn a_budget_moves_at_most_its_bytes_and_the_next_run_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, model) = holed(dir.path(), 900, 1000, 4, Codec::Raw);
    let full = store.compact_plan(CompactOptions::default()).unwrap();
    let options = CompactOptions { max_bytes: Some(40_000), ..Default::default() };
    let plan = store.compact_plan(options).unwrap();
    assert_eq!(plan.move_bytes + plan.remaining_bytes, full.move_bytes, "{plan:?} {full:?}");
    let mut runs = 0;
    let mut moved = 0;
    loop {
        let report = store.compact_with(options, |_, _| {}).unwrap();
        assert!(report.moved_bytes <= 40_000, "{report:?}");
        assert!(
            report.bytes_after < report.bytes_before || report.moved_bytes == 0,
            "each run frees space: {report:?}"
        );
        assert_matches(&store, &model);
        (runs, moved) = (runs + 1, moved + report.moved_bytes);
        if report.remaining_bytes == 0 {
            break;
        }
        assert!(runs < 20, "{report:?}");
    }
    assert!(runs > 1);
    assert_eq!(moved, full.move_bytes);
    assert_eq!(store.stats().unwrap().reclaimable, 0);
    let repack_budget = CompactOptions { max_bytes: Some(1), repack: true };
    assert!(matches!(store.compact_with(repack_budget, |_, _| {}), Err(Error::InvalidArgument(_))));
}

#[test]
fn repack_variable_sizes_many_rounds() {
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
    // No 50-byte hole holds a 5000-byte record: the fill moves nothing.
    let plan = store.compact_plan(CompactOptions::default()).unwrap();
    assert_eq!(plan.move_bytes, 0, "{plan:?}");
    let report = store.compact_with(CompactOptions { repack: true, ..Default::default() }, |_, _| {}).unwrap();
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
fn a_few_small_holes_take_a_few_records_not_the_whole_store() {
    // Three records deleted near the start of 2,000: the fill moves the
    // three last records into their places, one round. The repack slides
    // everything behind the holes: it evacuates them past the live data and
    // back in two rounds, reusing one area past the frontier, so the store
    // never grows by what it moves.
    for repack in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, mut model) = holed(dir.path(), 2000, 700, 2000, Codec::Raw);
        let doomed = [5u64, 6];
        store.delete(&doomed).unwrap();
        model_delete(&mut model, &doomed);
        let report = store.compact_with(CompactOptions { repack, ..Default::default() }, |_, _| {}).unwrap();
        if repack {
            assert!(report.rounds <= 4, "{report:?}");
            assert!(report.moved_records >= 1990, "{report:?}");
        } else {
            assert_eq!((report.rounds, report.moved_records, report.moved_bytes), (1, 3, 2100), "{report:?}");
        }
        let after = store.stats().unwrap();
        assert_eq!(after.chunk_file_bytes, after.live_bytes);
        assert_matches(&store, &model);
        drop(store);
        assert_matches(&Zrecord::open(dir.path()).unwrap(), &model);
    }
}
