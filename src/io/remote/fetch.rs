//! The request engine of the remote backend: ranged GETs through
//! `object_store`, coalesced ([`plan`]), many in flight with a bound shared
//! by every read of the process's [`Fetcher`], each attempt under a
//! timeout, transient failures retried with bounded, jittered backoff, and
//! everything else a [`RemoteError`] naming the object.
//!
//! Every response is checked before a byte of it is used: the object's size
//! and entity tag are the manifest's (an object replaced since the manifest
//! was read is [`RemoteErrorKind::Changed`]), and the body is exactly the
//! range asked for.
//!
//! `object_store` is asynchronous; the store's reads are not. The fetcher
//! owns a small tokio runtime and blocks the calling thread on it, which
//! must therefore not be a thread of an async runtime itself (an error, not
//! a panic). A process forked after the runtime started (a PyTorch
//! DataLoader's workers) has no runtime threads: the first read in the
//! child builds a new runtime and a new client.

use std::fmt;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use tokio::runtime::Runtime;
use tokio::sync::Semaphore;

use super::RemoteOptions;
use super::cache::BlockCache;
use crate::io::{BatchError, BatchRead};

/// One object of a published store, as its manifest pins it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRef {
    /// Its key in the bucket.
    pub key: ObjectPath,
    /// Its URL, for messages (`s3://bucket/prefix/3.zr`).
    pub url: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its entity tag when published, if the server gave one: a response
    /// with another is an object replaced since.
    pub etag: Option<String>,
}

/// What went wrong with a remote object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteErrorKind {
    /// The object (or its bucket) does not exist.
    NotFound,
    /// The credentials were refused, or lack the right.
    Denied,
    /// Every attempt timed out.
    Timeout,
    /// Every attempt failed with a transient error (5xx, a reset connection).
    Unavailable,
    /// The object is not the one the manifest names: another size or
    /// entity tag (re-published, or replaced by something else).
    Changed,
    /// The server sent fewer or more bytes than the range asked for.
    ShortBody,
    /// The manifest or a response is malformed, or the request is refused
    /// for another reason (a bad URL, a client-side error).
    Invalid,
}

impl RemoteErrorKind {
    fn io_kind(self) -> io::ErrorKind {
        match self {
            RemoteErrorKind::NotFound => io::ErrorKind::NotFound,
            RemoteErrorKind::Denied => io::ErrorKind::PermissionDenied,
            RemoteErrorKind::Timeout => io::ErrorKind::TimedOut,
            RemoteErrorKind::Unavailable => io::ErrorKind::ConnectionAborted,
            RemoteErrorKind::Changed | RemoteErrorKind::ShortBody | RemoteErrorKind::Invalid => {
                io::ErrorKind::InvalidData
            }
        }
    }
}

/// A failed request to object storage: which object, what happened, after
/// how many attempts. Carried inside the `io::Error` of the store's
/// `Error::Io` (`source().get_ref()` downcasts to it).
#[derive(Debug)]
pub struct RemoteError {
    /// The object's URL.
    pub url: String,
    /// What happened.
    pub kind: RemoteErrorKind,
    /// Attempts made.
    pub attempts: u32,
    /// The last failure's own words.
    pub detail: String,
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            RemoteErrorKind::NotFound => "not found (no such object, or no such bucket)",
            RemoteErrorKind::Denied => "access denied (check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)",
            RemoteErrorKind::Timeout => "timed out",
            RemoteErrorKind::Unavailable => "no answer, or only failures, from the server",
            RemoteErrorKind::Changed => {
                "the object changed since it was first seen (a manifest, a listing): open it again"
            }
            RemoteErrorKind::ShortBody => "the server sent another length than the range asked for",
            RemoteErrorKind::Invalid => "refused",
        };
        let tries = if self.attempts > 1 { format!(" after {} attempts", self.attempts) } else { String::new() };
        write!(f, "{}: {what}{tries}: {}", self.url, self.detail)
    }
}

impl std::error::Error for RemoteError {}

impl RemoteError {
    pub(crate) fn new(url: &str, kind: RemoteErrorKind, detail: impl Into<String>) -> RemoteError {
        RemoteError { url: url.to_string(), kind, attempts: 1, detail: detail.into() }
    }

    /// As an `io::Error` of the matching kind, this error inside.
    pub(crate) fn into_io(self) -> io::Error {
        io::Error::new(self.kind.io_kind(), self)
    }
}

/// One failed attempt: what it was and whether another may succeed.
struct Failure {
    kind: RemoteErrorKind,
    transient: bool,
    detail: String,
}

fn classify(error: object_store::Error) -> Failure {
    use object_store::Error as E;
    let (kind, transient) = match &error {
        E::NotFound { .. } => (RemoteErrorKind::NotFound, false),
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => (RemoteErrorKind::Denied, false),
        E::Precondition { .. } | E::NotModified { .. } => (RemoteErrorKind::Changed, false),
        // A 5xx, a reset or refused connection, a body cut off: the client's
        // own retries are off (one policy, here), so all of them land here.
        E::Generic { .. } | E::JoinError { .. } => (RemoteErrorKind::Unavailable, true),
        _ => (RemoteErrorKind::Invalid, false),
    };
    Failure { kind, transient, detail: error.to_string() }
}

/// Requests made and bytes fetched, since the fetcher was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FetchCounters {
    /// GETs sent (retries included).
    pub requests: u64,
    /// Body bytes received.
    pub bytes: u64,
    /// Attempts that failed and were retried.
    pub retries: u64,
    /// Blocks read from the local cache instead of the server.
    pub cached_blocks: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    retries: AtomicU64,
    cached_blocks: AtomicU64,
}

/// Builds the client (again, in a forked child).
pub(crate) type Connect = Arc<dyn Fn() -> io::Result<Arc<dyn ObjectStore>> + Send + Sync>;

/// The runtime, client and in-flight bound of one process (a fork child
/// has none of its parent's threads, connections or requests in flight).
struct Live {
    pid: u32,
    client: Client,
}

/// What a request needs of its process: the runtime, the client, the bound.
#[derive(Clone)]
struct Client {
    runtime: Arc<Runtime>,
    store: Arc<dyn ObjectStore>,
    in_flight: Arc<Semaphore>,
}

/// Reads byte ranges of objects; shared by every file of a remote store.
pub(crate) struct Fetcher {
    connect: Connect,
    live: Mutex<Option<Live>>,
    options: RemoteOptions,
    counters: Counters,
    cache: Option<BlockCache>,
}

impl fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fetcher").field("options", &self.options).finish_non_exhaustive()
    }
}

/// One GET of a batch: `range` of object `object` (an index into the
/// batch's objects), feeding `parts` (read index, offset of its bytes in
/// the range).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Request {
    pub(crate) object: usize,
    pub(crate) range: Range<u64>,
    pub(crate) parts: Vec<(usize, u64)>,
}

/// The GETs that read `reads` (object index, offset, length; reads of no
/// bytes need none): each read's range inside one request, neighbours of
/// one object merged while the gap between them is at most `gap` bytes and
/// the merged range at most `max_bytes` (a single read longer than that is
/// one request of its own length).
pub(crate) fn plan(reads: &[(usize, u64, u64)], gap: u64, max_bytes: u64) -> Vec<Request> {
    let mut order: Vec<usize> = (0..reads.len()).filter(|&k| reads[k].2 > 0).collect();
    order.sort_unstable_by_key(|&k| (reads[k].0, reads[k].1));
    let mut requests: Vec<Request> = Vec::new();
    for k in order {
        let (object, offset, len) = reads[k];
        let end = offset + len;
        if let Some(last) = requests.last_mut() {
            let merged_end = last.range.end.max(end);
            if last.object == object
                && offset <= last.range.end.saturating_add(gap)
                && merged_end - last.range.start <= max_bytes
            {
                last.range.end = merged_end;
                last.parts.push((k, offset - last.range.start));
                continue;
            }
        }
        requests.push(Request { object, range: offset..end, parts: vec![(k, 0)] });
    }
    requests
}

impl Fetcher {
    pub(crate) fn new(connect: Connect, options: RemoteOptions) -> Fetcher {
        let cache =
            options.cache_dir.clone().map(|dir| BlockCache::new(dir, options.cache_block_bytes, options.cache_bytes));
        Fetcher { connect, live: Mutex::new(None), options, counters: Counters::default(), cache }
    }

    pub(crate) fn options(&self) -> &RemoteOptions {
        &self.options
    }

    pub(crate) fn counters(&self) -> FetchCounters {
        FetchCounters {
            requests: self.counters.requests.load(Ordering::Relaxed),
            bytes: self.counters.bytes.load(Ordering::Relaxed),
            retries: self.counters.retries.load(Ordering::Relaxed),
            cached_blocks: self.counters.cached_blocks.load(Ordering::Relaxed),
        }
    }

    /// This process's runtime and client, made on first use (and again in
    /// a forked child, whose copy has no threads behind it).
    fn live(&self) -> io::Result<Client> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(io::Error::other(
                "a remote store was read from inside an async runtime; read it from a plain thread \
                 (tokio::task::spawn_blocking)",
            ));
        }
        let mut live = self.live.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        if let Some(old) = live.take_if(|l| l.pid != pid) {
            // The parent's runtime: its threads do not exist here, and
            // dropping it would wait for them.
            std::mem::forget(old);
        }
        if live.is_none() {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("loaderx-remote")
                .enable_all()
                .build()?;
            let in_flight = Arc::new(Semaphore::new(self.options.max_in_flight.max(1)));
            let client = Client { runtime: Arc::new(runtime), store: (self.connect)()?, in_flight };
            *live = Some(Live { pid, client });
        }
        Ok(live.as_ref().expect("just made").client.clone())
    }

    /// One attempt at `range` of `object`, checked.
    async fn get_once(&self, store: &dyn ObjectStore, object: &ObjectRef, range: Range<u64>) -> Result<Bytes, Failure> {
        let options = GetOptions {
            range: Some(GetRange::Bounded(range.clone())),
            if_match: object.etag.clone(),
            ..Default::default()
        };
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let result = store.get_opts(&object.key, options).await.map_err(classify)?;
        let changed = |detail: String| Failure { kind: RemoteErrorKind::Changed, transient: false, detail };
        if result.meta.size != object.size {
            return Err(changed(format!("{} bytes, the manifest says {}", result.meta.size, object.size)));
        }
        if let (Some(want), Some(got)) = (&object.etag, &result.meta.e_tag)
            && want != got
        {
            return Err(changed(format!("entity tag {got}, the manifest says {want}")));
        }
        let bytes = result.bytes().await.map_err(classify)?;
        self.counters.bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        if bytes.len() as u64 != range.end - range.start {
            return Err(Failure {
                kind: RemoteErrorKind::ShortBody,
                transient: true,
                detail: format!("{} bytes for the range {range:?}", bytes.len()),
            });
        }
        Ok(bytes)
    }

    /// `range` of `object`: attempts under the timeout, transient failures
    /// retried with backoff, at most `1 + retries` attempts in all.
    async fn get(
        &self,
        (store, in_flight): (&dyn ObjectStore, &Semaphore),
        object: &ObjectRef,
        range: Range<u64>,
    ) -> Result<Bytes, RemoteError> {
        let o = &self.options;
        let mut delay = o.backoff_initial;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let outcome = {
                let _permit = in_flight.acquire().await.expect("the semaphore is never closed");
                tokio::time::timeout(o.request_timeout, self.get_once(store, object, range.clone())).await
            };
            let failure = match outcome {
                Ok(Ok(bytes)) => return Ok(bytes),
                Ok(Err(failure)) => failure,
                Err(_) => Failure {
                    kind: RemoteErrorKind::Timeout,
                    transient: true,
                    detail: format!("no answer within {:?} for the range {range:?}", o.request_timeout),
                },
            };
            if !failure.transient || attempt > o.retries {
                return Err(RemoteError {
                    url: object.url.clone(),
                    kind: failure.kind,
                    attempts: attempt,
                    detail: failure.detail,
                });
            }
            self.counters.retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(jitter(delay, range.start ^ u64::from(attempt))).await;
            delay = (delay * 2).min(o.backoff_max);
        }
    }

    /// Reads `reads[k]` from `objects[k]` (as [`crate::io::Vfs::read_batch`]),
    /// through the cache where there is one.
    pub(crate) fn read_batch(&self, objects: &[&ObjectRef], reads: &mut [BatchRead<'_>]) -> Result<(), BatchError> {
        let (keys, shape) = shape(objects, reads)?;
        match &self.cache {
            Some(cache) => self.read_cached(cache, &keys, &shape, reads),
            None => self.fetch(&keys, &shape, reads),
        }
    }

    /// Fetches `reads` (of `shape`: object index into `keys`, offset, length).
    fn fetch(
        &self,
        keys: &[&ObjectRef],
        shape: &[(usize, u64, u64)],
        reads: &mut [BatchRead<'_>],
    ) -> Result<(), BatchError> {
        let batch_error = |index, error| BatchError { index, error };
        let requests = plan(shape, self.options.coalesce_gap, self.options.max_request_bytes);
        if requests.is_empty() {
            return Ok(());
        }
        let Client { runtime, store, in_flight } = self.live().map_err(|e| batch_error(0, e))?;
        let first = |r: &Request| r.parts[0].0;
        runtime.block_on(async {
            let mut done = futures::stream::iter(requests.iter().map(|request| {
                let client = (&*store, &*in_flight);
                async move { (request, self.get(client, keys[request.object], request.range.clone()).await) }
            }))
            .buffer_unordered(self.options.max_in_flight.max(1));
            while let Some((request, bytes)) = done.next().await {
                let bytes = bytes.map_err(|e| batch_error(first(request), e.into_io()))?;
                for &(k, at) in &request.parts {
                    let buf = &mut *reads[k].buf;
                    buf.copy_from_slice(&bytes[at as usize..at as usize + buf.len()]);
                }
            }
            Ok(())
        })
    }

    /// Reads `reads` from the whole cache blocks their bytes lie in: the
    /// cached ones from the cache, the others fetched (coalesced) and cached.
    fn read_cached(
        &self,
        cache: &BlockCache,
        keys: &[&ObjectRef],
        shape: &[Shape],
        reads: &mut [BatchRead<'_>],
    ) -> Result<(), BatchError> {
        let unit = cache.block_bytes();
        let block_len = |id: usize, block: u64| (keys[id].size - block * unit).min(unit) as usize;
        // (object, block) -> the first read that needs it
        let mut need = std::collections::BTreeMap::new();
        for (k, &(id, offset, len)) in shape.iter().enumerate().filter(|(_, s)| s.2 > 0) {
            for block in offset / unit..=(offset + len - 1) / unit {
                need.entry((id, block)).or_insert(k);
            }
        }
        let mut blocks = std::collections::HashMap::new();
        let mut missing = Vec::new();
        for (&(id, block), &k) in &need {
            match cache.get(keys[id], block, block_len(id, block)) {
                Some(bytes) => {
                    self.counters.cached_blocks.fetch_add(1, Ordering::Relaxed);
                    blocks.insert((id, block), bytes);
                }
                None => missing.push((id, block, k)),
            }
        }
        let mut fetched: Vec<Vec<u8>> = missing.iter().map(|&(id, block, _)| vec![0; block_len(id, block)]).collect();
        let missing_shape: Vec<Shape> =
            missing.iter().zip(&fetched).map(|(&(id, block, _), buf)| (id, block * unit, buf.len() as u64)).collect();
        let mut block_reads: Vec<BatchRead<'_>> =
            fetched.iter_mut().zip(&missing_shape).map(|(buf, &(_, offset, _))| BatchRead::new(offset, buf)).collect();
        self.fetch(keys, &missing_shape, &mut block_reads)
            .map_err(|e| BatchError { index: missing[e.index].2, error: e.error })?;
        for (&(id, block, _), bytes) in missing.iter().zip(fetched) {
            cache.put(keys[id], block, &bytes);
            blocks.insert((id, block), bytes);
        }
        for (read, &(id, offset, len)) in reads.iter_mut().zip(shape) {
            let mut at = 0u64;
            while at < len {
                let (block, skip) = ((offset + at) / unit, (offset + at) % unit);
                let bytes = &blocks[&(id, block)];
                let n = (unit - skip).min(len - at) as usize;
                read.buf[at as usize..at as usize + n].copy_from_slice(&bytes[skip as usize..skip as usize + n]);
                at += n as u64;
            }
        }
        Ok(())
    }

    /// The whole of `object` (at most `max` bytes, or an error), in
    /// requests of at most [`RemoteOptions::max_request_bytes`], all in
    /// flight together.
    pub(crate) fn read_whole(&self, object: &ObjectRef, max: u64) -> io::Result<Vec<u8>> {
        if object.size > max {
            let detail = format!("{} bytes, more than the {max} expected", object.size);
            return Err(RemoteError::new(&object.url, RemoteErrorKind::Invalid, detail).into_io());
        }
        let mut whole = vec![0u8; object.size as usize];
        let step = self.options.max_request_bytes.max(1) as usize;
        let mut reads: Vec<BatchRead<'_>> =
            whole.chunks_mut(step).enumerate().map(|(k, buf)| BatchRead::new((k * step) as u64, buf)).collect();
        let objects = vec![object; reads.len()];
        self.read_batch(&objects, &mut reads).map_err(|e| e.error)?;
        Ok(whole)
    }

    /// Runs `future` on this process's runtime with its client (publishing).
    pub(crate) fn run<T>(&self, future: impl AsyncFnOnce(Arc<dyn ObjectStore>) -> io::Result<T>) -> io::Result<T> {
        let client = self.live()?;
        client.runtime.block_on(future(client.store))
    }
}

/// One read of a batch: its object (an index into the batch's objects),
/// offset and length.
type Shape = (usize, u64, u64);

/// The objects of a batch by identity (the same key is one object), and
/// each read as (object index, offset, length); an error for a read past
/// its object's size.
fn shape<'o>(
    objects: &[&'o ObjectRef],
    reads: &[BatchRead<'_>],
) -> Result<(Vec<&'o ObjectRef>, Vec<Shape>), BatchError> {
    let mut keys: Vec<&ObjectRef> = Vec::new();
    let mut shape = Vec::with_capacity(reads.len());
    for (k, read) in reads.iter().enumerate() {
        let object = objects[k];
        let end = read.offset.checked_add(read.buf.len() as u64);
        if end.is_none_or(|end| end > object.size) {
            let detail = format!("{} bytes at {} past its {} bytes", read.buf.len(), read.offset, object.size);
            let error = io::Error::new(io::ErrorKind::UnexpectedEof, format!("{}: {detail}", object.url));
            return Err(BatchError { index: k, error });
        }
        let id = keys.iter().position(|o| o.key == object.key).unwrap_or_else(|| {
            keys.push(object);
            keys.len() - 1
        });
        shape.push((id, read.offset, read.buf.len() as u64));
    }
    Ok((keys, shape))
}

/// `delay` scaled into [0.5, 1.0) by a hash of `seed`: retries of one
/// batch's requests do not all come back at once.
fn jitter(delay: Duration, seed: u64) -> Duration {
    let mut x = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    let unit = (x >> 11) as f64 / (1u64 << 53) as f64;
    delay.mul_f64(0.5 + unit / 2.0)
}

#[cfg(test)]
mod tests {
    use super::plan;

    #[test]
    fn neighbours_merge_within_the_gap_and_the_size_cap() {
        // object, offset, len
        let reads = [(0, 100, 10), (0, 0, 10), (0, 15, 5), (1, 0, 4), (0, 1000, 1), (0, 30, 0)];
        let requests = plan(&reads, 10, 1 << 20);
        let ranges: Vec<_> = requests.iter().map(|r| (r.object, r.range.clone())).collect();
        assert_eq!(ranges, vec![(0, 0..20), (0, 100..110), (0, 1000..1001), (1, 0..4)]);
        assert_eq!(requests[0].parts, vec![(1, 0), (2, 15)]);
        // The cap splits what the gap would merge; a read longer than the cap stays whole.
        let capped = plan(&[(0, 0, 8), (0, 8, 8), (0, 16, 40)], 100, 16);
        let ranges: Vec<_> = capped.iter().map(|r| r.range.clone()).collect();
        assert_eq!(ranges, vec![0..16, 16..56]);
    }

    #[test]
    fn overlapping_and_repeated_reads_share_a_request() {
        let requests = plan(&[(0, 10, 10), (0, 10, 10), (0, 12, 3)], 0, 1 << 20);
        assert_eq!(requests.len(), 1);
        assert_eq!(requests[0].range, 10..20);
        assert_eq!(requests[0].parts, vec![(0, 0), (1, 0), (2, 2)]);
    }
}
