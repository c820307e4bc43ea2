//! The simulator's model of advisory locks (`flock`, per open file) and of
//! a read-only filesystem, and the store's readers' lock on it: the model
//! first (shared beside shared, exclusive alone, a wait that could never end
//! refused, released on drop and by a crash, a holder from before a crash
//! releasing nothing after it), then the store (a delete or compaction
//! refused beside a reader, a reader refused beside a running one, a reader
//! on a read-only filesystem without the lock file).

use std::io::ErrorKind;
use std::path::Path;
use std::sync::Arc;

use loaderx::io::{LockKind, OpenMode, Vfs};
use loaderx::{Codec, Error, Options, Zrecord};
use loaderx_sim::fs::{Faults, Persist, SimFs};
use loaderx_sim::rng::Rng;

fn fs_with_file() -> (SimFs, &'static Path) {
    let fs = SimFs::new(Rng::new(1), Faults::default());
    fs.create_dir_all(Path::new("/d")).unwrap();
    let path = Path::new("/d/f");
    fs.open(path, OpenMode::Create).unwrap();
    fs.sync_dir(Path::new("/d")).unwrap();
    (fs, path)
}

#[test]
fn shared_locks_coexist_and_an_exclusive_one_stands_alone() {
    let (fs, path) = fs_with_file();
    let (a, b, c) = (
        fs.open(path, OpenMode::Read).unwrap(),
        fs.open(path, OpenMode::Read).unwrap(),
        fs.open(path, OpenMode::Write).unwrap(),
    );
    assert!(a.lock(LockKind::Shared, false).unwrap());
    assert!(b.lock(LockKind::Shared, false).unwrap());
    assert!(!c.lock(LockKind::Exclusive, false).unwrap());
    // Every holder is this thread: a wait would never end.
    assert!(!c.lock(LockKind::Exclusive, true).unwrap());
    drop(a);
    assert!(!c.lock(LockKind::Exclusive, false).unwrap(), "one shared holder is left");
    drop(b);
    assert!(c.lock(LockKind::Exclusive, true).unwrap());
    let d = fs.open(path, OpenMode::Read).unwrap();
    assert!(!d.lock(LockKind::Shared, false).unwrap());
    drop(c);
    assert!(d.lock(LockKind::Shared, false).unwrap());
}

#[test]
fn a_crash_releases_every_lock_and_an_old_holder_releases_nothing_after_it() {
    let (fs, path) = fs_with_file();
    let old = fs.open(path, OpenMode::Write).unwrap();
    assert!(old.lock(LockKind::Exclusive, false).unwrap());
    fs.crash_now();
    fs.reboot(Persist::Everything);
    let new = fs.open(path, OpenMode::Write).unwrap();
    assert!(new.lock(LockKind::Exclusive, false).unwrap(), "the crash released the lock");
    drop(old);
    let other = fs.open(path, OpenMode::Read).unwrap();
    assert!(!other.lock(LockKind::Shared, false).unwrap(), "the new holder still holds it");
}

#[test]
fn a_read_only_filesystem_refuses_every_write() {
    let (fs, path) = fs_with_file();
    fs.set_read_only(true);
    for mode in [OpenMode::Write, OpenMode::Create] {
        assert_eq!(fs.open(path, mode).unwrap_err().kind(), ErrorKind::ReadOnlyFilesystem);
    }
    assert_eq!(fs.remove_file(path).unwrap_err().kind(), ErrorKind::ReadOnlyFilesystem);
    assert_eq!(fs.rename(path, Path::new("/d/g")).unwrap_err().kind(), ErrorKind::ReadOnlyFilesystem);
    // Reads and locks work there.
    let file = fs.open(path, OpenMode::Read).unwrap();
    assert!(file.lock(LockKind::Shared, false).unwrap());
}

fn store_on(fs: &SimFs) -> (Arc<dyn Vfs>, &'static Path, Zrecord) {
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    let dir = Path::new("/store");
    let store = Zrecord::open_in(vfs.clone(), dir, Options::default()).unwrap();
    store.append(&[7u8; 40], 10, 4, Codec::Raw).unwrap();
    (vfs, dir, store)
}

fn read_only() -> Options {
    Options { read_only: true, ..Options::default() }
}

#[test]
fn a_delete_or_compaction_beside_a_reader_is_refused_and_a_reader_beside_one() {
    let fs = SimFs::new(Rng::new(2), Faults::default());
    let (vfs, dir, mut writer) = store_on(&fs);
    let reader = Zrecord::open_in(vfs.clone(), dir, read_only()).unwrap();
    assert!(reader.holds_readers_lock());
    assert!(matches!(writer.delete(&[1]), Err(Error::ReadersOpen { .. })));
    assert!(matches!(writer.compact(), Err(Error::ReadersOpen { .. })));
    // Waiting cannot end here (one thread): refused the same way.
    writer.set_wait(true);
    assert!(matches!(writer.delete(&[1]), Err(Error::ReadersOpen { .. })));
    assert_eq!(writer.len(), 10);
    assert_eq!(reader.get(3).unwrap(), [7u8; 4]);
    drop(reader);
    writer.delete(&[1]).unwrap();
    // What a running delete or compaction holds.
    let held = vfs.open(&dir.join("readers.lock"), OpenMode::Write).unwrap();
    assert!(held.lock(LockKind::Exclusive, true).unwrap());
    let err = Zrecord::open_in(vfs.clone(), dir, read_only()).unwrap_err();
    assert!(matches!(err, Error::MutationRunning { .. }), "{err}");
    drop(held);
    assert_eq!(Zrecord::open_in(vfs, dir, read_only()).unwrap().len(), 9);
    assert!(fs.fault_past_eof().is_none());
}

#[test]
fn a_reader_on_a_read_only_filesystem_opens_without_the_lock_file() {
    let fs = SimFs::new(Rng::new(3), Faults::default());
    let (vfs, dir, writer) = store_on(&fs);
    drop(writer);
    fs.remove_file(&dir.join("readers.lock")).unwrap();
    fs.set_read_only(true);
    let reader = Zrecord::open_in(vfs.clone(), dir, read_only()).unwrap();
    assert!(!reader.holds_readers_lock());
    assert_eq!(reader.get(9).unwrap(), [7u8; 4]);
    drop(reader);
    // Writable again, a reader creates the missing file and holds the lock.
    fs.set_read_only(false);
    let reader = Zrecord::open_in(vfs, dir, read_only()).unwrap();
    assert!(reader.holds_readers_lock());
}
