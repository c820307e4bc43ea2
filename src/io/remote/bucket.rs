//! A bucket's objects as a read-only filesystem ([`BucketFs`]): how an
//! import reads its input files at `s3://bucket/key` (`docs/import.md`,
//! "Inputs on object storage"). [`RemoteFs`](super::RemoteFs) reads a
//! published store by its manifest; this reads any objects, found by
//! HEAD and LIST:
//!
//! - a path is a file if its key is an object, a directory if some key
//!   lies under it (`key/`), the bucket's root always;
//! - a directory's entries are the names one level below it, from a
//!   listing bounded in objects ([`BUCKET_LIST_MAX`]);
//! - a file's length, time and entity tag are taken once (from the listing
//!   that found it, or a HEAD); every read asks for that entity tag, so an
//!   object replaced during an import is an error, never mixed bytes;
//! - reads are ranged GETs through the remote backend's fetcher (its
//!   timeouts, retries and in-flight bound); a read shorter than
//!   [`BUCKET_READ_AHEAD`] fetches that much and serves the next reads
//!   from it, so a tar's headers and a JSON Lines file's lines are not one
//!   request each.

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex};

use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};

use super::fetch::{Fetcher, ObjectRef, RemoteError, RemoteErrorKind};
use super::{Location, RemoteOptions, split_url};
use crate::io::{
    BatchRead, FileKind, Handle, LockKind, Map, MapMode, OpenMode, ReadEngine, Stat, SyncKind, Vfs, VfsFile,
};

/// Objects one directory listing reads at most (a bucket's listing is
/// untrusted: it never grows a list without bound).
pub const BUCKET_LIST_MAX: usize = 1 << 20;

/// The bytes a short read fetches, the rest kept for the reads after it.
pub const BUCKET_READ_AHEAD: usize = 4 << 20;

/// The objects of one bucket, read-only, paths `s3://bucket/key`.
#[derive(Debug)]
pub struct BucketFs {
    /// The bucket (`s3://bucket`), its prefix the bucket's root.
    location: Location,
    /// What listings and HEADs found, by key: a file opened after its
    /// directory was listed costs no request.
    known: Mutex<HashMap<String, Arc<Object>>>,
}

/// An object as first seen: the reads pin its size and entity tag.
#[derive(Debug)]
struct Object {
    object: ObjectRef,
    /// Its last modification, nanoseconds since the Unix epoch.
    modified: Option<u64>,
}

impl BucketFs {
    /// The bucket of `url` (`s3://bucket/...`), the client configured from
    /// the standard environment as [`Location::s3`]'s.
    pub fn connect(url: &str, options: RemoteOptions) -> io::Result<BucketFs> {
        let (bucket, _) = split_url(url)?;
        Ok(BucketFs::new(Location::s3(&bucket, options)?))
    }

    /// The objects under `location` (a bucket, or a prefix of one in tests:
    /// paths are `location`'s URL and a key below it).
    pub fn new(location: Location) -> BucketFs {
        BucketFs { location, known: Mutex::new(HashMap::new()) }
    }

    /// Requests and bytes so far through this bucket's client.
    pub fn counters(&self) -> super::FetchCounters {
        self.location.counters()
    }

    /// The bucket's URL, the root of every path.
    pub fn root(&self) -> &str {
        self.location.url()
    }

    /// The key `path` names below the root (`""` for the root itself).
    fn key(&self, path: &Path) -> io::Result<String> {
        let bad = || io::Error::new(io::ErrorKind::NotFound, format!("{}: not in {}", path.display(), self.root()));
        let text = path.to_str().ok_or_else(bad)?;
        let rest = text.strip_prefix(self.root()).ok_or_else(bad)?;
        if !rest.is_empty() && !rest.starts_with('/') {
            return Err(bad());
        }
        Ok(rest.trim_matches('/').to_string())
    }

    /// The object key of `key` below the root: `NotFound` for a key no
    /// object can have (an empty segment, `.` or `..`).
    fn object_key(&self, key: &str) -> io::Result<ObjectPath> {
        let full = match (self.location.prefix.as_ref(), key) {
            (prefix, "") => prefix.to_string(),
            ("", key) => key.to_string(),
            (prefix, key) => format!("{prefix}/{key}"),
        };
        ObjectPath::parse(&full).map_err(|e| {
            io::Error::new(io::ErrorKind::NotFound, format!("{}/{key}: no object has this key ({e})", self.root()))
        })
    }

    fn fetcher(&self) -> &Fetcher {
        self.location.fetcher()
    }

    /// `f` on the client, under the request timeout; an error names `url`.
    fn call<T>(
        &self,
        url: &str,
        f: impl AsyncFnOnce(Arc<dyn ObjectStore>) -> object_store::Result<T>,
    ) -> io::Result<Result<T, object_store::Error>> {
        let timeout = self.fetcher().options().request_timeout;
        self.fetcher().run(async |store| match tokio::time::timeout(timeout, f(store)).await {
            Ok(result) => Ok(result),
            Err(_) => {
                Err(RemoteError::new(url, RemoteErrorKind::Timeout, format!("no answer within {timeout:?}")).into_io())
            }
        })
    }

    /// The object at `key`, from what a listing found or by a HEAD;
    /// `None` if there is none.
    fn object(&self, key: &str) -> io::Result<Option<Arc<Object>>> {
        if key.is_empty() {
            return Ok(None);
        }
        if let Some(found) = self.known.lock().unwrap_or_else(|e| e.into_inner()).get(key) {
            return Ok(Some(found.clone()));
        }
        let url = format!("{}/{key}", self.root());
        let location = match self.object_key(key) {
            Ok(location) => location,
            Err(_) => return Ok(None),
        };
        match self.call(&url, async |store| store.head(&location).await)? {
            Ok(meta) => Ok(Some(self.remember(meta))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(failure(&url, e)),
        }
    }

    /// `meta` kept as a known object.
    fn remember(&self, meta: ObjectMeta) -> Arc<Object> {
        let key = self.relative(&meta.location);
        let object = Arc::new(Object {
            object: ObjectRef {
                key: meta.location.clone(),
                url: format!("{}/{key}", self.root()),
                size: meta.size,
                etag: meta.e_tag.clone(),
            },
            modified: meta.last_modified.timestamp_nanos_opt().and_then(|n| u64::try_from(n).ok()),
        });
        self.known.lock().unwrap_or_else(|e| e.into_inner()).insert(key, object.clone());
        object
    }

    /// A key of the bucket relative to the root's prefix.
    fn relative(&self, location: &ObjectPath) -> String {
        let full = location.as_ref();
        full.strip_prefix(self.location.prefix.as_ref()).unwrap_or(full).trim_start_matches('/').to_string()
    }

    /// The objects under `key/` (every one below the root for `""`), at
    /// most `limit`; more is an error unless `limit` is 1 (an existence
    /// check).
    fn list(&self, key: &str, limit: usize) -> io::Result<Vec<ObjectMeta>> {
        use futures::TryStreamExt;
        let url = if key.is_empty() { self.root().to_string() } else { format!("{}/{key}", self.root()) };
        let prefix = self.object_key(key)?;
        let found = self.call(&url, async |store| {
            let mut stream = store.list(Some(&prefix));
            let mut out = Vec::new();
            while let Some(meta) = stream.try_next().await? {
                out.push(meta);
                if out.len() > limit {
                    break;
                }
            }
            Ok(out)
        })?;
        let found = found.map_err(|e| failure(&url, e))?;
        if found.len() > limit && limit > 1 {
            let detail = format!("more than {limit} objects under it: name the files, or a narrower prefix");
            return Err(RemoteError::new(&url, RemoteErrorKind::Invalid, detail).into_io());
        }
        Ok(found)
    }
}

/// An object store error as an I/O error naming `url`.
fn failure(url: &str, error: object_store::Error) -> io::Error {
    let kind = match error {
        object_store::Error::NotFound { .. } => RemoteErrorKind::NotFound,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. } => {
            RemoteErrorKind::Denied
        }
        _ => RemoteErrorKind::Unavailable,
    };
    RemoteError::new(url, kind, error.to_string()).into_io()
}

fn read_only(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::ReadOnlyFilesystem, format!("a bucket's objects are read-only here ({what})"))
}

impl Vfs for BucketFs {
    fn kind(&self, path: &Path) -> io::Result<Option<FileKind>> {
        let key = match self.key(path) {
            Ok(key) => key,
            Err(_) => return Ok(None),
        };
        if key.is_empty() {
            return Ok(Some(FileKind::Dir));
        }
        if self.object(&key)?.is_some() {
            return Ok(Some(FileKind::File));
        }
        Ok((!self.list(&key, 1)?.is_empty()).then_some(FileKind::Dir))
    }

    fn create_dir_all(&self, _: &Path) -> io::Result<()> {
        Err(read_only("create a directory"))
    }

    /// The names one level below `path`: its objects' and its
    /// subdirectories' (a key's next segment).
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let key = self.key(path)?;
        let mut names = Vec::new();
        for meta in self.list(&key, BUCKET_LIST_MAX)? {
            let below = self.relative(&meta.location);
            let rest = if key.is_empty() { below.as_str() } else { below.strip_prefix(&key).unwrap_or(&below) };
            let rest = rest.trim_start_matches('/');
            match rest.split_once('/') {
                Some((dir, _)) => names.push(dir.to_string()),
                None => {
                    names.push(rest.to_string());
                    self.remember(meta);
                }
            }
        }
        names.sort_unstable();
        names.dedup();
        if names.is_empty() && !key.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, format!("{}: no object under it", path.display())));
        }
        Ok(names)
    }

    fn sync_dir(&self, _: &Path) -> io::Result<()> {
        Err(read_only("sync"))
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn VfsFile>> {
        if mode != OpenMode::Read {
            return Err(read_only("open for writing or O_DIRECT"));
        }
        let key = self.key(path)?;
        let object = self
            .object(&key)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{}: no such object", path.display())))?;
        let fetcher = self.location.fetcher.clone();
        Ok(Box::new(BucketFile { object, fetcher, ahead: Mutex::new(None) }))
    }

    fn remove_file(&self, _: &Path) -> io::Result<()> {
        Err(read_only("remove"))
    }

    fn rename(&self, _: &Path, _: &Path) -> io::Result<()> {
        Err(read_only("rename"))
    }

    fn read_engine(&self) -> ReadEngine {
        ReadEngine::Remote
    }
}

/// An object open for reading.
#[derive(Debug)]
struct BucketFile {
    object: Arc<Object>,
    fetcher: Arc<Fetcher>,
    /// The bytes the last short read fetched, and where they start.
    ahead: Mutex<Option<(u64, Arc<[u8]>)>>,
}

impl BucketFile {
    /// `len` bytes at `offset` (inside the object), one ranged GET.
    fn fetch(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.fetcher
            .read_batch(&[&self.object.object], &mut [BatchRead::new(offset, &mut buf)])
            .map_err(|e| e.error)?;
        Ok(buf)
    }
}

impl VfsFile for BucketFile {
    fn stat(&self) -> io::Result<Stat> {
        let etag = self.object.object.etag.as_deref();
        Ok(Stat { modified: self.object.modified, version: etag.map(fnv64), ..Stat::of_len(self.object.object.size) })
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let size = self.object.object.size;
        let n = size.saturating_sub(offset).min(buf.len() as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        if n >= BUCKET_READ_AHEAD {
            buf[..n].copy_from_slice(&self.fetch(offset, n)?);
            return Ok(n);
        }
        let mut ahead = self.ahead.lock().unwrap_or_else(|e| e.into_inner());
        let held =
            |(start, bytes): &(u64, Arc<[u8]>)| offset >= *start && offset - start + n as u64 <= bytes.len() as u64;
        if !ahead.as_ref().is_some_and(held) {
            let len = size.saturating_sub(offset).min(BUCKET_READ_AHEAD as u64) as usize;
            *ahead = Some((offset, self.fetch(offset, len)?.into()));
        }
        let (start, bytes) = ahead.as_ref().expect("fetched above");
        let at = (offset - start) as usize;
        buf[..n].copy_from_slice(&bytes[at..at + n]);
        Ok(n)
    }

    fn write_at(&self, _: &[u8], _: u64) -> io::Result<usize> {
        Err(read_only("write"))
    }

    fn set_len(&self, _: u64) -> io::Result<()> {
        Err(read_only("set_len"))
    }

    fn sync(&self, _: SyncKind) -> io::Result<()> {
        Err(read_only("sync"))
    }

    fn lock(&self, kind: LockKind, _wait: bool) -> io::Result<bool> {
        match kind {
            LockKind::Shared => Ok(true),
            LockKind::Exclusive => Err(read_only("lock")),
        }
    }

    fn map(&self, _: usize, _: MapMode) -> io::Result<Box<dyn Map>> {
        Err(io::Error::new(io::ErrorKind::Unsupported, "a bucket's object is read by ranges, not mapped"))
    }

    /// One handle for every object: this filesystem's batches are the
    /// default one read after another, which never resolves a handle.
    fn handle(&self) -> Handle {
        Handle(0)
    }
}

/// FNV-1a, 64 bits: an entity tag as [`Stat::version`].
fn fnv64(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}
