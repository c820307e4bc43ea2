//! What an open store may do, and where it is: [`Home`] holds the
//! filesystem, the store's directory and its [`Access`], once, for the
//! store and its chunk set to ask. Nothing else holds read-only-ness or the
//! path: the options' `read_only` is read at open only.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::readers::Hold;
use crate::error::{Error, Result};
use crate::io::Vfs;

/// What an open store may do.
#[derive(Debug)]
pub(crate) enum Access {
    /// A writer's store: it holds the writer flock of `meta.zr`, and takes
    /// the readers' lock exclusively in each delete and compaction only.
    Writable,
    /// A read-only store, and what it holds of the readers' lock.
    ReadOnly {
        /// The readers' lock held shared, or why not (`readers.rs`).
        readers: Hold,
    },
}

impl Access {
    /// True for a read-only store.
    pub(crate) fn is_read_only(&self) -> bool {
        matches!(self, Access::ReadOnly { .. })
    }

    /// True for a read-only store holding the readers' lock.
    pub(crate) fn holds_readers_lock(&self) -> bool {
        matches!(self, Access::ReadOnly { readers: Hold::Shared(_) })
    }

    /// Whether reads may go through the chunk mappings: not for a reader
    /// without the readers' lock on a filesystem others may change, where
    /// a file truncated under a mapping would fault (SIGBUS) on the next
    /// read of it; its reads are positional, so that this is an error.
    pub(crate) fn reads_mapped(&self) -> bool {
        !matches!(self, Access::ReadOnly { readers: Hold::Without { frozen: false } })
    }
}

/// Where an open store is and what it may do there.
#[derive(Debug)]
pub(crate) struct Home {
    vfs: Arc<dyn Vfs>,
    path: PathBuf,
    access: Access,
}

impl Home {
    pub(crate) fn new(vfs: Arc<dyn Vfs>, path: &Path, access: Access) -> Home {
        Home { vfs, path: path.to_path_buf(), access }
    }

    /// The filesystem the store is on.
    pub(crate) fn vfs(&self) -> &dyn Vfs {
        &*self.vfs
    }

    /// The store's directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// What the store may do.
    pub(crate) fn access(&self) -> &Access {
        &self.access
    }

    /// `Ok` for a writable store, [`Error::ReadOnly`] otherwise.
    pub(crate) fn check_writable(&self) -> Result<()> {
        match self.access {
            Access::Writable => Ok(()),
            Access::ReadOnly { .. } => Err(Error::ReadOnly { path: self.path().to_path_buf() }),
        }
    }
}
