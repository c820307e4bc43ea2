//! Semantic fault points: a crash or an injected EIO armed at an I/O
//! operation chosen by what it is, not by its number.
//!
//! A [`Point`] is a sequence of [`Step`]s, each a predicate over an
//! [`IoOp`] (kind, path, offset, length) and how many matching operations it
//! takes; the point fires at the operation that completes its last step, once
//! the steps before it were completed in order. "The first `fsync` of
//! `meta.zr` after a `pwrite` into the intent area" is two steps. Because
//! nothing refers to absolute operation numbers, a point keeps hitting the
//! same situation when the store adds or reorders unrelated I/O. Whether (and
//! at which operation) a point fired is recorded, so a test can fail when
//! its point is never reached.

use std::fmt;
use std::path::Path;

/// What an I/O operation of the simulated filesystem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoKind {
    /// `create_dir_all`.
    Mkdir,
    /// `fsync` of a directory.
    SyncDir,
    /// Creation of a file (an open with `OpenMode::Create` of a new name).
    Create,
    /// `remove_file`.
    Unlink,
    /// `rename` (`path` is the source, `to` the destination).
    Rename,
    /// `pwrite` of `len` bytes at `offset`.
    Pwrite,
    /// `set_len` to `len`.
    SetLen,
    /// `fdatasync`.
    Fdatasync,
    /// `fsync` of a file.
    Fsync,
    /// A store of `len` bytes at `offset` into a shared mapping.
    Store,
    /// An aligned 8-byte store at `offset` into a shared mapping.
    StoreWord,
    /// `msync` (`flush_range`) of `len` bytes at `offset` of a mapping.
    Msync,
}

impl IoKind {
    /// True for the operations that can fail with EIO (the syncs).
    pub fn is_sync(self) -> bool {
        matches!(self, IoKind::SyncDir | IoKind::Fdatasync | IoKind::Fsync | IoKind::Msync)
    }
}

/// One I/O operation, as a predicate sees it.
#[derive(Clone, Copy, Debug)]
pub struct IoOp<'a> {
    /// The kind.
    pub kind: IoKind,
    /// The file (its name, for operations on an open file) or directory.
    pub path: &'a Path,
    /// A rename's destination.
    pub to: Option<&'a Path>,
    /// Byte offset (writes, stores, `msync`), else 0.
    pub offset: u64,
    /// Byte count (writes, stores, `msync`) or the new length (`set_len`), else 0.
    pub len: u64,
}

impl<'a> IoOp<'a> {
    /// A `kind` operation on `path`, no offset or length.
    pub fn on(kind: IoKind, path: &'a Path) -> IoOp<'a> {
        IoOp { kind, path, to: None, offset: 0, len: 0 }
    }

    /// The same operation covering `len` bytes at `offset`.
    pub fn range(self, offset: u64, len: u64) -> IoOp<'a> {
        IoOp { offset, len, ..self }
    }

    /// The last component of the path (`meta.zr`, `0.zr`, ...).
    pub fn file(&self) -> &str {
        self.path.file_name().and_then(|n| n.to_str()).unwrap_or("")
    }

    /// True if this is a `kind` operation on the file named `file`.
    pub fn is(&self, kind: IoKind, file: &str) -> bool {
        self.kind == kind && self.file() == file
    }
}

/// The trace's spelling of an operation.
impl fmt::Display for IoOp<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (path, offset, len) = (self.path.display(), self.offset, self.len);
        match self.kind {
            IoKind::Mkdir => write!(f, "mkdir -p {path}"),
            IoKind::SyncDir => write!(f, "fsync dir {path}"),
            IoKind::Create => write!(f, "create {path}"),
            IoKind::Unlink => write!(f, "unlink {path}"),
            IoKind::Rename => write!(f, "rename {path} {}", self.to.unwrap_or(Path::new("?")).display()),
            IoKind::Pwrite => write!(f, "pwrite {path} @{offset} +{len}"),
            IoKind::SetLen => write!(f, "set_len {path} {len}"),
            IoKind::Fdatasync => write!(f, "fdatasync {path}"),
            IoKind::Fsync => write!(f, "fsync {path}"),
            IoKind::Store => write!(f, "store {path} @{offset} +{len}"),
            IoKind::StoreWord => write!(f, "store_word {path} @{offset} +{len}"),
            IoKind::Msync => write!(f, "msync {path} @{offset} +{len}"),
        }
    }
}

/// What a point does when it fires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Power loss at the operation: it and everything after it are lost.
    Crash,
    /// The sync fails with EIO; its dirty pages are dropped from the cache
    /// (`drop_dirty`) or kept dirty.
    Eio {
        /// Drop the dirty pages (reads then see the durable bytes again).
        drop_dirty: bool,
    },
}

/// One step of a point: the `nth` operation (counting from 1) matching
/// `matches` since the previous step completed.
#[derive(Clone, Copy)]
pub struct Step {
    /// The predicate, in words (failure messages quote it).
    pub what: &'static str,
    /// How many matching operations complete the step.
    pub nth: u32,
    /// The predicate.
    pub matches: fn(&IoOp<'_>) -> bool,
}

impl Step {
    /// The first operation matching `matches`.
    pub fn first(what: &'static str, matches: fn(&IoOp<'_>) -> bool) -> Step {
        Step { what, nth: 1, matches }
    }

    /// The `nth` operation (from 1) matching `matches`.
    pub fn nth(nth: u32, what: &'static str, matches: fn(&IoOp<'_>) -> bool) -> Step {
        assert!(nth >= 1, "steps count from 1");
        Step { what, nth, matches }
    }
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.nth {
            1 => write!(f, "{}", self.what),
            n => write!(f, "the #{n} of: {}", self.what),
        }
    }
}

/// An action armed at the operation that completes a sequence of steps.
#[derive(Clone, Debug)]
pub struct Point {
    /// What happens there.
    pub action: Action,
    /// The steps, in order; the last one is the operation acted on.
    pub steps: Vec<Step>,
}

impl Point {
    /// A point acting at the operation completing `steps` in order.
    pub fn new(action: Action, steps: Vec<Step>) -> Point {
        assert!(!steps.is_empty(), "a point needs at least one step");
        Point { action, steps }
    }

    /// The steps in words.
    pub fn describe(&self) -> String {
        let steps: Vec<String> = self.steps.iter().map(|s| format!("{s:?}")).collect();
        format!("{:?} at {}", self.action, steps.join(", then "))
    }
}

/// An armed point and how far it got.
#[derive(Clone, Debug)]
pub(crate) struct Armed {
    point: Point,
    step: usize,
    seen: u32,
    /// The I/O operation number it fired at.
    fired_at: Option<u64>,
}

impl Armed {
    pub(crate) fn new(point: Point) -> Armed {
        Armed { point, step: 0, seen: 0, fired_at: None }
    }

    /// Advances over operation number `number`; returns the action if the
    /// point fires here.
    pub(crate) fn observe(&mut self, op: &IoOp<'_>, number: u64) -> Option<Action> {
        if self.fired_at.is_some() {
            return None;
        }
        let step = &self.point.steps[self.step];
        if !(step.matches)(op) {
            return None;
        }
        self.seen += 1;
        if self.seen < step.nth {
            return None;
        }
        self.step += 1;
        self.seen = 0;
        if self.step < self.point.steps.len() {
            return None;
        }
        self.fired_at = Some(number);
        assert!(
            self.point.action == Action::Crash || op.kind.is_sync(),
            "an EIO point matched `{op}`, which is not a sync: {}",
            self.point.describe()
        );
        Some(self.point.action)
    }

    pub(crate) fn fired_at(&self) -> Option<u64> {
        self.fired_at
    }

    /// How many steps were completed.
    pub(crate) fn progress(&self) -> usize {
        self.step
    }

    pub(crate) fn point(&self) -> &Point {
        &self.point
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(kind: IoKind, path: &str, offset: u64) -> IoOp<'_> {
        IoOp { kind, path: Path::new(path), to: None, offset, len: 8 }
    }

    #[test]
    fn fires_once_at_the_nth_match_after_the_earlier_steps() {
        let point = Point::new(
            Action::Crash,
            vec![
                Step::first("a pwrite of meta.zr", |o| o.is(IoKind::Pwrite, "meta.zr")),
                Step::nth(2, "an fsync of meta.zr", |o| o.is(IoKind::Fsync, "meta.zr")),
            ],
        );
        let mut armed = Armed::new(point);
        let ops = [
            op(IoKind::Fsync, "meta.zr", 0), // before the first step: ignored
            op(IoKind::Pwrite, "0.zr", 0),
            op(IoKind::Pwrite, "meta.zr", 0),
            op(IoKind::Fsync, "0.zr", 0),
            op(IoKind::Fsync, "meta.zr", 0),
            op(IoKind::Fsync, "meta.zr", 0), // fires here (operation 6)
            op(IoKind::Fsync, "meta.zr", 0),
        ];
        let fired: Vec<Option<Action>> = ops.iter().zip(1..).map(|(o, n)| armed.observe(o, n)).collect();
        assert_eq!(fired.iter().filter(|f| f.is_some()).count(), 1);
        assert_eq!(fired[5], Some(Action::Crash));
        assert_eq!(armed.fired_at(), Some(6));
    }

    #[test]
    fn the_trace_spelling_is_kept() {
        assert_eq!(op(IoKind::StoreWord, "meta.zr", 8).to_string(), "store_word meta.zr @8 +8");
        let rename =
            IoOp { kind: IoKind::Rename, path: Path::new("/d/a"), to: Some(Path::new("/d/b")), offset: 0, len: 0 };
        assert_eq!(rename.to_string(), "rename /d/a /d/b");
    }
}
