//! The readers' lock: the `flock` of `readers.lock`, held shared by every
//! read-only open for as long as the store is open, and exclusively by a
//! delete or a compaction for as long as it runs. So neither moves or
//! truncates anything under a reader of this crate in another process, and
//! no reader opens half-way through one. Appends take no part in it: they
//! stay concurrent with readers.
//!
//! It is a file of its own, not a lock of `meta.zr`, so that it never
//! conflicts with the writer flock (the `flock` of `meta.zr`), NFS
//! included, where Linux emulates `flock` with byte-range locks over the
//! whole file. The writer's open creates it (an empty file, never removed,
//! never synced: one lost to a crash is created again), so that readers
//! without the right to create files in the directory find it.
//!
//! A reader that cannot take the lock for a reason other than a conflict
//! (no lock file and no right to create one, a filesystem without `flock`)
//! opens without it ([`Hold::Without`]): where the filesystem is read-only
//! nothing can change the files; elsewhere its reads go by positional reads,
//! never by the chunk mappings, so that a file truncated under it is an
//! error and never a fault (`Access::reads_mapped`).

use std::io;
use std::path::Path;

use super::Zrecord;
use crate::error::{Error, Result};
use crate::format::READERS_LOCK_FILE;
use crate::io::{LockKind, OpenMode, Vfs, VfsFile};

/// What a read-only store holds of the readers' lock (a writer's takes it
/// in each delete and compaction only: `Access::Writable`).
#[derive(Debug)]
pub(crate) enum Hold {
    /// A read-only store holding the lock shared (the open file).
    Shared(#[allow(dead_code)] Box<dyn VfsFile>),
    /// A read-only store that could not take it: `frozen` if because the
    /// filesystem is read-only.
    Without {
        /// On a read-only filesystem, where no process changes the files.
        frozen: bool,
    },
}

/// A delete's or compaction's exclusive hold, released when dropped.
#[derive(Debug)]
pub(crate) struct Exclusive(#[allow(dead_code)] Box<dyn VfsFile>);

/// Takes the lock `kind` on `file`, waiting if `wait`: `Ok(false)` on a
/// conflict (without waiting, or where a wait could never end).
fn take(file: &dyn VfsFile, kind: LockKind, wait: bool) -> io::Result<bool> {
    file.lock(kind, wait)
}

/// A read-only open's hold, taken before it reads anything of the store.
/// `Error::MutationRunning` if a delete or compaction holds the lock (and
/// `wait` is off); an interrupted wait is an error too.
pub(crate) fn share(vfs: &dyn Vfs, dir: &Path, wait: bool) -> Result<Hold> {
    let path = dir.join(READERS_LOCK_FILE);
    let without = |e: io::Error| Hold::Without { frozen: e.kind() == io::ErrorKind::ReadOnlyFilesystem };
    let file = match vfs.open(&path, OpenMode::Read) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => match vfs.open(&path, OpenMode::Create) {
            Ok(file) => file,
            Err(e) => return Ok(without(e)),
        },
        Err(e) => return Ok(without(e)),
    };
    match take(&*file, LockKind::Shared, wait) {
        Ok(true) => Ok(Hold::Shared(file)),
        Ok(false) => Err(Error::MutationRunning { path: dir.to_path_buf() }),
        Err(e) if e.kind() == io::ErrorKind::Interrupted => {
            Err(Error::Io { path: path.clone(), op: "wait for the readers' lock", source: e })
        }
        Err(e) => Ok(without(e)),
    }
}

/// Creates `readers.lock` if it is missing (a writer's open). A failure is
/// left to the first delete or compaction to report.
pub(crate) fn create_file(vfs: &dyn Vfs, dir: &Path) {
    let _ = vfs.open(&dir.join(READERS_LOCK_FILE), OpenMode::Create);
}

impl Zrecord {
    /// Takes the readers' lock exclusively, for a delete or a compaction:
    /// `Error::ReadersOpen` while a read-only open holds it (unless
    /// [`Options::wait`](super::Options::wait), then waits for them all).
    /// Any other failure to take it is an error too: a mutation never runs
    /// unguarded.
    pub(crate) fn exclude_readers(&self) -> Result<Exclusive> {
        let path = self.path().join(READERS_LOCK_FILE);
        let io = |op, source| Error::Io { path: path.clone(), op, source };
        let file = self.filesystem().open(&path, OpenMode::Create).map_err(|e| io("open readers.lock", e))?;
        match take(&*file, LockKind::Exclusive, self.options.wait) {
            Ok(true) => Ok(Exclusive(file)),
            Ok(false) => Err(Error::ReadersOpen { path: self.path().to_path_buf() }),
            Err(e) => Err(io("lock readers.lock", e)),
        }
    }

    /// True for a read-only store holding the readers' lock: no delete or
    /// compaction of this crate runs on the store while it is open. False
    /// for a writer's store, and for a reader that could not take it (see
    /// `docs/ARCHITECTURE.md`, "Concurrency contract").
    pub fn holds_readers_lock(&self) -> bool {
        self.home.access().holds_readers_lock()
    }
}
