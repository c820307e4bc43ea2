//! Bad input: every row of reference-behaviour.md's table, and more. Each
//! gets a clear typed error, never a panic, never bytes that are not the
//! record's.

mod common;

use std::fs::OpenOptions;
use std::path::Path;

use common::{FileAt, record};
use loaderx::format::{META_BYTES, entry_offset};
use loaderx::{Codec, Corruption, Error, Zrecord};

/// A store of 10 records of 256 bytes with `codec`.
fn store_of_ten(dir: &Path, codec: Codec) {
    let store = Zrecord::open(dir).unwrap();
    let src: Vec<u8> = (0..10).flat_map(|k| record(k, 256)).collect();
    store.append(&src, 10, 256, codec).unwrap();
}

fn poke(path: &Path, offset: u64, bytes: &[u8]) {
    OpenOptions::new().write(true).open(path).unwrap().write_all_at(bytes, offset).unwrap();
}

fn gather_one(dir: &Path, index: u64) -> Result<Vec<u8>, Error> {
    let store = Zrecord::open_read_only(dir)?;
    let mut out = vec![0u8; 256];
    store.gather(&[index], &mut out, 256)?;
    Ok(out)
}

fn corruption(err: Error) -> Corruption {
    match err {
        Error::Corrupt { what, .. } => what,
        other => panic!("expected a corruption error, got {other}"),
    }
}

#[test]
fn index_out_of_range() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    for index in [10, 1 << 40, u64::MAX] {
        let err = gather_one(dir.path(), index).unwrap_err();
        assert!(matches!(err, Error::IndexOutOfRange { len: 10, .. }), "{err}");
        assert!(err.to_string().contains("out of range"), "{err}");
    }
    let store = Zrecord::open_read_only(dir.path()).unwrap();
    assert!(matches!(store.get(10), Err(Error::IndexOutOfRange { .. })));
    assert!(matches!(store.lengths(&[3, 11], &mut [0, 0]), Err(Error::IndexOutOfRange { index: 11, .. })));
}

#[test]
fn garbage_header_is_not_a_store() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    poke(&dir.path().join("meta.zr"), 0, b"GARBAGE!");
    let err = Zrecord::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::NotAStore { .. }), "{err}");
    poke(&dir.path().join("meta.zr"), 0, b"ZREC\x04\x00");
    let err = Zrecord::open_read_only(dir.path()).unwrap_err();
    assert!(err.to_string().contains("format version 4"), "{err}");
}

#[test]
fn meta_truncated_to_4k_still_reads_and_is_grown_back() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    OpenOptions::new().write(true).open(dir.path().join("meta.zr")).unwrap().set_len(4096).unwrap();
    assert_eq!(gather_one(dir.path(), 9).unwrap(), record(9, 256), "read-only, short file");
    let store = Zrecord::open(dir.path()).unwrap();
    assert_eq!(store.get(9).unwrap(), record(9, 256));
    assert_eq!(std::fs::metadata(dir.path().join("meta.zr")).unwrap().len(), META_BYTES);
}

#[test]
fn meta_shorter_than_its_entries_or_its_header() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Raw);
    let meta = dir.path().join("meta.zr");
    OpenOptions::new().write(true).open(&meta).unwrap().set_len(entry_offset(5)).unwrap();
    let err = Zrecord::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::MetaTruncated { needed, .. } if needed == entry_offset(10)), "{err}");
    OpenOptions::new().write(true).open(&meta).unwrap().set_len(10).unwrap();
    assert!(matches!(Zrecord::open_read_only(dir.path()), Err(Error::MetaTruncated { .. })));
}

#[test]
fn header_length_past_the_written_table_is_an_error_not_memory() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    poke(&dir.path().join("meta.zr"), 12, &20u32.to_le_bytes());
    let store = Zrecord::open_read_only(dir.path()).unwrap();
    assert_eq!(store.len(), 20);
    let mut out = vec![0xAAu8; 256 * 2];
    let err = store.gather(&[3, 15], &mut out, 256).unwrap_err();
    assert_eq!(corruption(err), Corruption::UnwrittenEntry);
    let err = store.get(15).unwrap_err();
    assert!(err.to_string().contains("record 15"), "{err}");
}

#[test]
fn entry_offset_past_the_chunk_end() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Raw);
    poke(&dir.path().join("meta.zr"), entry_offset(4), &(1u32 << 30).to_le_bytes());
    let what = corruption(gather_one(dir.path(), 4).unwrap_err());
    assert!(matches!(what, Corruption::PastChunkEnd { chunk: 0, .. }), "{what}");
}

#[test]
fn corrupted_compressed_bytes_fail_their_checksum() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    let store = Zrecord::open_read_only(dir.path()).unwrap();
    assert_eq!(store.stats().unwrap().codec_records, [0, 10, 0]);
    drop(store);
    // Flip a byte in the middle of record 2's frame.
    let meta = std::fs::read(dir.path().join("meta.zr")).unwrap();
    let e = &meta[entry_offset(2) as usize..][..16];
    let offset = u32::from_le_bytes(e[0..4].try_into().unwrap());
    let phys = u32::from_le_bytes(e[4..8].try_into().unwrap());
    let chunk = dir.path().join("0.zr");
    let at = u64::from(offset + phys / 2);
    let mut byte = [0u8];
    std::fs::File::open(&chunk).unwrap().read_exact_at(&mut byte, at).unwrap();
    poke(&chunk, at, &[byte[0] ^ 0x10]);
    let what = corruption(gather_one(dir.path(), 2).unwrap_err());
    // The frame's own check where the bytes come from memory, the record's
    // checksum where they come from the device (every read there is checked).
    let caught = matches!(what, Corruption::Decode(_) | Corruption::DecodedLength { .. } | Corruption::Checksum { .. });
    assert!(caught, "{what}");
    assert_eq!(gather_one(dir.path(), 3).unwrap(), record(3, 256), "neighbours are unaffected");
}

#[test]
fn missing_chunk_file() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    std::fs::remove_file(dir.path().join("0.zr")).unwrap();
    let what = corruption(gather_one(dir.path(), 0).unwrap_err());
    assert_eq!(what, Corruption::ChunkMissing { chunk: 0 });
    assert!(what.to_string().contains("0.zr is missing"));
}

#[test]
fn stored_length_that_does_not_match_the_callers_layout() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    let store = Zrecord::open_read_only(dir.path()).unwrap();
    let mut out = vec![0u8; 512];
    let err = store.gather(&[1], &mut out, 512).unwrap_err();
    assert!(matches!(err, Error::LengthMismatch { index: 1, stored: 256, expected: 512, .. }), "{err}");
    let err = store.gather(&[1], &mut out[..128], 128).unwrap_err();
    assert!(matches!(err, Error::LengthMismatch { stored: 256, expected: 128, .. }), "{err}");
    let err = store.gather_var(&[1, 2], &mut out, &[0, 256], &[256, 200]).unwrap_err();
    assert!(matches!(err, Error::LengthMismatch { index: 2, .. }), "{err}");
}

#[test]
fn chunk_id_past_the_tail_and_unknown_codec() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Raw);
    let meta = dir.path().join("meta.zr");
    poke(&meta, entry_offset(1) + 12, &7u16.to_le_bytes());
    poke(&meta, entry_offset(2) + 14, &[9]);
    let what = corruption(gather_one(dir.path(), 1).unwrap_err());
    assert_eq!(what, Corruption::ChunkPastLast { chunk: 7, last_chunk: 0 });
    let what = corruption(gather_one(dir.path(), 2).unwrap_err());
    assert_eq!(what, Corruption::UnknownCodec(9));
}

#[test]
fn empty_directory_becomes_a_store_but_not_read_only() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(Zrecord::open_read_only(dir.path()), Err(Error::NoStore { .. })));
    assert!(matches!(Zrecord::open_read_only(dir.path().join("nope")), Err(Error::NoDirectory { .. })));
    let store = Zrecord::open(dir.path()).unwrap();
    assert_eq!(store.len(), 0);
    // A new store is exactly the reference's: meta.zr of the full size, chunk 0.
    assert_eq!(std::fs::metadata(dir.path().join("meta.zr")).unwrap().len(), META_BYTES);
    assert!(dir.path().join("0.zr").exists());
}

#[test]
fn dictionary_records_without_the_dictionary() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Zrecord::open(dir.path()).unwrap();
        let samples: Vec<u8> = (0..200).flat_map(|k| record(k % 5, 256)).collect();
        store.train_dict(&samples, &vec![256; 200], 8 << 10).unwrap();
        store.append(&samples[..256 * 10], 10, 256, Codec::ZstdDict).unwrap();
    }
    std::fs::remove_file(dir.path().join("dict.zr")).unwrap();
    let err = gather_one(dir.path(), 0).unwrap_err();
    assert!(matches!(err, Error::NoDictionary { index: Some(0), .. }), "{err}");
    assert!(err.to_string().contains("dict.zr is missing"), "{err}");
}

#[test]
fn records_over_the_limit_and_empty_records() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    let big = vec![0u8; (1 << 20) + 1];
    let err = store.append(&big, 1, big.len(), Codec::Zstd).unwrap_err();
    assert!(matches!(err, Error::RecordTooLarge { len, .. } if len == (1 << 20) + 1), "{err}");
    let err = store.append_var(&big, &[0, 0], &[5, (1 << 20) + 1], Codec::Raw).unwrap_err();
    assert!(matches!(err, Error::RecordTooLarge { position: 1, .. }), "{err}");
    // Zero-length records are real records (the reference refuses them).
    assert_eq!(store.append(&[], 3, 0, Codec::Zstd).unwrap(), 0);
    assert_eq!(store.append_var(&[], &[0], &[0], Codec::Raw).unwrap(), 3);
    assert_eq!(store.len(), 4);
    store.gather(&[0, 1, 2, 3], &mut [], 0).unwrap();
    assert_eq!(store.get(2).unwrap(), Vec::<u8>::new());
    assert_eq!(store.append(&big, 1, 1 << 20, Codec::Zstd).unwrap(), 4, "exactly 1 MiB is fine");
}

#[test]
fn meta_missing_but_chunks_present() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    std::fs::remove_file(dir.path().join("meta.zr")).unwrap();
    let err = Zrecord::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::MetaMissing { .. }), "{err}");
    assert!(dir.path().join("0.zr").exists(), "nothing was overwritten");
}

#[test]
fn path_that_is_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, b"x").unwrap();
    assert!(matches!(Zrecord::open(&file), Err(Error::NotADirectory { .. })));
    assert!(matches!(Zrecord::open_read_only(&file), Err(Error::NotADirectory { .. })));
}

#[test]
fn caller_buffers_that_do_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Raw);
    let store = Zrecord::open(dir.path()).unwrap();
    let mut small = vec![0u8; 300];
    assert!(matches!(store.gather(&[0, 1], &mut small, 256), Err(Error::InvalidArgument(_))));
    assert!(matches!(store.gather(&[0, 1], &mut small, usize::MAX), Err(Error::InvalidArgument(_))));
    let mut out = vec![0u8; 600];
    let err = store.gather_var(&[0, 1], &mut out, &[0, 100], &[256, 256]).unwrap_err();
    assert!(err.to_string().contains("overlaps"), "{err}");
    let err = store.gather_var(&[0, 1], &mut out, &[500, 0], &[256, 256]).unwrap_err();
    assert!(err.to_string().contains("runs past"), "{err}");
    let err = store.gather_var(&[0, 1], &mut out, &[u64::MAX, 0], &[256, 256]).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    // Unsorted but disjoint regions are fine.
    store.gather_var(&[0, 1], &mut out, &[300, 0], &[256, 256]).unwrap();
    assert_eq!(&out[300..556], &record(0, 256)[..]);
    assert!(matches!(store.append(&small, 2, 256, Codec::Raw), Err(Error::InvalidArgument(_))));
    assert!(matches!(store.append(&small, usize::MAX, 2, Codec::Raw), Err(Error::InvalidArgument(_))));
    let err = store.append_var(&small, &[0], &[1, 2], Codec::Raw).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    let err = store.train_dict(&small, &[100, 100], 1024).unwrap_err();
    assert!(matches!(err, Error::DictionaryTraining { .. }), "{err}");
}

#[test]
fn verify_finds_every_problem_and_passes_a_good_store() {
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    let report = Zrecord::open_read_only(dir.path()).unwrap().verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.records, 10);
    let meta = dir.path().join("meta.zr");
    let table = std::fs::read(&meta).unwrap();
    // Entry 3 claims entry 2's bytes; entry 5 gets an unknown codec.
    poke(&meta, entry_offset(3), &table[entry_offset(2) as usize..][..16]);
    poke(&meta, entry_offset(5) + 14, &[7]);
    let report = Zrecord::open_read_only(dir.path()).unwrap().verify().unwrap();
    let described: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(report.problems.len(), 3, "{described:?}");
    assert!(described.iter().any(|d| d.contains("unknown codec tag 7")), "{described:?}");
    // Record 3's entry is not the one its checksum was taken for, and
    // the bytes it names are not record 3's, but record 2's.
    assert!(described.iter().any(|d| d.contains("record 3: the table entry")), "{described:?}");
    assert!(described.iter().any(|d| d.contains("record 3: stored bytes overlap those of record 2")), "{described:?}");
    // Without checksums, the overlap check alone names it.
    std::fs::remove_file(dir.path().join(loaderx::format::SUMS_FILE)).unwrap();
    let report = Zrecord::open_read_only(dir.path()).unwrap().verify().unwrap();
    let described: Vec<String> = report.problems.iter().map(|p| p.to_string()).collect();
    assert!(described.iter().any(|d| d.contains("overlap")), "{described:?}");
}

#[test]
fn bytes_past_the_table_that_are_no_intent_are_dropped() {
    // Fuzzing observation O2: what lies past the table is read head first,
    // so garbage there (or a head claiming more items than follow) costs one
    // small read and is then removed by a writer's open.
    let claims_too_much = {
        let mut head = b"ZINT".to_vec();
        head.extend_from_slice(&10u32.to_le_bytes());
        head.extend_from_slice(&9u32.to_le_bytes());
        head.extend_from_slice(&(1u32 << 24).to_le_bytes());
        head.extend_from_slice(&[0; 4]);
        head
    };
    let too_many_items = {
        let mut head = claims_too_much.clone();
        head[12..16].copy_from_slice(&((1u32 << 24) + 1).to_le_bytes());
        head
    };
    for tail in [vec![0xA5; 1 << 20], claims_too_much, too_many_items, b"ZINT".to_vec()] {
        let dir = tempfile::tempdir().unwrap();
        store_of_ten(dir.path(), Codec::Zstd);
        poke(&dir.path().join("meta.zr"), META_BYTES, &tail);
        assert_eq!(gather_one(dir.path(), 9).unwrap(), record(9, 256), "read-only open ignores the tail");
        let store = Zrecord::open(dir.path()).unwrap();
        assert_eq!(store.len(), 10);
        assert_eq!(store.get(3).unwrap(), record(3, 256));
        // Windows erases the tail in place where a mapping stops the truncation.
        let len = std::fs::metadata(dir.path().join("meta.zr")).unwrap().len();
        assert!(cfg!(windows) || len == META_BYTES, "tail removed: {len} bytes");
    }
}

#[test]
fn compressed_length_beyond_any_zstd_frame() {
    // Fuzzing observation O3: a stored length is bounded by
    // ZSTD_compressBound(logic_length) before any byte is read.
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    let bound = 256 + (256 >> 8) + (((128 << 10) - 256) >> 11);
    for (phys, refused) in [(bound, false), (bound + 1, true), (u32::MAX, true)] {
        poke(&dir.path().join("meta.zr"), entry_offset(4) + 4, &phys.to_le_bytes());
        let err = gather_one(dir.path(), 4).unwrap_err();
        let what = corruption(err);
        if refused {
            assert_eq!(what, Corruption::PhysTooLarge { phys, bound: u64::from(bound) });
        } else {
            assert!(!matches!(what, Corruption::PhysTooLarge { .. }), "{what}");
        }
    }
}

#[test]
fn a_chunk_longer_than_the_frontier_is_trimmed_by_a_writers_open() {
    // Bytes past the frontier: an append that crashed before its commit, or
    // the reference's chunk file preallocated to 4 GiB. A writer's open
    // trims the file to its last record (so the next open need not scan
    // the table); a read-only open changes nothing.
    let chunk_len = |dir: &Path| std::fs::metadata(dir.join("0.zr")).unwrap().len();
    for (codec, damaged_header) in [(Codec::Raw, false), (Codec::Zstd, false), (Codec::Raw, true)] {
        let dir = tempfile::tempdir().unwrap();
        store_of_ten(dir.path(), codec);
        let end = chunk_len(dir.path());
        let file = OpenOptions::new().write(true).open(dir.path().join("0.zr")).unwrap();
        file.set_len(4 << 30).unwrap();
        file.write_all_at(&[0xA5; 4096], end).unwrap();
        if damaged_header {
            // Finding F7 as well: the frontier at 0, below every record.
            poke(&dir.path().join("meta.zr"), 8, &0u32.to_le_bytes());
        }
        drop(Zrecord::open_read_only(dir.path()).unwrap());
        assert_eq!(chunk_len(dir.path()), 4 << 30, "a read-only open leaves the file alone");
        let store = Zrecord::open(dir.path()).unwrap();
        assert_eq!(chunk_len(dir.path()), end, "{codec:?}: trimmed to the last record");
        assert_eq!(store.append(&record(10, 256), 1, 256, codec).unwrap(), 10);
        for k in 0..11 {
            assert_eq!(store.get(k).unwrap(), record(k, 256), "{codec:?} record {k}");
        }
        assert!(store.verify().unwrap().is_ok());
    }
}

#[test]
fn a_frontier_below_live_records_is_raised_before_anything_is_written() {
    // Fuzzing finding F7: a header whose frontier lies below live records
    // of its last chunk would let the next append (or a compaction's
    // evacuation) write over them, and a raw record would then read back
    // another record's bytes. A writer's open raises the frontier first.
    for codec in [Codec::Raw, Codec::Zstd] {
        let dir = tempfile::tempdir().unwrap();
        store_of_ten(dir.path(), codec);
        poke(&dir.path().join("meta.zr"), 8, &0u32.to_le_bytes()); // tail_offset
        let mut store = Zrecord::open(dir.path()).unwrap();
        store.append(&record(10, 256), 1, 256, codec).unwrap();
        for k in 0..11 {
            assert_eq!(store.get(k).unwrap(), record(k, 256), "{codec:?} record {k} after the append");
        }
        store.delete(&[4]).unwrap();
        store.compact().unwrap();
        drop(store);
        let store = Zrecord::open_read_only(dir.path()).unwrap();
        let want = [0, 1, 2, 3, 10, 5, 6, 7, 8, 9];
        assert_eq!(store.len(), 10);
        for (index, k) in want.into_iter().enumerate() {
            assert_eq!(store.get(index as u64).unwrap(), record(k, 256), "{codec:?} record {index}");
        }
        assert!(store.verify().unwrap().is_ok());
    }
}

#[test]
fn a_frontier_below_live_records_of_a_later_chunk_is_raised_before_anything_is_written() {
    // Fuzzing finding F9: a header whose frontier is in chunk 0 while live
    // records sit in chunk 1 (a file that exists). The next append rolled
    // over into chunk 1 at offset 0 and wrote over them; a raw record then
    // read back the appended bytes. A writer's open raises the frontier
    // past them first.
    let dir = tempfile::tempdir().unwrap();
    drop(Zrecord::open(dir.path()).unwrap());
    let meta = dir.path().join("meta.zr");
    poke(&meta, 8, &(((4u64 << 30) - 1000) as u32).to_le_bytes()); // near chunk 0's end
    let store = Zrecord::open(dir.path()).unwrap();
    store.append(&(0..3).flat_map(|k| record(k, 256)).collect::<Vec<u8>>(), 3, 256, Codec::Raw).unwrap();
    store.append(&(3..8).flat_map(|k| record(k, 256)).collect::<Vec<u8>>(), 5, 256, Codec::Raw).unwrap();
    assert_eq!(store.stats().unwrap().chunks, 2, "records in chunk 1");
    drop(store);
    // The damage: the frontier back to chunk 0 (its last usable offset).
    poke(&meta, 8, &u32::MAX.to_le_bytes());
    poke(&meta, 6, &0u16.to_le_bytes());
    let store = Zrecord::open(dir.path()).unwrap();
    store.append(&record(8, 256), 1, 256, Codec::Raw).unwrap();
    for k in 0..9 {
        assert_eq!(store.get(k).unwrap(), record(k, 256), "record {k} after the append");
    }
    assert!(store.verify().unwrap().is_ok());
}

#[test]
fn a_record_ending_at_the_chunks_last_byte_moves_the_frontier_to_the_next_chunk() {
    // The reference may fill a chunk to its very end; no frontier offset in
    // that chunk lies past such a record, so a writer's open puts the
    // frontier at the start of the next chunk rather than below the record.
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Raw);
    let chunk = OpenOptions::new().write(true).open(dir.path().join("0.zr")).unwrap();
    chunk.set_len(4 << 30).unwrap();
    let last = record(99, 256);
    chunk.write_all_at(&last, (4 << 30) - 256).unwrap();
    let entry = loaderx::format::Entry::new(
        loaderx::format::Loc { chunk: 0, offset: ((4u64 << 30) - 256) as u32 },
        256,
        256,
        Codec::Raw,
    );
    let meta = dir.path().join("meta.zr");
    poke(&meta, entry_offset(10), bytemuck::bytes_of(&entry));
    let header =
        loaderx::format::Header::new(loaderx::format::Frontier { chunk: 0, offset: ((4u64 << 30) - 300) as u32 }, 11);
    poke(&meta, 0, bytemuck::bytes_of(&header));
    let store = Zrecord::open(dir.path()).unwrap();
    // 200 bytes at the old frontier would have covered the record's first 156.
    assert_eq!(store.append(&record(11, 200), 1, 200, Codec::Raw).unwrap(), 11);
    assert_eq!(store.get(10).unwrap(), last);
    assert_eq!(store.get(11).unwrap(), record(11, 200));
    assert_eq!(store.stats().unwrap().chunks, 2);
    assert!(store.verify().unwrap().is_ok());
}

#[test]
fn a_chunk_file_numbered_past_the_limit_is_removed_by_a_writers_open() {
    // `4097.zr` is no chunk the format can name; a writer's open removes
    // the chunk files past the frontier that no readable record is in
    // (and a compaction would), and this one must not trip it.
    let dir = tempfile::tempdir().unwrap();
    store_of_ten(dir.path(), Codec::Zstd);
    std::fs::write(dir.path().join("4097.zr"), b"stray").unwrap();
    drop(Zrecord::open_read_only(dir.path()).unwrap());
    assert!(dir.path().join("4097.zr").exists(), "a reader removes nothing");
    let mut store = Zrecord::open(dir.path()).unwrap();
    assert!(!dir.path().join("4097.zr").exists());
    store.delete(&[3]).unwrap();
    assert_eq!(store.compact().unwrap().removed_chunks, 0);
    assert!(store.verify().unwrap().is_ok());
}

/// Opens the store at `dir` (read-only or not) and reads every record.
#[cfg(unix)]
fn open_and_read(dir: &Path, read_only: bool) -> Result<(), Error> {
    let store = Zrecord::open_with(dir, loaderx::Options { read_only, ..loaderx::Options::default() })?;
    let mut out = vec![0u8; 256 * store.len() as usize];
    let indices: Vec<u64> = (0..u64::from(store.len())).collect();
    store.gather(&indices, &mut out, 256)
}

#[test]
#[cfg(unix)]
fn a_fifo_where_a_store_file_belongs_is_refused_without_blocking() {
    for name in ["meta.zr", "0.zr", "dict.zr"] {
        let dir = tempfile::tempdir().unwrap();
        store_of_ten(dir.path(), Codec::Raw);
        let store = Zrecord::open(dir.path()).unwrap();
        let sizes = vec![256; 200];
        let samples: Vec<u8> = (0..200).flat_map(|k| record(k, 256)).collect();
        store.train_dict(&samples, &sizes, 4 << 10).unwrap();
        drop(store);
        let path = dir.path().join(name);
        std::fs::remove_file(&path).unwrap();
        common::mkfifo(&path);
        let _unblock = common::Unblocker::new(&path);
        for read_only in [true, false] {
            let err = open_and_read(dir.path(), read_only).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, Error::Io { .. }), "{name}: {text}");
            assert!(text.contains(&format!("{name} is not a regular file but a FIFO")), "{name}: {text}");
        }
    }
}

#[test]
#[cfg(unix)]
fn a_fifo_as_a_schema_or_an_npy_input_is_refused_without_blocking() {
    use loaderx::dataset::{Dataset, WriteOptions, write_dataset, write_dataset_npy};
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write_dataset(&data, &[1u8, 2, 3, 4, 5, 6], &[2, 3], &WriteOptions::codec(Codec::Raw)).unwrap();
    let schema = data.join("schema.json");
    std::fs::remove_file(&schema).unwrap();
    common::mkfifo(&schema);
    let npy = dir.path().join("input.npy");
    common::mkfifo(&npy);
    let (_a, _b) = (common::Unblocker::new(&schema), common::Unblocker::new(&npy));
    let Err(err) = Dataset::open(&data) else { panic!("a FIFO schema.json is refused") };
    assert!(err.to_string().contains("schema.json is not a regular file but a FIFO"), "{err}");
    let err = write_dataset_npy(dir.path().join("out"), &npy, &WriteOptions::default()).unwrap_err();
    assert!(err.to_string().contains("input.npy is not a regular file but a FIFO"), "{err}");
}
