//! Publishing a store to object storage ([`push`]) and fetching one back
//! into a local directory ([`pull`]); `docs/remote.md`, "Publishing".
//!
//! A push uploads the chunk files (multipart when large), the used part of
//! `meta.zr` as the store was when the push opened it, `dict.zr` and
//! `schema.json`, and last `manifest.json`, which names each object with
//! its size, CRC-32 and entity tag. Object storage has no directory fsync;
//! the manifest is the commit: a reader goes by the manifest it read and
//! never sees a half-published store, and a reader of an older manifest
//! whose objects a push replaced gets `RemoteErrorKind::Changed`, never
//! another object's bytes (the entity tags). An object whose size and
//! CRC-32 the existing manifest already lists (and the server still holds)
//! is not uploaded again, so a second push of the same store uploads only
//! the manifest. Objects the old manifest listed and the new one does not
//! are removed after the new manifest is in place.
//!
//! A pull writes the objects into a directory holding no store, checks
//! every CRC-32, and makes `meta.zr` (grown to the full table, as the
//! reference package writes it) appear last, by rename, after everything
//! else is durable: a pull cut short leaves no `meta.zr`, and the open
//! refuses the directory (`Error::MetaMissing`) until a pull finishes.
//!
//! A sharded dataset (`shards.json` beside its shard 0) is published as its
//! local layout: shards 1 on each a store under `shard-NNNNNN/` with its own
//! manifest, pushed first, then shard 0 with `shards.json` at the prefix,
//! whose manifest, last of all, is the dataset's commit. A pull fetches
//! shards 1 on first and shard 0 (`shards.json` with it, `meta.zr` last)
//! after them.
//!
//! A table (`table.json` beside its columns' datasets) is published as its
//! local layout too: `table.json` read first, each column's dataset pushed
//! under `col-NNNN/` as above, then that commit (as `Commit::to_json`
//! writes it) and a manifest of
//! kind `table` at the prefix, last of all: the table's commit. A reader
//! sees the rows of the `table.json` it read, which every column published
//! before it holds. A pull fetches every column, then writes `table.json`
//! by its commit (replaced whole, synced) last.
//!
//! Local files are reached through the I/O boundary (`RealFs`), objects
//! through the remote backend's [`Location`]. Publishing sits above the
//! store, dataset and table layers (it opens stores, reads `shards.json`
//! and `table.json`); the I/O layer knows none of them. The commit of a
//! Ray write to object storage, which adopts pushed tables into a
//! published one, is `adopt.rs`'s; reclaiming the objects that failed
//! writes left unlisted is `gc.rs`'s, and the lock that lets one write at
//! a time adopt into a location is `lock.rs`'s. Uploading objects, for a
//! push and an adoption alike, is `objects.rs`'s.

mod adopt;
mod gc;
mod lock;
mod objects;

pub use adopt::{adopt_published, remove_published};
pub use gc::{GcReport, remove_unlisted_objects};
pub use lock::{LockTaken, WRITE_LOCK_FILE, lock_writes, unlock_writes};

use std::collections::BTreeMap;
use std::io;
use std::path::Path;
use std::sync::Arc;

use object_store::{ObjectStore, ObjectStoreExt};

use crate::Zrecord;
use crate::dataset::{ShardTable, shard_dir};
use crate::error::{Error, Result};
use crate::format::{
    DICT_FILE, ENTRY_BYTES, HEADER_BYTES, MANIFEST_FILE, META_BYTES, META_FILE, META_TMP_FILE, SCHEMA_FILE,
    SHARDS_FILE, SUMS_FILE, StoreFile, TABLE_FILE, TABLE_FILE_BYTES_MAX, chunk_file_name, column_dir_name,
    shard_dir_name,
};
use crate::io::real::RealFs;
use crate::io::remote::{
    Location, Manifest, ObjectInfo, Published, RemoteError, RemoteErrorKind, RemoteFs, RemoteOptions, read_manifest,
};
use crate::io::{BatchRead, FileKind, OpenMode, SyncKind, Vfs, VfsFile, write_all_at};
use crate::table::Commit;
use objects::{Source, remove_replaced, still_held, upload, upload_version};

/// Bytes read at a time by a pull.
const PIECE_BYTES: usize = objects::PIECE_BYTES;

/// What a push did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PushReport {
    /// Objects uploaded (the manifest included).
    pub uploaded: Vec<String>,
    /// Objects the existing manifest already listed with the same size and CRC-32.
    pub unchanged: Vec<String>,
    /// Objects of the old manifest removed.
    pub removed: Vec<String>,
    /// Bytes uploaded.
    pub bytes: u64,
    /// The records published (every shard's, for a sharded dataset; every
    /// column's, for a table).
    pub records: u64,
    /// A table's committed rows, as published; `None` for a store or dataset.
    pub rows: Option<u64>,
}

/// What [`pull`] fetched.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PullReport {
    /// Records (every shard's, for a sharded dataset; every column's, for
    /// a table).
    pub records: u64,
    /// Objects fetched, every shard's.
    pub objects: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Stores fetched: 1, a sharded dataset's shard count, or every
    /// column's of a table.
    pub shards: usize,
    /// A table's committed rows; `None` for a store or dataset.
    pub rows: Option<u64>,
}

/// The objects of the store at `dir`, open read-only as `store`: its chunk
/// files up to the frontier of the `meta.zr` image, that image, `dict.zr`
/// and `schema.json` where present.
fn sources(store: &Zrecord, dir: &Path) -> Result<(u32, Vec<(String, Source)>)> {
    let fs = RealFs;
    fn io_err(path: &Path, op: &'static str) -> impl FnOnce(io::Error) -> Error {
        move |source| Error::Io { path: path.to_path_buf(), op, source }
    }
    let (image, frontier) = store.meta_image();
    // The records the image holds: `16 + 16 x len` bytes.
    let len = ((image.len() as u64 - HEADER_BYTES) / ENTRY_BYTES) as u32;
    let sums = store.sums_image(len, frontier);
    let mut out = vec![(META_FILE.to_string(), Source::Memory(image))];
    out.extend(sums.map(|sums| (SUMS_FILE.to_string(), Source::Memory(sums))));
    for id in 0..=frontier.chunk {
        let name = chunk_file_name(id);
        let path = dir.join(&name);
        let file = fs.open(&path, OpenMode::Read).map_err(io_err(&path, "open chunk"))?;
        let mut len = file.stat().map_err(io_err(&path, "stat chunk"))?.len;
        if id == frontier.chunk {
            // Past the frontier nothing is live (a crashed append's bytes,
            // the reference's preallocation).
            len = len.min(u64::from(frontier.offset));
        }
        out.push((name, Source::File { file, len }));
    }
    for name in [DICT_FILE, SCHEMA_FILE, SHARDS_FILE] {
        let path = dir.join(name);
        if fs.kind(&path).map_err(io_err(&path, "stat"))? == Some(FileKind::File) {
            let file = fs.open(&path, OpenMode::Read).map_err(io_err(&path, "open"))?;
            let len = file.stat().map_err(io_err(&path, "stat"))?.len;
            out.push((name.to_string(), Source::File { file, len }));
        }
    }
    Ok((store.len(), out))
}

/// Publishes the store at `dir` to `to` (see the module comment). The
/// store is opened read-only for the push: appends elsewhere go on (what
/// they add after the open is not published), a delete or compaction
/// waits for it (the readers' lock).
pub fn push(dir: &Path, to: &Location) -> Result<PushReport> {
    let fs = RealFs;
    let table = dir.join(TABLE_FILE);
    match fs.kind(&table).map_err(|source| Error::Io { path: table, op: "stat", source })? {
        Some(_) => push_table(dir, to),
        None => push_dataset(dir, to),
    }
}

/// [`push`] of a store or a sharded dataset.
fn push_dataset(dir: &Path, to: &Location) -> Result<PushReport> {
    let Some(shards) = shard_table(&RealFs, dir)? else { return push_store(dir, to) };
    if let Some(pending) = &shards.pending {
        return Err(Error::InvalidArgument(format!(
            "{}: a delete of shard {} is under way; open the dataset for writing to finish it, then push",
            dir.display(),
            pending.shard
        )));
    }
    let mut report = PushReport::default();
    for k in (1..shards.shards()).chain([0]) {
        let name = shard_dir_name(k);
        let shard = push_store(&shard_dir(dir, k), &if k == 0 { to.clone() } else { to.child(&name) })?;
        report.add(shard, if k == 0 { "" } else { &name });
    }
    Ok(report)
}

impl PushReport {
    /// Adds the report of a push under directory `under` ("" for the prefix).
    fn add(&mut self, other: PushReport, under: &str) {
        let within = |v: Vec<String>| v.into_iter().map(|o| if under.is_empty() { o } else { format!("{under}/{o}") });
        self.uploaded.extend(within(other.uploaded));
        self.unchanged.extend(within(other.unchanged));
        self.removed.extend(within(other.removed));
        self.bytes += other.bytes;
        self.records += other.records;
    }
}

/// [`push`] of a table: its `table.json` read first, every column pushed
/// under `col-NNNN/`, then that `table.json` and the table's manifest.
fn push_table(dir: &Path, to: &Location) -> Result<PushReport> {
    let commit = Commit::read(&RealFs, dir).map_err(|e| Error::Io {
        path: dir.join(TABLE_FILE),
        op: "read table.json",
        source: invalid(e.to_string()),
    })?;
    let remote_err = |op| move |source| Error::Io { path: to.url().into(), op, source };
    let old = read_manifest(to).map_err(remote_err("read manifest.json"))?;
    if old.as_ref().is_some_and(|m| m.records().is_some()) {
        return Err(Error::InvalidArgument(format!("{}: a store is published there, not a table", to.url())));
    }
    let mut report = PushReport { rows: Some(commit.rows), ..PushReport::default() };
    for k in 0..commit.columns.len() {
        let name = column_dir_name(k);
        let column = push_dataset(&dir.join(&name), &to.child(&name))?;
        report.add(column, &name);
    }
    let info =
        upload_version(to, TABLE_FILE, commit.to_json().into_bytes()).map_err(remote_err("upload table.json"))?;
    report.bytes += info.size;
    let objects = BTreeMap::from([(TABLE_FILE.to_string(), info)]);
    let manifest = Manifest { published: Published::Table { rows: commit.rows }, objects };
    let text = manifest.encode().into_bytes();
    report.bytes += text.len() as u64;
    upload(to, MANIFEST_FILE, &Source::Memory(text)).map_err(remote_err("upload manifest.json"))?;
    report.uploaded.extend([TABLE_FILE.to_string(), MANIFEST_FILE.to_string()]);
    remove_replaced(to, old.as_ref(), &manifest, TABLE_FILE).map_err(remote_err("remove"))?;
    Ok(report)
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// The sharded dataset's shard table at `dir` on `fs`, `None` for a store.
fn shard_table(fs: &dyn Vfs, dir: &Path) -> Result<Option<ShardTable>> {
    ShardTable::read(fs, dir).map_err(|e| Error::Io {
        path: dir.join(SHARDS_FILE),
        op: "read shards.json",
        source: io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
    })
}

/// [`push`] of one store.
fn push_store(dir: &Path, to: &Location) -> Result<PushReport> {
    let store = Zrecord::open_read_only(dir)?;
    let (records, sources) = sources(&store, dir)?;
    let remote_err = |op| move |source| Error::Io { path: to.url().into(), op, source };
    let old = read_manifest(to).map_err(remote_err("read manifest.json"))?;
    if old.as_ref().is_some_and(|m| m.records().is_none()) {
        return Err(Error::InvalidArgument(format!("{}: a table is published there, not a store", to.url())));
    }
    let mut report = PushReport { records: u64::from(records), ..PushReport::default() };
    let mut objects = BTreeMap::new();
    for (name, source) in &sources {
        let local = |op| move |source| Error::Io { path: dir.join(name), op, source };
        let crc32 = source.crc32().map_err(local("read"))?;
        let (size, listed) = (source.len(), old.as_ref().and_then(|m| m.objects.get(name)));
        let same = listed.filter(|o| o.size == size && o.crc32 == crc32);
        let held = match same {
            Some(o) => still_held(to, name, o).map_err(remote_err("check an object"))?,
            None => None,
        };
        let etag = match held {
            Some(etag) => {
                report.unchanged.push(name.clone());
                etag
            }
            None => {
                let etag = upload(to, name, source).map_err(remote_err("upload"))?;
                report.uploaded.push(name.clone());
                report.bytes += size;
                etag
            }
        };
        objects.insert(name.clone(), ObjectInfo::new(size, crc32, etag));
    }
    let manifest = Manifest { published: Published::Store { records }, objects };
    let text = manifest.encode().into_bytes();
    report.bytes += text.len() as u64;
    upload(to, MANIFEST_FILE, &Source::Memory(text)).map_err(remote_err("upload manifest.json"))?;
    report.uploaded.push(MANIFEST_FILE.into());
    for name in old.iter().flat_map(|m| m.objects.keys()) {
        if manifest.objects.contains_key(name) {
            // A version of it an adoption wrote (`shards.json.VERSION`).
            remove_replaced(to, old.as_ref(), &manifest, name).map_err(remote_err("remove"))?;
            continue;
        }
        to.fetcher()
            .run(async |store| store.delete(&to.key(name)).await.map_err(io::Error::from))
            .map_err(remote_err("remove"))?;
        report.removed.push(name.clone());
    }
    Ok(report)
}

/// Fetches the store or sharded dataset at `from` into `dir` (created if
/// missing; it must hold no `meta.zr`, nor may a shard's directory),
/// checking every object's CRC-32 (see the module comment).
pub fn pull(from: &Location, dir: &Path) -> Result<PullReport> {
    let root = read_manifest(from)
        .map_err(|source| Error::Io { path: from.url().into(), op: "read manifest.json", source })?
        .ok_or_else(|| Error::NoStore { path: from.url().into() })?;
    match root.published {
        Published::Table { rows } => pull_table(from, dir, &root, rows),
        Published::Store { .. } => pull_dataset(from, dir, root),
    }
}

/// [`pull`] of a store or a sharded dataset, `root` its manifest.
fn pull_dataset(from: &Location, dir: &Path, root: Manifest) -> Result<PullReport> {
    let remote = RemoteFs::with_manifest(from.clone(), root.clone());
    let shards = shard_table(&remote, Path::new(remote.root()))?.map_or(1, |m| m.shards());
    let mut report = PullReport { shards, ..PullReport::default() };
    for k in (1..shards).chain([0]) {
        let (at, manifest) = match k {
            // The root's manifest is the one `shards.json` was read by.
            0 => (from.clone(), root.clone()),
            _ => {
                let at = from.child(&shard_dir_name(k));
                let manifest = published(&at)?;
                (at, manifest)
            }
        };
        pull_store(&at, &shard_dir(dir, k), &manifest)?;
        report.records += u64::from(manifest.records().unwrap_or(0));
        report.objects += manifest.objects.len();
        report.bytes += manifest.objects.values().map(|o| o.size).sum::<u64>();
    }
    Ok(report)
}

/// [`pull`] of a table, `manifest` its manifest (of `rows` rows): its
/// `table.json` fetched and checked, every column pulled into
/// `dir/col-NNNN`, then `table.json` written by its commit, last.
fn pull_table(from: &Location, dir: &Path, manifest: &Manifest, rows: u64) -> Result<PullReport> {
    let fs = RealFs;
    let path = dir.join(TABLE_FILE);
    if fs.kind(&path).map_err(|source| Error::Io { path: path.clone(), op: "stat", source })?.is_some() {
        let why = format!("{}: holds a table already; pull into an empty directory", dir.display());
        return Err(Error::InvalidArgument(why));
    }
    let remote_err = |op| move |source| Error::Io { path: from.url().into(), op, source };
    let info = &manifest.objects[TABLE_FILE];
    let object = from.object(TABLE_FILE, info);
    let text = from.fetcher().read_whole(&object, TABLE_FILE_BYTES_MAX).map_err(remote_err("fetch table.json"))?;
    let check = |why: String| {
        remote_err("fetch table.json")(RemoteError::new(&object.url, RemoteErrorKind::Changed, why).into_io())
    };
    if crc32fast::hash(&text) != info.crc32 {
        return Err(check(format!("CRC-32 {:08x}, the manifest says {:08x}", crc32fast::hash(&text), info.crc32)));
    }
    let commit = std::str::from_utf8(&text)
        .map_err(|_| "not UTF-8".to_string())
        .and_then(|t| Commit::parse(t, &path).map_err(|e| e.to_string()))
        .map_err(check)?;
    if commit.rows != rows {
        return Err(check(format!("{} rows, the manifest says {rows}", commit.rows)));
    }
    let mut report = PullReport { rows: Some(rows), ..PullReport::default() };
    for k in 0..commit.columns.len() {
        let name = column_dir_name(k);
        let at = from.child(&name);
        let column = pull_dataset(&at, &dir.join(&name), published(&at)?)?;
        report.records += column.records;
        report.objects += column.objects;
        report.bytes += column.bytes;
        report.shards += column.shards;
    }
    commit.write(&fs, dir).map_err(|e| Error::Io {
        path: path.clone(),
        op: "write table.json",
        source: invalid(e.to_string()),
    })?;
    report.objects += 1;
    report.bytes += info.size;
    Ok(report)
}

/// The manifest of the store published at `from` (`Error::NoStore` if none
/// is; an error if a table's is there, whose objects a store's pull cannot
/// take: a shard's or a column's directory holds a store).
fn published(from: &Location) -> Result<Manifest> {
    let manifest = read_manifest(from)
        .map_err(|source| Error::Io { path: from.url().into(), op: "read manifest.json", source })?
        .ok_or_else(|| Error::NoStore { path: from.url().into() })?;
    match manifest.published {
        Published::Store { .. } => Ok(manifest),
        Published::Table { .. } => {
            Err(Error::InvalidArgument(format!("{}: a table is published there, not a store", from.url())))
        }
    }
}

/// [`pull`] of one store, as `manifest` (read at `from`) lists it.
fn pull_store(from: &Location, dir: &Path, manifest: &Manifest) -> Result<()> {
    let fs = RealFs;
    fn local(path: &Path, op: &'static str) -> impl FnOnce(io::Error) -> Error {
        move |source| Error::Io { path: path.to_path_buf(), op, source }
    }
    match fs.kind(dir).map_err(local(dir, "stat"))? {
        None => fs.create_dir_all(dir).map_err(local(dir, "create directory"))?,
        Some(FileKind::Dir) => {}
        Some(_) => return Err(Error::NotADirectory { path: dir.to_path_buf() }),
    }
    if fs.kind(&dir.join(META_FILE)).map_err(local(dir, "stat meta.zr"))?.is_some() {
        return Err(Error::InvalidArgument(format!(
            "{}: holds a store already (meta.zr); pull into an empty directory",
            dir.display()
        )));
    }
    let meta_info = &manifest.objects[META_FILE];
    for (name, info) in manifest.objects.iter().filter(|(n, _)| n.as_str() != META_FILE) {
        let path = dir.join(name);
        let file = fs.open(&path, OpenMode::Create).map_err(local(&path, "create"))?;
        file.set_len(0).map_err(local(&path, "truncate"))?;
        fetch_into(from, name, info, &*file, 0)?;
        file.sync(SyncKind::All).map_err(local(&path, "sync"))?; // SYNC P1
    }
    fs.sync_dir(dir).map_err(local(dir, "sync directory"))?; // SYNC P2
    let tmp = dir.join(META_TMP_FILE);
    let file = fs.open(&tmp, OpenMode::Create).map_err(local(&tmp, "create"))?;
    file.set_len(0).map_err(local(&tmp, "truncate"))?;
    file.set_len(META_BYTES.max(meta_info.size)).map_err(local(&tmp, "grow"))?;
    fetch_into(from, META_FILE, meta_info, &*file, 0)?;
    file.sync(SyncKind::All).map_err(local(&tmp, "sync"))?; // SYNC P3
    fs.rename(&tmp, &dir.join(META_FILE)).map_err(local(&tmp, "rename"))?;
    fs.sync_dir(dir).map_err(local(dir, "sync directory"))?; // SYNC P4
    Ok(())
}

/// Writes object `name` into `file` at `at`, in pieces, checking its CRC-32.
fn fetch_into(from: &Location, name: &str, info: &ObjectInfo, file: &dyn VfsFile, at: u64) -> Result<()> {
    let object = from.object(name, info);
    let remote = |source| Error::Io { path: from.url().into(), op: "fetch", source };
    if StoreFile::of(name).is_none_or(|file| info.size > file.bytes_max()) {
        let detail = format!("{} bytes, more than a store file has", info.size);
        return Err(remote(RemoteError::new(&object.url, RemoteErrorKind::Invalid, detail).into_io()));
    }
    let window = PIECE_BYTES * from.fetcher().options().max_in_flight.clamp(1, 8);
    let mut buf = vec![0u8; window.min(info.size as usize)];
    let mut hasher = crc32fast::Hasher::new();
    let mut offset = 0u64;
    while offset < info.size {
        let n = (info.size - offset).min(window as u64) as usize;
        let mut reads: Vec<BatchRead<'_>> = buf[..n]
            .chunks_mut(PIECE_BYTES)
            .enumerate()
            .map(|(k, piece)| BatchRead::new(offset + (k * PIECE_BYTES) as u64, piece))
            .collect();
        let objects = vec![&object; reads.len()];
        from.fetcher().read_batch(&objects, &mut reads).map_err(|e| remote(e.error))?;
        hasher.update(&buf[..n]);
        write_all_at(file, &buf[..n], at + offset).map_err(|source| Error::Io {
            path: name.into(),
            op: "write",
            source,
        })?;
        offset += n as u64;
    }
    let crc32 = hasher.finalize();
    if crc32 != info.crc32 {
        let detail = format!("CRC-32 {crc32:08x}, the manifest says {:08x}", info.crc32);
        return Err(remote(RemoteError::new(&object.url, RemoteErrorKind::Changed, detail).into_io()));
    }
    Ok(())
}

/// An in-memory store under `url`, for tests and examples: `object_store`'s
/// in-memory backend.
pub fn memory_location(url: &str, options: RemoteOptions) -> Location {
    let store: Arc<dyn ObjectStore> = Arc::new(object_store::memory::InMemory::new());
    Location::with_store(store, url, "", options).expect("an empty prefix parses")
}
