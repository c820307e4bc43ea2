//! Fail-stop: after a failed sync the store refuses every write until it is
//! reopened. What the page cache holds after a failed `fsync` or `msync` need
//! not be on disk, so nothing may be built on it; reopening recovers from
//! what is.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::sync::{AtomicBool, Ordering};

/// The poisoned flag and the check every write makes.
#[derive(Debug)]
pub(crate) struct FailStop {
    path: PathBuf,
    read_only: bool,
    poisoned: AtomicBool,
}

impl FailStop {
    pub(crate) fn new(path: &Path, read_only: bool) -> FailStop {
        FailStop { path: path.to_path_buf(), read_only, poisoned: AtomicBool::new(false) }
    }

    /// `Ok` if writes are allowed: not read-only, no sync failed.
    pub(crate) fn check_writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly { path: self.path.clone() });
        }
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned { path: self.path.clone() });
        }
        Ok(())
    }

    /// A failed sync: poisons the store and reports it.
    pub(crate) fn sync_failed(&self, source: std::io::Error) -> Error {
        self.poisoned.store(true, Ordering::Release);
        Error::Io { path: self.path.clone(), op: "sync (the store now refuses writes until reopened)", source }
    }
}
