//! The readers' lock within one process (other processes:
//! `store_processes.rs`; the simulator's model of it: `sim/tests/locks.rs`):
//! a read-only open holds it shared, a delete or compaction needs it
//! exclusively and is refused at once or, with `Options::wait`, waits;
//! appends ignore it. A reader that could not take it reads without the
//! mappings. A store changed under a reader anyway (by a writer that takes
//! no readers' lock) is `Error::StoreChanged`, not corruption.

mod common;

use std::path::Path;

use common::{append_all, described, identify, lock_waiters, until_blocked};
use loaderx::format::{ENTRY_BYTES, entry_offset};
use loaderx::{Codec, Error, Options, ReadMode, Zrecord};

fn make(dir: &Path, n: u64) -> Zrecord {
    let store = Zrecord::open(dir).unwrap();
    let records: Vec<Vec<u8>> = (0..n).map(described).collect();
    append_all(&store, &records, Codec::Raw);
    store
}

fn read_only(wait: bool, read_mode: ReadMode) -> Options {
    Options { read_only: true, wait, read_mode, ..Options::default() }
}

/// Every record of `store` is the one its index names.
fn check_all(store: &Zrecord) {
    for i in 0..u64::from(store.len()) {
        assert_eq!(identify(&store.get(i).unwrap()), Some(i), "record {i}");
    }
}

#[test]
fn a_delete_or_compaction_is_refused_while_a_reader_is_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = make(dir.path(), 100);
    let reader = Zrecord::open_read_only(dir.path()).unwrap();
    assert!(reader.holds_readers_lock() && !writer.holds_readers_lock());
    let err = writer.delete(&[3, 50]).unwrap_err();
    assert!(matches!(err, Error::ReadersOpen { .. }), "{err}");
    assert!(err.to_string().contains("open for reading elsewhere"), "{err}");
    let err = writer.compact().unwrap_err();
    assert!(matches!(err, Error::ReadersOpen { .. }), "{err}");
    assert_eq!((writer.len(), reader.len()), (100, 100));
    check_all(&reader);
    // An empty delete changes nothing and needs no lock.
    writer.delete(&[]).unwrap();
    drop(reader);
    writer.delete(&[3, 50]).unwrap();
    writer.compact().unwrap();
    assert_eq!(writer.len(), 98);
}

#[test]
fn appends_stay_concurrent_with_readers() {
    let dir = tempfile::tempdir().unwrap();
    let writer = make(dir.path(), 10);
    let reader = Zrecord::open_read_only(dir.path()).unwrap();
    let more: Vec<Vec<u8>> = (10..30).map(described).collect();
    append_all(&writer, &more, Codec::Zstd);
    assert_eq!(reader.refresh().unwrap(), 30);
    check_all(&reader);
}

#[test]
fn a_waiting_delete_runs_once_the_readers_close() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = make(dir.path(), 100);
    writer.set_wait(true);
    let reader = Zrecord::open_read_only(dir.path()).unwrap();
    let lock_file = dir.path().join("readers.lock");
    std::thread::scope(|s| {
        let delete = s.spawn(|| writer.delete(&[0, 1, 2]));
        let waited = until_blocked(|| lock_waiters(&lock_file) > 0, || delete.is_finished());
        assert!(waited, "the delete returned with a reader open: {:?}", delete.join());
        check_all(&reader); // the reader still reads what it opened on
        drop(reader);
        delete.join().unwrap().unwrap();
    });
    assert_eq!(writer.len(), 97);
    let reader = Zrecord::open_read_only(dir.path()).unwrap();
    for i in 0..97 {
        let id = identify(&reader.get(i).unwrap()).unwrap();
        assert!(id > 2, "record {i} is deleted record {id}");
    }
}

#[test]
fn a_read_only_open_is_refused_or_waits_while_a_mutation_runs() {
    let dir = tempfile::tempdir().unwrap();
    drop(make(dir.path(), 10));
    // What a running delete or compaction holds.
    let lock_file = dir.path().join("readers.lock");
    let held = std::fs::File::open(&lock_file).unwrap();
    held.try_lock().unwrap();
    let err = Zrecord::open_read_only(dir.path()).unwrap_err();
    assert!(matches!(err, Error::MutationRunning { .. }), "{err}");
    assert!(err.to_string().contains("a delete or compaction is running"), "{err}");
    std::thread::scope(|s| {
        let open = s.spawn(|| Zrecord::open_with(dir.path(), read_only(true, ReadMode::Auto)));
        let waited = until_blocked(|| lock_waiters(&lock_file) > 0, || open.is_finished());
        assert!(waited, "the open returned while the lock was held: {:?}", open.join());
        drop(held);
        let reader = open.join().unwrap().unwrap();
        assert!(reader.holds_readers_lock());
        check_all(&reader);
    });
}

#[test]
fn a_reader_that_cannot_take_the_lock_reads_without_the_mappings() {
    let dir = tempfile::tempdir().unwrap();
    drop(make(dir.path(), 200));
    // A lock file that cannot be opened (not a regular file).
    let lock_file = dir.path().join("readers.lock");
    std::fs::remove_file(&lock_file).unwrap();
    std::fs::create_dir(&lock_file).unwrap();
    // A mutation never runs unguarded: it says why.
    let mut writer = Zrecord::open(dir.path()).unwrap();
    let err = writer.delete(&[1]).unwrap_err();
    assert!(matches!(&err, Error::Io { path, .. } if path.ends_with("readers.lock")), "{err}");
    drop(writer);
    let reader = Zrecord::open_with(dir.path(), read_only(false, ReadMode::Mapped)).unwrap();
    assert!(!reader.holds_readers_lock());
    check_all(&reader);
    // Nothing kept another process from truncating a chunk file under it:
    // an error, not a fault of the mapping (which would kill this test).
    let chunk = std::fs::OpenOptions::new().write(true).open(dir.path().join("0.zr")).unwrap();
    chunk.set_len(chunk.metadata().unwrap().len() / 2).unwrap();
    let indices: Vec<u64> = (0..200).collect();
    let lens: Vec<u32> = indices.iter().map(|&i| described(i).len() as u32).collect();
    let mut out = vec![0u8; lens.iter().map(|&l| l as usize).sum()];
    let offsets: Vec<u64> = lens.iter().scan(0u64, |at, &l| Some(std::mem::replace(at, *at + u64::from(l)))).collect();
    let err = reader.gather_var(&indices, &mut out, &offsets, &lens).unwrap_err();
    assert!(matches!(err, Error::StoreChanged { .. }), "{err}");
}

#[test]
fn a_store_changed_under_a_reader_is_reported_as_changed_not_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let writer = make(dir.path(), 50);
    let reader = Zrecord::open_read_only(dir.path()).unwrap();
    check_all(&reader); // 0.zr's length is known from here on
    let more: Vec<Vec<u8>> = (50..60).map(described).collect();
    append_all(&writer, &more, Codec::Raw);
    drop(writer);
    // What a delete by a writer that takes no readers' lock does (the
    // reference's swap-with-last): the last entry moved into slot 0, under
    // the reader, which has not refreshed and never saw record 59's bytes.
    let meta = std::fs::OpenOptions::new().read(true).write(true).open(dir.path().join("meta.zr")).unwrap();
    let mut entry = [0u8; ENTRY_BYTES as usize];
    std::os::unix::fs::FileExt::read_exact_at(&meta, &mut entry, entry_offset(59)).unwrap();
    std::os::unix::fs::FileExt::write_all_at(&meta, &entry, entry_offset(0)).unwrap();
    let err = reader.get(0).unwrap_err();
    assert!(matches!(err, Error::StoreChanged { index: Some(0), .. }), "{err}");
    assert!(!err.to_string().contains("corrupt"), "{err}");
    // Refreshed, the reader knows the new length and reads the moved record.
    assert_eq!(reader.refresh().unwrap(), 60);
    assert_eq!(identify(&reader.get(0).unwrap()), Some(59));
}
