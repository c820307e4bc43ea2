//! The cold-cache benchmark: random-batch gather of records that are not in
//! the page cache, for each read mode, beside the device's bound measured in
//! the same run (fio, io_uring, direct, random reads at the record size).
//!
//! ```text
//! cargo bench -p loaderx --bench cold -- [--dir DIR] [--store-mib 2048]
//!     [--record-kib 4,12,128] [--codecs raw,zstd] [--modes mapped,batched,auto,direct]
//!     [--batches 40] [--batch 256] [--rounds 4] [--no-fio] [--no-loader]
//!     [--get-threads 64] [--gets 4096] [--json OUT]
//! ```
//!
//! Method. A store per (record size, codec) of `--store-mib` logical bytes
//! is written once under `DIR` (default `target/cold`, on the work disk)
//! and kept. Each measurement evicts the store's chunk files from the page
//! cache (`posix_fadvise(DONTNEED)`, checked with `mincore`), then gathers
//! `--batches` batches of `--batch` random indices, no record twice (a
//! repeat would come from the cache). The modes alternate within each of
//! `--rounds` rounds, each round starting with another mode and `mapped`
//! last, with a second's pause before each measurement and six after a
//! mapped one (its read-ahead outlives it); the median round is reported.
//! `COLD_VERBOSE=1` prints each round's figure as it is measured.
//! Figures: MiB/s of the records' logical bytes; device bytes read (from
//! `/sys/dev/block/MAJ:MIN/stat`) per byte the records occupy on disk; CPU
//! time (user + system, this process) per batch. Serving: `--gets` single
//! records (`Zrecord::get`, distinct, random) from `--get-threads` threads
//! at once, each call's latency, p50 and p99, cold (evicted first) and warm
//! (the same records again). The bound: `fio` random
//! reads of the record size over all the store's chunk files, `--direct=1
//! --ioengine=io_uring`, queue depths 1 to 128, 4 s each. For a compressed
//! store, two bounds in logical MiB/s: decode (the same kind of batches
//! gathered from memory, mapped, on every core) and device (fio at QD32 at
//! the mean stored record size, times the store's logical/stored ratio).
//! That device bound also runs as a workload of its own in every round
//! (unless `--no-fio`), so that each figure is also given over the bound of
//! its own round ("x the bound", the median of the rounds' ratios): the
//! disk's speed moves from minute to minute.

use std::path::{Path, PathBuf};
use std::time::Instant;

use loaderx::dataset::{DType, Dataset, Kind, Schema};
use loaderx::io::real::{RealFs, evict_page_cache, resident_pages};
use loaderx::loader::DataLoader;
use loaderx::sampler::Mode;
use loaderx::{Codec, Options, ReadMode, Zrecord};

const MIB: f64 = (1u64 << 20) as f64;

struct Args {
    dir: PathBuf,
    loader: bool,
    store_mib: u64,
    record_kib: Vec<usize>,
    codecs: Vec<Codec>,
    modes: Vec<ReadMode>,
    batches: usize,
    batch: usize,
    rounds: usize,
    fio: bool,
    get_threads: usize,
    gets: usize,
    json: Option<PathBuf>,
}

fn parse() -> Args {
    let mut a = Args {
        dir: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/target/cold")),
        loader: true,
        store_mib: 2048,
        record_kib: vec![4, 12, 128],
        codecs: vec![Codec::Raw, Codec::Zstd],
        modes: vec![ReadMode::Mapped, ReadMode::Batched, ReadMode::Auto, ReadMode::Direct],
        batches: 40,
        batch: 256,
        rounds: 4,
        fio: true,
        get_threads: 64,
        gets: 4096,
        json: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--dir" => a.dir = PathBuf::from(value()),
            "--store-mib" => a.store_mib = value().parse().expect("a number"),
            "--record-kib" => a.record_kib = value().split(',').map(|v| v.parse().expect("a number")).collect(),
            "--codecs" => a.codecs = value().split(',').map(|v| Codec::from_name(v).expect("a codec")).collect(),
            "--modes" => a.modes = value().split(',').map(mode).collect(),
            "--batches" => a.batches = value().parse().expect("a number"),
            "--batch" => a.batch = value().parse().expect("a number"),
            "--rounds" => a.rounds = value().parse().expect("a number"),
            "--no-fio" => a.fio = false,
            "--no-loader" => a.loader = false,
            "--get-threads" => a.get_threads = value().parse().expect("a number"),
            "--gets" => a.gets = value().parse().expect("a number"),
            "--json" => a.json = Some(PathBuf::from(value())),
            "--bench" => {}
            other => panic!("unknown argument {other}"),
        }
    }
    a
}

fn mode(name: &str) -> ReadMode {
    ReadMode::from_name(name).unwrap_or_else(|| panic!("unknown mode {name}"))
}

fn mode_name(mode: ReadMode) -> &'static str {
    mode.name()
}

/// What one measurement runs.
#[derive(Clone, Copy, PartialEq)]
enum Workload {
    /// `Zrecord::gather` of each batch, in this mode.
    Gather(ReadMode),
    /// A `DataLoader` over the store as a dataset (default options: `Auto`).
    Loader,
    /// The device's bound in the same round: fio at QD32 (`device_bound`).
    Bound,
}

impl Workload {
    fn name(self) -> String {
        match self {
            Workload::Gather(mode) => format!("gather {}", mode_name(mode)),
            Workload::Loader => "loader".to_string(),
            Workload::Bound => "bound (fio QD32)".to_string(),
        }
    }
}

/// Record `k` of `len` bytes: half noise, half runs (zstd keeps about 60%).
fn record(k: u64, len: usize, out: &mut Vec<u8>) {
    let mut x = k.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    out.extend((0..len).map(|i| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if (i / 64) % 2 == 0 { x as u8 } else { (i / 512) as u8 }
    }));
}

/// The store for (record size, codec), written once.
fn ensure_store(args: &Args, len: usize, codec: Codec) -> (PathBuf, u64) {
    let n = (args.store_mib << 20) / len as u64;
    let path = args.dir.join(format!("{}k-{}-{}m", len >> 10, codec.name(), args.store_mib));
    let schema = Schema::fixed(DType::native(Kind::Uint, 1), vec![len], codec).expect("a schema");
    if let Ok(store) = Zrecord::open_read_only(&path)
        && u64::from(store.len()) == n
    {
        schema.write(&RealFs, &path).expect("schema.json");
        return (path, n);
    }
    let _ = std::fs::remove_dir_all(&path);
    eprintln!("writing {} ({n} records)", path.display());
    let store = Zrecord::open(&path).expect("create the store");
    let per_call = ((64 << 20) / len).max(1) as u64;
    let mut buf = Vec::new();
    for first in (0..n).step_by(per_call as usize) {
        buf.clear();
        let count = per_call.min(n - first);
        (first..first + count).for_each(|k| record(k, len, &mut buf));
        store.append(&buf, count as usize, len, codec).expect("append");
    }
    schema.write(&RealFs, &path).expect("schema.json");
    (path, n)
}

fn chunk_files(store: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(store)
        .expect("the store")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(".zr") && n != "meta.zr"))
        .collect();
    files.sort();
    files
}

/// Evicts the chunk files; panics if more than 1% of their pages stay.
fn evict(store: &Path) {
    let (mut resident, mut pages) = (0, 0);
    for file in chunk_files(store) {
        evict_page_cache(&file).expect("evict");
        let (r, p) = resident_pages(&file).expect("mincore");
        (resident, pages) = (resident + r, pages + p);
    }
    assert!(resident * 100 <= pages.max(1), "eviction left {resident} of {pages} pages resident");
}

/// Sectors read so far by the device holding `path`.
fn device_bytes(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).expect("stat").dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let stat = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/stat")).unwrap_or_default();
    stat.split_whitespace().nth(2).and_then(|s| s.parse::<u64>().ok()).unwrap_or(0) * 512
}

/// User plus system CPU seconds of this process.
fn cpu_seconds() -> f64 {
    // SAFETY: `getrusage` writes one `rusage` into the zeroed struct given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

struct Measured {
    mib_s: f64,
    amplification: f64,
    cpu_ms_per_batch: f64,
}

/// One cold measurement of `workload` on the store at `path` of `n` records.
fn measure(args: &Args, path: &Path, n: u64, len: usize, workload: Workload, seed: u64) -> Measured {
    match workload {
        Workload::Gather(mode) => measure_gather(args, path, n, len, mode, seed),
        Workload::Loader => measure_loader(args, path, len, seed),
        Workload::Bound => {
            let (files, bs, ratio) = device_bound(path, len);
            let mib_s = fio(&files, bs, 32).map_or(f64::NAN, |b| b * ratio);
            Measured { mib_s, amplification: f64::NAN, cpu_ms_per_batch: f64::NAN }
        }
    }
}

/// What fio reads for a store's device bound: its chunk files, at the
/// record size (raw) or at the mean stored record size rounded up to 512
/// bytes (compressed), and the factor from stored to logical bytes.
fn device_bound(path: &Path, len: usize) -> (Vec<PathBuf>, usize, f64) {
    let stats = Zrecord::open_read_only(path).and_then(|s| s.stats()).expect("stats");
    let files = chunk_files(path);
    if stats.live_bytes >= stats.logical_bytes {
        return (files, len, 1.0);
    }
    let stored_mean = stats.live_bytes / u64::from(stats.records.max(1));
    let bs = (stored_mean as usize).next_multiple_of(512).max(512);
    (files, bs, stats.logical_bytes as f64 / stats.live_bytes.max(1) as f64)
}

/// The loader's batches (cyclic: no record twice), timed from the first
/// request to the last batch. Device bytes are per byte of the batches
/// taken, the prefetched ones not counted (so slightly high).
fn measure_loader(args: &Args, path: &Path, len: usize, seed: u64) -> Measured {
    evict(path);
    let dataset = Dataset::open(path).expect("the dataset");
    let ratio = {
        let stats = Zrecord::open_read_only(path).and_then(|s| s.stats()).expect("stats");
        stats.live_bytes as f64 / stats.logical_bytes.max(1) as f64
    };
    let (dev0, cpu0, t0) = (device_bytes(path), cpu_seconds(), Instant::now());
    let mut loader = DataLoader::builder()
        .stream("x", dataset)
        .batch_size(args.batch)
        .mode(Mode::Cyclic)
        .seed(seed)
        .build()
        .expect("the loader");
    for _ in 0..args.batches {
        loader.next_batch().expect("a batch");
    }
    let seconds = t0.elapsed().as_secs_f64();
    let (dev, cpu) = (device_bytes(path) - dev0, cpu_seconds() - cpu0);
    drop(loader);
    let logical = (args.batches * args.batch * len) as f64;
    Measured {
        mib_s: logical / MIB / seconds,
        amplification: dev as f64 / (logical * ratio),
        cpu_ms_per_batch: cpu * 1e3 / args.batches as f64,
    }
}

fn measure_gather(args: &Args, path: &Path, n: u64, len: usize, mode: ReadMode, seed: u64) -> Measured {
    let store =
        Zrecord::open_with(path, Options { read_only: true, read_mode: mode, ..Options::default() }).expect("open");
    evict(path);
    let mut out = vec![0u8; args.batch * len];
    let batches = distinct_batches(n, args.batches, args.batch, seed);
    let stored: u64 = {
        let mut lens = vec![0u32; args.batch];
        batches.iter().map(|b| phys_bytes(&store, b, &mut lens)).sum()
    };
    evict(path); // the lengths above read no record, but be sure
    let (dev0, cpu0, t0) = (device_bytes(path), cpu_seconds(), Instant::now());
    for batch in &batches {
        store.gather(batch, &mut out, len).expect("gather");
    }
    let seconds = t0.elapsed().as_secs_f64();
    let (dev, cpu) = (device_bytes(path) - dev0, cpu_seconds() - cpu0);
    let logical = (args.batches * args.batch * len) as f64;
    Measured {
        mib_s: logical / MIB / seconds,
        amplification: dev as f64 / stored as f64,
        cpu_ms_per_batch: cpu * 1e3 / args.batches as f64,
    }
}

/// The order of the workloads in round `round`: the others rotated, each
/// round starting with the next, and the mapped gather last (its
/// read-ahead outlives it).
fn round_order(workloads: &[Workload], round: usize) -> Vec<usize> {
    let mapped = |w: &Workload| *w == Workload::Gather(ReadMode::Mapped);
    let others: Vec<usize> = (0..workloads.len()).filter(|&m| !mapped(&workloads[m])).collect();
    let mut order: Vec<usize> = (0..others.len()).map(|k| others[(round + k) % others.len()]).collect();
    order.extend((0..workloads.len()).filter(|&m| mapped(&workloads[m])));
    order
}

/// `batches` batches of `batch` random indices below `n`, no index twice
/// (a repeat would be read from the cache), as long as `n` allows.
fn distinct_batches(n: u64, batches: usize, batch: usize, seed: u64) -> Vec<Vec<u64>> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut all: Vec<u64> = (0..n).collect();
    let want = (batches * batch).min(n as usize);
    for k in 0..want {
        let j = k + (next() % (n - k as u64)) as usize;
        all.swap(k, j);
    }
    let mut picks: Vec<u64> = all[..want].to_vec();
    while picks.len() < batches * batch {
        picks.push(next() % n); // more reads asked for than records: repeats
    }
    picks.chunks(batch).map(<[u64]>::to_vec).collect()
}

/// Bytes the records of `batch` occupy on disk (from `stats` of the
/// store's codec mix: raw records are their length; compressed ones are
/// estimated by the store's average).
fn phys_bytes(store: &Zrecord, batch: &[u64], lens: &mut [u32]) -> u64 {
    store.lengths(batch, lens).expect("lengths");
    let stats = store.stats().expect("stats");
    let ratio = stats.live_bytes as f64 / stats.logical_bytes.max(1) as f64;
    (lens.iter().map(|&l| f64::from(l)).sum::<f64>() * ratio) as u64
}

/// p50 and p99 of `get` latencies (microseconds) with `threads` callers,
/// cold and then warm, for each read mode.
fn measure_gets(args: &Args, path: &Path, n: u64, mode: ReadMode) -> [(f64, f64); 2] {
    let store =
        Zrecord::open_with(path, Options { read_only: true, read_mode: mode, ..Options::default() }).expect("open");
    let picks = distinct_batches(n, 1, args.gets, 99).remove(0);
    let mut out = [(0.0, 0.0); 2];
    for (k, cold) in [true, false].into_iter().enumerate() {
        if cold {
            evict(path);
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let mut latencies: Vec<f64> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..args.get_threads)
                .map(|_| {
                    scope.spawn(|| {
                        let mut mine = Vec::new();
                        loop {
                            let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                            let Some(&index) = picks.get(k) else { break };
                            let t0 = Instant::now();
                            std::hint::black_box(store.get(index).expect("get"));
                            mine.push(t0.elapsed().as_secs_f64() * 1e6);
                        }
                        mine
                    })
                })
                .collect();
            workers.into_iter().flat_map(|w| w.join().expect("a caller")).collect()
        });
        latencies.sort_by(f64::total_cmp);
        let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize];
        out[k] = (at(0.5), at(0.99));
    }
    out
}

/// The bounds of a compressed store's cold gather, in logical MiB/s: the
/// decode bound (the same kind of batches, gathered from memory on every
/// core: the chunk files read in first) and the device bound (fio at QD32
/// at the mean stored record size, rounded up to 512 bytes, times the
/// store's ratio of logical to stored bytes).
fn compressed_bounds(args: &Args, path: &Path, n: u64, len: usize) -> (f64, f64, usize) {
    let store =
        Zrecord::open_with(path, Options { read_only: true, read_mode: ReadMode::Mapped, ..Options::default() })
            .expect("open");
    let files = chunk_files(path);
    let mut sink = vec![0u8; 16 << 20];
    for file in &files {
        use std::io::Read;
        let mut f = std::fs::File::open(file).expect("a chunk file");
        while f.read(&mut sink).expect("read") > 0 {}
    }
    let mut out = vec![0u8; args.batch * len];
    let batches = distinct_batches(n, args.batches, args.batch, 5);
    let t0 = Instant::now();
    for batch in &batches {
        store.gather(batch, &mut out, len).expect("gather");
    }
    let decode = (batches.len() * args.batch * len) as f64 / MIB / t0.elapsed().as_secs_f64();
    let (files, bs, ratio) = device_bound(path, len);
    let device = if args.fio { fio(&files, bs, 32).map_or(f64::NAN, |b| b * ratio) } else { f64::NAN };
    (decode, device, bs)
}

/// `x` to three decimals, or `null` where it is not a number (a figure
/// the workload has none of, such as the bound's CPU time).
fn json_number(x: f64) -> String {
    if x.is_finite() { format!("{x:.3}") } else { "null".to_string() }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// fio's random-read bandwidth (MiB/s) over `files` (the store's chunk
/// files, so that the reads span what the gathers' span) at `bs` bytes,
/// queue depth `qd`.
fn fio(files: &[PathBuf], bs: usize, qd: usize) -> Option<f64> {
    // fio separates file names with ':'.
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    let out = std::process::Command::new("fio")
        .args(["--name=bound", "--rw=randread", "--direct=1", "--ioengine=io_uring", "--time_based"])
        .arg("--runtime=4")
        .arg(format!("--bs={bs}"))
        .arg(format!("--iodepth={qd}"))
        .arg(format!("--filename={}", names.join(":")))
        .args(["--output-format=terse", "--terse-version=3"])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let kib_s: f64 = text.split(';').nth(6)?.parse().ok()?;
    Some(kib_s / 1024.0)
}

fn main() {
    let args = parse();
    std::fs::create_dir_all(&args.dir).expect("the work directory");
    let mut json = Vec::new();
    println!("engine: {}", loaderx::io::real::read_engine().name());
    for &kib in &args.record_kib {
        let len = kib << 10;
        for &codec in &args.codecs {
            let (path, n) = ensure_store(&args, len, codec);
            let mut workloads: Vec<Workload> = args.modes.iter().map(|&m| Workload::Gather(m)).collect();
            if args.loader {
                workloads.push(Workload::Loader);
            }
            if args.fio {
                workloads.push(Workload::Bound);
            }
            let mut rounds: Vec<Vec<Measured>> = workloads.iter().map(|_| Vec::new()).collect();
            for round in 0..args.rounds {
                for m in round_order(&workloads, round) {
                    // The device settles first: a mapped run leaves seconds
                    // of read-ahead in flight behind it.
                    let after_mapped = rounds
                        .iter()
                        .zip(&workloads)
                        .any(|(r, &w)| w == Workload::Gather(ReadMode::Mapped) && r.len() > round);
                    std::thread::sleep(std::time::Duration::from_secs(if after_mapped { 6 } else { 1 }));
                    let seed = (round * 7 + m + 1) as u64;
                    rounds[m].push(measure(&args, &path, n, len, workloads[m], seed));
                    if std::env::var_os("COLD_VERBOSE").is_some() {
                        let r = rounds[m].last().expect("just pushed");
                        eprintln!("  round {round} {}: {:.1} MiB/s", workloads[m].name(), r.mib_s);
                    }
                }
            }
            let bound = workloads.iter().position(|&w| w == Workload::Bound);
            for (m, &workload) in workloads.iter().enumerate() {
                let runs = &rounds[m];
                let mib_s = median(runs.iter().map(|r| r.mib_s).collect());
                let amp = median(runs.iter().map(|r| r.amplification).collect());
                let cpu = median(runs.iter().map(|r| r.cpu_ms_per_batch).collect());
                // Each round's figure over the same round's bound.
                let of_bound = bound.map_or(f64::NAN, |b| {
                    median(runs.iter().zip(&rounds[b]).map(|(r, b)| r.mib_s / b.mib_s).collect())
                });
                if workload == Workload::Bound {
                    println!("{kib:>4} KiB {:<5} {:<16} {mib_s:>9.1} MiB/s", codec.name(), workload.name());
                } else {
                    println!(
                        "{kib:>4} KiB {:<5} {:<16} {mib_s:>9.1} MiB/s  {of_bound:>5.2}x the bound  device bytes {amp:>6.2}x  CPU {cpu:>7.2} ms/batch",
                        codec.name(),
                        workload.name()
                    );
                }
                json.push(format!(
                    r#"{{"record_kib":{kib},"codec":"{}","workload":"{}","mib_s":{},"of_bound":{},"device_bytes_per_byte":{},"cpu_ms_per_batch":{}}}"#,
                    codec.name(),
                    workload.name(),
                    json_number(mib_s),
                    json_number(of_bound),
                    json_number(amp),
                    json_number(cpu)
                ));
            }
            for &mode in &args.modes {
                std::thread::sleep(std::time::Duration::from_secs(3));
                let [(c50, c99), (w50, w99)] = measure_gets(&args, &path, n, mode);
                println!(
                    "{kib:>4} KiB {:<5} get {:<11} {} callers: cold p50 {c50:>8.0} us p99 {c99:>8.0} us, warm p50 {w50:>6.1} us p99 {w99:>7.1} us",
                    codec.name(),
                    mode_name(mode),
                    args.get_threads
                );
                json.push(format!(
                    r#"{{"record_kib":{kib},"codec":"{}","workload":"get {}","callers":{},"cold_p50_us":{c50:.1},"cold_p99_us":{c99:.1},"warm_p50_us":{w50:.2},"warm_p99_us":{w99:.2}}}"#,
                    codec.name(),
                    mode_name(mode),
                    args.get_threads
                ));
            }
            if codec != Codec::Raw {
                let (decode, device, bs) = compressed_bounds(&args, &path, n, len);
                println!(
                    "{kib:>4} KiB {:<5} bounds (logical MiB/s): decode {decode:.0} (warm mapped gather, all cores), device {device:.0} (fio QD32 at {bs} bytes, times the ratio)",
                    codec.name()
                );
                json.push(format!(
                    r#"{{"record_kib":{kib},"codec":"{}","decode_bound_mib_s":{decode:.1},"device_bound_mib_s":{device:.1},"device_bound_bs":{bs}}}"#,
                    codec.name()
                ));
            }
            if args.fio && codec == Codec::Raw {
                let files = chunk_files(&path);
                let bound: Vec<String> = [1, 2, 8, 32, 128]
                    .iter()
                    .filter_map(|&qd| fio(&files, len, qd).map(|b| format!("QD{qd} {b:.0}")))
                    .collect();
                println!("{kib:>4} KiB fio bound (MiB/s): {}", bound.join(", "));
                json.push(format!(r#"{{"record_kib":{kib},"fio":"{}"}}"#, bound.join(", ")));
            }
        }
    }
    if let Some(out) = &args.json {
        std::fs::write(out, format!("[{}]\n", json.join(",\n"))).expect("write the JSON");
    }
}
