//! The readers' lock within one process (other processes:
//! `store_processes.rs`; the simulator's model of it: `sim/tests/locks.rs`):
//! a read-only open holds it shared, a delete or compaction needs it
//! exclusively and is refused at once or, with `Options::wait`, waits;
//! appends ignore it. A reader that could not take it reads without the
//! mappings. A store changed under a reader anyway (by a writer that takes
//! no readers' lock) is `Error::StoreChanged`, not corruption, and a record
//! moved while it is read is that error, not another record's bytes.

mod common;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};

use common::{FileAt, append_all, described, identify};
use loaderx::format::{ENTRY_BYTES, HEADER_BYTES, entry_offset};
use loaderx::io::real::RealFs;
use loaderx::io::{FileKind, Handle, LockKind, Map, MapMode, OpenMode, Residency, Stat, SyncKind, Vfs, VfsFile};
use loaderx::{Codec, Corruption, Error, Options, ReadMode, Zrecord};

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
#[cfg(target_os = "linux")]
fn a_waiting_delete_runs_once_the_readers_close() {
    let dir = tempfile::tempdir().unwrap();
    let mut writer = make(dir.path(), 100);
    writer.set_wait(true);
    let reader = Zrecord::open_read_only(dir.path()).unwrap();
    let lock_file = dir.path().join("readers.lock");
    std::thread::scope(|s| {
        let delete = s.spawn(|| writer.delete(&[0, 1, 2]));
        let waited = common::until_blocked(|| common::lock_waiters(&lock_file) > 0, || delete.is_finished());
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
#[cfg(target_os = "linux")]
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
        let waited = common::until_blocked(|| common::lock_waiters(&lock_file) > 0, || open.is_finished());
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
    meta.read_exact_at(&mut entry, entry_offset(59)).unwrap();
    meta.write_all_at(&entry, entry_offset(0)).unwrap();
    meta.write_all_at(&59u32.to_le_bytes(), HEADER_BYTES - 4).unwrap(); // the length, one less
    let err = reader.get(0).unwrap_err();
    assert!(matches!(err, Error::StoreChanged { index: Some(0), .. }), "{err}");
    assert!(!err.to_string().contains("corrupt"), "{err}");
    // Refreshed, the reader knows the new length and reads the moved record
    // (unchecked: the header is not the one `sums.zr` was sealed for, on
    // the mapped path and on the device path, which checks every read).
    assert_eq!(reader.refresh().unwrap(), 59);
    assert_eq!(identify(&reader.get(0).unwrap()), Some(59));
}

/// The real filesystem, with a writer that takes no readers' lock moving
/// record `from` onto record `to`'s slot and reusing `from`'s old bytes,
/// in the instant between a reader's validation of the entries and its
/// reads of chunk bytes (the first positional read of a chunk file).
#[derive(Debug)]
struct Meddling {
    dir: std::path::PathBuf,
    done: Arc<AtomicBool>,
}

#[derive(Debug)]
struct MeddlingFile(Box<dyn VfsFile>, Option<(std::path::PathBuf, Arc<AtomicBool>)>);

impl Meddling {
    /// What the other writer does: entry 9 over entry 0 (a delete's move of
    /// the last record), then zeros over record 0's old bytes (a compaction
    /// reusing them).
    fn meddle(dir: &Path) {
        let meta = std::fs::OpenOptions::new().read(true).write(true).open(dir.join("meta.zr")).unwrap();
        let (mut zero, mut last) = ([0u8; ENTRY_BYTES as usize], [0u8; ENTRY_BYTES as usize]);
        meta.read_exact_at(&mut zero, entry_offset(0)).unwrap();
        meta.read_exact_at(&mut last, entry_offset(9)).unwrap();
        meta.write_all_at(&last, entry_offset(0)).unwrap();
        let offset = u64::from(u32::from_le_bytes(zero[..4].try_into().unwrap()));
        let chunk = std::fs::OpenOptions::new().write(true).open(dir.join("0.zr")).unwrap();
        chunk.write_all_at(&vec![0u8; described(0).len()], offset).unwrap();
    }
}

impl Meddling {
    /// Meddles the first time only.
    fn once(meddle: &Option<(std::path::PathBuf, Arc<AtomicBool>)>) {
        if let Some((dir, done)) = meddle
            && !done.swap(true, AtomicOrdering::SeqCst)
        {
            Meddling::meddle(dir);
        }
    }
}

impl Vfs for Meddling {
    fn kind(&self, path: &Path) -> io::Result<Option<FileKind>> {
        RealFs.kind(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        RealFs.list_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        RealFs.sync_dir(path)
    }
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn VfsFile>> {
        let chunk = path.file_name().is_some_and(|n| n == "0.zr");
        let meddle = chunk.then(|| (self.dir.clone(), self.done.clone()));
        Ok(Box::new(MeddlingFile(RealFs.open(path, mode)?, meddle)))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }
}

impl VfsFile for MeddlingFile {
    fn stat(&self) -> io::Result<Stat> {
        self.0.stat()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        Meddling::once(&self.1);
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    fn sync(&self, kind: SyncKind) -> io::Result<()> {
        self.0.sync(kind)
    }
    fn lock(&self, kind: LockKind, wait: bool) -> io::Result<bool> {
        self.0.lock(kind, wait)
    }
    fn map(&self, len: usize, mode: MapMode) -> io::Result<Box<dyn Map>> {
        let map = self.0.map(len, mode)?;
        Ok(if mode == MapMode::Read { Box::new(MeddlingMap(map, self.1.clone())) } else { map })
    }
    fn handle(&self) -> Handle {
        self.0.handle()
    }
}

#[derive(Debug)]
struct MeddlingMap(Box<dyn Map>, Option<(std::path::PathBuf, Arc<AtomicBool>)>);

impl Map for MeddlingMap {
    unsafe fn read(&self, offset: usize, dst: &mut [u8]) {
        // SAFETY: forwarded contract.
        unsafe { self.0.read(offset, dst) }
    }
    fn bytes<'a>(&'a self, offset: u64, len: usize, scratch: &'a mut Vec<u8>) -> io::Result<&'a [u8]> {
        Meddling::once(&self.1);
        self.0.bytes(offset, len, scratch)
    }
    unsafe fn write(&self, offset: usize, src: &[u8]) {
        // SAFETY: forwarded contract.
        unsafe { self.0.write(offset, src) }
    }
    unsafe fn store_word(&self, offset: usize, word: u64) {
        // SAFETY: forwarded contract.
        unsafe { self.0.store_word(offset, word) }
    }
    fn load_word(&self, offset: usize) -> u64 {
        self.0.load_word(offset)
    }
    fn flush_range(&self, offset: usize, len: usize) -> io::Result<()> {
        self.0.flush_range(offset, len)
    }
    fn residency(&self, offset: u64, len: usize) -> Residency {
        self.0.residency(offset, len)
    }
}

#[test]
fn a_record_moved_while_a_reader_reads_it_is_an_error_not_another_records_bytes() {
    for mode in [ReadMode::Batched, ReadMode::Mapped] {
        let dir = tempfile::tempdir().unwrap();
        drop(make(dir.path(), 10));
        let done = Arc::new(AtomicBool::new(false));
        let vfs: Arc<dyn Vfs> = Arc::new(Meddling { dir: dir.path().to_path_buf(), done: done.clone() });
        let reader = Zrecord::open_in(vfs, dir.path(), read_only(false, mode)).unwrap();
        let err = reader.get(0).unwrap_err();
        assert!(done.load(AtomicOrdering::SeqCst), "{mode:?}: the other writer ran");
        assert!(matches!(err, Error::StoreChanged { index: Some(0), .. }), "{mode:?}: {err}");
        // Half-way through the other writer's delete (its entry moved, its
        // length not yet cut) the moved record does not match record 0's
        // checksum: an error, not bytes that may be another record's.
        // (The mapped path checks only with `VerifyReads::Always`.)
        match reader.get(0) {
            Err(Error::Corrupt { what: Corruption::Checksum { .. }, .. }) if mode == ReadMode::Batched => {}
            Ok(bytes) if mode == ReadMode::Mapped => assert_eq!(identify(&bytes), Some(9)),
            other => panic!("{mode:?}: {other:?}"),
        }
        // Once it cuts the length, as the reference's delete does, the table
        // is another writer's (the checksums' seal no longer holds) and the
        // record is the one the table names now.
        let meta = std::fs::OpenOptions::new().write(true).open(dir.path().join("meta.zr")).unwrap();
        meta.write_all_at(&9u32.to_le_bytes(), 12).unwrap();
        assert_eq!(identify(&reader.get(0).unwrap()), Some(9), "{mode:?}");
    }
}
