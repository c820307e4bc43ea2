//! Checksums (`sums.zr`, `docs/format.md`, "Checksums"): one bit flipped in
//! a record's stored bytes, in a table entry or in a checksum slot is named
//! by `verify` (that record, no other) and makes a gather of it an error,
//! never bytes; the oracle is the `Vec<Vec<u8>>` model. A store without
//! `sums.zr`, or one another writer changed, reports no false error and is
//! covered again by `Zrecord::cover`.

mod common;

use std::fs::OpenOptions;
use std::path::Path;

use common::{FileAt, append_all, record};
use loaderx::format::{ENTRY_BYTES, Entry, HEADER_BYTES, SUMS_FILE, entry_offset, sum_offset};
use loaderx::{Codec, Corruption, Error, Options, ReadMode, VerifyReads, Zrecord};

/// The kinds of record the checks must cover.
#[derive(Clone, Copy, Debug)]
enum Kind {
    RawFixed,
    RawVariable,
    Zstd,
    Dict,
}

const KINDS: [Kind; 4] = [Kind::RawFixed, Kind::RawVariable, Kind::Zstd, Kind::Dict];

/// A store of 12 records of `kind`, and the model.
fn build(dir: &Path, kind: Kind) -> Vec<Vec<u8>> {
    let store = Zrecord::open(dir).unwrap();
    let model: Vec<Vec<u8>> = (0..12u64)
        .map(|k| match kind {
            Kind::RawFixed | Kind::Zstd | Kind::Dict => record(k, 300),
            Kind::RawVariable => record(k, 1 + 37 * k as usize),
        })
        .collect();
    let codec = match kind {
        Kind::RawFixed | Kind::RawVariable => Codec::Raw,
        Kind::Zstd => Codec::Zstd,
        Kind::Dict => {
            let samples: Vec<u8> = (100..200u64).flat_map(|k| record(k, 300)).collect();
            store.train_dict(&samples, &[300; 100], 4096).unwrap();
            Codec::ZstdDict
        }
    };
    append_all(&store, &model, codec);
    let report = store.verify().unwrap();
    assert!(report.is_ok() && report.checksummed == 12 && report.unchecked == 0, "{report:?}");
    model
}

fn entry(dir: &Path, index: u32) -> Entry {
    let mut bytes = [0u8; ENTRY_BYTES as usize];
    OpenOptions::new()
        .read(true)
        .open(dir.join("meta.zr"))
        .unwrap()
        .read_exact_at(&mut bytes, entry_offset(index))
        .unwrap();
    *bytemuck::from_bytes(&bytes)
}

fn flip(path: &Path, offset: u64, bit: u8) {
    let file = OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut byte = [0u8];
    file.read_exact_at(&mut byte, offset).unwrap();
    byte[0] ^= 1 << bit;
    file.write_all_at(&byte, offset).unwrap();
}

/// Each record gathered alone on every read path: `Err` or the model's
/// bytes, never other bytes; the indices that failed.
fn failing(dir: &Path, model: &[Vec<u8>]) -> Vec<u64> {
    let mut failed = Vec::new();
    for mode in [ReadMode::Batched, ReadMode::Direct, ReadMode::Mapped] {
        let options =
            Options { read_only: true, read_mode: mode, verify_reads: VerifyReads::Always, ..Options::default() };
        let Ok(store) = Zrecord::open_with(dir, options) else { continue }; // no O_DIRECT here (tmpfs)
        for (k, want) in model.iter().enumerate() {
            let mut out = vec![0u8; want.len()];
            match store.gather_var(&[k as u64], &mut out, &[0], &[want.len() as u32]) {
                Ok(()) => assert_eq!(&out, want, "{mode:?}: record {k} read back other bytes without an error"),
                Err(Error::Corrupt { index, .. }) => {
                    assert_eq!(index, Some(k as u64), "{mode:?}: the error names the record");
                    failed.push(k as u64);
                }
                Err(e) => {
                    assert!(!matches!(e, Error::Io { .. }), "{mode:?}: record {k}: {e}");
                    failed.push(k as u64);
                }
            }
        }
    }
    failed.sort_unstable();
    failed.dedup();
    failed
}

/// The records `verify` names (an overlap names both of its records).
fn named(dir: &Path) -> Vec<u64> {
    let report = Zrecord::open_read_only(dir).unwrap().verify().unwrap();
    let mut named: Vec<u64> = report
        .problems
        .iter()
        .flat_map(|p| match p {
            Error::Corrupt { index, what: Corruption::Overlap { other }, .. } => vec![index.unwrap(), *other],
            Error::Corrupt { index: Some(index), .. } | Error::NoDictionary { index: Some(index), .. } => vec![*index],
            other => panic!("{other}"),
        })
        .collect();
    named.sort_unstable();
    named.dedup();
    named
}

#[test]
fn a_flipped_bit_in_stored_bytes_is_named_and_never_read() {
    for kind in KINDS {
        for (k, bit) in [(0u32, 0u8), (5, 3), (11, 7)] {
            let dir = tempfile::tempdir().unwrap();
            let model = build(dir.path(), kind);
            let e = entry(dir.path(), k);
            let loc = e.loc();
            flip(
                &dir.path().join(format!("{}.zr", loc.chunk)),
                u64::from(loc.offset) + u64::from(e.phys_length()) / 2,
                bit,
            );
            assert_eq!(named(dir.path()), [u64::from(k)], "{kind:?} record {k}");
            assert_eq!(failing(dir.path(), &model), [u64::from(k)], "{kind:?} record {k}");
        }
    }
}

#[test]
fn a_raw_record_flipped_is_a_checksum_error_that_blames_the_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path(), Kind::RawFixed);
    let e = entry(dir.path(), 4);
    flip(&dir.path().join("0.zr"), u64::from(e.loc().offset), 2);
    let store = Zrecord::open_with(dir.path(), Options { read_mode: ReadMode::Batched, ..Options::default() }).unwrap();
    let mut out = vec![0u8; 300];
    let err = store.gather(&[4], &mut out, 300).unwrap_err();
    match &err {
        Error::Corrupt {
            index: Some(4), what: Corruption::Checksum { chunk: 0, offset, entry_matches: true }, ..
        } => {
            assert_eq!(*offset, e.loc().offset)
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("the bytes changed"), "{err}");
    // The mapped path checks only when asked to; the report names the record.
    let report = store.verify().unwrap();
    assert_eq!((report.problems_total, report.checksummed), (1, 11), "{report:?}");
    drop(model);
}

#[test]
fn a_flipped_bit_in_any_field_of_an_entry_is_named_and_never_read() {
    // Offset and physical length: the bytes read are not the record's;
    // logical length and codec: the sum binds them; chunk id: a chunk
    // that does not exist. The reserved byte is ignored on read.
    for kind in KINDS {
        for field_byte in [0u64, 1, 4, 8, 12, 14] {
            for bit in [0u8, 4] {
                let dir = tempfile::tempdir().unwrap();
                let model = build(dir.path(), kind);
                flip(&dir.path().join("meta.zr"), entry_offset(6) + field_byte, bit);
                let failed = failing(dir.path(), &model);
                assert_eq!(failed, [6], "{kind:?} entry byte {field_byte} bit {bit}");
                let named = named(dir.path());
                assert!(named.contains(&6), "{kind:?} entry byte {field_byte} bit {bit}: {named:?}");
                assert!(named.iter().all(|&i| i == 6 || overlaps(dir.path(), i, 6)), "{kind:?}: {named:?}");
            }
        }
    }
}

/// True when record `a`'s bytes overlap record `b`'s (an entry moved onto
/// its neighbour makes both named by the overlap check).
fn overlaps(dir: &Path, a: u64, b: u64) -> bool {
    let (x, y) = (entry(dir, a as u32), entry(dir, b as u32));
    let span = |e: Entry| (e.loc().address(), e.loc().address() + u64::from(e.phys_length()));
    let ((x0, x1), (y0, y1)) = (span(x), span(y));
    x.loc().chunk == y.loc().chunk && x0 < y1 && y0 < x1
}

#[test]
fn a_flipped_bit_in_a_checksum_slot_is_named_and_a_flipped_seal_checks_nothing_falsely() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path(), Kind::Zstd);
    flip(&dir.path().join(SUMS_FILE), sum_offset(3) + 1, 5);
    assert_eq!(named(dir.path()), [3]);
    assert_eq!(failing(dir.path(), &model), [3]);
    flip(&dir.path().join(SUMS_FILE), sum_offset(3) + 1, 5);
    // The seal, damaged: no error at all (a mismatch could be another
    // writer's), every record still matches its sum.
    flip(&dir.path().join(SUMS_FILE), 9, 1);
    let report = Zrecord::open_read_only(dir.path()).unwrap().verify().unwrap();
    assert!(report.is_ok() && report.checksummed == 12, "{report:?}");
    assert!(failing(dir.path(), &model).is_empty());
}

#[test]
fn a_store_without_sums_opens_and_one_command_covers_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path(), Kind::RawVariable);
    std::fs::remove_file(dir.path().join(SUMS_FILE)).unwrap();
    let mut store = Zrecord::open(dir.path()).unwrap();
    let report = store.verify().unwrap();
    assert!(report.is_ok() && report.unchecked == 12 && report.checksummed == 0, "{report:?}");
    append_all(&store, &[b"later".to_vec()], Codec::Raw); // a store without sums appends without them
    let cover = store.cover().unwrap();
    assert_eq!((cover.records, cover.summed, cover.failed, cover.created), (13, 13, 0, true));
    let report = store.verify().unwrap();
    assert!(report.is_ok() && report.checksummed == 13, "{report:?}");
    assert_eq!(store.cover().unwrap().summed, 0, "covered once");
    drop(store);
    let mut all = model.clone();
    all.push(b"later".to_vec());
    assert!(failing(dir.path(), &all).is_empty());
}

/// What the reference package does on delete: the last entry swapped into
/// the hole, the length one less, nothing in `sums.zr`.
fn foreign_delete(dir: &Path, index: u32, len: u32) {
    let last = entry(dir, len - 1);
    let meta = OpenOptions::new().read(true).write(true).open(dir.join("meta.zr")).unwrap();
    meta.write_all_at(bytemuck::bytes_of(&last), entry_offset(index)).unwrap();
    meta.write_all_at(&(len - 1).to_le_bytes(), HEADER_BYTES - 4).unwrap();
}

#[test]
fn another_writers_delete_is_no_error_and_is_covered_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = build(dir.path(), Kind::RawFixed);
    foreign_delete(dir.path(), 2, 12);
    model.swap_remove(2);
    let report = Zrecord::open_read_only(dir.path()).unwrap().verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
    assert_eq!((report.checksummed, report.unchecked), (10, 1), "{report:?}");
    assert!(failing(dir.path(), &model).is_empty());
    // The next writer's open keeps the seal broken; cover mends it.
    let mut store = Zrecord::open(dir.path()).unwrap();
    append_all(&store, &[record(99, 300)], Codec::Raw);
    model.push(record(99, 300));
    assert_eq!(store.cover().unwrap().summed, 1);
    let report = store.verify().unwrap();
    assert_eq!((report.checksummed, report.unchecked), (12, 0), "{report:?}");
    drop(store);
    // Sealed again: a flip is an error once more.
    let e = entry(dir.path(), 2);
    flip(&dir.path().join("0.zr"), u64::from(e.loc().offset), 0);
    assert_eq!(failing(dir.path(), &model), [2]);
}

/// `sums.zr`'s header and slots `0..n`, as on disk now.
fn sums_head(dir: &Path, n: u32) -> Vec<u8> {
    let mut bytes = vec![0u8; sum_offset(n) as usize];
    OpenOptions::new().read(true).open(dir.join(SUMS_FILE)).unwrap().read_exact_at(&mut bytes, 0).unwrap();
    bytes
}

/// A power loss after appends whose slots (and perhaps seal) were never
/// written back: `sums.zr` gets `old`'s bytes at `range` again.
fn lose_sums(dir: &Path, old: &[u8], range: std::ops::Range<usize>) {
    let file = OpenOptions::new().write(true).open(dir.join(SUMS_FILE)).unwrap();
    file.write_all_at(&old[range.clone()], range.start as u64).unwrap();
}

/// 12 raw records, the last 4 deleted (their slots left behind, past the
/// length: another record's sum and tag), then 4 others appended over
/// them; `sums.zr` before those appends, and the model after them.
fn appended_over_leftovers(dir: &Path) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut model = build(dir, Kind::RawFixed);
    let mut store = Zrecord::open(dir).unwrap();
    store.delete(&[8, 9, 10, 11]).unwrap();
    model.truncate(8);
    drop(store);
    let before = sums_head(dir, 12);
    let store = Zrecord::open(dir).unwrap();
    let later: Vec<Vec<u8>> = (20..24u64).map(|k| record(k, 300)).collect();
    append_all(&store, &later, Codec::Raw);
    drop(store);
    model.extend(later);
    (before, model)
}

#[test]
fn appends_whose_checksums_a_crash_lost_are_unchecked_then_summed_at_the_next_writers_open() {
    // The slots and the covered word lost; the seal lost too, or written
    // back (it shares the covered word's page).
    for seal_lost in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let (before, model) = appended_over_leftovers(dir.path());
        assert_ne!(sums_head(dir.path(), 12)[sum_offset(8) as usize..], before[sum_offset(8) as usize..]);
        let kept_seal = if seal_lost { 8 } else { 16 };
        lose_sums(dir.path(), &before, kept_seal..sum_offset(12) as usize);
        if !seal_lost {
            lose_sums(dir.path(), &before, 16..24);
        }
        // A reader: no false error, the lost slots' records unchecked.
        let report = Zrecord::open_read_only(dir.path()).unwrap().verify().unwrap();
        assert!(report.is_ok(), "seal lost {seal_lost}: {report:?}");
        assert_eq!(report.sealed, !seal_lost, "{report:?}");
        assert_eq!((report.checksummed, report.unchecked), (8, 4), "{report:?}");
        assert!(failing(dir.path(), &model).is_empty(), "seal lost {seal_lost}");
        // The next writer's open sums them again and the seal holds; the
        // first cover reports them as summed, the next none.
        let mut store = Zrecord::open(dir.path()).unwrap();
        assert_eq!(store.cover().unwrap().summed, 4, "seal lost {seal_lost}");
        assert_eq!(store.cover().unwrap().summed, 0, "seal lost {seal_lost}");
        drop(store);
        let report = Zrecord::open_read_only(dir.path()).unwrap().verify().unwrap();
        assert!(report.is_ok() && report.sealed, "seal lost {seal_lost}: {report:?}");
        assert_eq!((report.checksummed, report.unchecked), (12, 0), "{report:?}");
        // Checked again: a flipped bit in one of them is named.
        let e = entry(dir.path(), 10);
        flip(&dir.path().join("0.zr"), u64::from(e.loc().offset) + 7, 2);
        assert_eq!(named(dir.path()), [10], "seal lost {seal_lost}");
        assert_eq!(failing(dir.path(), &model), [10], "seal lost {seal_lost}");
    }
}

/// `sums.zr`'s covered word, as the file holds it (`None`: it does not check).
fn covered(dir: &Path) -> Option<u32> {
    let head = sums_head(dir, 0);
    let covered = u32::from_le_bytes(head[16..20].try_into().unwrap());
    let check = u32::from_le_bytes(head[20..24].try_into().unwrap());
    (crc32c::crc32c(&head[16..20]) | 1 == check).then_some(covered)
}

#[test]
fn the_covered_word_moves_with_the_lags_sync_at_its_bound_and_at_close() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), Kind::RawFixed);
    assert_eq!(covered(dir.path()), Some(12), "synced at close");
    // The default lag: appends leave it where it was until the close.
    let store = Zrecord::open(dir.path()).unwrap();
    append_all(&store, &[record(30, 300), record(31, 300)], Codec::Raw);
    assert_eq!(covered(dir.path()), Some(12));
    store.sync_checksums().unwrap();
    assert_eq!(covered(dir.path()), Some(14));
    append_all(&store, &[record(32, 300)], Codec::Raw);
    drop(store);
    assert_eq!(covered(dir.path()), Some(15));
    // A lag of 600 bytes: the second append of 300 makes it due.
    let store = Zrecord::open_with(dir.path(), Options { checksum_lag_bytes: 600, ..Options::default() }).unwrap();
    append_all(&store, &[record(33, 300)], Codec::Raw);
    assert_eq!(covered(dir.path()), Some(15));
    append_all(&store, &[record(34, 300)], Codec::Raw);
    assert_eq!(covered(dir.path()), Some(17));
    // A delete lowers it with the length, before the length shrinks.
    let mut store = store;
    store.delete(&[16]).unwrap();
    assert_eq!(covered(dir.path()), Some(16));
    drop(store);
    let report = Zrecord::open_read_only(dir.path()).unwrap().verify().unwrap();
    assert!(report.is_ok() && report.sealed && report.checksummed == 16, "{report:?}");
}

/// A covered word past the length, under a seal that names the header, as
/// an earlier build's writer's open could leave it (docs/fuzzing.md, F11):
/// the next writer's open lowers it, so that appends over those indices
/// whose slots a crash then loses are summed again, not left unchecked.
#[test]
fn a_covered_word_past_the_length_is_lowered_at_a_writers_open() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), Kind::RawFixed);
    let file = OpenOptions::new().write(true).open(dir.path().join(SUMS_FILE)).unwrap();
    file.write_all_at(&16u32.to_le_bytes(), 16).unwrap();
    file.write_all_at(&(crc32c::crc32c(&16u32.to_le_bytes()) | 1).to_le_bytes(), 20).unwrap();
    drop(file);
    assert_eq!(covered(dir.path()), Some(16));
    let store = Zrecord::open(dir.path()).unwrap();
    assert_eq!(covered(dir.path()), Some(12), "lowered to the length, durably, at the open");
    // Four appends whose slots, and the covered word after them, a power
    // loss takes back to what the open left.
    let before = sums_head(dir.path(), 16);
    append_all(&store, &(40..44u64).map(|k| record(k, 300)).collect::<Vec<_>>(), Codec::Raw);
    drop(store);
    lose_sums(dir.path(), &before, 16..24);
    lose_sums(dir.path(), &before, sum_offset(12) as usize..sum_offset(16) as usize);
    drop(Zrecord::open(dir.path()).unwrap());
    let report = Zrecord::open_read_only(dir.path()).unwrap().verify().unwrap();
    assert!(report.is_ok() && report.sealed, "{report:?}");
    assert_eq!((report.checksummed, report.unchecked), (16, 0), "{report:?}");
}

#[test]
fn a_version_1_sums_file_is_read_as_covered_whole_and_a_writer_rewrites_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path(), Kind::RawVariable);
    // As a build before the covered word wrote it.
    let file = OpenOptions::new().write(true).open(dir.path().join(SUMS_FILE)).unwrap();
    file.write_all_at(&1u32.to_le_bytes(), 4).unwrap();
    file.write_all_at(&[0; 8], 16).unwrap();
    drop(file);
    let e = entry(dir.path(), 11);
    flip(&dir.path().join("0.zr"), u64::from(e.loc().offset), 3);
    assert_eq!(named(dir.path()), [11], "every slot checked");
    assert_eq!(failing(dir.path(), &model), [11]);
    drop(Zrecord::open(dir.path()).unwrap());
    let head = sums_head(dir.path(), 0);
    assert_eq!(u32::from_le_bytes(head[4..8].try_into().unwrap()), 2);
    assert_eq!(covered(dir.path()), Some(12));
    assert_eq!(named(dir.path()), [11]);
}

#[test]
fn another_writers_delete_after_a_crash_of_appends_breaks_the_seal() {
    let dir = tempfile::tempdir().unwrap();
    let (before, mut model) = appended_over_leftovers(dir.path());
    lose_sums(dir.path(), &before, 8..sum_offset(12) as usize);
    // The reference package deletes record 2: record 11 (one whose slot
    // was lost) swapped into its place, the length 11, still past the
    // covered word (8).
    foreign_delete(dir.path(), 2, 12);
    model.swap_remove(2);
    drop(Zrecord::open(dir.path()).unwrap());
    let report = Zrecord::open_read_only(dir.path()).unwrap().verify().unwrap();
    assert!(report.is_ok() && !report.sealed, "{report:?}");
    assert!(failing(dir.path(), &model).is_empty());
    // `cover` mends it.
    let mut store = Zrecord::open(dir.path()).unwrap();
    store.cover().unwrap();
    let report = store.verify().unwrap();
    assert!(report.is_ok() && report.sealed && report.unchecked == 0, "{report:?}");
}

#[test]
fn delete_and_compaction_keep_every_record_covered() {
    for kind in KINDS {
        let dir = tempfile::tempdir().unwrap();
        let mut model = build(dir.path(), kind);
        let mut store = Zrecord::open(dir.path()).unwrap();
        store.delete(&[0, 7, 3]).unwrap();
        for d in [7usize, 3, 0] {
            model.swap_remove(d);
        }
        store.compact().unwrap();
        append_all(&store, &[record(50, 300)], Codec::Zstd);
        model.push(record(50, 300));
        let report = store.verify().unwrap();
        assert!(report.is_ok() && report.unchecked == 0, "{kind:?}: {report:?}");
        assert_eq!(report.checksummed as usize, model.len());
        drop(store);
        assert!(failing(dir.path(), &model).is_empty(), "{kind:?}");
    }
}

#[test]
fn compaction_stops_at_damaged_bytes_before_moving_them() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), Kind::RawFixed);
    let mut store = Zrecord::open(dir.path()).unwrap();
    // Record 11 now at index 0; the fill moves it, the last, into the hole.
    store.delete(&[0]).unwrap();
    let e = entry(dir.path(), 0);
    flip(&dir.path().join("0.zr"), u64::from(e.loc().offset) + 9, 1);
    let err = store.compact().unwrap_err();
    assert!(matches!(err, Error::Corrupt { what: Corruption::Checksum { .. }, .. }), "{err}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// Random bits flipped in the chunk file, the table's entries and the
    /// checksum slots: no read returns bytes that differ from the model
    /// without an error.
    #[test]
    fn no_read_returns_other_bytes_without_an_error(
        kind in 0..4usize,
        flips in proptest::collection::vec((0..3u8, 0..100_000u64, 0..8u8), 1..4),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let model = build(dir.path(), KINDS[kind]);
        let chunk_len = std::fs::metadata(dir.path().join("0.zr")).unwrap().len();
        for (file, at, bit) in flips {
            match file {
                0 => flip(&dir.path().join("0.zr"), at % chunk_len, bit),
                1 => flip(&dir.path().join("meta.zr"), entry_offset(0) + at % (12 * ENTRY_BYTES), bit),
                _ => flip(&dir.path().join(SUMS_FILE), sum_offset(0) + at % (12 * 8), bit),
            }
        }
        failing(dir.path(), &model); // asserts every successful read
    }
}

/// The 8-byte slot `index` of `sums.zr`, read from the file.
fn slot(dir: &Path, index: u32) -> u64 {
    let mut bytes = [0u8; 8];
    OpenOptions::new()
        .read(true)
        .open(dir.join(SUMS_FILE))
        .unwrap()
        .read_exact_at(&mut bytes, sum_offset(index))
        .unwrap();
    u64::from_le_bytes(bytes)
}

#[test]
fn an_append_zeroes_slots_past_the_length_and_none_below() {
    let dir = tempfile::tempdir().unwrap();
    let model: Vec<Vec<u8>> = (0..100u64).map(|k| record(k, 64)).collect();
    {
        let mut store = Zrecord::open(dir.path()).unwrap();
        append_all(&store, &model, Codec::Raw);
        // Deleting from the end moves only the length: slots 60..100 keep
        // the sums of records that are gone.
        store.delete(&(60..100).collect::<Vec<u64>>()).unwrap();
    }
    assert!((60..100).all(|k| slot(dir.path(), k) != 0), "the deleted records' slots stay");
    // A new writer zeroes from the length on before its first slots.
    let store = Zrecord::open(dir.path()).unwrap();
    append_all(&store, &model[..10], Codec::Raw);
    drop(store);
    assert!((0..70).all(|k| slot(dir.path(), k) != 0), "every record's slot is written");
    assert!((70..100).all(|k| slot(dir.path(), k) == 0), "the slots past the length are zeroed");
    let report = Zrecord::open(dir.path()).unwrap().verify().unwrap();
    assert!(report.is_ok() && report.checksummed == 70 && report.unchecked == 0, "{report:?}");
    // The zeroing wrote blocks: at least a page of slots past the last one
    // is allocated (without it, one page would be: the header and slots
    // 0..504).
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::MetadataExt;
        let blocks = std::fs::metadata(dir.path().join(SUMS_FILE)).unwrap().blocks();
        assert!(blocks * 512 >= sum_offset(70 + 512), "{blocks} blocks of 512 bytes");
    }
}
