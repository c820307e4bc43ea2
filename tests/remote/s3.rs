//! The remote backend against a real S3 server (SeaweedFS on loopback,
//! started by `tests/remote/run.sh`, which sets `LOADERX_S3_TEST_BUCKET`
//! and the `AWS_*` variables): push, open, gather and pull of stores large
//! enough for multipart uploads; datasets by URL; and the faults: a server
//! that stalls (a loopback proxy that stops forwarding), missing and
//! truncated objects, wrong credentials, an unknown bucket.
//!
//! Built only with the `s3-tests` feature (`run.sh` passes it).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use loaderx::dataset::Dataset;
use loaderx::io::remote::{Location, RemoteError, RemoteErrorKind, RemoteFs, RemoteOptions};
use loaderx::publish::{pull, push};
use loaderx::{Codec, Error, Options, Zrecord};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

fn bucket() -> String {
    std::env::var("LOADERX_S3_TEST_BUCKET").expect("LOADERX_S3_TEST_BUCKET (tests/remote/run.sh sets it)")
}

/// A prefix no other test of this run uses.
fn fresh_url(name: &str) -> String {
    static RUN: AtomicU64 = AtomicU64::new(0);
    let n = RUN.fetch_add(1, Ordering::SeqCst);
    format!("s3://{}/{}-{}-{n}", bucket(), name, std::process::id())
}

fn options() -> RemoteOptions {
    RemoteOptions {
        request_timeout: Duration::from_secs(5),
        backoff_initial: Duration::from_millis(10),
        backoff_max: Duration::from_millis(100),
        ..RemoteOptions::default()
    }
}

fn record(k: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| ((k * 131 + i as u64 * 7) % 251) as u8 ^ (i / 97) as u8).collect()
}

fn local_store(dir: &std::path::Path, n: usize, len: usize, codec: Codec) -> Vec<u8> {
    let store = Zrecord::open(dir).unwrap();
    let flat: Vec<u8> = (0..n as u64).flat_map(|k| record(k, len)).collect();
    store.append(&flat, n, len, codec).unwrap();
    flat
}

/// The server's client, to damage objects behind a reader's back.
fn raw_client() -> (tokio::runtime::Runtime, Arc<dyn ObjectStore>) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = AmazonS3Builder::from_env().with_bucket_name(bucket()).build().unwrap();
    (rt, Arc::new(store))
}

fn key(url: &str, name: &str) -> ObjectPath {
    let prefix = url.strip_prefix(&format!("s3://{}/", bucket())).unwrap();
    ObjectPath::from(format!("{prefix}/{name}"))
}

fn remote_error(error: &Error) -> &RemoteError {
    match error {
        Error::Io { source, .. } => source.get_ref().and_then(|e| e.downcast_ref::<RemoteError>()),
        _ => None,
    }
    .unwrap_or_else(|| panic!("not a remote error: {error}"))
}

fn io_remote_error(error: &std::io::Error) -> &RemoteError {
    error.get_ref().and_then(|e| e.downcast_ref::<RemoteError>()).unwrap_or_else(|| panic!("{error}"))
}

#[test]
fn a_store_with_a_multipart_chunk_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    // 24 MiB raw: 0.zr goes up in parts.
    let flat = local_store(dir.path(), 6144, 4096, Codec::Raw);
    let url = fresh_url("multipart");
    let report = push(dir.path(), &Location::s3(&url, options()).unwrap()).unwrap();
    assert!(report.uploaded.contains(&"0.zr".to_string()));
    let store = Zrecord::open_url(&url, Options::default()).unwrap();
    assert_eq!(store.len(), 6144);
    let picks: Vec<u64> = (0..512).map(|k| (k * 7919) % 6144).collect();
    let mut out = vec![0u8; picks.len() * 4096];
    store.gather(&picks, &mut out, 4096).unwrap();
    for (k, &i) in picks.iter().enumerate() {
        assert_eq!(&out[k * 4096..][..4096], &flat[i as usize * 4096..][..4096], "record {i}");
    }
    let into = tempfile::tempdir().unwrap();
    pull(&Location::s3(&url, options()).unwrap(), into.path()).unwrap();
    let local = Zrecord::open_read_only(into.path()).unwrap();
    let all: Vec<u64> = (0..6144).collect();
    let mut back = vec![0u8; flat.len()];
    local.gather(&all, &mut back, 4096).unwrap();
    assert!(back == flat, "the pulled store holds every record");
    let again = push(dir.path(), &Location::s3(&url, options()).unwrap()).unwrap();
    assert_eq!(again.uploaded, vec!["manifest.json".to_string()], "a second push changes nothing");
}

#[test]
fn a_dataset_opens_by_url() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<f32> = (0..1000 * 8).map(|v| v as f32).collect();
    loaderx::dataset::write_dataset(dir.path(), &rows, &[8], &Default::default()).unwrap();
    let url = fresh_url("dataset");
    push(dir.path(), &Location::s3(&url, options()).unwrap()).unwrap();
    let ds = Dataset::open_url(&url, loaderx::ReadMode::Auto).unwrap();
    assert_eq!((ds.len(), ds.shape()), (1000, &[8usize][..]));
    let mut out = vec![0f32; 16];
    ds.gather_into(&[999, 3], &mut out).unwrap();
    assert_eq!(&out[..8], &rows[999 * 8..1000 * 8]);
    assert_eq!(&out[8..], &rows[3 * 8..4 * 8]);
}

#[test]
fn missing_and_truncated_objects_are_errors_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    local_store(dir.path(), 100, 1000, Codec::Zstd);
    let url = fresh_url("damaged");
    push(dir.path(), &Location::s3(&url, options()).unwrap()).unwrap();
    let store = Zrecord::open_url(&url, Options::default()).unwrap();
    let (rt, client) = raw_client();
    rt.block_on(client.put(&key(&url, "0.zr"), PutPayload::from(vec![0u8; 100]))).unwrap();
    let err = store.get(50).unwrap_err();
    assert_eq!(remote_error(&err).kind, RemoteErrorKind::Changed, "{err}");
    assert!(err.to_string().contains(&format!("{url}/0.zr")), "{err}");
    rt.block_on(client.delete(&key(&url, "0.zr"))).unwrap();
    let err = store.get(50).unwrap_err();
    assert_eq!(remote_error(&err).kind, RemoteErrorKind::NotFound, "{err}");
    // A store whose meta.zr went missing does not open.
    rt.block_on(client.delete(&key(&url, "meta.zr"))).unwrap();
    let err = Zrecord::open_url(&url, Options::default()).unwrap_err();
    assert_eq!(remote_error(&err).kind, RemoteErrorKind::NotFound, "{err}");
}

#[test]
fn wrong_credentials_and_an_unknown_bucket_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    local_store(dir.path(), 10, 100, Codec::Raw);
    let url = fresh_url("credentials");
    push(dir.path(), &Location::s3(&url, options()).unwrap()).unwrap();
    let wrong = Location::s3_with(&url, options(), &[("aws_secret_access_key", "not-the-secret")]).unwrap();
    let err = RemoteFs::open(wrong).unwrap_err();
    assert_eq!(io_remote_error(&err).kind, RemoteErrorKind::Denied, "{err}");
    let unknown = "s3://loaderx-no-such-bucket/store";
    let err = RemoteFs::open(Location::s3(unknown, options()).unwrap()).unwrap_err();
    let remote = io_remote_error(&err);
    assert_eq!(remote.kind, RemoteErrorKind::NotFound, "{err}");
    assert!(err.to_string().contains("no such bucket"), "{err}");
}

/// A loopback TCP proxy to the server that stops forwarding while
/// `stalled` is set: requests then get no answer. Its threads end when
/// their sockets close or, at the latest, `LIFETIME` after they started.
struct Proxy {
    port: u16,
    stalled: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

const LIFETIME: Duration = Duration::from_secs(120);

impl Proxy {
    fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stalled, stop) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (s, t, upstream) = (stalled.clone(), stop.clone(), upstream.to_string());
        std::thread::spawn(move || {
            let started = Instant::now();
            while !t.load(Ordering::SeqCst) && started.elapsed() < LIFETIME {
                match listener.accept() {
                    Ok((client, _)) => {
                        client.set_nonblocking(false).unwrap();
                        let server = TcpStream::connect(&upstream).unwrap();
                        pump(client.try_clone().unwrap(), server.try_clone().unwrap(), s.clone(), t.clone());
                        pump(server, client, s.clone(), t.clone());
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Proxy { port, stalled, stop }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Copies `from` to `to`, holding what it read while `stalled` is set.
fn pump(mut from: TcpStream, mut to: TcpStream, stalled: Arc<AtomicBool>, stop: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let started = Instant::now();
        let mut buf = vec![0u8; 64 << 10];
        from.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
        while !stop.load(Ordering::SeqCst) && started.elapsed() < LIFETIME {
            let n = match from.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
                Err(_) => break,
            };
            while stalled.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst) && started.elapsed() < LIFETIME {
                std::thread::sleep(Duration::from_millis(10));
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Both);
    });
}

#[test]
fn a_stalled_server_is_a_timeout_error_and_the_store_reads_again_after() {
    let dir = tempfile::tempdir().unwrap();
    let flat = local_store(dir.path(), 200, 1000, Codec::Raw);
    let url = fresh_url("stall");
    push(dir.path(), &Location::s3(&url, options()).unwrap()).unwrap();
    let endpoint = std::env::var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL");
    let upstream = endpoint.trim_start_matches("http://").trim_end_matches('/').to_string();
    let proxy = Proxy::start(&upstream);
    let quick = RemoteOptions { request_timeout: Duration::from_millis(300), retries: 2, ..options() };
    let via = format!("http://127.0.0.1:{}", proxy.port);
    let location = Location::s3_with(&url, quick, &[("aws_endpoint", &via)]).unwrap();
    let fs = Arc::new(RemoteFs::open(location).unwrap());
    let store = Zrecord::open_remote(fs.clone(), Options::default()).unwrap();
    assert_eq!(store.get(10).unwrap(), &flat[10_000..11_000]);
    proxy.stalled.store(true, Ordering::SeqCst);
    let err = store.get(20).unwrap_err();
    let remote = remote_error(&err);
    assert_eq!((remote.kind, remote.attempts), (RemoteErrorKind::Timeout, 3), "{err}");
    assert!(err.to_string().contains("0.zr"), "{err}");
    proxy.stalled.store(false, Ordering::SeqCst);
    assert_eq!(store.get(20).unwrap(), &flat[20_000..21_000], "reads again once the server answers");
    assert!(fs.counters().retries >= 2);
}

/// `n` rows from `start` as a Parquet file: `id` int64 and `text` utf8.
fn parquet_rows(start: i64, n: i64) -> Vec<u8> {
    use arrow_array::{Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("text", DataType::Utf8, false),
    ]));
    let ids = Int64Array::from_iter_values(start..start + n);
    let texts = StringArray::from_iter_values((start..start + n).map(|i| format!("row {i}")));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(ids), Arc::new(texts)]).unwrap();
    let mut out = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    out
}

/// Parquet files on the server, imported by their prefix through
/// `open_source` (HEAD, LIST and ranged GETs with `If-Match` against
/// SeaweedFS); every row lands; a rerun is done. The files stay under
/// `import-fixture/tokens/` for run.sh's CLI and Python steps.
#[test]
fn parquet_files_on_the_server_import_by_their_prefix() {
    use loaderx::import::{ImportOptions, SourceOptions, import, open_source};
    let (rt, client) = raw_client();
    for k in 0..3i64 {
        let key = ObjectPath::from(format!("import-fixture/tokens/part-{k}.parquet"));
        rt.block_on(client.put(&key, PutPayload::from(parquet_rows(k * 10_000, 10_000)))).unwrap();
    }
    let url = format!("s3://{}/import-fixture/tokens", bucket());
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t");
    let inputs = [std::path::PathBuf::from(&url)];
    let mut opened = open_source(None, &inputs, &SourceOptions::default()).unwrap();
    let done = import(&mut *opened.source, &dest, &ImportOptions::default(), &mut |_| Ok(())).unwrap();
    assert_eq!(done.rows, 30_000);
    let table = loaderx::table::Table::open(&dest).unwrap();
    assert_eq!(table.strings("text", &[0, 29_999]).unwrap(), ["row 0", "row 29999"]);
    let mut opened = open_source(None, &inputs, &SourceOptions::default()).unwrap();
    let again = import(&mut *opened.source, &dest, &ImportOptions::default(), &mut |_| Ok(())).unwrap();
    assert!(again.already_done, "{again:?}");
    let missing = [std::path::PathBuf::from(format!("s3://{}/import-fixture/none.parquet", bucket()))];
    let err = open_source(None, &missing, &SourceOptions::default()).err().expect("no such object");
    assert!(err.to_string().contains("import-fixture/none.parquet"), "{err}");
}
