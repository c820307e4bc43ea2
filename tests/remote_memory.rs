//! The remote backend on `object_store`'s in-memory backend: push, open,
//! gather and pull round trips; what an open reads; coalescing and the
//! in-flight bound; retries, timeouts, missing, replaced and truncated
//! objects, all through a fault-injecting wrapper of the in-memory store.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use loaderx::io::remote::{Location, RemoteError, RemoteErrorKind, RemoteFs, RemoteOptions};
use loaderx::publish::{pull, push};
use loaderx::{Codec, Corruption, Error, Options, ReadMode, VerifyReads, Zrecord};
use object_store::memory::InMemory;
use object_store::path::Path as ObjectPath;
use object_store::{
    CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMultipartOptions, PutOptions, PutPayload, PutResult,
};

/// What the wrapper does to GETs of chunk files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    None,
    /// The first `n` GETs fail with a transient error.
    FailFirst(u32),
    /// Every GET fails with a transient error.
    FailAlways,
    /// Every GET never answers.
    Stall,
    /// Every GET answers with the low bit of its first byte flipped (bit
    /// rot at rest or in transit, which no entity tag catches).
    Rot,
}

/// The in-memory store, with faults injected into GETs of `*.zr` chunk
/// files and the largest number of GETs seen in flight at once.
#[derive(Debug)]
struct Faulty {
    inner: InMemory,
    fault: Mutex<Fault>,
    /// A key whose PUTs fail (not transiently), if any.
    refuse_put: Mutex<Option<String>>,
    /// PUTs and copies so far, and the one that fails (counting from 0), if any.
    writes: AtomicUsize,
    fail_write: Mutex<Option<usize>>,
    failed: AtomicU32,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl fmt::Display for Faulty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Faulty")
    }
}

impl Faulty {
    fn new() -> Arc<Faulty> {
        Arc::new(Faulty {
            inner: InMemory::new(),
            fault: Mutex::new(Fault::None),
            refuse_put: Mutex::new(None),
            writes: AtomicUsize::new(0),
            fail_write: Mutex::new(None),
            failed: AtomicU32::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        })
    }

    /// Counts a PUT or copy; an error if it is the one to fail.
    fn write(&self, key: &ObjectPath) -> object_store::Result<()> {
        let n = self.writes.fetch_add(1, Ordering::SeqCst);
        let refused = self.refuse_put.lock().unwrap().as_deref() == Some(key.as_ref());
        if refused || *self.fail_write.lock().unwrap() == Some(n) {
            return Err(object_store::Error::Generic { store: "Faulty", source: "403 refused".into() });
        }
        Ok(())
    }

    fn set(&self, fault: Fault) {
        *self.fault.lock().unwrap() = fault;
        self.failed.store(0, Ordering::SeqCst);
    }
}

/// `result` with the low bit of its first byte flipped.
async fn rot(result: GetResult) -> object_store::Result<GetResult> {
    let (meta, range) = (result.meta.clone(), result.range.clone());
    let (attributes, extensions) = (result.attributes.clone(), result.extensions.clone());
    let mut bytes = result.bytes().await?.to_vec();
    if let Some(first) = bytes.first_mut() {
        *first ^= 1;
    }
    let body = futures::stream::once(async move { Ok(bytes::Bytes::from(bytes)) }).boxed();
    Ok(GetResult { payload: GetResultPayload::Stream(body), meta, range, attributes, extensions })
}

fn transient() -> object_store::Error {
    object_store::Error::Generic { store: "Faulty", source: "503 Slow Down".into() }
}

#[async_trait::async_trait]
impl ObjectStore for Faulty {
    async fn put_opts(
        &self,
        location: &ObjectPath,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.write(location)?;
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &ObjectPath,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.write(location)?;
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &ObjectPath, options: GetOptions) -> object_store::Result<GetResult> {
        let chunk =
            location.filename().is_some_and(|n| n.ends_with(".zr") && !["meta.zr", "dict.zr", "sums.zr"].contains(&n));
        let fault = *self.fault.lock().unwrap();
        if chunk {
            match fault {
                Fault::None | Fault::Rot => {}
                Fault::FailFirst(n) if self.failed.fetch_add(1, Ordering::SeqCst) >= n => {}
                Fault::FailFirst(_) | Fault::FailAlways => return Err(transient()),
                Fault::Stall => futures::future::pending::<()>().await,
            }
        }
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        // Long enough for the requests of one batch to overlap.
        tokio::time::sleep(Duration::from_millis(2)).await;
        let result = self.inner.get_opts(location, options).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        match result {
            Ok(result) if chunk && fault == Fault::Rot => rot(result).await,
            result => result,
        }
    }

    async fn get_ranges(
        &self,
        location: &ObjectPath,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<bytes::Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<ObjectPath>>,
    ) -> BoxStream<'static, object_store::Result<ObjectPath>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&ObjectPath>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    async fn list_with_delimiter(&self, prefix: Option<&ObjectPath>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &ObjectPath, to: &ObjectPath, options: CopyOptions) -> object_store::Result<()> {
        self.write(to)?;
        self.inner.copy_opts(from, to, options).await
    }
}

/// Record `k`: its bytes say which record they are.
fn record(k: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((k * 131 + i as u64 * 7) % 251) as u8 ^ (i / 97) as u8).collect()
}

/// A local store of `n` records of `len` bytes each, `codec`, with a dictionary for `ZstdDict`.
fn local_store(dir: &std::path::Path, n: usize, len: usize, codec: Codec) -> Vec<Vec<u8>> {
    let store = Zrecord::open(dir).unwrap();
    let records: Vec<Vec<u8>> = (0..n as u64).map(|k| record(k, len)).collect();
    let flat: Vec<u8> = records.concat();
    if codec == Codec::ZstdDict {
        store.train_dict(&flat, &vec![len; n], 16 << 10).unwrap();
    }
    store.append(&flat, n, len, codec).unwrap();
    records
}

fn options() -> RemoteOptions {
    RemoteOptions {
        request_timeout: Duration::from_millis(500),
        backoff_initial: Duration::from_millis(1),
        backoff_max: Duration::from_millis(5),
        ..RemoteOptions::default()
    }
}

fn location(store: &Arc<Faulty>, options: RemoteOptions) -> Location {
    Location::with_store(store.clone(), "s3://test/sets/one", "sets/one", options).unwrap()
}

fn open(store: &Arc<Faulty>, options: RemoteOptions) -> (Zrecord, Arc<RemoteFs>) {
    let fs = Arc::new(RemoteFs::open(location(store, options)).unwrap());
    (Zrecord::open_remote(fs.clone(), Options::default()).unwrap(), fs)
}

/// The remote error inside a store error.
fn remote_error(error: &Error) -> &RemoteError {
    match error {
        Error::Io { source, .. } => source.get_ref().and_then(|e| e.downcast_ref::<RemoteError>()),
        _ => None,
    }
    .unwrap_or_else(|| panic!("not a remote error: {error}"))
}

fn gather_all(store: &Zrecord, len: usize) -> Result<Vec<u8>, Error> {
    let all: Vec<u64> = (0..u64::from(store.len())).collect();
    let mut out = vec![0u8; all.len() * len];
    store.gather(&all, &mut out, len).map(|()| out)
}

#[test]
fn every_codec_reads_back_as_written() {
    for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
        let dir = tempfile::tempdir().unwrap();
        let records = local_store(dir.path(), 500, 300, codec);
        let remote = Faulty::new();
        let report = push(dir.path(), &location(&remote, options())).unwrap();
        assert_eq!(report.records, 500);
        let (store, _) = open(&remote, options());
        assert!(store.is_read_only());
        assert_eq!(store.len(), 500);
        assert_eq!(store.has_dict(), codec == Codec::ZstdDict);
        assert_eq!(gather_all(&store, 300).unwrap(), records.concat(), "{codec:?}");
        let picks = [499u64, 3, 3, 250, 0];
        let mut out = vec![0u8; picks.len() * 300];
        store.gather(&picks, &mut out, 300).unwrap();
        for (k, &i) in picks.iter().enumerate() {
            assert_eq!(&out[k * 300..][..300], &records[i as usize][..], "{codec:?} record {i}");
        }
        assert_eq!(store.get(42).unwrap(), records[42]);
        let report = store.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        let local = Zrecord::open_read_only(dir.path()).unwrap();
        assert_eq!(store.stats().unwrap(), local.stats().unwrap());
    }
}

#[test]
fn an_open_reads_the_manifest_the_used_table_and_the_dictionary_only() {
    let dir = tempfile::tempdir().unwrap();
    local_store(dir.path(), 1000, 100, Codec::ZstdDict);
    let remote = Faulty::new();
    push(dir.path(), &location(&remote, options())).unwrap();
    let (store, fs) = open(&remote, options());
    let objects = &fs.manifest().objects;
    assert_eq!(objects["meta.zr"].size, 16 + 16 * 1000, "the used part of meta.zr is published");
    let opened = fs.counters();
    assert_eq!(objects["sums.zr"].size, 64 + 8 * 1000, "the slots of the published records");
    assert_eq!(opened.requests, 3, "meta.zr, sums.zr and dict.zr, one GET each");
    assert_eq!(opened.bytes, objects["meta.zr"].size + objects["sums.zr"].size + objects["dict.zr"].size);
    store.get(7).unwrap();
    assert_eq!(fs.counters().requests, 4, "a record is one GET");
}

#[test]
fn neighbouring_records_share_requests_within_the_in_flight_bound() {
    let dir = tempfile::tempdir().unwrap();
    let records = local_store(dir.path(), 2000, 1000, Codec::Raw);
    let remote = Faulty::new();
    push(dir.path(), &location(&remote, options())).unwrap();
    let tight = RemoteOptions { max_in_flight: 3, coalesce_gap: 0, max_request_bytes: 64 << 10, ..options() };
    let (store, fs) = open(&remote, tight);
    let before = fs.counters();
    // 256 consecutive records: 256,000 bytes in requests of at most 64 KiB.
    let picks: Vec<u64> = (100..356).collect();
    let mut out = vec![0u8; picks.len() * 1000];
    store.gather(&picks, &mut out, 1000).unwrap();
    assert_eq!(out, records[100..356].concat());
    let after = fs.counters();
    assert_eq!(after.requests - before.requests, 256u64.div_ceil(65), "ranges of 65 records, the most in 64 KiB");
    assert_eq!(after.bytes - before.bytes, 256_000, "no byte fetched twice, none outside the records");
    let max = remote.max_in_flight.load(Ordering::SeqCst);
    assert!((2..=3).contains(&max), "{max} GETs in flight at most, the bound is 3");
    // Records every 10th: the gap is 9,000 bytes; with a gap of 10 KiB they merge.
    let (store, fs) = open(&remote, RemoteOptions { coalesce_gap: 10 << 10, ..options() });
    let sparse: Vec<u64> = (0..100).map(|k| k * 10).collect();
    let before = fs.counters();
    let mut out = vec![0u8; sparse.len() * 1000];
    store.gather(&sparse, &mut out, 1000).unwrap();
    for (k, &i) in sparse.iter().enumerate() {
        assert_eq!(&out[k * 1000..][..1000], &records[i as usize][..]);
    }
    assert_eq!(fs.counters().requests - before.requests, 1, "one range over them all");
}

#[test]
fn transient_failures_are_retried_and_then_reported() {
    let dir = tempfile::tempdir().unwrap();
    let records = local_store(dir.path(), 100, 500, Codec::Zstd);
    let remote = Faulty::new();
    push(dir.path(), &location(&remote, options())).unwrap();
    let (store, fs) = open(&remote, RemoteOptions { retries: 3, ..options() });
    remote.set(Fault::FailFirst(3));
    assert_eq!(gather_all(&store, 500).unwrap(), records.concat(), "the fourth attempt succeeds");
    assert_eq!(fs.counters().retries, 3);
    remote.set(Fault::FailAlways);
    let err = gather_all(&store, 500).unwrap_err();
    let remote_err = remote_error(&err);
    assert_eq!((remote_err.kind, remote_err.attempts), (RemoteErrorKind::Unavailable, 4));
    assert!(remote_err.url.ends_with("sets/one/0.zr"), "{}", remote_err.url);
    assert!(err.to_string().contains("s3://test/sets/one/0.zr"), "{err}");
}

#[test]
fn a_stalled_server_times_out_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    local_store(dir.path(), 10, 100, Codec::Raw);
    let remote = Faulty::new();
    push(dir.path(), &location(&remote, options())).unwrap();
    let quick = RemoteOptions { request_timeout: Duration::from_millis(50), retries: 2, ..options() };
    let (store, fs) = open(&remote, quick);
    remote.set(Fault::Stall);
    let err = store.get(3).unwrap_err();
    let remote_err = remote_error(&err);
    assert_eq!((remote_err.kind, remote_err.attempts), (RemoteErrorKind::Timeout, 3), "{err}");
    assert_eq!(fs.counters().retries, 2);
    remote.set(Fault::None);
    assert_eq!(store.get(3).unwrap(), record(3, 100), "the store reads again once the server answers");
}

#[test]
fn missing_and_replaced_objects_are_typed_errors_naming_the_object() {
    let dir = tempfile::tempdir().unwrap();
    local_store(dir.path(), 50, 100, Codec::Raw);
    let remote = Faulty::new();
    push(dir.path(), &location(&remote, options())).unwrap();
    let (store, _) = open(&remote, options());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let key = ObjectPath::from("sets/one/0.zr");
    // Replaced by a shorter object: another size (and entity tag).
    rt.block_on(remote.inner.put(&key, PutPayload::from(vec![7u8; 1000]))).unwrap();
    let err = store.get(1).unwrap_err();
    assert_eq!(remote_error(&err).kind, RemoteErrorKind::Changed, "{err}");
    assert!(err.to_string().contains("0.zr"), "{err}");
    // Gone.
    rt.block_on(remote.inner.delete(&key)).unwrap();
    let err = store.get(1).unwrap_err();
    assert_eq!(remote_error(&err).kind, RemoteErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("s3://test/sets/one/0.zr"), "{err}");
    // No store at all under another prefix.
    let empty = Location::with_store(remote.clone(), "s3://test/none", "none", options()).unwrap();
    let err = RemoteFs::open(empty).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert!(err.to_string().contains("s3://test/none/manifest.json"), "{err}");
}

#[test]
fn entries_are_validated_against_the_object_sizes_before_any_read() {
    let dir = tempfile::tempdir().unwrap();
    local_store(dir.path(), 50, 100, Codec::Raw);
    let remote = Faulty::new();
    let to = location(&remote, options());
    push(dir.path(), &to).unwrap();
    // A manifest that says 0.zr is shorter than the table needs: a
    // consistent publication of a damaged store.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let key = ObjectPath::from("sets/one/0.zr");
    rt.block_on(remote.inner.put(&key, PutPayload::from(record(0, 100)))).unwrap();
    let manifest_key = ObjectPath::from("sets/one/manifest.json");
    let text = rt.block_on(async { remote.inner.get(&manifest_key).await.unwrap().bytes().await.unwrap() });
    let mut manifest = loaderx::io::remote::Manifest::decode(&text).unwrap();
    let etag = rt.block_on(remote.inner.head(&key)).unwrap().e_tag;
    let chunk = manifest.objects.get_mut("0.zr").unwrap();
    (chunk.size, chunk.etag) = (100, etag);
    rt.block_on(remote.inner.put(&manifest_key, PutPayload::from(manifest.encode().into_bytes()))).unwrap();
    let (store, fs) = open(&remote, options());
    assert_eq!(store.get(0).unwrap(), record(0, 100));
    let requests = fs.counters().requests;
    let err = store.get(1).unwrap_err();
    assert!(matches!(err, Error::Corrupt { index: Some(1), .. }), "{err}");
    assert_eq!(fs.counters().requests, requests, "refused before any request");
}

#[test]
fn a_second_push_uploads_the_manifest_only_and_a_changed_store_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    local_store(dir.path(), 100, 200, Codec::Zstd);
    let remote = Faulty::new();
    let to = location(&remote, options());
    let first = push(dir.path(), &to).unwrap();
    assert!(first.uploaded.contains(&"0.zr".to_string()) && first.uploaded.contains(&"meta.zr".to_string()));
    let again = push(dir.path(), &to).unwrap();
    assert_eq!(again.uploaded, vec!["manifest.json".to_string()]);
    assert_eq!(again.unchanged, ["meta.zr", "sums.zr", "0.zr"].map(String::from));
    let (old, _) = open(&remote, options());
    {
        let writer = Zrecord::open(dir.path()).unwrap();
        writer.append(&record(100, 200), 1, 200, Codec::Zstd).unwrap();
    }
    let third = push(dir.path(), &to).unwrap();
    assert_eq!(third.records, 101);
    // The old reader's 0.zr was replaced: an error, never other bytes.
    let err = old.get(5).unwrap_err();
    assert_eq!(remote_error(&err).kind, RemoteErrorKind::Changed, "{err}");
    let (new, _) = open(&remote, options());
    assert_eq!(new.len(), 101);
    assert_eq!(new.get(100).unwrap(), record(100, 200));
}

#[test]
fn a_remote_gather_checks_each_record_and_a_rotten_one_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let records = local_store(dir.path(), 200, 300, Codec::Raw);
    let remote = Faulty::new();
    push(dir.path(), &location(&remote, options())).unwrap();
    let (store, _) = open(&remote, options());
    let report = store.verify().unwrap();
    assert_eq!((report.checksummed, report.unchecked, report.sealed), (200, 0, true), "{report:?}");
    remote.set(Fault::Rot);
    // One record per gather, each its own GET: its first byte arrives
    // flipped, and the check names it instead of returning it.
    for i in [0u64, 77, 199] {
        let mut out = vec![0u8; 300];
        let err = store.gather(&[i], &mut out, 300).unwrap_err();
        assert!(
            matches!(err, Error::Corrupt { index: Some(k), what: Corruption::Checksum { entry_matches: true, .. }, .. } if k == i),
            "record {i}: {err}"
        );
    }
    // Unchecked, the rotten bytes come back: what the check is for.
    let fs = Arc::new(RemoteFs::open(location(&remote, options())).unwrap());
    let unchecked =
        Zrecord::open_remote(fs, Options { verify_reads: VerifyReads::Never, ..Options::default() }).unwrap();
    let got = unchecked.get(77).unwrap();
    assert_ne!(got, records[77]);
    assert_eq!(got[1..], records[77][1..]);
    remote.set(Fault::None);
    assert_eq!(gather_all(&store, 300).unwrap(), records.concat());
}

#[test]
fn a_store_pushed_without_checksums_reads_unchecked() {
    let dir = tempfile::tempdir().unwrap();
    let records = local_store(dir.path(), 50, 100, Codec::Raw);
    std::fs::remove_file(dir.path().join("sums.zr")).unwrap();
    let remote = Faulty::new();
    push(dir.path(), &location(&remote, options())).unwrap();
    let (store, fs) = open(&remote, options());
    assert!(!fs.manifest().objects.contains_key("sums.zr"));
    assert_eq!(gather_all(&store, 100).unwrap(), records.concat());
    let report = store.verify().unwrap();
    assert_eq!((report.checksummed, report.unchecked, report.sealed), (0, 50, false), "{report:?}");
}

#[test]
fn a_pull_restores_a_local_store() {
    let dir = tempfile::tempdir().unwrap();
    let records = local_store(dir.path(), 300, 400, Codec::ZstdDict);
    let remote = Faulty::new();
    let to = location(&remote, options());
    push(dir.path(), &to).unwrap();
    let into = tempfile::tempdir().unwrap();
    let target = into.path().join("copy");
    let manifest = pull(&to, &target).unwrap();
    assert_eq!(manifest.records, 300);
    let local = Zrecord::open_read_only(&target).unwrap();
    assert_eq!(gather_all(&local, 400).unwrap(), records.concat());
    let report = local.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!((report.checksummed, report.unchecked, report.sealed), (300, 0, true), "the checksums came along");
    drop(local);
    // The writer's open finds a sound store too (it appends after the records).
    let writer = Zrecord::open(&target).unwrap();
    writer.append(&record(300, 400), 1, 400, Codec::Zstd).unwrap();
    assert_eq!(writer.get(300).unwrap(), record(300, 400));
    let report = writer.verify().unwrap();
    assert_eq!((report.checksummed, report.unchecked, report.sealed), (301, 0, true), "{report:?}");
    // A second pull into a store is refused.
    let err = pull(&to, &target).unwrap_err();
    assert!(err.to_string().contains("holds a store already"), "{err}");
}

#[test]
fn the_serial_path_is_one_request_per_record() {
    let dir = tempfile::tempdir().unwrap();
    let records = local_store(dir.path(), 64, 100, Codec::Raw);
    let remote = Faulty::new();
    push(dir.path(), &location(&remote, options())).unwrap();
    let fs = Arc::new(RemoteFs::open(location(&remote, options())).unwrap());
    let store =
        Zrecord::open_remote(fs.clone(), Options { read_mode: ReadMode::Mapped, ..Options::default() }).unwrap();
    let before = fs.counters().requests;
    assert_eq!(gather_all(&store, 100).unwrap(), records.concat());
    assert_eq!(fs.counters().requests - before, 64);
    let store = Zrecord::open_remote(fs.clone(), Options::default()).unwrap();
    let before = fs.counters().requests;
    assert_eq!(gather_all(&store, 100).unwrap(), records.concat());
    assert_eq!(fs.counters().requests - before, 1, "the batched path: one range");
}

#[test]
fn the_cache_serves_what_was_read_before_within_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let records = local_store(dir.path(), 400, 1000, Codec::Zstd);
    let remote = Faulty::new();
    push(dir.path(), &location(&remote, options())).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let cached = RemoteOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        cache_block_bytes: 4096,
        cache_bytes: 1 << 30,
        ..options()
    };
    let (store, fs) = open(&remote, cached.clone());
    assert_eq!(gather_all(&store, 1000).unwrap(), records.concat());
    assert_eq!(fs.counters().cached_blocks, 0, "a cold cache");
    // Another open (another process, as far as the cache knows): no request at all.
    let (again, fs) = open(&remote, cached.clone());
    assert_eq!(gather_all(&again, 1000).unwrap(), records.concat());
    assert_eq!(fs.counters().requests, 0, "meta.zr and every record from the cache");
    assert!(fs.counters().cached_blocks > 0);
    // A damaged block file is fetched again, never returned.
    let mut damaged = 0;
    for object in std::fs::read_dir(cache.path()).unwrap() {
        let block = object.unwrap().path().join("0");
        if let Ok(mut bytes) = std::fs::read(&block) {
            bytes[0] ^= 0xff;
            std::fs::write(&block, bytes).unwrap();
            damaged += 1;
        }
    }
    assert_eq!(damaged, 3, "meta.zr's, sums.zr's and 0.zr's first blocks");
    let (third, fs) = open(&remote, cached.clone());
    assert_eq!(gather_all(&third, 1000).unwrap(), records.concat());
    assert_eq!(fs.counters().requests, 3, "the three damaged blocks, fetched again");
    // The cap: a cache of 3 blocks holds at most 3 blocks' bytes.
    let small = tempfile::tempdir().unwrap();
    let capped = RemoteOptions { cache_dir: Some(small.path().to_path_buf()), cache_bytes: 3 * 4100, ..cached };
    let (store, _) = open(&remote, capped);
    assert_eq!(gather_all(&store, 1000).unwrap(), records.concat());
    let held: u64 = std::fs::read_dir(small.path())
        .unwrap()
        .flat_map(|o| std::fs::read_dir(o.unwrap().path()).unwrap())
        .map(|b| b.unwrap().metadata().unwrap().len())
        .sum();
    assert!(held > 0 && held <= 3 * 4100, "{held} bytes cached");
}

/// A sharded dataset (four shards of up to 30 records) round trips: push
/// (shards 1 on under `shard-NNNNNN/`, shard 0 and `shards.json` at the
/// prefix, its manifest last), a `Dataset` read through the remote
/// filesystem across every shard, a second push that uploads only the
/// manifests, and a pull that opens locally with the same records.
#[test]
fn a_sharded_dataset_is_published_read_and_pulled_whole() {
    use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
    let dir = tempfile::tempdir().unwrap();
    let data: Vec<u32> = (0..100).map(|i| i * 7 + 1).collect();
    let opts = WriteOptions { shard_records: Some(30), ..WriteOptions::default() };
    assert_eq!(write_dataset(dir.path(), &data, &[1], &opts).unwrap(), 100);
    let remote = Faulty::new();
    let report = push(dir.path(), &location(&remote, options())).unwrap();
    assert_eq!(report.records, 100);
    assert!(report.uploaded.iter().any(|o| o == "shard-000003/manifest.json"), "{:?}", report.uploaded);
    assert_eq!(report.uploaded.last().map(String::as_str), Some("manifest.json"), "the root manifest last");
    let all: Vec<u64> = (0..100).collect();
    let read = |ds: &Dataset| ds.gather(&all).unwrap().as_slice::<u32>().unwrap().to_vec();
    let fs = Arc::new(RemoteFs::open(location(&remote, options())).unwrap());
    let root = std::path::PathBuf::from(fs.root());
    let published = Dataset::open_in_with(fs, &root, ReadMode::Auto).unwrap();
    assert_eq!((published.len(), published.shards()), (100, 4));
    assert_eq!(read(&published), data);
    let again = push(dir.path(), &location(&remote, options())).unwrap();
    assert!(again.uploaded.iter().all(|o| o.ends_with("manifest.json")), "{:?}", again.uploaded);
    let local = tempfile::tempdir().unwrap();
    let pulled = pull(&location(&remote, options()), &local.path().join("copy")).unwrap();
    assert_eq!((pulled.records, pulled.shards), (100, 4));
    let copy = Dataset::open(local.path().join("copy")).unwrap();
    assert_eq!(read(&copy), data);
    let nothing = Location::with_store(remote.clone(), "s3://test/nothing", "nothing", options()).unwrap();
    let error = pull(&nothing, &local.path().join("none")).unwrap_err();
    assert!(matches!(error, Error::NoStore { .. }), "{error}");
}

/// The remote filesystem routes a path under a shard directory to the store
/// published there by the name `loaderx::format::shard_dir_name` gives it,
/// past six digits too (shard 1,000,000), and only by that name: a store
/// published under `shard-01000000/` or `shard-0000001/` is none of the
/// dataset's shards.
#[test]
fn paths_under_a_shard_directory_reach_that_shard_past_six_digits() {
    use loaderx::format::shard_dir_name;
    let remote = Faulty::new();
    let root = location(&remote, options());
    let dir = tempfile::tempdir().unwrap();
    local_store(dir.path(), 5, 10, Codec::Raw);
    push(dir.path(), &root).unwrap();
    let far = tempfile::tempdir().unwrap();
    let records = local_store(far.path(), 7, 10, Codec::Zstd);
    for name in [shard_dir_name(1_000_000), shard_dir_name(999_999), "shard-01000000".into(), "shard-0000001".into()] {
        push(far.path(), &root.child(&name)).unwrap();
    }
    let fs = Arc::new(RemoteFs::open(location(&remote, options())).unwrap());
    let open = |name: &str| {
        let path = std::path::PathBuf::from(format!("{}/{name}", fs.root()));
        Zrecord::open_in(fs.clone(), &path, Options { read_only: true, ..Options::default() })
    };
    for name in ["shard-1000000", "shard-999999"] {
        assert_eq!(gather_all(&open(name).unwrap(), 10).unwrap(), records.concat(), "{name}");
    }
    for name in ["shard-01000000", "shard-0000001"] {
        let error = open(name).unwrap_err();
        assert!(matches!(error, Error::NoDirectory { .. }), "{name} is no shard's directory: {error}");
    }
}

/// A table is published as its columns' datasets under `col-NNNN/` and a
/// manifest of kind `table` last: a reader by URL sees exactly the
/// committed rows (a tail past the commit, pushed with the columns, stays
/// unseen) across every column's shards; a store's open of a table and a
/// table's open of a store say which is published; a second push uploads
/// no column object again; a store is never pushed over a table, nor a
/// table over a store; and a pull restores a table a local reader opens
/// with the same rows.
#[test]
fn a_table_is_published_read_by_its_commit_and_pulled_whole() {
    use loaderx::dataset::{DType, WriteOptions};
    use loaderx::table::{ColumnSpec, Table, TableColumn, TableWriter, Values};
    let row = |i: usize| -> (Vec<u8>, Vec<u8>, String) {
        let x = [i as u32, (i * 7 + 1) as u32].iter().flat_map(|v| v.to_le_bytes()).collect();
        let ids = (0..i % 5).flat_map(|j| ((i * 3 + j) as u16).to_le_bytes()).collect();
        (x, ids, format!("row {i} é").repeat(i % 3))
    };
    let dtype = |s| DType::parse(s).unwrap();
    let specs = [
        ColumnSpec::fixed("x", dtype("<u4"), &[2]),
        ColumnSpec::ragged("ids", dtype("<u2"), &[]),
        ColumnSpec::utf8("text").with_codec(Codec::Zstd),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t");
    let opts = WriteOptions { shard_records: Some(5), ..WriteOptions::default() };
    let mut writer = TableWriter::create(&path, &specs, &opts).unwrap();
    let append = |writer: &mut TableWriter, range: Range<usize>| {
        let rows: Vec<_> = range.map(row).collect();
        let x: Vec<u8> = rows.iter().flat_map(|r| r.0.clone()).collect();
        let ids: Vec<&[u8]> = rows.iter().map(|r| r.1.as_slice()).collect();
        let text: Vec<&[u8]> = rows.iter().map(|r| r.2.as_bytes()).collect();
        writer.append(&[Values::Fixed(&x), Values::Items(&ids), Values::Items(&text)]).unwrap();
    };
    append(&mut writer, 0..17);
    writer.commit().unwrap();
    append(&mut writer, 17..23); // never committed
    drop(writer);
    let remote = Faulty::new();
    let report = push(&path, &location(&remote, options())).unwrap();
    assert_eq!((report.rows, report.records), (Some(17), 3 * 23), "every column's records, the tail included");
    assert!(report.uploaded.iter().any(|o| o == "col-0002/shard-000004/manifest.json"), "{:?}", report.uploaded);
    assert_eq!(report.uploaded.last().map(String::as_str), Some("manifest.json"), "the table's manifest last");
    let read = |table: &Table| {
        let all: Vec<u64> = (0..table.rows()).collect();
        let Some(TableColumn::Fixed(x)) = table.column("x") else { panic!("x is fixed") };
        let Some(TableColumn::Ragged(ids)) = table.column("ids") else { panic!("ids is ragged") };
        assert!(x.gather(&[table.rows()]).is_err(), "a row past the commit is out of range");
        let (xs, ids, text) =
            (x.gather(&all).unwrap(), ids.gather(&all).unwrap(), table.strings("text", &all).unwrap());
        (0..all.len())
            .map(|k| (xs.as_bytes()[k * 8..][..8].to_vec(), ids.record(k).unwrap().to_vec(), text[k].clone()))
            .collect::<Vec<_>>()
    };
    let oracle: Vec<_> = (0..17).map(row).collect();
    let fs = Arc::new(RemoteFs::open_table(location(&remote, options())).unwrap());
    let root = std::path::PathBuf::from(fs.root());
    let published = Table::open_in(fs, &root).unwrap();
    assert_eq!(published.rows(), 17);
    assert_eq!(read(&published), oracle);
    // A store's open of the table, a table's open of a store: named errors.
    let error = RemoteFs::open(location(&remote, options())).unwrap_err();
    assert!(error.to_string().contains("a table is published here"), "{error}");
    let store_dir = tempfile::tempdir().unwrap();
    local_store(store_dir.path(), 4, 10, Codec::Raw);
    let elsewhere = Location::with_store(remote.clone(), "s3://test/store", "store", options()).unwrap();
    push(store_dir.path(), &elsewhere).unwrap();
    let error = RemoteFs::open_table(elsewhere.clone()).unwrap_err();
    assert!(error.to_string().contains("a store is published here"), "{error}");
    let error = push(store_dir.path(), &location(&remote, options())).unwrap_err();
    assert!(error.to_string().contains("a table is published there"), "{error}");
    let error = push(&path, &elsewhere).unwrap_err();
    assert!(error.to_string().contains("a store is published there"), "{error}");
    // Again: no column object uploaded, only manifests and table.json.
    let again = push(&path, &location(&remote, options())).unwrap();
    assert!(again.uploaded.iter().all(|o| o.ends_with("manifest.json") || o == "table.json"), "{:?}", again.uploaded);
    let local = tempfile::tempdir().unwrap();
    let pulled = pull(&location(&remote, options()), &local.path().join("copy")).unwrap();
    assert_eq!((pulled.rows, pulled.records, pulled.shards), (Some(17), 3 * 23, 3 * 5));
    assert_eq!(read(&Table::open(local.path().join("copy")).unwrap()), oracle);
    let error = pull(&location(&remote, options()), &local.path().join("copy")).unwrap_err();
    assert!(error.to_string().contains("holds a table already"), "{error}");
    // A table's manifest where a column's store belongs (the bucket's
    // bytes are input): a named error for the reader and the pull.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let root = remote.inner.get(&ObjectPath::from("sets/one/manifest.json")).await.unwrap().bytes().await.unwrap();
        remote.inner.put(&ObjectPath::from("sets/one/col-0001/manifest.json"), root.into()).await.unwrap();
    });
    let fs = Arc::new(RemoteFs::open_table(location(&remote, options())).unwrap());
    let root = std::path::PathBuf::from(fs.root());
    let error = Table::open_in(fs, &root).unwrap_err();
    assert!(error.to_string().contains("a table's manifest where a store's is expected"), "{error}");
    let error = pull(&location(&remote, options()), &local.path().join("again")).unwrap_err();
    assert!(error.to_string().contains("a table is published there, not a store"), "{error}");
}

/// Row `i` of the adoption tests' tables: a fixed `<u4[2]` and text.
fn table_row(i: usize) -> ([u32; 2], String) {
    ([i as u32, (i * 7 + 1) as u32], format!("row {i} é").repeat(i % 3))
}

/// Pushes a table of rows `rows` (its text column named `text`) to
/// `name` under `dest`.
fn stage_table(dest: &Location, name: &str, rows: Range<usize>, text: &str) {
    use loaderx::dataset::{DType, WriteOptions};
    use loaderx::table::{ColumnSpec, TableWriter, Values};
    let local = tempfile::tempdir().unwrap();
    let specs = [ColumnSpec::fixed("x", DType::parse("<u4").unwrap(), &[2]), ColumnSpec::utf8(text)];
    let mut writer = TableWriter::create(local.path(), &specs, &WriteOptions::default()).unwrap();
    let rows: Vec<_> = rows.map(table_row).collect();
    let x: Vec<u8> = rows.iter().flat_map(|r| r.0.iter().flat_map(|v| v.to_le_bytes())).collect();
    let text: Vec<&[u8]> = rows.iter().map(|r| r.1.as_bytes()).collect();
    writer.append(&[Values::Fixed(&x), Values::Items(&text)]).unwrap();
    writer.commit().unwrap();
    drop(writer);
    push(local.path(), &name.split('/').fold(dest.clone(), |at, part| at.child(part))).unwrap();
}

/// Every row of the table published at `location`, as a reader by URL sees it.
fn published_table_rows(location: Location) -> Vec<([u32; 2], String)> {
    use loaderx::table::{Table, TableColumn};
    let fs = Arc::new(RemoteFs::open_table(location).unwrap());
    let root = std::path::PathBuf::from(fs.root());
    let table = Table::open_in(fs, &root).unwrap();
    let all: Vec<u64> = (0..table.rows()).collect();
    let Some(TableColumn::Fixed(x)) = table.column("x") else { panic!("x is fixed") };
    let xs = x.gather(&all).unwrap().as_slice::<u32>().unwrap().to_vec();
    let text = table.strings("text", &all).unwrap();
    (0..all.len()).map(|k| ([xs[2 * k], xs[2 * k + 1]], text[k].clone())).collect()
}

/// Tables pushed under the destination's staging prefix are adopted as new
/// shards of a published table's columns and committed by its manifest
/// (R0-R4 of `publish/adopt.rs`): a new table from two staged ones, read
/// back by URL in their order, their staged objects removed; an adoption
/// whose commit (R3) fails leaves a reader the rows it saw, and the next
/// adoption seals the columns at the committed rows again and writes over
/// what the failed one left past them; a staged table of other columns is
/// refused before anything is written.
#[test]
fn published_tables_are_adopted_as_shards_and_committed_by_the_table_manifest() {
    use loaderx::publish::{adopt_published, remove_published};
    let remote = Faulty::new();
    let dest = location(&remote, options());
    let read = || published_table_rows(location(&remote, options()));
    let oracle = |n: usize| (0..n).map(table_row).collect::<Vec<_>>();
    stage_table(&dest, ".staging/w1/t0", 0..10, "text");
    stage_table(&dest, ".staging/w1/t1", 10..17, "text");
    assert_eq!(adopt_published(&dest, &[".staging/w1/t0", ".staging/w1/t1"]).unwrap(), 17);
    assert_eq!(read(), oracle(17));
    assert_eq!(remove_published(&dest.child(".staging")).unwrap(), 0, "the staged objects are removed");
    // R3 fails (the table manifest): the commit stays at 17 rows, the columns hold more.
    stage_table(&dest, ".staging/w2/t0", 17..22, "text");
    *remote.refuse_put.lock().unwrap() = Some("sets/one/manifest.json".into());
    let error = adopt_published(&dest, &[".staging/w2/t0"]).unwrap_err();
    assert!(error.to_string().contains("403 refused"), "{error}");
    *remote.refuse_put.lock().unwrap() = None;
    assert_eq!(read(), oracle(17), "a failed commit changes no row a reader sees");
    stage_table(&dest, ".staging/w3/t0", 17..20, "text");
    stage_table(&dest, ".staging/w3/t1", 20..26, "text");
    assert_eq!(adopt_published(&dest, &[".staging/w3/t0", ".staging/w3/t1"]).unwrap(), 26);
    assert_eq!(read(), oracle(26), "sealed at the committed rows again: the failed write's rows are gone");
    assert!(remove_published(&dest.child(".staging").child("w2")).unwrap() > 0, "the failed write's staging");
    // Other columns: refused before anything is written.
    stage_table(&dest, ".staging/w4/t0", 26..30, "words");
    let error = adopt_published(&dest, &[".staging/w4/t0"]).unwrap_err();
    assert!(error.to_string().contains("not \"x\" (fixed), \"text\" (utf8)"), "{error}");
    assert_eq!(read(), oracle(26));
    let error = adopt_published(&dest, &["../elsewhere"]).unwrap_err();
    assert!(error.to_string().contains("not a path under the destination"), "{error}");
    // Pulled and pushed back over itself: the same rows by URL.
    let copy = tempfile::tempdir().unwrap();
    assert_eq!(pull(&dest, &copy.path().join("t")).unwrap().rows, Some(26));
    assert_eq!(push(&copy.path().join("t"), &dest).unwrap().rows, Some(26));
    assert_eq!(read(), oracle(26));
}

/// The objects under `sets/one/` (the test location's prefix).
fn object_names(remote: &Arc<Faulty>) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let listed: Vec<_> = runtime.block_on(remote.inner.list(Some(&ObjectPath::from("sets/one"))).collect());
    listed.into_iter().map(|m| m.unwrap().location.as_ref().strip_prefix("sets/one/").unwrap().to_string()).collect()
}

/// After a gc, no orphan under the table at `dest`: the objects there are
/// exactly the ones a pull of it fetches (every object each manifest
/// lists) and the manifests themselves (the table's and each store's).
fn assert_no_orphan(remote: &Arc<Faulty>, dest: &Location, what: &str) {
    let copy = tempfile::tempdir().unwrap();
    let pulled = pull(dest, &copy.path().join("t")).unwrap();
    let names = object_names(remote);
    assert!(!names.iter().any(|n| n.starts_with(".staging/")), "{what}: staged objects left: {names:?}");
    assert_eq!(names.len(), pulled.objects + 1 + pulled.shards, "{what}: {names:?}");
}

/// An object where a first write's copy would be (`col-0000/`), as a
/// failed first commit leaves.
fn push_copy_as_column(remote: &Arc<Faulty>) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let key = ObjectPath::from("sets/one/col-0000/orphan.zr");
    runtime.block_on(remote.inner.put(&key, PutPayload::from(vec![1u8; 8]))).unwrap();
}

/// An adoption failed at each of its writes in turn (every copy and PUT of
/// R1 to R3, and the removals after), into a new table and into one of 7
/// rows: a reader sees the rows committed before it or all of them, never
/// a part, and never an error; and an adoption of the same rows staged
/// again then commits exactly them after the committed rows. A gc after
/// the failure removes no object a reader reaches (after a failed first
/// adoption, nothing while it is young and then every object), and one
/// after the second adoption leaves no orphan.
#[test]
fn an_adoption_failed_at_any_write_leaves_the_commit_whole() {
    use loaderx::publish::{adopt_published, remove_unlisted_objects};
    let (mut reclaimed, mut first_reclaimed) = (0, 0);
    for base in [0usize, 7] {
        let setup = || {
            let remote = Faulty::new();
            let dest = location(&remote, options());
            if base > 0 {
                stage_table(&dest, ".staging/w0/t0", 0..base, "text");
                adopt_published(&dest, &[".staging/w0/t0"]).unwrap();
            }
            stage_table(&dest, ".staging/w1/t0", base..base + 4, "text");
            stage_table(&dest, ".staging/w1/t1", base + 4..base + 9, "text");
            remote.writes.store(0, Ordering::SeqCst);
            (remote, dest)
        };
        let staged = [".staging/w1/t0", ".staging/w1/t1"];
        let (remote, dest) = setup();
        adopt_published(&dest, &staged).unwrap();
        let writes = remote.writes.load(Ordering::SeqCst);
        assert!(writes > 10, "{writes} writes");
        for n in 0..writes {
            let (remote, dest) = setup();
            *remote.fail_write.lock().unwrap() = Some(n);
            let result = adopt_published(&dest, &staged);
            *remote.fail_write.lock().unwrap() = None;
            let seen = if base == 0 && result.is_err() {
                match RemoteFs::open_table(location(&remote, options())) {
                    Ok(_) => published_table_rows(location(&remote, options())),
                    Err(_) => Vec::new(), // no table published yet
                }
            } else {
                published_table_rows(location(&remote, options()))
            };
            let committed = if result.is_ok() { base + 9 } else { base };
            assert_eq!(seen, (0..committed).map(table_row).collect::<Vec<_>>(), "write {n} of {writes} failed");
            if committed > 0 {
                let report = remove_unlisted_objects(&dest, Duration::ZERO).unwrap();
                reclaimed += report.removed.iter().filter(|n| !n.starts_with(".staging/")).count();
                let rows = published_table_rows(location(&remote, options()));
                assert_eq!(rows, (0..committed).map(table_row).collect::<Vec<_>>(), "gc after write {n}");
            } else {
                // A failed first write: kept while young (it may be under
                // way), then every object of it reclaimed, by its mark.
                let young = remove_unlisted_objects(&dest, Duration::from_secs(3600)).unwrap();
                assert!(young.removed.is_empty(), "write {n}: {young:?}");
                let report = remove_unlisted_objects(&dest, Duration::ZERO).unwrap();
                first_reclaimed += report.removed.iter().filter(|n| !n.starts_with(".staging/")).count();
                assert_eq!(object_names(&remote), Vec::<String>::new(), "gc after write {n}: {report:?}");
            }
            stage_table(&dest, ".staging/w2/t0", committed..committed + 3, "text");
            assert_eq!(adopt_published(&dest, &[".staging/w2/t0"]).unwrap(), (committed + 3) as u64, "after write {n}");
            let all = published_table_rows(location(&remote, options()));
            assert_eq!(all, (0..committed + 3).map(table_row).collect::<Vec<_>>(), "after write {n}");
            remove_unlisted_objects(&dest, Duration::ZERO).unwrap();
            assert_no_orphan(&remote, &dest, &format!("write {n} of {writes} failed, base {base}"));
        }
    }
    assert!(reclaimed > 0, "failed adoptions left copies outside the staging that a gc reclaimed");
    assert!(first_reclaimed > 0, "failed first adoptions left copies outside the staging that a gc reclaimed");
}

/// A gc keeps what is younger than its bound (a write under way) and what
/// is not this format's; where nothing is published, it removes only
/// staged objects.
#[test]
fn a_gc_keeps_young_and_foreign_objects_and_only_staging_where_nothing_is_published() {
    use loaderx::publish::{adopt_published, remove_unlisted_objects};
    let remote = Faulty::new();
    let dest = location(&remote, options());
    stage_table(&dest, ".staging/w9/t0", 0..2, "text");
    push_copy_as_column(&remote);
    let unpublished = remove_unlisted_objects(&dest, Duration::ZERO).unwrap();
    assert!(!unpublished.removed.is_empty(), "{unpublished:?}");
    assert!(unpublished.removed.iter().all(|n| n.starts_with(".staging/w9/")), "{unpublished:?}");
    assert_eq!(object_names(&remote), ["col-0000/orphan.zr"]);
    stage_table(&dest, ".staging/w0/t0", 0..5, "text");
    adopt_published(&dest, &[".staging/w0/t0"]).unwrap();
    stage_table(&dest, ".staging/w1/t0", 5..9, "text");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime
        .block_on(remote.inner.put(&ObjectPath::from("sets/one/README.md"), PutPayload::from(vec![1u8; 3])))
        .unwrap();
    let young = remove_unlisted_objects(&dest, Duration::from_secs(3600)).unwrap();
    assert!(young.removed.is_empty() && young.kept_recent > 0, "{young:?}");
    let old = remove_unlisted_objects(&dest, Duration::ZERO).unwrap();
    assert_eq!(old.removed.len(), young.kept_recent, "{old:?}");
    assert!(old.removed.contains(&"col-0000/orphan.zr".to_string()), "once a table is published: {old:?}");
    assert!(old.removed.iter().all(|n| n.starts_with(".staging/w1/") || n == "col-0000/orphan.zr"), "{old:?}");
    let names = object_names(&remote);
    assert!(names.contains(&"README.md".to_string()), "{names:?}");
    assert_eq!(published_table_rows(location(&remote, options())), (0..5).map(table_row).collect::<Vec<_>>());
}

/// One write at a time per location: a second lock is refused naming the
/// holder, an unlock by another holder leaves it, the holder's unlock frees
/// it; a gc removes a stale lock only past its bound.
#[test]
fn the_write_lock_is_held_by_one_write_and_a_gc_removes_a_stale_one() {
    use loaderx::publish::{LockTaken, adopt_published, lock_writes, remove_unlisted_objects, unlock_writes};
    let remote = Faulty::new();
    let dest = location(&remote, options());
    assert_eq!(lock_writes(&dest, "w1").unwrap(), LockTaken::Held { unenforced: false });
    match lock_writes(&dest, "w2").unwrap() {
        LockTaken::Refused(held) => assert!(held.starts_with("w1 "), "{held}"),
        other => panic!("a second write took the lock: {other:?}"),
    }
    assert!(!unlock_writes(&dest, "w2").unwrap(), "not w2's to remove");
    assert!(matches!(lock_writes(&dest, "w3").unwrap(), LockTaken::Refused(_)));
    assert!(unlock_writes(&dest, "w1").unwrap());
    assert!(!unlock_writes(&dest, "w1").unwrap(), "already removed");
    assert_eq!(lock_writes(&dest, "w2").unwrap(), LockTaken::Held { unenforced: false });
    assert!(matches!(lock_writes(&dest, "bad/name"), Err(Error::InvalidArgument(_))));
    // w2's driver dies holding it: a gc within its bound keeps the lock,
    // one past it removes it, and the next write takes it.
    stage_table(&dest, ".staging/w0/t0", 0..3, "text");
    adopt_published(&dest, &[".staging/w0/t0"]).unwrap();
    assert!(remove_unlisted_objects(&dest, Duration::from_secs(3600)).unwrap().removed.is_empty());
    assert!(matches!(lock_writes(&dest, "w4").unwrap(), LockTaken::Refused(_)));
    let report = remove_unlisted_objects(&dest, Duration::ZERO).unwrap();
    assert_eq!(report.removed, [".staging/write.lock"], "{report:?} {:?}", object_names(&remote));
    assert_eq!(lock_writes(&dest, "w4").unwrap(), LockTaken::Held { unenforced: false });
}
