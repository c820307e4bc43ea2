//! The batched read path (`ReadMode::Batched`, and `Auto` on records that
//! are not in memory) against the naive model: every codec, fixed and
//! variable sizes, bad input; and a cold-cache run on the real filesystem
//! that evicts the store's pages, reads every byte back, and checks that
//! the device was asked for no more than the records' own pages.
//!
//! `ReadMode::Direct` (`O_DIRECT`) gets the same checks on the work disk,
//! and must leave the page cache as it found it.
//!
//! CI runs this file twice: with the engine this machine picks (io_uring
//! where it works) and with `LOADERX_READ_ENGINE=threads`, the fallback.

mod common;

use std::path::Path;

use common::{FileAt, gathered, record};
use loaderx::io::ReadEngine;
#[cfg(target_os = "linux")]
use loaderx::io::real::{evict_page_cache, resident_pages};
use loaderx::{Codec, Corruption, Error, Options, ReadMode, Zrecord};

fn open(dir: &Path, read_mode: ReadMode) -> Zrecord {
    Zrecord::open_with(dir, Options { read_only: true, read_mode, ..Options::default() }).unwrap()
}

/// A store of raw, zstd and zstd_dict records of varied sizes; the model.
fn mixed_store(dir: &Path) -> Vec<Vec<u8>> {
    let store = Zrecord::open(dir).unwrap();
    let sizes = |k: u64| [0, 1, 700, 4096, 12_288, 70_000][(k % 6) as usize] + (k % 5) as usize;
    let mut model = Vec::new();
    let samples: Vec<u8> = (0..200).flat_map(|k| record(k, 1000)).collect();
    store.train_dict(&samples, &[1000; 200], 16 << 10).unwrap();
    for (block, codec) in [Codec::Raw, Codec::Zstd, Codec::ZstdDict, Codec::Raw].into_iter().enumerate() {
        let records: Vec<Vec<u8>> = (0..150).map(|k| record(block as u64 * 1000 + k, sizes(k))).collect();
        common::append_all(&store, &records, codec);
        model.extend(records);
    }
    model
}

fn engine_is_the_one_asked_for(store: &Zrecord) {
    let forced = std::env::var("LOADERX_READ_ENGINE").is_ok_and(|v| v == "threads");
    if forced {
        assert_eq!(store.read_engine(), ReadEngine::Threads);
    } else {
        assert_ne!(store.read_engine(), ReadEngine::Sequential, "the real filesystem reads in batches");
    }
}

#[test]
fn every_mode_reads_what_the_model_holds() {
    let dir = tempfile::tempdir().unwrap();
    let model = mixed_store(dir.path());
    for mode in [ReadMode::Mapped, ReadMode::Batched, ReadMode::Auto] {
        let store = open(dir.path(), mode);
        engine_is_the_one_asked_for(&store);
        common::assert_matches(&store, &model);
        // Random batches, duplicates included, through gather_var.
        let mut x = 7u64;
        for _ in 0..20 {
            let indices: Vec<u64> = (0..97)
                .map(|_| {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (x >> 33) % model.len() as u64
                })
                .collect();
            let got = gathered(&store, &indices);
            for (k, &i) in indices.iter().enumerate() {
                assert!(got[k] == model[i as usize], "{mode:?}: record {i}");
            }
        }
    }
}

#[test]
fn fixed_size_gathers_agree_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    let n = 3000u64;
    let src: Vec<u8> = (0..n).flat_map(|k| record(k, 4096)).collect();
    store.append(&src, n as usize, 4096, Codec::Zstd).unwrap();
    store.append(&src, n as usize, 4096, Codec::Raw).unwrap();
    drop(store);
    let indices: Vec<u64> = (0..512).map(|k| (k * 7919) % (2 * n)).collect();
    let mut want = vec![0u8; indices.len() * 4096];
    open(dir.path(), ReadMode::Mapped).gather(&indices, &mut want, 4096).unwrap();
    for (k, &i) in indices.iter().enumerate() {
        assert_eq!(want[k * 4096..][..4096], record(i % n, 4096)[..], "record {i}");
    }
    for mode in [ReadMode::Batched, ReadMode::Auto] {
        let mut got = vec![0xEEu8; indices.len() * 4096];
        open(dir.path(), mode).gather(&indices, &mut got, 4096).unwrap();
        assert!(got == want, "{mode:?}");
    }
}

#[test]
fn bad_input_gets_the_same_errors_on_the_batched_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    store.append(&[5u8; 10 * 300], 10, 300, Codec::Raw).unwrap();
    drop(store);
    let batched = open(dir.path(), ReadMode::Batched);
    let mut out = vec![0u8; 2 * 300];
    assert!(matches!(batched.gather(&[1, 10], &mut out, 300), Err(Error::IndexOutOfRange { index: 10, .. })));
    let mut short = vec![0u8; 2 * 200];
    assert!(matches!(batched.gather(&[1, 2], &mut short, 200), Err(Error::LengthMismatch { .. })));
    // A chunk file truncated under the store: the read ends early, a typed
    // error that says the store changed (a mapped read would fault).
    let chunk = dir.path().join("0.zr");
    std::fs::OpenOptions::new().write(true).open(&chunk).unwrap().set_len(1000).unwrap();
    let err = batched.gather(&[0, 9], &mut out, 300).unwrap_err();
    assert!(matches!(err, Error::StoreChanged { .. }), "{err}");
    assert!(err.to_string().contains("changed under this reader") && !err.to_string().contains("corrupt"), "{err}");
    // `refresh` picks up the shorter length: what lies inside it reads,
    // what lies past it is refused before any read.
    batched.refresh().unwrap();
    let mut one = vec![0u8; 300];
    batched.gather(&[0], &mut one, 300).unwrap();
    assert_eq!(one, [5u8; 300]);
    let err = batched.gather(&[9], &mut one, 300).unwrap_err();
    assert!(matches!(err, Error::Corrupt { what: Corruption::PastChunkEnd { chunk_len: 1000, .. }, .. }), "{err}");
}

/// A store on the work disk (the temporary directory may be in memory,
/// where nothing can be evicted).
#[cfg(target_os = "linux")]
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
#[cfg(target_os = "linux")] // the page cache and O_DIRECT are Linux's
fn a_cold_store_reads_back_every_byte_and_only_its_own_pages() {
    let dir = disk_dir();
    let (n, len) = (4000u64, 12_288usize);
    let store = Zrecord::open(dir.path()).unwrap();
    let src: Vec<u8> = (0..n).flat_map(|k| record(k, len)).collect();
    store.append(&src, n as usize, len, Codec::Raw).unwrap();
    drop(store);
    let chunk = dir.path().join("0.zr");
    evict_page_cache(&chunk).unwrap();
    let (resident, pages) = resident_pages(&chunk).unwrap();
    assert!(resident * 100 <= pages, "eviction left {resident} of {pages} pages");
    // One record in ten, at random, in batches of 64: Auto finds them cold.
    let store = open(dir.path(), ReadMode::Auto);
    let picks: Vec<u64> = (0..n / 10).map(|k| (k * 2_654_435_761) % n).collect();
    for batch in picks.chunks(64) {
        let mut out = vec![0u8; batch.len() * len];
        store.gather(batch, &mut out, len).unwrap();
        for (k, &i) in batch.iter().enumerate() {
            assert!(out[k * len..][..len] == src[i as usize * len..][..len], "record {i}");
        }
    }
    // Each 12 KiB record spans 3 or 4 pages; read-ahead would bring in more.
    let (resident, _) = resident_pages(&chunk).unwrap();
    let wanted = picks.len() as u64 * 4;
    assert!(resident <= wanted + pages / 100, "{resident} pages resident for {} records", picks.len());
    // And the rest of the store is still right, read cold.
    evict_page_cache(&chunk).unwrap();
    let all: Vec<u64> = (0..n).collect();
    let mut out = vec![0u8; src.len()];
    open(dir.path(), ReadMode::Batched).gather(&all, &mut out, len).unwrap();
    assert!(out == src);
}

#[test]
fn a_batch_across_chunk_files_reads_every_record() {
    // The frontier moved to a few KiB before the end of chunk 0, so that the
    // records roll over into chunk 1 (chunk files are sparse): one gather's
    // reads go to two files in one submission.
    let dir = tempfile::tempdir().unwrap();
    drop(Zrecord::open(dir.path()).unwrap());
    let meta = dir.path().join("meta.zr");
    let offset = ((4u64 << 30) - 20_000) as u32;
    std::fs::OpenOptions::new().write(true).open(&meta).unwrap().write_all_at(&offset.to_le_bytes(), 8).unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    let records: Vec<Vec<u8>> = (0..40).map(|k| record(k, 3000 + k as usize * 17)).collect();
    common::append_all(&store, &records[..20], Codec::Raw);
    common::append_all(&store, &records[20..], Codec::Zstd);
    assert_eq!(store.stats().unwrap().chunks, 2, "the records span two chunk files");
    drop(store);
    let indices: Vec<u64> = (0..40).rev().chain([0, 39, 5]).collect();
    for mode in [ReadMode::Batched, ReadMode::Mapped] {
        let got = gathered(&open(dir.path(), mode), &indices);
        for (k, &i) in indices.iter().enumerate() {
            assert!(got[k] == records[i as usize], "{mode:?}: record {i}");
        }
    }
}

#[test]
#[cfg(target_os = "linux")] // the page cache and O_DIRECT are Linux's
fn direct_reads_return_every_byte_and_leave_the_cache_alone() {
    // Records of every codec and of sizes around the sector: the last one
    // ends where the chunk file ends, off a sector boundary, so its
    // rounded-out read would pass the end (it takes the cached path).
    let dir = disk_dir();
    let model = mixed_store(dir.path());
    let chunk = dir.path().join("0.zr");
    assert_ne!(std::fs::metadata(&chunk).unwrap().len() % 512, 0, "the store ends off a sector");
    evict_page_cache(&chunk).unwrap();
    let store = open(dir.path(), ReadMode::Direct);
    common::assert_matches(&store, &model);
    let mut x = 11u64;
    for _ in 0..20 {
        let indices: Vec<u64> = (0..97)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) % model.len() as u64
            })
            .chain([model.len() as u64 - 1])
            .collect();
        let got = gathered(&store, &indices);
        for (k, &i) in indices.iter().enumerate() {
            assert!(got[k] == model[i as usize], "record {i}");
        }
    }
    // Everything was read past the cache but the last sector's record.
    let (resident, pages) = resident_pages(&chunk).unwrap();
    assert!(resident <= 4 + pages / 100, "{resident} of {pages} pages resident after direct reads");
}

#[test]
#[cfg(target_os = "linux")] // the page cache and O_DIRECT are Linux's
fn direct_fixed_size_gathers_agree_with_the_mapping() {
    let dir = disk_dir();
    let store = Zrecord::open(dir.path()).unwrap();
    let (n, len) = (2000u64, 4096 + 100);
    let src: Vec<u8> = (0..n).flat_map(|k| record(k, len)).collect();
    store.append(&src, n as usize, len, Codec::Zstd).unwrap();
    store.append(&src, n as usize, len, Codec::Raw).unwrap();
    drop(store);
    let indices: Vec<u64> = (0..700).map(|k| (k * 7919) % (2 * n)).collect();
    let mut want = vec![0u8; indices.len() * len];
    open(dir.path(), ReadMode::Mapped).gather(&indices, &mut want, len).unwrap();
    let mut got = vec![0xEEu8; want.len()];
    open(dir.path(), ReadMode::Direct).gather(&indices, &mut got, len).unwrap();
    assert!(got == want);
    // A record just appended by this process is read back right (the
    // kernel writes dirty pages back before a direct read of them).
    let store = Zrecord::open_with(dir.path(), Options { read_mode: ReadMode::Direct, ..Options::default() }).unwrap();
    store.append(&record(99, len), 1, len, Codec::Raw).unwrap();
    assert_eq!(store.get(2 * n).unwrap(), record(99, len));
}

#[test]
#[cfg(target_os = "linux")]
fn direct_reads_on_a_filesystem_without_o_direct_are_refused_at_open() {
    // tmpfs refuses O_DIRECT; /dev/shm is tmpfs on Linux where it exists.
    let shm = Path::new("/dev/shm");
    let Ok(dir) = tempfile::tempdir_in(shm) else {
        println!("no /dev/shm here: nothing to check");
        return;
    };
    drop(Zrecord::open(dir.path()).unwrap());
    use std::os::unix::fs::OpenOptionsExt;
    let refused =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(dir.path().join("meta.zr")).is_err();
    let opened = Zrecord::open_with(dir.path(), Options { read_mode: ReadMode::Direct, ..Options::default() });
    if refused {
        let err = opened.unwrap_err();
        assert!(err.to_string().contains("ReadMode::Direct"), "{err}");
    } else {
        opened.unwrap();
    }
}
