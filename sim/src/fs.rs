//! SimFs: the store's I/O boundary in memory, with power loss as the Linux
//! page cache produces it.
//!
//! Every file has a volatile image (what reads see: the page cache) and a
//! durable one (what survives a power loss), both sparse maps of 4 KiB pages.
//! Writes and stores into a mapping change the volatile image and mark pages
//! dirty; `sync_data`/`sync_all` make the file durable, `flush_range` the
//! pages of a range. Creations, removals and renames are durable only after
//! the directory is synced. At any I/O operation a random dirty page may be
//! written back by itself. A crash keeps the durable image plus a chosen
//! subset of the dirty pages, torn at 8-byte granularity inside mapped pages
//! and at sector granularity elsewhere (garbage for sectors wholly past the
//! durable end of a file). Injected faults: EIO on sync (the dirty pages then
//! dropped from the cache or kept), ENOSPC on growth, short reads and writes,
//! failed opens. A lying disk acknowledges syncs and persists nothing.
//!
//! Everything is deterministic from the seed: one PRNG, ordered maps, no
//! clock, no threads.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use loaderx::io::{
    BatchError, BatchRead, FileKind, Handle, LockKind, Map, MapMode, OpenMode, Residency, Stat, SyncKind, Then, Vfs,
    VfsFile,
};

use crate::point::{Action, Armed, IoKind, IoOp, Point};
use crate::rng::Rng;
use crate::trace::Trace;

/// Page size of the model.
pub const PAGE: u64 = 4096;
/// Sector size of the model.
pub const SECTOR: u64 = 512;
const WORD: u64 = 8;

type Page = Box<[u8; PAGE as usize]>;

fn zero_page() -> Page {
    Box::new([0; PAGE as usize])
}

/// Fault probabilities, per operation.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// A dirty page is written back by itself.
    pub writeback: f64,
    /// A sync (`sync_data`, `sync_all`, `flush_range`, `sync_dir`) fails with EIO.
    pub eio_sync: f64,
    /// A write or `set_len` that grows a file fails with ENOSPC.
    pub enospc: f64,
    /// A read or write transfers fewer bytes than asked.
    pub short_io: f64,
    /// An open fails.
    pub open_fail: f64,
    /// A batch of reads of one file ([`Vfs::read_batch`]) fails with EIO.
    pub eio_read: f64,
    /// Syncs succeed and persist nothing.
    pub lying: bool,
    /// The Windows model: a `set_len` that shrinks a file mapped shared is
    /// refused with `ERROR_USER_MAPPED_FILE`, as Windows refuses it while a
    /// section of the file exists (here: once mapped, for good).
    pub windows: bool,
}

/// What a crash keeps of the dirty (unsynced) state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Persist {
    /// Only what was synced.
    Nothing,
    /// Everything, as if the page cache had been flushed.
    Everything,
    /// A random subset, with torn pages.
    Random,
}

#[derive(Clone, Default)]
struct Image {
    pages: BTreeMap<u64, Page>,
    len: u64,
}

impl Image {
    fn read(&self, offset: u64, buf: &mut [u8]) -> usize {
        let end = (offset + buf.len() as u64).min(self.len);
        let (page, within) = (offset / PAGE, (offset % PAGE) as usize);
        if end == offset + buf.len() as u64 && within + buf.len() <= PAGE as usize {
            // Within one page (a table entry, a word): one lookup.
            match self.pages.get(&page) {
                Some(p) => buf.copy_from_slice(&p[within..][..buf.len()]),
                None => buf.fill(0),
            }
            return buf.len();
        }
        let mut at = offset;
        while at < end {
            let (page, within) = (at / PAGE, at % PAGE);
            let n = (PAGE - within).min(end - at) as usize;
            let dst = &mut buf[(at - offset) as usize..][..n];
            match self.pages.get(&page) {
                Some(p) => dst.copy_from_slice(&p[within as usize..][..n]),
                None => dst.fill(0),
            }
            at += n as u64;
        }
        end.saturating_sub(offset) as usize
    }

    /// Writes `data` at `offset`, returning the pages touched.
    fn write(&mut self, offset: u64, data: &[u8]) -> Vec<u64> {
        let mut touched = Vec::new();
        let mut at = offset;
        let end = offset + data.len() as u64;
        while at < end {
            let (page, within) = (at / PAGE, at % PAGE);
            let n = (PAGE - within).min(end - at) as usize;
            let p = self.pages.entry(page).or_insert_with(zero_page);
            p[within as usize..][..n].copy_from_slice(&data[(at - offset) as usize..][..n]);
            touched.push(page);
            at += n as u64;
        }
        self.len = self.len.max(end);
        touched
    }

    /// The first non-zero byte at or past `len`, if any.
    fn first_byte_past_end(&self) -> Option<u64> {
        self.pages.range(self.len / PAGE..).find_map(|(&page, data)| {
            let start = self.len.saturating_sub(page * PAGE).min(PAGE) as usize;
            data[start..].iter().position(|&b| b != 0).map(|k| page * PAGE + (start + k) as u64)
        })
    }

    /// Sets the length. Invariant: no byte past `len` is non-zero, so a file
    /// extended later reads zeros there, as POSIX requires.
    fn set_len(&mut self, len: u64) {
        self.pages.retain(|&p, _| p * PAGE < len);
        if let Some(p) = self.pages.get_mut(&(len / PAGE)) {
            p[(len % PAGE) as usize..].fill(0);
        }
        self.len = len;
    }
}

struct Inode {
    volatile: Image,
    durable: Image,
    dirty: BTreeSet<u64>,
    len_dirty: bool,
    /// Mapped shared: its pages tear at word granularity.
    mapped: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    File(usize),
    Dir,
}

#[derive(Clone, Debug)]
enum NsOp {
    Link(PathBuf, Node),
    Unlink(PathBuf),
    Rename(PathBuf, PathBuf),
}

impl NsOp {
    fn dir(&self) -> PathBuf {
        let path = match self {
            NsOp::Link(p, _) | NsOp::Unlink(p) | NsOp::Rename(p, _) => p,
        };
        path.parent().map(Path::to_path_buf).unwrap_or_default()
    }

    fn apply(&self, names: &mut BTreeMap<PathBuf, Node>) {
        match self {
            NsOp::Link(p, node) => {
                names.insert(p.clone(), *node);
            }
            NsOp::Unlink(p) => {
                // A directory's removal: its entries were unlinked before
                // it (it was empty), in the journal's order.
                names.retain(|q, _| !q.starts_with(p));
            }
            NsOp::Rename(from, to) => move_tree(names, from, to),
        }
    }
}

/// Moves `from` and every name under it to `to` (a directory's rename:
/// its entries live in its inode, so they move with it). Nothing if `from`
/// is missing.
fn move_tree(names: &mut BTreeMap<PathBuf, Node>, from: &Path, to: &Path) {
    let moved: Vec<PathBuf> = names.keys().filter(|p| p.starts_with(from)).cloned().collect();
    for old in moved {
        let node = names.remove(&old).expect("listed");
        let rest = old.strip_prefix(from).expect("under from");
        let new = if rest.as_os_str().is_empty() { to.to_path_buf() } else { to.join(rest) };
        names.insert(new, node);
    }
}

struct State {
    rng: Rng,
    faults: Faults,
    names: BTreeMap<PathBuf, Node>,
    durable_names: BTreeMap<PathBuf, Node>,
    pending: Vec<NsOp>,
    inodes: Vec<Option<Inode>>,
    /// Advisory locks (`flock`) per inode: shared holders, and whether an
    /// exclusive one is held. Each [`SimFile`] is one open file description:
    /// it holds at most one lock, released when it is dropped or at a crash.
    locks: BTreeMap<usize, (u32, bool)>,
    /// Reboots so far: a lock taken before one is gone, and its holder's
    /// drop must not release a lock taken after it.
    boots: u64,
    /// A read-only filesystem: opening for writing, creating, removing and
    /// renaming fail with `ReadOnlyFilesystem` (`EROFS`).
    read_only: bool,
    ops: u64,
    crash_at: Option<u64>,
    crashed: bool,
    /// Set when the store read a mapping past the end of a file (a SIGBUS on
    /// a real system): always a bug.
    fault_past_eof: Option<String>,
    /// Batched reads made, and EIOs injected into them.
    batched: (u64, u64),
    /// Reads of files opened `O_DIRECT` (all aligned, or refused).
    direct_reads: u64,
    /// The name of each file opened: a [`SimFile`]'s [`Handle`] is its
    /// index here.
    handles: Vec<String>,
    trace: Trace,
    /// Semantic fault points ([`SimFs::arm`]).
    armed: Vec<Armed>,
    /// An armed EIO fired at the current operation (dirty pages dropped?).
    inject_eio: Option<bool>,
}

fn read_only_error() -> io::Error {
    io::Error::new(io::ErrorKind::ReadOnlyFilesystem, "read-only filesystem")
}

fn crash_error() -> io::Error {
    io::Error::other("simulated power loss")
}

impl State {
    /// Counts an I/O operation, logs it, and crashes if this is the chosen
    /// one (by number, or by an armed point). Random writeback happens here
    /// too.
    fn op(&mut self, io: IoOp<'_>) -> io::Result<()> {
        if self.crashed {
            return Err(crash_error());
        }
        self.ops += 1;
        self.trace.push(format!("{} {io}", self.ops));
        self.inject_eio = None;
        let mut point_crash = false;
        for armed in &mut self.armed {
            match armed.observe(&io, self.ops) {
                Some(Action::Crash) => point_crash = true,
                Some(Action::Eio { drop_dirty }) => self.inject_eio = Some(drop_dirty),
                None => {}
            }
        }
        if point_crash || self.crash_at == Some(self.ops) {
            self.crashed = true;
            self.trace.push("crash".into());
            return Err(crash_error());
        }
        if self.faults.writeback > 0.0 && self.rng.chance(self.faults.writeback) {
            self.writeback_one();
        }
        Ok(())
    }

    fn writeback_one(&mut self) {
        let candidates: Vec<(usize, u64)> = self
            .inodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| n.as_ref().map(|n| (i, n)))
            .flat_map(|(i, n)| n.dirty.iter().map(move |&p| (i, p)))
            .collect();
        if candidates.is_empty() {
            return;
        }
        let (i, page) = candidates[self.rng.below(candidates.len() as u64) as usize];
        let inode = self.inodes[i].as_mut().expect("listed");
        persist_page(inode, page);
        inode.dirty.remove(&page);
        self.trace.push(format!("  writeback inode {i} page {page}"));
    }

    fn inode(&mut self, id: usize) -> &mut Inode {
        self.inodes[id].as_mut().expect("open files keep their inode")
    }

    fn fault(&mut self, pick: fn(&Faults) -> f64) -> bool {
        let p = pick(&self.faults);
        p > 0.0 && self.rng.chance(p)
    }

    /// An injected EIO on a sync of `pages` of inode `id`: the dirty pages
    /// are dropped from the cache (reads see the durable bytes again) or kept.
    fn eio(&mut self, id: usize, pages: &[u64], drop: bool) -> io::Error {
        let inode = self.inode(id);
        for &p in pages {
            if drop && inode.dirty.remove(&p) {
                match inode.durable.pages.get(&p) {
                    Some(d) => {
                        inode.volatile.pages.insert(p, d.clone());
                    }
                    None => {
                        inode.volatile.pages.remove(&p);
                    }
                }
            }
        }
        // Whatever came back, nothing past the end of the file is visible.
        let len = inode.volatile.len;
        inode.volatile.set_len(len);
        self.trace.push(format!("  EIO ({})", if drop { "dirty pages dropped" } else { "dirty pages kept" }));
        io::Error::other("injected EIO")
    }

    fn sync_pages(&mut self, id: usize, pages: Option<(u64, u64)>, with_len: bool) -> io::Result<()> {
        let selected: Vec<u64> = {
            let inode = self.inode(id);
            match pages {
                None => inode.dirty.iter().copied().collect(),
                Some((first, end)) => inode.dirty.range(first..end).copied().collect(),
            }
        };
        if let Some(drop) = self.inject_eio.take() {
            return Err(self.eio(id, &selected, drop));
        }
        if self.faults.lying {
            return Ok(());
        }
        if self.fault(|f| f.eio_sync) {
            let drop = self.rng.chance(0.5);
            return Err(self.eio(id, &selected, drop));
        }
        let inode = self.inode(id);
        for p in selected {
            persist_page(inode, p);
            inode.dirty.remove(&p);
        }
        if with_len {
            let len = inode.volatile.len;
            inode.durable.set_len(len);
            inode.len_dirty = false;
        }
        Ok(())
    }
}

fn persist_page(inode: &mut Inode, page: u64) {
    match inode.volatile.pages.get(&page) {
        Some(p) => {
            inode.durable.pages.insert(page, p.clone());
        }
        None => {
            inode.durable.pages.remove(&page);
        }
    }
}

/// The simulated filesystem. Clones share the same state.
#[derive(Clone)]
pub struct SimFs {
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for SimFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimFs")
    }
}

impl SimFs {
    /// An empty filesystem (just `/`) with its own generator.
    pub fn new(rng: Rng, faults: Faults) -> SimFs {
        let mut names = BTreeMap::new();
        names.insert(PathBuf::from("/"), Node::Dir);
        let state = State {
            rng,
            faults,
            durable_names: names.clone(),
            names,
            pending: Vec::new(),
            inodes: Vec::new(),
            locks: BTreeMap::new(),
            read_only: false,
            boots: 0,
            ops: 0,
            crash_at: None,
            crashed: false,
            fault_past_eof: None,
            batched: (0, 0),
            direct_reads: 0,
            handles: Vec::new(),
            trace: Trace::default(),
            armed: Vec::new(),
            inject_eio: None,
        };
        SimFs { state: Arc::new(Mutex::new(state)) }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// I/O operations so far.
    pub fn ops(&self) -> u64 {
        self.lock().ops
    }

    /// Batched reads ([`VfsFile::read_batch`]) made so far, and how many
    /// of them an injected EIO failed.
    pub fn batched_reads(&self) -> (u64, u64) {
        self.lock().batched
    }

    /// Reads of files opened `OpenMode::ReadDirect` so far.
    pub fn direct_reads(&self) -> u64 {
        self.lock().direct_reads
    }

    /// Crash when the I/O operation count reaches `at` (absolute).
    pub fn arm_crash(&self, at: Option<u64>) {
        self.lock().crash_at = at;
    }

    /// Crash now (between operations).
    pub fn crash_now(&self) {
        let mut s = self.lock();
        s.crashed = true;
        s.trace.push("crash (between operations)".into());
    }

    /// True once a crash happened and until [`SimFs::reboot`].
    pub fn crashed(&self) -> bool {
        self.lock().crashed
    }

    /// Turns faults on or off (the checker reads with faults off).
    pub fn set_faults(&self, faults: Faults) {
        self.lock().faults = faults;
    }

    /// Makes the filesystem read-only (`EROFS` for every open for writing
    /// and every creation, removal or rename), or writable again.
    pub fn set_read_only(&self, read_only: bool) {
        self.lock().read_only = read_only;
    }

    /// The current fault settings.
    pub fn faults(&self) -> Faults {
        self.lock().faults.clone()
    }

    /// A read past the end of a file, if the store ever made one.
    pub fn fault_past_eof(&self) -> Option<String> {
        self.lock().fault_past_eof.clone()
    }

    /// Arms `point` (see [`crate::point`]) for the rest of the run, reboots
    /// included; returns its handle for [`SimFs::fired_at`].
    pub fn arm(&self, point: Point) -> usize {
        let mut s = self.lock();
        s.armed.push(Armed::new(point));
        s.armed.len() - 1
    }

    /// The I/O operation number at which armed point `id` fired, if it did.
    pub fn fired_at(&self, id: usize) -> Option<u64> {
        self.lock().armed[id].fired_at()
    }

    /// Armed point `id` in words, with how many of its steps were completed.
    pub fn point_progress(&self, id: usize) -> String {
        let s = self.lock();
        let armed = &s.armed[id];
        format!("{} ({} of {} steps completed)", armed.point().describe(), armed.progress(), armed.point().steps.len())
    }

    /// A file whose cached image holds a non-zero byte past its end (POSIX
    /// never shows one: a file extended later reads zeros there). A check of
    /// the simulator itself. (The durable image may hold such bytes: pages
    /// written back before the length was; a reboot drops them.)
    pub fn bytes_past_eof(&self) -> Option<String> {
        let s = self.lock();
        let names: BTreeMap<usize, &PathBuf> =
            s.names.iter().filter_map(|(p, n)| if let Node::File(i) = n { Some((*i, p)) } else { None }).collect();
        for (id, inode) in s.inodes.iter().enumerate() {
            let Some(inode) = inode else { continue };
            if let Some(at) = inode.volatile.first_byte_past_end() {
                let name = names.get(&id).map_or_else(|| format!("inode {id}"), |p| p.display().to_string());
                return Some(format!("{name} holds data at {at}, past its end {}", inode.volatile.len));
            }
        }
        None
    }

    /// The operation trace so far (its last lines, after
    /// [`SimFs::keep_trace`]).
    pub fn trace(&self) -> Vec<String> {
        self.lock().trace.lines()
    }

    /// Keeps only the trace's last `lines` from now on: for long runs that
    /// print only a violation's tail (the fuzz harness; see `trace.rs`).
    pub fn keep_trace(&self, lines: usize) {
        self.lock().trace.keep_last(lines);
    }

    /// Appends a line to the trace (the workload logs its operations).
    pub fn log(&self, line: String) {
        self.lock().trace.push(line);
    }

    /// Power comes back: every file becomes its durable image plus what
    /// `persist` keeps of the dirty state. Locks are released (the process
    /// died); the crash point is disarmed.
    pub fn reboot(&self, persist: Persist) {
        let mut guard = self.lock();
        let s = &mut *guard;
        // Namespace: a prefix of the unsynced operations, in order.
        let keep = match persist {
            Persist::Nothing => 0,
            Persist::Everything => s.pending.len(),
            Persist::Random => s.rng.below(s.pending.len() as u64 + 1) as usize,
        };
        for op in &s.pending[..keep] {
            op.apply(&mut s.durable_names);
        }
        s.pending.clear();
        s.names = s.durable_names.clone();
        let live: BTreeSet<usize> =
            s.names.values().filter_map(|n| if let Node::File(i) = n { Some(*i) } else { None }).collect();
        for (id, slot) in s.inodes.iter_mut().enumerate() {
            let Some(inode) = slot.as_mut() else { continue };
            if !live.contains(&id) {
                *slot = None;
                continue;
            }
            let dirty: Vec<u64> = inode.dirty.iter().copied().collect();
            for page in dirty {
                let choice = match persist {
                    Persist::Nothing => 0,
                    Persist::Everything => 1,
                    Persist::Random => s.rng.below(3),
                };
                match choice {
                    0 => {}
                    1 => persist_page(inode, page),
                    _ => tear_page(inode, page, &mut s.rng),
                }
            }
            if inode.len_dirty {
                let new_len = match persist {
                    Persist::Nothing => false,
                    Persist::Everything => true,
                    Persist::Random => s.rng.chance(0.5),
                };
                if new_len {
                    inode.durable.len = inode.volatile.len;
                }
            }
            // Bytes written past the durable end are not part of the file.
            let len = inode.durable.len;
            inode.durable.set_len(len);
            inode.volatile = inode.durable.clone();
            inode.dirty.clear();
            inode.len_dirty = false;
        }
        s.locks.clear();
        s.boots += 1;
        s.crashed = false;
        s.crash_at = None;
        s.trace.push(format!("reboot ({persist:?})"));
    }
}

/// Persists a random mix of the page's old and new contents: 8-byte words
/// for a mapped page (a writeback racing the CPU's stores), 512-byte
/// sectors otherwise, garbage for a sector wholly past the durable end.
fn tear_page(inode: &mut Inode, page: u64, rng: &mut Rng) {
    let new = inode.volatile.pages.get(&page).cloned().unwrap_or_else(zero_page);
    let old = inode.durable.pages.get(&page).cloned().unwrap_or_else(zero_page);
    let mut out = old.clone();
    let unit = if inode.mapped { WORD } else { SECTOR };
    for start in (0..PAGE).step_by(unit as usize) {
        let range = start as usize..(start + unit) as usize;
        let past_end = page * PAGE + start >= inode.durable.len;
        match rng.below(3) {
            0 => {}
            1 => out[range.clone()].copy_from_slice(&new[range]),
            _ if past_end && !inode.mapped => {
                for b in &mut out[range] {
                    *b = rng.next_u64() as u8;
                }
            }
            _ => out[range.clone()].copy_from_slice(&new[range]),
        }
    }
    inode.durable.pages.insert(page, out);
}

impl Vfs for SimFs {
    fn kind(&self, path: &Path) -> io::Result<Option<FileKind>> {
        let s = self.lock();
        if s.crashed {
            return Err(crash_error());
        }
        Ok(s.names.get(path).map(|n| match n {
            Node::File(_) => FileKind::File,
            Node::Dir => FileKind::Dir,
        }))
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.op(IoOp::on(IoKind::Mkdir, path))?;
        let mut missing = Vec::new();
        let mut at = Some(path);
        while let Some(p) = at {
            match s.names.get(p) {
                Some(Node::Dir) => break,
                Some(Node::File(_)) => return Err(io::Error::other("a file is in the way")),
                None => missing.push(p.to_path_buf()),
            }
            at = p.parent();
        }
        for p in missing.into_iter().rev() {
            s.names.insert(p.clone(), Node::Dir);
            s.pending.push(NsOp::Link(p, Node::Dir));
        }
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let s = self.lock();
        if s.crashed {
            return Err(crash_error());
        }
        Ok(s.names
            .keys()
            .filter(|p| p.parent() == Some(path))
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        s.op(IoOp::on(IoKind::SyncDir, path))?;
        if s.inject_eio.take().is_some() {
            s.trace.push("  EIO".into());
            return Err(io::Error::other("injected EIO"));
        }
        if s.faults.lying {
            return Ok(());
        }
        if s.fault(|f| f.eio_sync) {
            s.trace.push("  EIO".into());
            return Err(io::Error::other("injected EIO"));
        }
        let (mine, rest): (Vec<NsOp>, Vec<NsOp>) = s.pending.drain(..).partition(|op| op.dir() == path);
        s.pending = rest;
        for op in mine {
            op.apply(&mut s.durable_names);
        }
        Ok(())
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn VfsFile>> {
        let mut s = self.lock();
        if s.crashed {
            return Err(crash_error());
        }
        if s.fault(|f| f.open_fail) {
            s.trace.push(format!("  open {} failed (injected)", path.display()));
            return Err(io::Error::other("injected open failure"));
        }
        if s.read_only && !matches!(mode, OpenMode::Read | OpenMode::ReadDirect) {
            return Err(read_only_error());
        }
        let id = match s.names.get(path) {
            Some(Node::File(id)) => *id,
            Some(Node::Dir) => return Err(io::Error::other("is a directory")),
            None if mode == OpenMode::Create => {
                if !matches!(path.parent().and_then(|p| s.names.get(p)), Some(Node::Dir)) {
                    return Err(io::Error::new(io::ErrorKind::NotFound, "no parent directory"));
                }
                s.op(IoOp::on(IoKind::Create, path))?;
                let id = s.inodes.len();
                s.inodes.push(Some(Inode {
                    volatile: Image::default(),
                    durable: Image::default(),
                    dirty: BTreeSet::new(),
                    len_dirty: false,
                    mapped: false,
                }));
                s.names.insert(path.to_path_buf(), Node::File(id));
                s.pending.push(NsOp::Link(path.to_path_buf(), Node::File(id)));
                id
            }
            None => return Err(io::ErrorKind::NotFound.into()),
        };
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let writable = !matches!(mode, OpenMode::Read | OpenMode::ReadDirect);
        let direct = mode == OpenMode::ReadDirect;
        s.handles.push(name.clone());
        let handle = Handle(s.handles.len() as u64 - 1);
        Ok(Box::new(SimFile { fs: self.clone(), id, name, writable, direct, handle, lock: None.into() }))
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if s.read_only {
            return Err(read_only_error());
        }
        s.op(IoOp::on(IoKind::Unlink, path))?;
        match s.names.get(path) {
            Some(Node::Dir) if s.names.keys().any(|p| p.parent() == Some(path)) => {
                Err(io::Error::other("directory not empty"))
            }
            Some(_) => {
                s.names.remove(path);
                s.pending.push(NsOp::Unlink(path.to_path_buf()));
                Ok(())
            }
            None => Err(io::Error::new(io::ErrorKind::NotFound, "no such file")),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.lock();
        if s.read_only {
            return Err(read_only_error());
        }
        s.op(IoOp { to: Some(to), ..IoOp::on(IoKind::Rename, from) })?;
        let node = *s.names.get(from).ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such file"))?;
        if node == Node::Dir {
            // A directory replaces only an empty one (POSIX), never itself.
            if to.starts_with(from) || s.names.get(to).is_some_and(|t| *t != Node::Dir) {
                return Err(io::Error::other("cannot rename a directory there"));
            }
            if s.names.keys().any(|p| p.parent() == Some(to)) {
                return Err(io::Error::other("directory not empty"));
            }
        }
        s.names.remove(to);
        move_tree(&mut s.names, from, to);
        s.pending.push(NsOp::Rename(from.to_path_buf(), to.to_path_buf()));
        Ok(())
    }

    /// Each run of consecutive reads of one file is one batch, as a ring's:
    /// its reads complete in an order the run's generator picks, each may
    /// come back short (and continue), and an injected EIO (at most one per
    /// batch, with the `eio_read` chance per batch) fails one read, which
    /// fails the batch.
    fn read_batch(
        &self,
        files: &[&dyn VfsFile],
        reads: &mut [BatchRead<'_>],
        then: Then<'_>,
    ) -> Result<(), BatchError> {
        let mut start = 0;
        while start < reads.len() {
            let same = |k: &usize| std::ptr::addr_eq(files[*k], files[start]);
            let end = (start..reads.len()).find(|k| !same(k)).unwrap_or(reads.len());
            self.read_run(files[start], &mut reads[start..end], &|k, read| then(start + k, read))
                .map_err(|e| BatchError { index: start + e.index, error: e.error })?;
            start = end;
        }
        Ok(())
    }
}

impl SimFs {
    /// One batch of reads of `file` ([`Vfs::read_batch`]).
    fn read_run(&self, file: &dyn VfsFile, reqs: &mut [BatchRead<'_>], then: Then<'_>) -> Result<(), BatchError> {
        let mut order: Vec<usize> = (0..reqs.len()).collect();
        let failing = {
            let mut s = self.lock();
            s.batched.0 += 1;
            for k in (1..order.len()).rev() {
                order.swap(k, s.rng.below(k as u64 + 1) as usize);
            }
            let fails = !reqs.is_empty() && !s.crashed && s.fault(|f| f.eio_read);
            fails.then(|| s.rng.below(reqs.len() as u64) as usize)
        };
        for index in order {
            let req = &mut reqs[index];
            if failing == Some(index) {
                let mut s = self.lock();
                s.batched.1 += 1;
                let name = s.handles.get(file.handle().0 as usize).cloned().unwrap_or_default();
                s.trace.push(format!("  EIO on a batched read of {name} @{}", req.offset));
                return Err(BatchError { index, error: io::Error::other("injected EIO on a batched read") });
            }
            loaderx::io::read_exact_at(file, req.buf, req.offset).map_err(|error| BatchError { index, error })?;
            then(index, req);
        }
        Ok(())
    }
}

struct SimFile {
    fs: SimFs,
    id: usize,
    name: String,
    writable: bool,
    /// Opened `OpenMode::ReadDirect`: reads must be aligned to
    /// [`SIM_DIRECT_ALIGN`] in offset, length and buffer address, as
    /// `O_DIRECT`'s are (`EINVAL` otherwise).
    direct: bool,
    /// Its index among the files opened ([`SimFs::read_batch`]).
    handle: Handle,
    /// The lock this open file holds, and the boot it was taken in.
    lock: Mutex<Option<(LockKind, u64)>>,
}

/// The simulated `O_DIRECT` alignment (a 512-byte logical sector).
pub const SIM_DIRECT_ALIGN: usize = 512;

impl std::fmt::Debug for SimFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimFile({})", self.name)
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        let held = self.lock.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some((kind, boot)) = held {
            let mut s = self.fs.lock();
            if boot != s.boots {
                return;
            }
            if let Some(entry) = s.locks.get_mut(&self.id) {
                match kind {
                    LockKind::Shared => entry.0 = entry.0.saturating_sub(1),
                    LockKind::Exclusive => entry.1 = false,
                }
            }
        }
    }
}

impl VfsFile for SimFile {
    fn stat(&self) -> io::Result<Stat> {
        let mut s = self.fs.lock();
        if s.crashed {
            return Err(crash_error());
        }
        Ok(Stat {
            len: s.inode(self.id).volatile.len,
            direct_alignment: SIM_DIRECT_ALIGN,
            modified: None,
            version: None,
        })
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut s = self.fs.lock();
        if s.crashed {
            return Err(crash_error());
        }
        let unit = if self.direct { SIM_DIRECT_ALIGN } else { 1 };
        s.direct_reads += u64::from(self.direct);
        let aligned = [offset as usize, buf.len(), buf.as_ptr() as usize].iter().all(|v| v.is_multiple_of(unit));
        if !aligned {
            let what = format!("misaligned O_DIRECT read of {} @{offset} +{}", self.name, buf.len());
            s.trace.push(format!("  {what}"));
            return Err(io::Error::new(io::ErrorKind::InvalidInput, what));
        }
        // A short read stops at a unit boundary, as a direct read does.
        let units = buf.len() / unit;
        let want = if units > 1 && s.fault(|f| f.short_io) {
            (1 + s.rng.below(units as u64 - 1)) as usize * unit
        } else {
            buf.len()
        };
        Ok(s.inode(self.id).volatile.read(offset, &mut buf[..want]))
    }

    fn handle(&self) -> Handle {
        self.handle
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        assert!(self.writable, "write to a file opened read-only");
        let mut s = self.fs.lock();
        s.op(IoOp::on(IoKind::Pwrite, Path::new(&self.name)).range(offset, buf.len() as u64))?;
        let grows = offset + buf.len() as u64 > s.inode(self.id).volatile.len;
        if grows && s.fault(|f| f.enospc) {
            s.trace.push("  ENOSPC".into());
            return Err(io::Error::new(io::ErrorKind::StorageFull, "injected ENOSPC"));
        }
        let n = if buf.len() > 1 && s.fault(|f| f.short_io) {
            1 + s.rng.below(buf.len() as u64 - 1)
        } else {
            buf.len() as u64
        } as usize;
        let inode = s.inode(self.id);
        let before = inode.volatile.len;
        for page in inode.volatile.write(offset, &buf[..n]) {
            inode.dirty.insert(page);
        }
        inode.len_dirty |= inode.volatile.len != before;
        Ok(n)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.fs.lock();
        s.op(IoOp::on(IoKind::SetLen, Path::new(&self.name)).range(0, len))?;
        if len > s.inode(self.id).volatile.len && s.fault(|f| f.enospc) {
            s.trace.push("  ENOSPC".into());
            return Err(io::Error::new(io::ErrorKind::StorageFull, "injected ENOSPC"));
        }
        let windows = s.faults.windows;
        let inode = s.inode(self.id);
        if windows && inode.mapped && len < inode.volatile.len {
            s.trace.push("  refused: the file is mapped (the Windows model)".into());
            return Err(io::Error::from_raw_os_error(loaderx::io::USER_MAPPED_FILE));
        }
        if len < inode.volatile.len && inode.volatile.pages.contains_key(&(len / PAGE)) {
            inode.dirty.insert(len / PAGE);
        }
        inode.dirty.retain(|&p| p * PAGE < len.max(1));
        inode.volatile.set_len(len);
        inode.len_dirty = true;
        Ok(())
    }

    /// `StartWriteback` does nothing (and is no operation of the run).
    fn sync(&self, kind: SyncKind) -> io::Result<()> {
        let op = match kind {
            SyncKind::Data => IoKind::Fdatasync,
            SyncKind::All => IoKind::Fsync,
            SyncKind::StartWriteback { .. } => return Ok(()),
        };
        let mut s = self.fs.lock();
        s.op(IoOp::on(op, Path::new(&self.name)))?;
        s.sync_pages(self.id, None, true)
    }

    /// A conflict with `wait` is `Ok(false)`: every holder is this
    /// thread, so a wait would never end.
    fn lock(&self, kind: LockKind, wait: bool) -> io::Result<bool> {
        let free = self.try_lock(kind)?;
        if !free && wait {
            self.fs.log(format!("  lock {kind:?} of {} would wait forever", self.name));
        }
        Ok(free)
    }

    fn map(&self, len: usize, mode: MapMode) -> io::Result<Box<dyn Map>> {
        let writable = match mode {
            MapMode::Read => {
                let (fs, id, name) = (self.fs.clone(), self.id, self.name.clone());
                return Ok(Box::new(SimReadMap { fs, id, name }));
            }
            MapMode::Shared { writable } => writable,
        };
        let mut s = self.fs.lock();
        if s.crashed {
            return Err(crash_error());
        }
        let inode = s.inode(self.id);
        if inode.volatile.len < len as u64 {
            return Err(io::Error::other("mapping past the end of the file"));
        }
        inode.mapped = true;
        Ok(Box::new(SimMap { fs: self.fs.clone(), id: self.id, name: self.name.clone(), len, writable }))
    }
}

impl SimFile {
    /// Takes the lock if no other open file holds a conflicting one.
    fn try_lock(&self, kind: LockKind) -> io::Result<bool> {
        let mut s = self.fs.lock();
        if s.crashed {
            return Err(crash_error());
        }
        let held = self.lock.lock().unwrap_or_else(|e| e.into_inner()).is_some();
        assert!(!held, "the store takes one lock per open file");
        let entry = s.locks.entry(self.id).or_insert((0, false));
        let free = match kind {
            LockKind::Shared => !entry.1,
            LockKind::Exclusive => !entry.1 && entry.0 == 0,
        };
        if free {
            match kind {
                LockKind::Shared => entry.0 += 1,
                LockKind::Exclusive => entry.1 = true,
            }
            let boot = s.boots;
            *self.lock.lock().unwrap_or_else(|e| e.into_inner()) = Some((kind, boot));
        }
        Ok(free)
    }
}

struct SimMap {
    fs: SimFs,
    id: usize,
    name: String,
    len: usize,
    writable: bool,
}

impl std::fmt::Debug for SimMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimMap({})", self.name)
    }
}

impl SimMap {
    fn store(&self, offset: usize, src: &[u8], kind: IoKind) {
        assert!(self.writable && offset + src.len() <= self.len, "bad store into the mapping");
        let mut s = self.fs.lock();
        // A store after the crash point is lost with the process.
        if s.op(IoOp::on(kind, Path::new(&self.name)).range(offset as u64, src.len() as u64)).is_err() {
            return;
        }
        let inode = s.inode(self.id);
        for page in inode.volatile.write(offset as u64, src) {
            inode.dirty.insert(page);
        }
    }
}

impl Map for SimMap {
    unsafe fn read(&self, offset: usize, dst: &mut [u8]) {
        assert!(offset + dst.len() <= self.len, "read past the mapping");
        let mut s = self.fs.lock();
        s.inode(self.id).volatile.read(offset as u64, dst);
    }
    unsafe fn write(&self, offset: usize, src: &[u8]) {
        self.store(offset, src, IoKind::Store);
    }
    unsafe fn store_word(&self, offset: usize, word: u64) {
        assert_eq!(offset % 8, 0);
        self.store(offset, &word.to_ne_bytes(), IoKind::StoreWord);
    }
    fn load_word(&self, offset: usize) -> u64 {
        assert_eq!(offset % 8, 0);
        let mut b = [0u8; 8];
        let mut s = self.fs.lock();
        s.inode(self.id).volatile.read(offset as u64, &mut b);
        u64::from_ne_bytes(b)
    }
    /// A read-only mapping's bytes, copied.
    fn bytes<'a>(&'a self, offset: u64, len: usize, scratch: &'a mut Vec<u8>) -> io::Result<&'a [u8]> {
        assert!(!self.writable, "bytes of a writable mapping");
        if offset + len as u64 > self.len as u64 {
            return Err(io::Error::other("read past the mapping"));
        }
        scratch.resize(len, 0);
        self.fs.lock().inode(self.id).volatile.read(offset, scratch);
        Ok(&scratch[..])
    }
    /// A hole where no page of the range was ever written (or all were
    /// cut away), and it lies within the file: what `read` would give is
    /// zeros. Otherwise in memory.
    fn residency(&self, offset: u64, len: usize) -> Residency {
        let len = len as u64;
        let mut s = self.fs.lock();
        let image = &s.inode(self.id).volatile;
        let hole = len > 0
            && offset + len <= image.len
            && image.pages.range(offset / PAGE..(offset + len).div_ceil(PAGE)).next().is_none();
        if hole { Residency::Hole } else { Residency::Memory }
    }
    fn flush_range(&self, offset: usize, len: usize) -> io::Result<()> {
        let mut s = self.fs.lock();
        s.op(IoOp::on(IoKind::Msync, Path::new(&self.name)).range(offset as u64, len as u64))?;
        let first = offset as u64 / PAGE;
        let end = ((offset + len) as u64).div_ceil(PAGE);
        s.sync_pages(self.id, Some((first, end)), false)
    }
}

struct SimReadMap {
    fs: SimFs,
    id: usize,
    name: String,
}

impl std::fmt::Debug for SimReadMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SimReadMap({})", self.name)
    }
}

impl Map for SimReadMap {
    /// As `bytes`, copied; panics where `bytes` fails.
    unsafe fn read(&self, offset: usize, dst: &mut [u8]) {
        let mut scratch = Vec::new();
        dst.copy_from_slice(self.bytes(offset as u64, dst.len(), &mut scratch).expect("a read inside the file"));
    }
    fn bytes<'a>(&'a self, offset: u64, len: usize, scratch: &'a mut Vec<u8>) -> io::Result<&'a [u8]> {
        let mut s = self.fs.lock();
        let Some(inode) = s.inodes[self.id].as_ref() else {
            return Err(io::Error::other("file vanished"));
        };
        if offset + len as u64 > inode.volatile.len {
            let what = format!("read of {} @{offset} +{len} past its end ({})", self.name, inode.volatile.len);
            s.fault_past_eof.get_or_insert(what.clone());
            return Err(io::Error::other(what));
        }
        scratch.resize(len, 0);
        inode.volatile.read(offset, scratch);
        Ok(&scratch[..])
    }
    unsafe fn write(&self, _: usize, _: &[u8]) {
        panic!("a store into a read-only mapping");
    }
    unsafe fn store_word(&self, _: usize, _: u64) {
        panic!("a store into a read-only mapping");
    }
    fn load_word(&self, offset: usize) -> u64 {
        let mut word = [0; 8];
        // SAFETY: nothing stores into a read-only mapping.
        unsafe { self.read(offset, &mut word) };
        u64::from_ne_bytes(word)
    }
    fn flush_range(&self, _: usize, _: usize) -> io::Result<()> {
        Ok(())
    }
    /// In memory or not as the run's generator says, so that gathers take
    /// both the mapped and the batched path.
    fn residency(&self, _offset: u64, _len: usize) -> Residency {
        if self.fs.lock().rng.chance(0.5) { Residency::Memory } else { Residency::Device }
    }
}
