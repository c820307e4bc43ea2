//! Append and read back, every codec, fixed and variable sizes, across reopen.

mod common;

use common::{append_all, assert_matches, record};
use loaderx::{Codec, Error, Options, Zrecord};

const CODECS: [Codec; 2] = [Codec::Raw, Codec::Zstd];

#[test]
fn fixed_records_every_codec_gather_and_reopen() {
    for codec in CODECS {
        let dir = tempfile::tempdir().unwrap();
        let n = 300;
        let item = 1000;
        let src: Vec<u8> = (0..n).flat_map(|k| record(k as u64, item)).collect();
        {
            let store = Zrecord::open(dir.path()).unwrap();
            assert_eq!(store.append(&src, n, item, codec).unwrap(), 0);
            assert_eq!(store.append(&src[..item * 10], 10, item, codec).unwrap(), n as u64);
            let idx = [5u64, 0, 299, 305, 5];
            let mut out = vec![0u8; idx.len() * item];
            store.gather(&idx, &mut out, item).unwrap();
            for (k, &i) in idx.iter().enumerate() {
                let want = record(if i >= n as u64 { i - n as u64 } else { i }, item);
                assert_eq!(&out[k * item..][..item], &want[..], "{codec:?} index {i}");
            }
        }
        let store = Zrecord::open_read_only(dir.path()).unwrap();
        assert_eq!(store.len(), 310);
        let all: Vec<u64> = (0..n as u64).collect();
        let mut out = vec![0u8; n * item];
        store.gather(&all, &mut out, item).unwrap();
        assert_eq!(out, src, "{codec:?}: all records after reopen");
        let stats = store.stats().unwrap();
        assert_eq!(stats.records, 310);
        assert_eq!(stats.logical_bytes, 310 * item as u64);
        if codec == Codec::Zstd {
            assert!(stats.live_bytes < stats.logical_bytes, "zstd shrinks these records");
            assert_eq!(stats.codec_records[1], 310);
        }
    }
}

#[test]
fn variable_records_including_empty_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    // An empty record first: it lands at chunk 0, offset 0.
    let model: Vec<Vec<u8>> =
        [0usize, 1, 7, 0, 4096, 20_000, 0, 1 << 20].iter().enumerate().map(|(k, &len)| record(k as u64, len)).collect();
    append_all(&store, &model[..4], Codec::Raw);
    append_all(&store, &model[4..], Codec::Zstd);
    assert_matches(&store, &model);
    drop(store);
    let store = Zrecord::open(dir.path()).unwrap();
    assert_matches(&store, &model);
    assert_eq!(store.get(3).unwrap(), Vec::<u8>::new());
    assert_eq!(store.get(7).unwrap(), model[7]);
}

#[test]
fn incompressible_records_are_stored_raw() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    let mut x = 1u64;
    let noise: Vec<u8> = (0..4096)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect();
    store.append(&noise, 1, 4096, Codec::Zstd).unwrap();
    let stats = store.stats().unwrap();
    assert_eq!(stats.codec_records, [1, 0, 0]);
    assert_eq!(store.get(0).unwrap(), noise);
}

#[test]
fn min_saving_stores_barely_compressible_records_raw() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options { min_saving: 0.9, ..Options::default() };
    let store = Zrecord::open_with(dir.path(), options).unwrap();
    let r = record(1, 4096); // compresses, but by far less than 90%
    store.append(&r, 1, 4096, Codec::Zstd).unwrap();
    assert_eq!(store.stats().unwrap().codec_records, [1, 0, 0]);
    assert_eq!(store.get(0).unwrap(), r);
}

#[test]
fn dictionary_records_read_back_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let model: Vec<Vec<u8>> = (0..400).map(|k| record(k % 7, 300)).collect();
    {
        let store = Zrecord::open(dir.path()).unwrap();
        assert!(!store.has_dict());
        let err = store.append(&model[0], 1, 300, Codec::ZstdDict).unwrap_err();
        assert!(matches!(err, Error::NoDictionary { index: None, .. }), "{err}");
        let samples: Vec<u8> = model.concat();
        let sizes = vec![300usize; model.len()];
        let size = store.train_dict(&samples, &sizes, loaderx::default_dict_size(samples.len())).unwrap();
        assert!(size > 0 && size <= 8 << 10, "dictionary of {size} bytes");
        assert!(store.has_dict());
        let again = store.train_dict(&samples, &sizes, 8 << 10).unwrap_err();
        assert!(matches!(again, Error::DictionaryExists { .. }), "{again}");
        append_all(&store, &model, Codec::ZstdDict);
        assert_matches(&store, &model);
    }
    let store = Zrecord::open_read_only(dir.path()).unwrap();
    assert!(store.has_dict());
    assert_matches(&store, &model);
    assert!(store.stats().unwrap().codec_records[2] > 0);
}

#[test]
fn concurrent_appends_and_gathers_from_many_threads() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    let item = 512;
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let store = &store;
            s.spawn(move || {
                for round in 0..20u64 {
                    // Each record carries its own identity in its first 8 bytes.
                    let mut src = Vec::new();
                    for k in 0..8u64 {
                        let id = t * 1000 + round * 8 + k;
                        let mut r = record(id, item);
                        r[..8].copy_from_slice(&id.to_le_bytes());
                        src.extend_from_slice(&r);
                    }
                    store.append(&src, 8, item, Codec::Zstd).unwrap();
                    let len = u64::from(store.len());
                    let idx: Vec<u64> = (0..16).map(|k| (k * 7919 + round) % len).collect();
                    let mut out = vec![0u8; idx.len() * item];
                    store.gather(&idx, &mut out, item).unwrap();
                    for rec in out.chunks(item) {
                        let id = u64::from_le_bytes(rec[..8].try_into().unwrap());
                        let mut want = record(id, item);
                        want[..8].copy_from_slice(&id.to_le_bytes());
                        assert_eq!(rec, &want[..]);
                    }
                }
            });
        }
    });
    assert_eq!(store.len(), 4 * 20 * 8);
}

#[test]
fn a_second_writer_is_refused_and_readers_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    store.append(b"abcd", 1, 4, Codec::Raw).unwrap();
    let err = Zrecord::open(dir.path()).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(err.to_string().contains("another writer"), "{err}");
    let reader = Zrecord::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.get(0).unwrap(), b"abcd");
    // The reader picks up later appends on refresh.
    store.append(b"efgh", 1, 4, Codec::Zstd).unwrap();
    assert_eq!(reader.len(), 1);
    assert_eq!(reader.refresh().unwrap(), 2);
    assert_eq!(reader.get(1).unwrap(), b"efgh");
    drop(store);
    Zrecord::open(dir.path()).expect("the lock is released on drop");
}

/// A read-only handle's `stats` after `refresh` describes the store as it
/// is then, not as it was at open: the frontier is read from the header, the
/// one place that holds it.
#[test]
fn stats_of_a_refreshed_reader_match_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Zrecord::open(dir.path()).unwrap();
    writer.append(&[1u8; 10 * 4096], 10, 4096, Codec::Raw).unwrap();
    let reader = Zrecord::open_read_only(dir.path()).unwrap();
    assert_eq!(reader.stats().unwrap(), writer.stats().unwrap());
    writer.append(&[2u8; 3000 * 4096], 3000, 4096, Codec::Raw).unwrap();
    assert_eq!(reader.refresh().unwrap(), 3010);
    let stats = reader.stats().unwrap();
    assert_eq!(stats, writer.stats().unwrap());
    assert_eq!(stats.chunk_file_bytes, 3010 * 4096);
    assert_eq!(stats.reclaimable, 0);
}
