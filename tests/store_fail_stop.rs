//! Fail-stop: after a failed sync (fsync, fdatasync or msync) the store
//! publishes nothing, refuses every later write, and says so; reopening
//! recovers from what is on disk. Faults are injected by wrapping the real
//! filesystem.

mod common;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use common::{append_all, assert_matches, record};
use loaderx::io::real::RealFs;
use loaderx::io::{FileKind, Handle, LockKind, Map, MapMode, OpenMode, Residency, Stat, SyncKind, Vfs, VfsFile};
use loaderx::{Codec, Error, Options, Zrecord};

/// Fails the sync that brings `countdown` to zero (and only that one).
#[derive(Debug, Default)]
struct Faults {
    countdown: AtomicI64,
}

impl Faults {
    fn sync(&self) -> io::Result<()> {
        if self.countdown.fetch_sub(1, Ordering::SeqCst) == 1 { Err(io::Error::other("injected EIO")) } else { Ok(()) }
    }
}

#[derive(Debug)]
struct FaultyFs(Arc<Faults>);
#[derive(Debug)]
struct FaultyFile(Box<dyn VfsFile>, Arc<Faults>);
#[derive(Debug)]
struct FaultyMap(Box<dyn Map>, Arc<Faults>);

impl Vfs for FaultyFs {
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
        self.0.sync()?;
        RealFs.sync_dir(path)
    }
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn VfsFile>> {
        Ok(Box::new(FaultyFile(RealFs.open(path, mode)?, self.0.clone())))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }
}

impl VfsFile for FaultyFile {
    fn stat(&self) -> io::Result<Stat> {
        self.0.stat()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        self.0.write_at(buf, offset)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
    /// A writeback hint is no sync.
    fn sync(&self, kind: SyncKind) -> io::Result<()> {
        if let SyncKind::StartWriteback { .. } = kind {
            return Ok(());
        }
        self.1.sync()?;
        self.0.sync(kind)
    }
    fn lock(&self, kind: LockKind, wait: bool) -> io::Result<bool> {
        self.0.lock(kind, wait)
    }
    fn map(&self, len: usize, mode: MapMode) -> io::Result<Box<dyn Map>> {
        let map = self.0.map(len, mode)?;
        Ok(if mode == MapMode::Read { map } else { Box::new(FaultyMap(map, self.1.clone())) })
    }
    fn handle(&self) -> Handle {
        self.0.handle()
    }
}

impl Map for FaultyMap {
    unsafe fn read(&self, offset: usize, dst: &mut [u8]) {
        // SAFETY: forwarded contract.
        unsafe { self.0.read(offset, dst) }
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
        self.1.sync()?;
        self.0.flush_range(offset, len)
    }
    fn bytes<'a>(&'a self, offset: u64, len: usize, scratch: &'a mut Vec<u8>) -> io::Result<&'a [u8]> {
        self.0.bytes(offset, len, scratch)
    }
    fn residency(&self, offset: u64, len: usize) -> Residency {
        self.0.residency(offset, len)
    }
}

/// Every sync of one mutation, failed in turn.
#[test]
fn every_failed_sync_poisons_and_reopen_recovers() {
    for codec in [Codec::Raw, Codec::Zstd] {
        for fail_at in 1..=8 {
            let dir = tempfile::tempdir().unwrap();
            let faults = Arc::new(Faults::default());
            let vfs = Arc::new(FaultyFs(faults.clone()));
            let mut store = Zrecord::open_in(vfs, dir.path(), Options::default()).unwrap();
            let mut model: Vec<Vec<u8>> = (0..30).map(|k| record(k, 200)).collect();
            append_all(&store, &model, codec);

            let more: Vec<Vec<u8>> = (0..5).map(|k| record(100 + k, 300)).collect();
            faults.countdown.store(fail_at, Ordering::SeqCst);
            let mut after = model.clone();
            after.extend(more.iter().cloned());
            if let Err(err) = common::try_append_all(&store, &more, codec) {
                assert!(err.to_string().contains("injected EIO") || err.to_string().contains("sync"), "{err}");
                // Nothing published; every later write refused, with a reason.
                assert_eq!(store.len(), 30, "fail at sync {fail_at}");
                let err = store.append(b"x", 1, 1, Codec::Raw).unwrap_err();
                assert!(matches!(err, Error::Poisoned { .. }), "{err}");
                assert!(err.to_string().contains("reopen"), "{err}");
                assert!(matches!(store.delete(&[0]), Err(Error::Poisoned { .. })));
                assert!(matches!(store.compact(), Err(Error::Poisoned { .. })));
                assert_matches(&store, &model); // reads still work
                drop(store);
                // Reopen: the interrupted append is wholly there or wholly
                // absent (there when only the last msync failed: the page
                // cache holds the new header).
                let store = Zrecord::open(dir.path()).unwrap();
                if store.len() as usize == after.len() {
                    model = after;
                }
                assert_matches(&store, &model);
            } else {
                faults.countdown.store(0, Ordering::SeqCst);
                model = after;
                store.delete(&[1, 2, 29]).unwrap();
                common::model_delete(&mut model, &[1, 2, 29]);
                drop(store);
                assert_matches(&Zrecord::open(dir.path()).unwrap(), &model);
            }
        }
    }
}

/// A failed sync inside a delete: the store is exactly as before or after.
#[test]
fn failed_sync_during_delete_is_all_or_nothing() {
    for fail_at in 1..=5 {
        let dir = tempfile::tempdir().unwrap();
        let faults = Arc::new(Faults::default());
        let vfs = Arc::new(FaultyFs(faults.clone()));
        let mut store = Zrecord::open_in(vfs, dir.path(), Options::default()).unwrap();
        let before: Vec<Vec<u8>> = (0..40).map(|k| record(k, 100)).collect();
        append_all(&store, &before, Codec::Zstd);
        let doomed = [0u64, 5, 5, 39, 17];
        let mut after = before.clone();
        common::model_delete(&mut after, &doomed);
        faults.countdown.store(fail_at, Ordering::SeqCst);
        let result = store.delete(&doomed);
        drop(store);
        let store = Zrecord::open(dir.path()).unwrap();
        let got: Vec<Vec<u8>> = (0..u64::from(store.len())).map(|i| store.get(i).unwrap()).collect();
        match result {
            Ok(()) => assert_eq!(got, after, "fail at {fail_at}"),
            Err(e) => {
                assert!(e.to_string().contains("sync"), "{e}");
                assert!(got == before || got == after, "fail at {fail_at}: neither before nor after");
            }
        }
    }
}

#[test]
fn the_store_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Zrecord>();
}
