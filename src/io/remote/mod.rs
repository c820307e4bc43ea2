//! The read-only remote backend: a published store (or a sharded dataset,
//! or a table, whose stores lie under it) on S3-compatible object storage
//! as a [`Vfs`] (`docs/remote.md`). The store's own read-only open runs on
//! it unchanged, and the dataset's and the table's above it; this module
//! answers their file operations from the manifests and ranged GETs.
//!
//! - [`RemoteFs::connect`] reads `manifest.json` (the list of objects, with
//!   their sizes and entity tags) and nothing else; a file the manifest
//!   does not name does not exist, and every file is as long as the
//!   manifest says, so every table entry is validated against the object
//!   sizes before a byte is read.
//! - `meta.zr` (the header and the used part of the table, as published),
//!   `dict.zr` and `schema.json` are read whole, once, on first use.
//! - Chunk files are read by ranged GETs: the store's batched read
//!   ([`Vfs::read_batch`]) becomes coalesced requests, many in flight
//!   ([`fetch`]); the one-record read path ([`Map::bytes`]) is one GET.
//! - Nothing is ever written: writes fail with `ReadOnlyFilesystem`, which
//!   the store's read-only open takes as a frozen store (it reads through
//!   its chunk "mappings" and takes no readers' lock: nothing changes a
//!   published store but a new push, which the entity tags catch).
//!
//! Publishing and fetching whole stores is the `publish` module's, above
//! the dataset layer; it reaches object storage through [`Location`].

mod bucket;
mod cache;
mod fetch;
mod manifest;

pub use crate::format::MANIFEST_FILE;
pub use bucket::{BUCKET_LIST_MAX, BUCKET_READ_AHEAD, BucketFs};
pub use fetch::{FetchCounters, ObjectRef, RemoteError, RemoteErrorKind};
pub(crate) use manifest::is_version_of;
pub use manifest::{Manifest, ObjectInfo, Published};

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;

use super::{
    BatchError, BatchRead, FileKind, Handle, LockKind, Map, MapMode, OpenMode, ReadEngine, Residency, Stat, SyncKind,
    Then, Vfs, VfsFile,
};
use crate::format::{MANIFEST_BYTES_MAX, StoreFile, TABLE_FILE, column_of_dir_name, shard_of_dir_name};
use fetch::{Connect, Fetcher};

/// How the remote backend reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteOptions {
    /// Requests in flight at most, over every read of the store.
    pub max_in_flight: usize,
    /// Two reads of one object are one request when at most this many
    /// bytes lie between them (fetched and dropped).
    pub coalesce_gap: u64,
    /// Largest range one request asks for (a merge stops there; a longer
    /// read is split into requests this long when read whole).
    pub max_request_bytes: u64,
    /// How long one attempt may take, its body included.
    pub request_timeout: Duration,
    /// Attempts after the first, for transient failures (timeouts, 5xx,
    /// reset connections, short bodies).
    pub retries: u32,
    /// The first retry's delay (each next one doubles, jittered).
    pub backoff_initial: Duration,
    /// The longest delay between attempts.
    pub backoff_max: Duration,
    /// A local directory to cache fetched blocks of the objects in, for
    /// data read many times (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// The cache's size cap in bytes.
    pub cache_bytes: u64,
    /// The size of a cached block: a read through the cache fetches the
    /// whole blocks its bytes lie in.
    pub cache_block_bytes: u64,
}

impl Default for RemoteOptions {
    fn default() -> RemoteOptions {
        RemoteOptions {
            max_in_flight: 64,
            coalesce_gap: 16 << 10,
            max_request_bytes: 8 << 20,
            request_timeout: Duration::from_secs(30),
            retries: 4,
            backoff_initial: Duration::from_millis(100),
            backoff_max: Duration::from_secs(2),
            cache_dir: None,
            cache_bytes: 10 << 30,
            cache_block_bytes: 1 << 20,
        }
    }
}

impl RemoteOptions {
    /// The defaults, changed by `LOADERX_REMOTE_IN_FLIGHT`,
    /// `LOADERX_REMOTE_GAP` (bytes), `LOADERX_REMOTE_TIMEOUT_MS`,
    /// `LOADERX_REMOTE_RETRIES`, `LOADERX_REMOTE_CACHE_BYTES` and
    /// `LOADERX_REMOTE_CACHE_BLOCK` (bytes) where set to a number, and
    /// `LOADERX_REMOTE_CACHE_DIR` (the cache's directory) where set.
    pub fn from_env() -> RemoteOptions {
        let var = |name: &str| std::env::var(name).ok().and_then(|v| v.trim().parse::<u64>().ok());
        let mut o = RemoteOptions::default();
        if let Some(n) = var("LOADERX_REMOTE_IN_FLIGHT") {
            o.max_in_flight = n.clamp(1, 4096) as usize;
        }
        if let Some(n) = var("LOADERX_REMOTE_GAP") {
            o.coalesce_gap = n;
        }
        if let Some(n) = var("LOADERX_REMOTE_TIMEOUT_MS") {
            o.request_timeout = Duration::from_millis(n.max(1));
        }
        if let Some(n) = var("LOADERX_REMOTE_RETRIES") {
            o.retries = n.min(100) as u32;
        }
        if let Some(dir) = std::env::var_os("LOADERX_REMOTE_CACHE_DIR").filter(|d| !d.is_empty()) {
            o.cache_dir = Some(PathBuf::from(dir));
        }
        if let Some(n) = var("LOADERX_REMOTE_CACHE_BYTES") {
            o.cache_bytes = n;
        }
        if let Some(n) = var("LOADERX_REMOTE_CACHE_BLOCK") {
            o.cache_block_bytes = n.clamp(4096, 64 << 20);
        }
        o
    }
}

/// Whether `path` names a remote store (`s3://...`) rather than a directory.
pub fn is_url(path: &str) -> bool {
    path.starts_with("s3://") || path.starts_with("s3a://")
}

/// An `s3://bucket/prefix` URL split: the bucket URL and the prefix.
pub(crate) fn split_url(url: &str) -> io::Result<(String, ObjectPath)> {
    let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {why}"));
    let rest =
        url.strip_prefix("s3://").or_else(|| url.strip_prefix("s3a://")).ok_or_else(|| bad("not an s3:// URL"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err(bad("no bucket"));
    }
    let prefix = ObjectPath::parse(prefix.trim_matches('/')).map_err(|e| bad(&e.to_string()))?;
    Ok((format!("s3://{bucket}"), prefix))
}

/// The S3 client for `bucket_url`, configured from the standard
/// environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
/// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`), its own
/// retries off (the fetcher retries), the timeout a backstop to the
/// fetcher's.
fn s3_client(
    bucket_url: &str,
    options: &RemoteOptions,
    config: &[(object_store::aws::AmazonS3ConfigKey, String)],
) -> io::Result<Arc<dyn ObjectStore>> {
    use object_store::aws::AmazonS3Builder;
    use object_store::{ClientOptions, RetryConfig};
    let client = ClientOptions::new()
        .with_timeout(options.request_timeout + Duration::from_secs(1))
        .with_connect_timeout(options.request_timeout.min(Duration::from_secs(10)))
        .with_allow_http(std::env::var("AWS_ALLOW_HTTP").is_ok_and(|v| v == "true" || v == "1"));
    let retry = RetryConfig { max_retries: 0, ..RetryConfig::default() };
    let mut builder = AmazonS3Builder::from_env().with_url(bucket_url).with_client_options(client).with_retry(retry);
    if std::env::var_os("AWS_REGION").is_none() && std::env::var_os("AWS_DEFAULT_REGION").is_none() {
        builder = builder.with_region("us-east-1");
    }
    for (key, value) in config {
        builder = builder.with_config(*key, value);
    }
    let store =
        builder.build().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{bucket_url}: {e}")))?;
    Ok(Arc::new(store))
}

/// Where a store is published: a prefix of a bucket, and the client that
/// reaches it. What [`RemoteFs::open`] and publishing's `push` and `pull`
/// take; a sharded dataset's shards are locations under one
/// ([`Location::child`]).
#[derive(Clone, Debug)]
pub struct Location {
    /// The URL, no trailing slash (`s3://bucket/prefix`).
    root: String,
    prefix: ObjectPath,
    fetcher: Arc<Fetcher>,
}

impl Location {
    /// `url` (`s3://bucket/prefix`) on S3 or an S3-compatible server, the
    /// client configured from the standard environment (`AWS_ENDPOINT_URL`,
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
    /// `AWS_ALLOW_HTTP`).
    pub fn s3(url: &str, options: RemoteOptions) -> io::Result<Location> {
        Location::s3_with(url, options, &[])
    }

    /// As [`Location::s3`], with `config` (key, value) pairs over the
    /// environment's (keys as `object_store`'s `AmazonS3ConfigKey` parses
    /// them: `aws_endpoint`, `aws_access_key_id`, `aws_secret_access_key`, ...).
    pub fn s3_with(url: &str, options: RemoteOptions, config: &[(&str, &str)]) -> io::Result<Location> {
        use object_store::aws::AmazonS3ConfigKey;
        let (bucket, prefix) = split_url(url)?;
        let mut pairs = Vec::with_capacity(config.len());
        for (key, value) in config {
            let key: AmazonS3ConfigKey =
                key.parse().map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {key}: {e}")))?;
            pairs.push((key, value.to_string()));
        }
        let client_options = options.clone();
        let connect: Connect = Arc::new(move || s3_client(&bucket, &client_options, &pairs));
        Ok(Location::new(connect, url, prefix, options))
    }

    /// `prefix` of `store` (any `object_store` backend: the in-memory one
    /// in tests), named `url` in paths and messages.
    pub fn with_store(
        store: Arc<dyn ObjectStore>,
        url: &str,
        prefix: &str,
        options: RemoteOptions,
    ) -> io::Result<Location> {
        let prefix = ObjectPath::parse(prefix.trim_matches('/'))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{url}: {e}")))?;
        let connect: Connect = Arc::new(move || Ok(store.clone()));
        Ok(Location::new(connect, url, prefix, options))
    }

    fn new(connect: Connect, url: &str, prefix: ObjectPath, options: RemoteOptions) -> Location {
        let root = url.trim_end_matches('/').to_string();
        Location { root, prefix, fetcher: Arc::new(Fetcher::new(connect, options)) }
    }

    /// The URL (no trailing slash).
    pub fn url(&self) -> &str {
        &self.root
    }

    /// `name` under this prefix (a sharded dataset's shard directory),
    /// through the same client and its in-flight bound.
    pub fn child(&self, name: &str) -> Location {
        Location { root: format!("{}/{name}", self.root), prefix: self.key(name), fetcher: self.fetcher.clone() }
    }

    /// The object `name` under the prefix, as the manifest pins it.
    pub(crate) fn object(&self, name: &str, info: &ObjectInfo) -> ObjectRef {
        ObjectRef {
            key: self.key(info.key.as_deref().unwrap_or(name)),
            url: format!("{}/{name}", self.root),
            size: info.size,
            etag: info.etag.clone(),
        }
    }

    /// The prefix itself (the key every object under it starts with).
    pub(crate) fn prefix(&self) -> &ObjectPath {
        &self.prefix
    }

    pub(crate) fn key(&self, name: &str) -> ObjectPath {
        self.prefix.clone().join(name)
    }

    /// The client and its in-flight bound, for publishing's uploads,
    /// removals and fetches.
    pub(crate) fn fetcher(&self) -> &Fetcher {
        &self.fetcher
    }

    /// Requests and bytes so far through this location's client.
    pub fn counters(&self) -> FetchCounters {
        self.fetcher.counters()
    }
}

/// A published store, read through object storage; for a sharded
/// dataset, its shard 0, with the other shards' stores under it; for a
/// table, its `table.json`, with each column's dataset under it.
#[derive(Debug)]
pub struct RemoteFs {
    location: Location,
    /// The objects, by name.
    objects: BTreeMap<String, Arc<RemoteObject>>,
    manifest: Manifest,
    /// The stores published under this one's child directories (a sharded
    /// dataset's `shard-NNNNNN/`, shards 1 on; a table's `col-NNNN/`),
    /// each connected on first use; `None`: none is there.
    children: std::sync::Mutex<BTreeMap<String, Option<Arc<RemoteFs>>>>,
    /// The objects opened through this filesystem, its children's included:
    /// a file's [`Handle`] is its object's index here, by which
    /// [`Vfs::read_batch`] finds the object again.
    opened: std::sync::Mutex<Vec<Arc<RemoteObject>>>,
}

/// One object and, for the small files read whole, its bytes.
#[derive(Debug)]
struct RemoteObject {
    object: ObjectRef,
    whole: OnceLock<Arc<[u8]>>,
}

impl RemoteFs {
    /// The store at `url` (`s3://bucket/prefix`), its manifest read; a
    /// table published there is an error that says so.
    pub fn connect(url: &str, options: RemoteOptions) -> io::Result<RemoteFs> {
        RemoteFs::open(Location::s3(url, options)?)
    }

    /// The table at `url`, its manifest read; a store published there is an
    /// error that says so.
    pub fn connect_table(url: &str, options: RemoteOptions) -> io::Result<RemoteFs> {
        RemoteFs::open_table(Location::s3(url, options)?)
    }

    /// The store at `location`, its manifest read (and nothing else).
    pub fn open(location: Location) -> io::Result<RemoteFs> {
        RemoteFs::open_published(location, false)
    }

    /// The table at `location`, its manifest read (and nothing else).
    pub fn open_table(location: Location) -> io::Result<RemoteFs> {
        RemoteFs::open_published(location, true)
    }

    fn open_published(location: Location, table: bool) -> io::Result<RemoteFs> {
        let what = if table { "table" } else { "store" };
        let error = |kind, why: String| RemoteError::new(&format!("{}/{MANIFEST_FILE}", location.root), kind, why);
        let manifest = read_manifest(&location)?
            .ok_or_else(|| error(RemoteErrorKind::NotFound, format!("no {what} is published here")).into_io())?;
        if manifest.records().is_none() != table {
            let (found, open) = if table { ("store", "a dataset or store") } else { ("table", "a table") };
            let why = format!("a {found} is published here, not a {what}: open it as {open}");
            return Err(error(RemoteErrorKind::Invalid, why).into_io());
        }
        Ok(RemoteFs::with_manifest(location, manifest))
    }

    /// The store at `location` as `manifest` (read there) lists it.
    pub(crate) fn with_manifest(location: Location, manifest: Manifest) -> RemoteFs {
        let objects = manifest
            .objects
            .iter()
            .map(|(name, info)| {
                (name.clone(), Arc::new(RemoteObject { object: location.object(name, info), whole: OnceLock::new() }))
            })
            .collect();
        RemoteFs { location, objects, manifest, children: Default::default(), opened: Default::default() }
    }

    /// The store's URL: the path to open it at (`Zrecord::open_in`).
    pub fn root(&self) -> &str {
        &self.location.root
    }

    /// The manifest read at connect.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Requests and bytes so far (the benchmarks' figures).
    pub fn counters(&self) -> FetchCounters {
        self.location.fetcher.counters()
    }

    /// The store of the child directory `path` lies in (`ROOT/shard-NNNNNN`
    /// of a store, shards 1 on; `ROOT/col-NNNN` of a table; or below it),
    /// connected on first use; `None` for a path of this manifest's own,
    /// or a child directory where nothing is published.
    fn child_of(&self, path: &Path) -> io::Result<Option<Arc<RemoteFs>>> {
        let Some(rest) = path.to_str().and_then(|p| p.strip_prefix(self.root())?.strip_prefix('/')) else {
            return Ok(None);
        };
        let name = rest.split('/').next().unwrap_or_default();
        let is_child = match self.manifest.published {
            Published::Store { .. } => shard_of_dir_name(name).is_some_and(|k| k > 0),
            Published::Table { .. } => column_of_dir_name(name).is_some(),
        };
        if !is_child {
            return Ok(None);
        }
        let mut children = self.children.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(child) = children.get(name) {
            return Ok(child.clone());
        }
        let location = self.location.child(name);
        let child = match read_manifest(&location)? {
            None => None,
            Some(manifest) if manifest.records().is_none() => {
                let why = "a table's manifest where a store's is expected";
                return Err(RemoteError::new(location.url(), RemoteErrorKind::Invalid, why).into_io());
            }
            Some(manifest) => Some(Arc::new(RemoteFs::with_manifest(location, manifest))),
        };
        children.insert(name.to_string(), child.clone());
        Ok(child)
    }

    /// The object `path` names, if the manifest lists it.
    fn object(&self, path: &Path) -> Option<&Arc<RemoteObject>> {
        let name = path.to_str()?.strip_prefix(self.root())?.strip_prefix('/')?;
        self.objects.get(name)
    }

    fn is_root(&self, path: &Path) -> bool {
        path.to_str().is_some_and(|p| p.trim_end_matches('/') == self.root())
    }

    /// The object `path` names, in this store or a child's (`NotFound`
    /// if no manifest lists it).
    fn find(&self, path: &Path) -> io::Result<Arc<RemoteObject>> {
        if let Some(child) = self.child_of(path)? {
            return child.find(path);
        }
        if self.is_root(path) {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: a directory", path.display())));
        }
        self.object(path).cloned().ok_or_else(|| not_found(&path.display().to_string()))
    }

    /// `object` open, under its handle in this filesystem.
    fn file(&self, object: Arc<RemoteObject>) -> RemoteFile {
        let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        let index = match opened.iter().position(|o| Arc::ptr_eq(o, &object)) {
            Some(index) => index,
            None => {
                opened.push(object.clone());
                opened.len() - 1
            }
        };
        RemoteFile { object, fetcher: self.location.fetcher.clone(), handle: Handle(index as u64) }
    }
}

/// What is published at `url` (`s3://bucket/prefix`): a store (or a
/// sharded dataset's shard 0) or a table, and its length, by its manifest;
/// `None` where nothing is.
pub fn published_at(url: &str, options: RemoteOptions) -> io::Result<Option<Published>> {
    Ok(read_manifest(&Location::s3(url, options)?)?.map(|m| m.published))
}

/// The manifest at `location`, `None` if there is none (an error for an
/// unknown bucket, refused credentials, a malformed manifest).
pub(crate) fn read_manifest(location: &Location) -> io::Result<Option<Manifest>> {
    let url = format!("{}/{MANIFEST_FILE}", location.root);
    let key = location.key(MANIFEST_FILE);
    let fetcher = &location.fetcher;
    let text = fetcher.run(async |store| {
        use object_store::ObjectStoreExt;
        let timeout = fetcher.options().request_timeout;
        let get = async { store.get(&key).await?.bytes().await };
        let error = |kind, detail: String| RemoteError::new(&url, kind, detail).into_io();
        match tokio::time::timeout(timeout, get).await {
            Err(_) => Err(error(RemoteErrorKind::Timeout, format!("no answer within {timeout:?}"))),
            Ok(Err(e @ object_store::Error::NotFound { .. })) if is_no_such_bucket(&e) => {
                Err(error(RemoteErrorKind::NotFound, format!("no such bucket: {e}")))
            }
            Ok(Err(object_store::Error::NotFound { .. })) => Ok(None),
            Ok(Err(
                e @ (object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }),
            )) => Err(error(RemoteErrorKind::Denied, e.to_string())),
            Ok(Err(e)) => Err(error(RemoteErrorKind::Unavailable, e.to_string())),
            Ok(Ok(bytes)) if bytes.len() as u64 > MANIFEST_BYTES_MAX => {
                Err(error(RemoteErrorKind::Invalid, format!("{} bytes, more than a manifest has", bytes.len())))
            }
            Ok(Ok(bytes)) => Ok(Some(bytes)),
        }
    })?;
    let Some(text) = text else { return Ok(None) };
    let manifest =
        Manifest::decode(&text).map_err(|why| RemoteError::new(&url, RemoteErrorKind::Invalid, why).into_io())?;
    Ok(Some(manifest))
}

/// Whether a not-found answer is the bucket's (S3's `NoSuchBucket`).
fn is_no_such_bucket(error: &object_store::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = Some(error);
    while let Some(e) = source {
        if e.to_string().contains("NoSuchBucket") {
            return true;
        }
        source = e.source();
    }
    false
}

fn not_found(url: &str) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{url}: not in the store's manifest"))
}

fn read_only(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::ReadOnlyFilesystem, format!("a remote store is read-only ({what})"))
}

impl Vfs for RemoteFs {
    fn kind(&self, path: &Path) -> io::Result<Option<FileKind>> {
        if let Some(child) = self.child_of(path)? {
            return child.kind(path);
        }
        Ok(if self.is_root(path) { Some(FileKind::Dir) } else { self.object(path).map(|_| FileKind::File) })
    }

    fn create_dir_all(&self, _: &Path) -> io::Result<()> {
        Err(read_only("create a directory"))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        if let Some(child) = self.child_of(path)? {
            return child.list_dir(path);
        }
        if !self.is_root(path) {
            return Err(not_found(&path.display().to_string()));
        }
        Ok(self.objects.keys().cloned().collect())
    }

    fn sync_dir(&self, _: &Path) -> io::Result<()> {
        Err(read_only("sync"))
    }

    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn VfsFile>> {
        match mode {
            OpenMode::Read => {}
            OpenMode::ReadDirect => {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, "a remote store has no O_DIRECT reads"));
            }
            OpenMode::Write | OpenMode::Create => return Err(read_only("open for writing")),
        }
        Ok(Box::new(self.file(self.find(path)?)))
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

    /// The reads are fetched together (coalesced, many requests in
    /// flight), then each read's `then` runs.
    fn read_batch(
        &self,
        files: &[&dyn VfsFile],
        reads: &mut [BatchRead<'_>],
        then: Then<'_>,
    ) -> Result<(), BatchError> {
        // Each file's object, found by its handle (a run of reads of one
        // file finds it once).
        let mut held: Vec<(Handle, Arc<RemoteObject>)> = Vec::new();
        let mut which = Vec::with_capacity(files.len());
        {
            let opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
            for (index, file) in files.iter().enumerate() {
                let handle = file.handle();
                if held.last().is_none_or(|(last, _)| *last != handle) {
                    let Some(object) = opened.get(handle.0 as usize) else {
                        let error = io::Error::new(io::ErrorKind::InvalidInput, "not a file of this remote store");
                        return Err(BatchError { index, error });
                    };
                    held.push((handle, object.clone()));
                }
                which.push(held.len() - 1);
            }
        }
        let objects: Vec<&ObjectRef> = which.iter().map(|&k| &held[k].1.object).collect();
        self.location.fetcher.read_batch(&objects, reads)?;
        reads.iter_mut().enumerate().for_each(|(k, read)| then(k, read));
        Ok(())
    }
}

/// An object of the store, open.
#[derive(Debug)]
struct RemoteFile {
    object: Arc<RemoteObject>,
    fetcher: Arc<Fetcher>,
    /// The object's index among those its filesystem opened.
    handle: Handle,
}

impl RemoteFile {
    /// The file's bytes, fetched once, for the small files read whole.
    fn whole(&self) -> Option<io::Result<Arc<[u8]>>> {
        let name = self.object.object.url.rsplit('/').next()?;
        let small = name == TABLE_FILE || StoreFile::of(name).is_some_and(|file| !matches!(file, StoreFile::Chunk(_)));
        if !small {
            return None;
        }
        if let Some(bytes) = self.object.whole.get() {
            return Some(Ok(bytes.clone()));
        }
        Some(self.fetcher.read_whole(&self.object.object, u64::MAX).map(|bytes| {
            let bytes: Arc<[u8]> = bytes.into();
            self.object.whole.get_or_init(|| bytes).clone()
        }))
    }

    /// `len` bytes at `offset` (below the object's size).
    fn range(&self, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let mut buf = vec![0; len];
        self.fetcher
            .read_batch(&[&self.object.object], &mut [BatchRead::new(offset, &mut buf)])
            .map_err(|e| e.error)?;
        Ok(buf)
    }
}

impl VfsFile for RemoteFile {
    fn stat(&self) -> io::Result<Stat> {
        Ok(Stat::of_len(self.object.object.size))
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let size = self.object.object.size;
        let n = (size.saturating_sub(offset)).min(buf.len() as u64) as usize;
        if n == 0 {
            return Ok(0);
        }
        if let Some(whole) = self.whole() {
            buf[..n].copy_from_slice(&whole?[offset as usize..][..n]);
            return Ok(n);
        }
        let bytes = self.range(offset, n)?;
        buf[..n].copy_from_slice(&bytes);
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

    fn handle(&self) -> Handle {
        self.handle
    }

    fn lock(&self, kind: LockKind, _wait: bool) -> io::Result<bool> {
        match kind {
            LockKind::Shared => Ok(true),
            LockKind::Exclusive => Err(read_only("lock")),
        }
    }

    fn map(&self, len: usize, mode: MapMode) -> io::Result<Box<dyn Map>> {
        match mode {
            MapMode::Shared { writable: true } => Err(read_only("map for writing")),
            MapMode::Shared { writable: false } => {
                if len as u64 > self.object.object.size {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "a mapping past the object's end"));
                }
                let bytes = match self.whole() {
                    Some(whole) => whole?,
                    None => self.range(0, len)?.into(),
                };
                Ok(Box::new(MemoryMap { bytes, len }))
            }
            MapMode::Read => {
                // A chunk file's "mapping": each range asked for is one GET.
                let file =
                    RemoteFile { object: self.object.clone(), fetcher: self.fetcher.clone(), handle: self.handle };
                Ok(Box::new(crate::io::positional::PositionalMap::new(file, len)))
            }
        }
    }
}

/// A read-only "mapping" of `meta.zr`: its bytes, fetched whole.
#[derive(Debug)]
struct MemoryMap {
    bytes: Arc<[u8]>,
    len: usize,
}

impl Map for MemoryMap {
    unsafe fn read(&self, offset: usize, dst: &mut [u8]) {
        dst.copy_from_slice(&self.bytes[..self.len][offset..offset + dst.len()]);
    }

    fn bytes<'a>(&'a self, offset: u64, len: usize, _: &'a mut Vec<u8>) -> io::Result<&'a [u8]> {
        usize::try_from(offset)
            .ok()
            .and_then(|start| self.bytes[..self.len].get(start..start.checked_add(len)?))
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "read past the mapping"))
    }

    unsafe fn write(&self, _: usize, _: &[u8]) {
        panic!("a write into a read-only mapping");
    }

    unsafe fn store_word(&self, _: usize, _: u64) {
        panic!("a store into a read-only mapping");
    }

    fn load_word(&self, offset: usize) -> u64 {
        let word: [u8; 8] = self.bytes[..self.len][offset..offset + 8].try_into().expect("8 bytes");
        u64::from_ne_bytes(word)
    }

    fn flush_range(&self, _: usize, _: usize) -> io::Result<()> {
        Ok(())
    }

    fn residency(&self, _: u64, _: usize) -> Residency {
        Residency::Memory
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_bucket_and_prefix() {
        let (bucket, prefix) = split_url("s3://data/sets/one/").unwrap();
        assert_eq!((bucket.as_str(), prefix.as_ref()), ("s3://data", "sets/one"));
        let (bucket, prefix) = split_url("s3://data").unwrap();
        assert_eq!((bucket.as_str(), prefix.as_ref()), ("s3://data", ""));
        assert!(split_url("s3:///x").is_err());
        assert!(split_url("/local/dir").is_err());
        assert!(is_url("s3://a/b") && !is_url("a/s3://b"));
    }
}
