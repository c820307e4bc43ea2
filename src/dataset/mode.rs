//! What a write does to a dataset that already exists ([`WriteMode`]), and
//! the one place that replaces a dataset (`overwrite`): the new one is
//! written beside the old, then swapped in by renames, so that a crash at
//! any point leaves the old dataset or the new one under the path, or both
//! under names that say which is which (docs/crash-safety.md, "Overwriting
//! a dataset").
//!
//! A replacement works on the real filesystem only: the `Vfs` has no
//! directory removal, and the simulator's renames move files, not trees.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::DatasetError;
use super::shards::Shards;
use crate::ReadMode;
use crate::io::Vfs;
use crate::io::real::RealFs;

/// What a write does to a dataset that already holds records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WriteMode {
    /// Adds the records after the existing ones (the reference's behaviour,
    /// and the default).
    #[default]
    Append,
    /// Replaces the existing dataset with one of the new records only.
    Overwrite,
    /// Refuses ([`DatasetError::Exists`]) a dataset that holds records.
    Error,
}

impl WriteMode {
    /// The mode named `name`: `"append"`, `"overwrite"` or `"error"`.
    pub fn parse(name: &str) -> Result<WriteMode, DatasetError> {
        match name {
            "append" => Ok(WriteMode::Append),
            "overwrite" => Ok(WriteMode::Overwrite),
            "error" => Ok(WriteMode::Error),
            _ => Err(DatasetError::InvalidArgument(format!(
                "write mode {name:?} is not one of \"append\", \"overwrite\", \"error\""
            ))),
        }
    }

    /// The mode's name, as [`WriteMode::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            WriteMode::Append => "append",
            WriteMode::Overwrite => "overwrite",
            WriteMode::Error => "error",
        }
    }
}

/// Records of the dataset at `path`: 0 where there is no directory, or a
/// directory that is not a dataset (the write decides what to do with it).
pub fn existing_records(path: impl AsRef<Path>) -> Result<u64, DatasetError> {
    existing_records_in(Arc::new(RealFs), path.as_ref())
}

/// [`existing_records`] on any filesystem implementation.
pub fn existing_records_in(vfs: Arc<dyn Vfs>, path: &Path) -> Result<u64, DatasetError> {
    match Shards::open_in(vfs, path, ReadMode::default()) {
        Ok(shards) => Ok(shards.len()),
        Err(DatasetError::NoDataset { .. } | DatasetError::NoSchema { .. }) => Ok(0),
        Err(e) => Err(e),
    }
}

/// The sibling names an overwrite of `path` uses: the new dataset while it
/// is written, and the old one between the two renames.
fn siblings(path: &Path) -> Result<(PathBuf, PathBuf), DatasetError> {
    let name = path.file_name().ok_or_else(|| {
        DatasetError::InvalidArgument(format!("{}: a dataset to overwrite needs a directory name", path.display()))
    })?;
    let name = name.to_string_lossy();
    Ok((path.with_file_name(format!("{name}.overwrite-new")), path.with_file_name(format!("{name}.overwrite-old"))))
}

fn io(path: &Path, op: &'static str) -> impl FnOnce(std::io::Error) -> DatasetError + use<> {
    let path = path.to_path_buf();
    move |source| DatasetError::Io { path, op, source }
}

/// Finishes an overwrite of `path` that a crash interrupted, and removes
/// what it left: `old` exists only once `new` is complete and synced, so
/// with `path` missing the swap is finished (`new` renamed in); with `path`
/// present, the swap was done and `old` is removed; a `new` without an
/// `old` is a write that never completed, removed too.
pub fn recover_overwrite(path: &Path) -> Result<(), DatasetError> {
    if path.file_name().is_none() {
        // `.`, `..`, `/`: never overwritten (there is no sibling name), so nothing to recover.
        return Ok(());
    }
    let (new, old) = siblings(path)?;
    let fs = RealFs;
    // A parent that is no directory holds no sibling: the write itself
    // then says what is wrong with the path the caller named.
    let exists = |p: &Path| match fs.kind(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Ok(false),
        kind => kind.map(|k| k.is_some()).map_err(io(p, "stat")),
    };
    if exists(&old)? {
        if !exists(path)? {
            let from = if exists(&new)? { &new } else { &old };
            fs.rename(from, path).map_err(io(from, "rename into place"))?;
        }
        if exists(&old)? {
            RealFs::remove_dir_all(&old).map_err(io(&old, "remove"))?;
        }
    }
    if exists(&new)? {
        RealFs::remove_dir_all(&new).map_err(io(&new, "remove"))?;
    }
    Ok(())
}

/// Runs `write` (which writes a whole dataset at the path it is given) for
/// `mode` at `path`: in place for `Append`, and for `Error` once the path
/// is known to hold no records; for `Overwrite`, at a sibling path that then
/// replaces `path` (which need not exist).
pub(crate) fn write_with_mode<T>(
    path: &Path,
    mode: WriteMode,
    write: impl FnOnce(&Path) -> Result<T, DatasetError>,
) -> Result<T, DatasetError> {
    recover_overwrite(path)?;
    match mode {
        WriteMode::Append => write(path),
        WriteMode::Error => match existing_records(path)? {
            0 => write(path),
            records => Err(DatasetError::Exists { path: path.to_path_buf(), records }),
        },
        WriteMode::Overwrite => {
            let (new, old) = siblings(path)?;
            let out = write(&new)?;
            replace(path, &new, &old)?;
            Ok(out)
        }
    }
}

/// The check a write through any filesystem makes before writing at
/// `path`: `Error` refuses a dataset with records; `Overwrite` is refused
/// (it replaces directories, which only the real filesystem does: call the
/// path-taking write).
pub(crate) fn check_in(vfs: &Arc<dyn Vfs>, path: &Path, mode: WriteMode) -> Result<(), DatasetError> {
    match mode {
        WriteMode::Append => Ok(()),
        WriteMode::Error => match existing_records_in(vfs.clone(), path)? {
            0 => Ok(()),
            records => Err(DatasetError::Exists { path: path.to_path_buf(), records }),
        },
        WriteMode::Overwrite => Err(DatasetError::InvalidArgument(format!(
            "{}: overwrite replaces the dataset's directory, which only the real filesystem does; call the write \
             that takes a path",
            path.display()
        ))),
    }
}

/// Swaps the complete dataset at `new` in for `path`: `path` renamed to
/// `old`, `new` renamed to `path`, the parent synced, then `old` removed.
fn replace(path: &Path, new: &Path, old: &Path) -> Result<(), DatasetError> {
    let fs = RealFs;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if fs.kind(new).map_err(io(new, "stat"))?.is_none() {
        // Nothing was written: the replacement is an empty directory.
        fs.create_dir_all(new).map_err(io(new, "create"))?;
    }
    fs.sync_dir(new).map_err(io(new, "sync"))?;
    let had_old = fs.kind(path).map_err(io(path, "stat"))?.is_some();
    if had_old {
        fs.rename(path, old).map_err(io(path, "rename aside"))?;
    }
    fs.rename(new, path).map_err(io(new, "rename into place"))?;
    fs.sync_dir(&parent).map_err(io(&parent, "sync"))?;
    if had_old {
        RealFs::remove_dir_all(old).map_err(io(old, "remove"))?;
    }
    Ok(())
}
