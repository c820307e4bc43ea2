//! Fail-stop: after a failed sync the store refuses every write until it is
//! reopened. What the page cache holds after a failed `fsync` or `msync` need
//! not be on disk, so nothing may be built on it; reopening recovers from
//! what is.

use std::path::Path;

use crate::error::{Error, Result};
use crate::sync::{AtomicBool, Ordering};

/// The poisoned flag and the check every write makes.
#[derive(Debug)]
pub(crate) struct FailStop {
    poisoned: AtomicBool,
}

impl FailStop {
    pub(crate) fn new() -> FailStop {
        FailStop { poisoned: AtomicBool::new(false) }
    }

    /// `Ok` unless a sync failed (of the store at `path`).
    pub(crate) fn check(&self, path: &Path) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned { path: path.to_path_buf() });
        }
        Ok(())
    }

    /// A failed sync (of the store at `path`): poisons the store and
    /// reports it.
    pub(crate) fn sync_failed(&self, path: &Path, source: std::io::Error) -> Error {
        self.poisoned.store(true, Ordering::Release);
        Error::Io { path: path.to_path_buf(), op: "sync (the store now refuses writes until reopened)", source }
    }
}
