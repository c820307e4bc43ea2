//! loom models of the store's concurrency protocol: the lock-free read path
//! against appends, concurrent appends, dictionary installation, and a failed
//! append beside a good one.
//!
//! Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release -p loaderx-sim --test loom_store --target-dir target/loom`.
//!
//! These models run the store's own code (`Zrecord` compiled with loom's
//! atomics and mutex through `src/sync.rs`) over the simulated filesystem.
//! loom cannot see mapped memory, so the mapping of `meta.zr` is wrapped: every
//! access to a 16-byte table entry (or the header) also touches a loom
//! `UnsafeCell` standing for that entry, so loom reports a read of an entry that
//! is not ordered after its write (a reader seeing a half-written entry) as a
//! data race. Chunk bytes and the `OnceLock`s (chunk files, dictionary) are
//! ordinary synchronized memory that loom does not model; the models check
//! them by content instead: every record a reader sees must read back exactly.
#![cfg(loom)]

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Mutex as StdMutex;

use loaderx::io::{FileKind, Handle, LockKind, Map, MapMode, OpenMode, Residency, Stat, SyncKind, Vfs, VfsFile};
use loaderx::{Codec, Error, Options, Zrecord};
use loaderx_sim::fs::{Faults, SimFs};
use loaderx_sim::rng::Rng;
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

/// A byte that makes the sync of the chunk it was written to fail.
const POISON: u8 = 0xEE;

#[derive(Debug)]
struct LoomFs(SimFs);

#[derive(Debug)]
struct LoomFile {
    inner: Box<dyn VfsFile>,
    fail_next_sync: StdMutex<bool>,
    /// The race tokens of this file's writable mapping, once it has one:
    /// a write of the file (`io::write_mapped`'s `pwrite`) touches them as
    /// a store into the mapping does, so that loom orders it against the
    /// mapping's readers.
    slots: StdMutex<Option<Slots>>,
}

/// Race tokens, one per 16-byte slot of a file's writable mapping, created
/// on first touch.
type Slots = std::sync::Arc<StdMutex<BTreeMap<usize, std::sync::Arc<Token>>>>;

/// The tokens of `offset..offset + len` in `slots`.
fn tokens_of(slots: &Slots, offset: usize, len: usize) -> Vec<std::sync::Arc<Token>> {
    let mut slots = slots.lock().unwrap();
    (offset / 16..(offset + len.max(1)).div_ceil(16))
        .map(|s| slots.entry(s).or_insert_with(|| std::sync::Arc::new(Token(UnsafeCell::new(())))).clone())
        .collect()
}

/// A race token: a loom cell holding nothing, touched on every access to the
/// slot it stands for.
struct Token(UnsafeCell<()>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token")
    }
}

// SAFETY: a token holds no data; it is only passed to loom's `with` and
// `with_mut`, which exist to detect unordered accesses across threads.
unsafe impl Sync for Token {}
// SAFETY: as above.
unsafe impl Send for Token {}

/// A writable mapping, its accesses checked by loom through race tokens
/// (shared with its file's writes).
struct LoomMap {
    inner: Box<dyn Map>,
    slots: Slots,
}

impl std::fmt::Debug for LoomMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoomMap")
    }
}

impl LoomMap {
    fn tokens(&self, offset: usize, len: usize) -> Vec<std::sync::Arc<Token>> {
        tokens_of(&self.slots, offset, len)
    }
}

impl Vfs for LoomFs {
    fn kind(&self, path: &Path) -> io::Result<Option<FileKind>> {
        self.0.kind(path)
    }
    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        self.0.create_dir_all(path)
    }
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        self.0.list_dir(path)
    }
    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        self.0.sync_dir(path)
    }
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn VfsFile>> {
        Ok(Box::new(LoomFile {
            inner: self.0.open(path, mode)?,
            fail_next_sync: StdMutex::new(false),
            slots: StdMutex::new(None),
        }))
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        self.0.remove_file(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.0.rename(from, to)
    }
}

impl VfsFile for LoomFile {
    fn stat(&self) -> io::Result<Stat> {
        self.inner.stat()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        if buf.contains(&POISON) {
            *self.fail_next_sync.lock().unwrap() = true;
        }
        if let Some(slots) = self.slots.lock().unwrap().as_ref() {
            for token in tokens_of(slots, offset as usize, buf.len()) {
                token.0.with_mut(|_| ());
            }
        }
        self.inner.write_at(buf, offset)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&self, kind: SyncKind) -> io::Result<()> {
        if kind == SyncKind::Data && std::mem::take(&mut *self.fail_next_sync.lock().unwrap()) {
            return Err(io::Error::other("injected EIO"));
        }
        self.inner.sync(kind)
    }
    fn lock(&self, kind: LockKind, wait: bool) -> io::Result<bool> {
        self.inner.lock(kind, wait)
    }
    fn map(&self, len: usize, mode: MapMode) -> io::Result<Box<dyn Map>> {
        let inner = self.inner.map(len, mode)?;
        Ok(if mode == MapMode::Read {
            inner
        } else {
            let slots = self.slots.lock().unwrap().get_or_insert_with(Slots::default).clone();
            Box::new(LoomMap { inner, slots })
        })
    }
    fn handle(&self) -> Handle {
        self.inner.handle()
    }
}

impl Map for LoomMap {
    unsafe fn read(&self, offset: usize, dst: &mut [u8]) {
        for token in self.tokens(offset, dst.len()) {
            token.0.with(|_| ());
        }
        // SAFETY: forwarded contract.
        unsafe { self.inner.read(offset, dst) }
    }
    unsafe fn write(&self, offset: usize, src: &[u8]) {
        for token in self.tokens(offset, src.len()) {
            token.0.with_mut(|_| ());
        }
        // SAFETY: forwarded contract.
        unsafe { self.inner.write(offset, src) }
    }
    unsafe fn store_word(&self, offset: usize, word: u64) {
        for token in self.tokens(offset, 8) {
            token.0.with_mut(|_| ());
        }
        // SAFETY: forwarded contract.
        unsafe { self.inner.store_word(offset, word) }
    }
    fn load_word(&self, offset: usize) -> u64 {
        self.inner.load_word(offset)
    }
    fn flush_range(&self, offset: usize, len: usize) -> io::Result<()> {
        self.inner.flush_range(offset, len)
    }
    fn bytes<'a>(&'a self, offset: u64, len: usize, scratch: &'a mut Vec<u8>) -> io::Result<&'a [u8]> {
        self.inner.bytes(offset, len, scratch)
    }
    fn residency(&self, offset: u64, len: usize) -> Residency {
        self.inner.residency(offset, len)
    }
}

fn open_store() -> Zrecord {
    let fs = LoomFs(SimFs::new(Rng::new(1), Faults::default()));
    Zrecord::open_in(std::sync::Arc::new(fs), Path::new("/data/s.zr"), Options::default()).expect("open")
}

/// Runs a model (preemption bound 2 unless `LOOM_MAX_PREEMPTIONS` says
/// otherwise) and prints how many interleavings it explored.
fn model(f: impl Fn() + Sync + Send + 'static) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    RUNS.store(0, std::sync::atomic::Ordering::Relaxed);
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(2);
    }
    builder.check(move || {
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    let runs = RUNS.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("{}: {runs} interleavings", std::thread::current().name().unwrap_or("model"));
    assert!(runs > 1, "the model explored a single interleaving: it checks nothing");
}

/// The records below the length a reader observes, each read back whole.
fn read_prefix(store: &Zrecord) -> Vec<Vec<u8>> {
    let n = store.len();
    (0..u64::from(n)).map(|i| store.get(i).expect("a published record reads back")).collect()
}

/// A reader that observes length n finds every record below n whole, and
/// never an index past n: the append publishes its two records together.
#[test]
fn reader_against_an_appender() {
    model(|| {
        let store = Arc::new(open_store());
        let reader = {
            let store = store.clone();
            thread::spawn(move || read_prefix(&store))
        };
        assert_eq!(store.append(b"aaaabbbb", 2, 4, Codec::Raw).unwrap(), 0);
        let seen = reader.join().unwrap();
        assert!(seen.is_empty() || seen == [b"aaaa".to_vec(), b"bbbb".to_vec()], "{seen:?}");
        assert_eq!(store.len(), 2);
    });
}

/// Two appenders and a reader: index ranges never overlap, no append is
/// lost, and the length never exposes a record whose append has not finished.
#[test]
fn two_appenders_and_a_reader() {
    model(|| {
        let store = Arc::new(open_store());
        let reader = {
            let store = store.clone();
            thread::spawn(move || read_prefix(&store))
        };
        let b = {
            let store = store.clone();
            thread::spawn(move || store.append(b"b1", 1, 2, Codec::Zstd).unwrap())
        };
        let first_a = store.append(b"a1a2", 2, 2, Codec::Raw).unwrap();
        let first_b = b.join().unwrap();
        let seen = reader.join().unwrap();
        let all: Vec<Vec<u8>> = (0..3).map(|i| store.get(i).unwrap()).collect();
        let a_then_b = (first_a, first_b) == (0, 2) && all == [b"a1".to_vec(), b"a2".to_vec(), b"b1".to_vec()];
        let b_then_a = (first_a, first_b) == (1, 0) && all == [b"b1".to_vec(), b"a1".to_vec(), b"a2".to_vec()];
        assert!(a_then_b || b_then_a, "{first_a} {first_b} {all:?}");
        // What the reader saw is a prefix made of whole appends.
        let n = seen.len();
        assert!([0, 3].contains(&n) || (n == 2 && first_a == 0) || (n == 1 && first_b == 0), "reader saw {n}");
        assert_eq!(seen[..], all[..n]);
    });
}

/// Installing the dictionary races a `zstd_dict` append and a reader: the
/// append either fails cleanly (no dictionary yet) or its record reads back.
#[test]
fn dictionary_installation_against_an_appender_and_a_reader() {
    static DICT: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let dict = DICT
        .get_or_init(|| {
            let samples: Vec<u8> = (0..64u32).flat_map(|k| (0..256u32).map(move |i| (i / 3 + k % 5) as u8)).collect();
            zstd::dict::from_continuous(&samples, &[256; 64], 4096).expect("train")
        })
        .clone();
    model(move || {
        let store = Arc::new(open_store());
        let record: Vec<u8> = (0..256u32).map(|i| (i / 3 + 2) as u8).collect();
        let appender = {
            let store = store.clone();
            let record = record.clone();
            thread::spawn(move || store.append(&record, 1, 256, Codec::ZstdDict))
        };
        let reader = {
            let store = store.clone();
            thread::spawn(move || read_prefix(&store))
        };
        store.install_dict(dict.clone()).unwrap();
        match appender.join().unwrap() {
            Ok(0) => assert_eq!(store.get(0).unwrap(), record),
            Ok(other) => panic!("first index {other}"),
            Err(Error::NoDictionary { index: None, .. }) => assert_eq!(store.len(), 0),
            Err(e) => panic!("{e}"),
        }
        let seen = reader.join().unwrap();
        assert!(seen.is_empty() || seen == [record.clone()]);
        assert!(store.has_dict());
    });
}

/// An append whose sync fails, beside a good one: nothing of the failed
/// append is ever published, and the store refuses writes afterwards.
#[test]
fn a_failed_append_beside_a_good_one() {
    model(|| {
        let store = Arc::new(open_store());
        let reader = {
            let store = store.clone();
            thread::spawn(move || read_prefix(&store))
        };
        let good = {
            let store = store.clone();
            thread::spawn(move || store.append(b"good", 1, 4, Codec::Raw))
        };
        assert!(store.append(&[POISON; 4], 1, 4, Codec::Raw).is_err());
        for record in reader.join().unwrap() {
            assert_eq!(record, b"good", "a failed append was published");
        }
        let good = good.join().unwrap();
        match good {
            Ok(0) => assert_eq!(store.len(), 1),
            Err(Error::Poisoned { .. }) => assert_eq!(store.len(), 0),
            other => panic!("{other:?}"),
        }
        assert!(matches!(store.append(b"more", 1, 4, Codec::Raw), Err(Error::Poisoned { .. })));
    });
}
