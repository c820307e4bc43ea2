//! Remote gathers against a live S3 server (`benches/remote.sh` starts
//! SeaweedFS on loopback and runs this), side by side in alternating rounds:
//!
//! - **store**: `Zrecord::gather` of a published store (`open_remote`):
//!   validation, coalescing, the in-flight bound, timeouts, checks;
//! - **bound**: the same byte ranges (the same coalescing rule over the
//!   same records) fetched with `object_store` directly, the same number of
//!   requests in flight, no store logic (no validation, no copy into slots);
//! - **serial**: one GET per record, one after another;
//! - **unchecked**: the store's gather with `VerifyReads::Never`, the same
//!   batches, before or after the store's in turn: what checking each
//!   record against `sums.zr` costs.
//!
//! Reports batches per second, the ratios store / bound and store / serial,
//! requests per batch and bytes fetched per byte returned. With
//! `LOADERX_BENCH_DELAY_MS=D` every request goes through a loopback proxy
//! that holds each response's first bytes for D ms: a remote endpoint's
//! latency.
//!
//! Environment: `LOADERX_S3_TEST_BUCKET`, the `AWS_*` variables (set by
//! `benches/remote.sh`); `LOADERX_BENCH_RECORDS` (default 100,000),
//! `LOADERX_BENCH_RECORD_BYTES` (1024), `LOADERX_BENCH_BATCH` (256),
//! `LOADERX_BENCH_ROUNDS` (5), `LOADERX_BENCH_BATCHES` (batches per
//! workload and round, 10), `LOADERX_BENCH_DELAY_MS` (0).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use loaderx::io::remote::{Location, RemoteFs, RemoteOptions};
use loaderx::publish::push;
use loaderx::sampler::{Mode, Sampler};
use loaderx::{Codec, Options, VerifyReads, Zrecord};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

fn var(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A loopback proxy to `upstream` that holds the first bytes of every
/// upstream read for `delay` (one hold per response for small responses).
fn delay_proxy(upstream: String, delay: Duration, stop: Arc<AtomicBool>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        while !stop.load(Ordering::SeqCst) {
            match listener.accept() {
                Ok((client, _)) => {
                    client.set_nonblocking(false).unwrap();
                    let server = TcpStream::connect(&upstream).unwrap();
                    let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                    std::thread::spawn(move || pump(c2, s2, Duration::ZERO));
                    std::thread::spawn(move || pump(server, client, delay));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    });
    port
}

fn pump(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if !delay.is_zero() {
            std::thread::sleep(delay);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

/// The requests the store's coalescing makes of `ranges` (sorted by start).
fn coalesce(mut ranges: Vec<(u64, u64)>, gap: u64, max: u64) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (start, end) in ranges {
        match out.last_mut() {
            Some(last) if start <= last.1 + gap && end.max(last.1) - last.0 <= max => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

struct Totals {
    seconds: f64,
    batches: u64,
}

fn main() {
    let bucket = std::env::var("LOADERX_S3_TEST_BUCKET").expect("LOADERX_S3_TEST_BUCKET (benches/remote.sh sets it)");
    let (n, len) = (var("LOADERX_BENCH_RECORDS", 100_000), var("LOADERX_BENCH_RECORD_BYTES", 1024) as usize);
    let (batch, rounds, batches) =
        (var("LOADERX_BENCH_BATCH", 256) as usize, var("LOADERX_BENCH_ROUNDS", 5), var("LOADERX_BENCH_BATCHES", 10));
    let delay = Duration::from_millis(var("LOADERX_BENCH_DELAY_MS", 0));

    // A raw store: record i at bytes i * len of 0.zr (appended in order).
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Zrecord::open(dir.path()).unwrap();
        let flat: Vec<u8> = (0..n * len as u64).map(|b| (b % 251) as u8).collect();
        store.append(&flat, n as usize, len, Codec::Raw).unwrap();
    }
    let url = format!("s3://{bucket}/bench-{n}-{len}");
    let options = RemoteOptions::from_env();
    push(dir.path(), &Location::s3(&url, options.clone()).unwrap()).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let endpoint = std::env::var("AWS_ENDPOINT_URL").expect("AWS_ENDPOINT_URL");
    let endpoint = if delay.is_zero() {
        endpoint
    } else {
        let upstream = endpoint.trim_start_matches("http://").trim_end_matches('/').to_string();
        format!("http://127.0.0.1:{}", delay_proxy(upstream, delay, stop.clone()))
    };
    let location = Location::s3_with(&url, options.clone(), &[("aws_endpoint", &endpoint)]).unwrap();
    let fs = Arc::new(RemoteFs::open(location).unwrap());
    let store = Zrecord::open_remote(fs.clone(), Options::default()).unwrap();
    let never = Options { verify_reads: VerifyReads::Never, ..Options::default() };
    let unchecked = Zrecord::open_remote(fs.clone(), never).unwrap();
    let client: Arc<dyn ObjectStore> =
        Arc::new(AmazonS3Builder::from_env().with_bucket_name(&bucket).with_endpoint(&endpoint).build().unwrap());
    let key = ObjectPath::from(format!("bench-{n}-{len}/0.zr"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();

    let sampler = Sampler::new(n, batch, Mode::Iid, 7).unwrap();
    let mut indices = vec![0u64; sampler.batch_len()];
    let mut out = vec![0u8; indices.len() * len];
    let zero = || Totals { seconds: 0.0, batches: 0 };
    let (mut store_t, mut bound_t, mut serial_t, mut unchecked_t) = (zero(), zero(), zero(), zero());
    let (mut requests, mut fetched) = (0u64, 0u64);
    let mut step = 0u64;
    for round in 0..rounds {
        // store, and unchecked (the same batches) before or after it in turn.
        let first = step + 1;
        step += batches;
        let mut timed = |store: &Zrecord| {
            let started = Instant::now();
            for k in 0..batches {
                sampler.fill(first + k, &mut indices).unwrap();
                store.gather(&indices, &mut out, len).unwrap();
            }
            started.elapsed().as_secs_f64()
        };
        if round % 2 == 1 {
            unchecked_t.seconds += timed(&unchecked);
        }
        let before = fs.counters();
        store_t.seconds += timed(&store);
        let after = fs.counters();
        if round % 2 == 0 {
            unchecked_t.seconds += timed(&unchecked);
        }
        (store_t.batches, unchecked_t.batches) = (store_t.batches + batches, unchecked_t.batches + batches);
        (requests, fetched) = (requests + after.requests - before.requests, fetched + after.bytes - before.bytes);
        // bound: the same ranges, the same rule, the same requests in flight.
        let started = Instant::now();
        for k in 0..batches {
            sampler.fill(step - batches + 1 + k, &mut indices).unwrap();
            let ranges = indices.iter().map(|&i| (i * len as u64, (i + 1) * len as u64)).collect();
            let requests = coalesce(ranges, options.coalesce_gap, options.max_request_bytes);
            rt.block_on(async {
                let mut done = futures::stream::iter(requests.iter().map(|&(a, b)| client.get_range(&key, a..b)))
                    .buffer_unordered(options.max_in_flight);
                while let Some(bytes) = done.next().await {
                    std::hint::black_box(bytes.unwrap());
                }
            });
        }
        bound_t.seconds += started.elapsed().as_secs_f64();
        bound_t.batches += batches;
        // serial: one GET per record, one after another (a tenth of the batches: it is slow).
        let serial_batches = batches.div_ceil(10);
        let started = Instant::now();
        for k in 0..serial_batches {
            sampler.fill(step - batches + 1 + k, &mut indices).unwrap();
            for &i in &indices {
                let bytes = rt.block_on(client.get_range(&key, i * len as u64..(i + 1) * len as u64)).unwrap();
                std::hint::black_box(bytes);
            }
        }
        serial_t.seconds += started.elapsed().as_secs_f64();
        serial_t.batches += serial_batches;
        eprintln!("round {round} done");
    }
    stop.store(true, Ordering::SeqCst);
    let rate = |t: &Totals| t.batches as f64 / t.seconds;
    let returned = store_t.batches * indices.len() as u64 * len as u64;
    println!(
        "remote gather, {n} records of {len} B, batches of {batch} (IID), {rounds} alternating rounds, \
         {} in flight, gap {} B, added latency {} ms",
        options.max_in_flight,
        options.coalesce_gap,
        delay.as_millis()
    );
    println!("store   {:10.1} batches/s", rate(&store_t));
    println!("bound   {:10.1} batches/s", rate(&bound_t));
    println!("serial  {:10.1} batches/s", rate(&serial_t));
    println!("store / bound   {:.3}x", rate(&store_t) / rate(&bound_t));
    println!("store / serial  {:.1}x", rate(&store_t) / rate(&serial_t));
    println!("unchecked {:8.1} batches/s", rate(&unchecked_t));
    println!("store / unchecked {:.3}x (the cost of checking each record)", rate(&store_t) / rate(&unchecked_t));
    println!("requests per batch            {:.1}", requests as f64 / store_t.batches as f64);
    println!("bytes fetched per byte returned {:.3}", fetched as f64 / returned as f64);
}
