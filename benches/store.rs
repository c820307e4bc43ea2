//! The store benchmark: append and random-batch gather throughput of
//! [`loaderx::Zrecord`] for each codec, and the physical bounds (memcpy, a
//! memory-mapped `.npy`, single-core zstd decompression times the core
//! count) measured in the same run.
//!
//! ```text
//! cargo bench -p loaderx --bench store -- --data DIR [--json OUT] [--work DIR]
//!     [--reps 5] [--append-reps 5] [--batches 100] [--warmup 20]
//!     [--dict-subset 2000] [--datasets float,image]
//!     [--groups bounds,raw,zstd,zstd_dict,extra] [--round N]
//! ```
//!
//! `DIR` holds `float.npy`, `image.npy` and `indices.npy`, as
//! `benches/compare/make_data.py` writes them; `benches/compare/run.sh` runs
//! this side by side with the reference package and prints both. `--json`
//! (or `LOADERX_BENCH_JSON`) writes the results for that script. Stores are
//! written under `--work` (default: a directory inside `DIR`) and removed.
//! `--groups` picks what to measure (default all): the bounds, one codec's
//! append and gather, or the crate-only extras (dictionary level 19, the
//! dictionary on every record, `min_saving`); run.sh runs one group at a time,
//! alternating with the reference, and `--round` tags the results with the
//! pairing round.
//!
//! Method. Append: the dataset in calls of 64 MiB (the reference's
//! `write_dataset` step), each call durable when it returns, into a fresh
//! store; MiB/s of logical bytes, best and median of `--append-reps` runs;
//! dictionary training is timed apart. Gather: batches of 256 random indices
//! (the `indices.npy` batches, replayed in order) into one reused buffer,
//! `--warmup` batches first, then `--reps` timed runs of `--batches` batches;
//! MiB/s of logical bytes, median and best run.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use loaderx::{Codec, Options, Zrecord, default_dict_size};
use rayon::prelude::*;

const MIB: f64 = (1u64 << 20) as f64;
/// Bytes per append call: the reference `write_dataset`'s `chunk_bytes`.
const APPEND_CALL_BYTES: usize = 64 << 20;
/// The reference's dictionary sample: at most this many records...
const DICT_SAMPLES_MAX: usize = 8192;
/// ...and at most this many bytes.
const DICT_SAMPLE_BYTES_MAX: usize = 256 << 20;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Args {
    data: Option<PathBuf>,
    json: Option<PathBuf>,
    work: Option<PathBuf>,
    reps: usize,
    append_reps: usize,
    batches: usize,
    warmup: usize,
    dict_subset: Option<usize>,
    groups: Vec<String>,
    round: usize,
    datasets: Vec<String>,
}

fn parse_args() -> Res<Args> {
    let mut args = Args {
        data: std::env::var_os("LOADERX_BENCH_DATA").map(PathBuf::from),
        json: std::env::var_os("LOADERX_BENCH_JSON").map(PathBuf::from),
        work: None,
        reps: 5,
        append_reps: 5,
        batches: 100,
        warmup: 20,
        dict_subset: None,
        groups: ["bounds", "raw", "zstd", "zstd_dict", "extra"].map(String::from).to_vec(),
        round: 0,
        datasets: vec!["float".into(), "image".into()],
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            // cargo bench passes --bench to a harness-less target.
            "--bench" => {}
            "--data" => args.data = Some(value()?.into()),
            "--json" => args.json = Some(value()?.into()),
            "--work" => args.work = Some(value()?.into()),
            "--reps" => args.reps = value()?.parse()?,
            "--append-reps" => args.append_reps = value()?.parse()?,
            "--batches" => args.batches = value()?.parse()?,
            "--warmup" => args.warmup = value()?.parse()?,
            "--dict-subset" => args.dict_subset = Some(value()?.parse()?),
            "--groups" => args.groups = value()?.split(',').map(str::to_owned).collect(),
            "--round" => args.round = value()?.parse()?,
            "--datasets" => args.datasets = value()?.split(',').map(str::to_owned).collect(),
            other => return Err(format!("unknown argument {other:?} (see benches/store.rs)").into()),
        }
    }
    Ok(args)
}

/// A `.npy` file: its bytes and its header (the crate's parser).
struct Npy {
    bytes: Vec<u8>,
    offset: usize,
    shape: Vec<usize>,
    itemsize: usize,
}

impl Npy {
    fn read(path: &Path) -> Res<Npy> {
        let header = loaderx::dataset::read_npy_header(path)?;
        let bytes = fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let shape = std::iter::once(header.count as usize).chain(header.record_shape.iter().copied()).collect();
        let npy = Npy { bytes, offset: header.data_offset as usize, shape, itemsize: header.dtype.itemsize() };
        if npy.data().len() != npy.rows() * npy.row_bytes() {
            return Err(format!("{}: size does not match the header", path.display()).into());
        }
        Ok(npy)
    }

    fn rows(&self) -> usize {
        self.shape[0]
    }

    fn row_bytes(&self) -> usize {
        self.shape[1..].iter().product::<usize>() * self.itemsize
    }

    fn data(&self) -> &[u8] {
        &self.bytes[self.offset..]
    }
}

/// Timings of one measured operation.
#[derive(Clone, Debug)]
struct Row {
    dataset: String,
    kind: &'static str,
    name: String,
    /// MiB/s of each timed run.
    runs: Vec<f64>,
    records: usize,
    ratio: Option<f64>,
    train_s: Option<f64>,
    note: String,
}

impl Row {
    fn median(&self) -> f64 {
        let mut v = self.runs.clone();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
    }

    fn best(&self) -> f64 {
        self.runs.iter().copied().fold(0.0, f64::max)
    }
}

/// Runs `f` on index batches: `warmup` untimed, then `reps` timed runs of
/// `batches` batches; returns MiB/s of each run.
fn time_batches(
    idx: &[Vec<u64>],
    batch_bytes: usize,
    warmup: usize,
    batches: usize,
    reps: usize,
    mut f: impl FnMut(&[u64]) -> Res<()>,
) -> Res<Vec<f64>> {
    for k in 0..warmup {
        f(&idx[k % idx.len()])?;
    }
    let mut runs = Vec::with_capacity(reps);
    for r in 0..reps {
        let start = Instant::now();
        for k in 0..batches {
            f(&idx[(warmup + r * batches + k) % idx.len()])?;
        }
        runs.push((batches * batch_bytes) as f64 / MIB / start.elapsed().as_secs_f64());
    }
    Ok(runs)
}

/// The reference's dictionary sample of `count` records: at most 8192 (and
/// 256 MiB), evenly strided over the dataset (`np.linspace`).
fn dict_sample(data: &[u8], count: usize, row: usize) -> (Vec<u8>, Vec<usize>) {
    let k = count.min(DICT_SAMPLES_MAX).min((DICT_SAMPLE_BYTES_MAX / row).max(1));
    let mut picked: Vec<usize> = if k <= 1 {
        vec![0]
    } else {
        let step = (count - 1) as f64 / (k - 1) as f64;
        (0..k).map(|i| ((i as f64 * step) as usize).min(count - 1)).collect()
    };
    picked.dedup();
    let samples = picked.iter().flat_map(|&i| &data[i * row..(i + 1) * row]).copied().collect();
    (samples, vec![row; picked.len()])
}

struct AppendSpec<'a> {
    /// What `--groups` selects it by.
    group: &'static str,
    name: String,
    codec: Codec,
    options: Options,
    records: usize,
    reps: usize,
    note: &'a str,
}

/// Appends the first `spec.records` records into fresh stores; keeps the last
/// store (returned) for the gather measurements.
fn bench_append(dataset: &str, npy: &Npy, work: &Path, spec: &AppendSpec<'_>) -> Res<(Row, PathBuf)> {
    let row = npy.row_bytes();
    let n = spec.records;
    let src = &npy.data()[..n * row];
    let per_call = (APPEND_CALL_BYTES / row).max(1);
    let mut runs = Vec::new();
    let mut train_s = None;
    let mut last = None;
    for rep in 0..spec.reps {
        let path = work.join(format!("{dataset}-{}-{rep}", spec.name.replace([' ', '='], "_")));
        let _ = fs::remove_dir_all(&path);
        let store = Zrecord::open_with(&path, spec.options.clone())?;
        if spec.codec == Codec::ZstdDict {
            let (samples, sizes) = dict_sample(src, n, row);
            let start = Instant::now();
            store.train_dict(&samples, &sizes, default_dict_size(samples.len()))?;
            train_s = Some(start.elapsed().as_secs_f64());
        }
        let start = Instant::now();
        for block in src.chunks(per_call * row) {
            store.append(block, block.len() / row, row, spec.codec)?;
        }
        runs.push(src.len() as f64 / MIB / start.elapsed().as_secs_f64());
        let stats = store.stats()?;
        assert_eq!(stats.records as usize, n);
        let ratio = stats.logical_bytes as f64 / stats.live_bytes as f64;
        drop(store);
        if let Some((old, _)) = last.replace((path, ratio)) {
            fs::remove_dir_all(old)?;
        }
    }
    let (path, ratio) = last.ok_or("--append-reps must be at least 1")?;
    let row = Row {
        dataset: dataset.into(),
        kind: "append",
        name: spec.name.clone(),
        runs,
        records: n,
        ratio: Some(ratio),
        train_s,
        note: spec.note.into(),
    };
    Ok((row, path))
}

struct Ctx<'a> {
    args: &'a Args,
    idx: &'a [Vec<u64>],
    batch: usize,
}

fn bench_gather(ctx: &Ctx<'_>, row_bytes: usize, path: &Path, append: &Row) -> Res<Row> {
    let store = Zrecord::open_with(path, Options { read_only: true, ..Options::default() })?;
    let n = store.len() as u64;
    // A smaller store (the dictionary subset) takes the same batches mod n.
    let idx: Vec<Vec<u64>> = ctx.idx.iter().map(|b| b.iter().map(|i| i % n).collect()).collect();
    let mut dst = vec![0u8; ctx.batch * row_bytes];
    let a = ctx.args;
    let runs =
        time_batches(&idx, dst.len(), a.warmup, a.batches, a.reps, |ix| Ok(store.gather(ix, &mut dst, row_bytes)?))?;
    Ok(Row { kind: "gather", runs, train_s: None, ..append.clone() })
}

fn bench_bounds(ctx: &Ctx<'_>, dataset: &str, npy: &Npy, npy_path: &Path) -> Res<Vec<Row>> {
    let a = ctx.args;
    let row = npy.row_bytes();
    let batch_bytes = ctx.batch * row;
    let src = npy.data();
    let mut dst = vec![0u8; batch_bytes];
    let threads = rayon::current_num_threads();
    let mut rows = Vec::new();
    let mut push = |name: &str, runs: Vec<f64>, note: &str| {
        rows.push(Row {
            dataset: dataset.into(),
            kind: "bound",
            name: name.into(),
            runs,
            records: npy.rows(),
            ratio: None,
            train_s: None,
            note: note.into(),
        });
    };

    // memcpy: the same bytes per batch, contiguous, buffer to buffer.
    let slots = src.len() / batch_bytes;
    let mut k = 0usize;
    let runs = time_batches(ctx.idx, batch_bytes, a.warmup, a.batches, a.reps, |_| {
        k = (k + 1) % slots;
        dst.copy_from_slice(&src[k * batch_bytes..(k + 1) * batch_bytes]);
        Ok(())
    })?;
    push("memcpy 1T", runs, "contiguous batch-sized copy, heap to heap, one thread");
    let part = batch_bytes.div_ceil(threads);
    let runs = time_batches(ctx.idx, batch_bytes, a.warmup, a.batches, a.reps, |_| {
        k = (k + 1) % slots;
        let from = &src[k * batch_bytes..(k + 1) * batch_bytes];
        dst.par_chunks_mut(part).zip(from.par_chunks(part)).for_each(|(d, s)| d.copy_from_slice(s));
        Ok(())
    })?;
    push("memcpy rayon", runs, "the same, split across the rayon pool");

    // A memory-mapped flat file: gather random rows with memcpy.
    let file = fs::File::open(npy_path)?;
    // SAFETY: the benchmark's own input file, not modified while mapped.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    let rows_map = &map[npy.offset..];
    let runs = time_batches(ctx.idx, batch_bytes, a.warmup, a.batches, a.reps, |ix| {
        for (slot, &i) in dst.chunks_mut(row).zip(ix) {
            let i = i as usize;
            slot.copy_from_slice(&rows_map[i * row..(i + 1) * row]);
        }
        Ok(())
    })?;
    push("mmap .npy 1T", runs, "random rows of a memory-mapped .npy, memcpy, one thread");
    let min_len = (ctx.batch / (threads * 4)).max(1);
    let runs = time_batches(ctx.idx, batch_bytes, a.warmup, a.batches, a.reps, |ix| {
        dst.par_chunks_mut(row).zip(ix.par_iter()).with_min_len(min_len).for_each(|(slot, &i)| {
            let i = i as usize;
            slot.copy_from_slice(&rows_map[i * row..(i + 1) * row]);
        });
        Ok(())
    })?;
    push("mmap .npy rayon", runs, "the same across the rayon pool (the store's gather split)");

    // Single-core zstd decompression: every record compressed on its own at
    // the store's level 3 with a content checksum (as the store writes
    // them), then the batch's frames decoded one after another on one
    // thread, with one reused context, into the batch buffer. Times the
    // core count: the most a parallel zstd gather could reach.
    let mut compressor = zstd::bulk::Compressor::new(3)?;
    compressor.include_checksum(true)?;
    let frames: Vec<Vec<u8>> = src.chunks(row).map(|r| compressor.compress(r)).collect::<Result<_, _>>()?;
    let mut decompressor = zstd::bulk::Decompressor::new()?;
    let runs = time_batches(ctx.idx, batch_bytes, a.warmup, a.batches, a.reps, |ix| {
        for (slot, &i) in dst.chunks_mut(row).zip(ix) {
            let n = decompressor.decompress_to_buffer(&frames[i as usize], slot)?;
            debug_assert_eq!(n, row);
        }
        Ok(())
    })?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let scaled = runs.iter().map(|r| r * cores as f64).collect();
    push("zstd decode 1T", runs, "the batch's zstd level-3 frames (with checksum) decoded on one thread");
    push(&format!("zstd decode 1T x {cores} cores"), scaled, "the one-thread figure times the core count");
    Ok(rows)
}

fn bench_dataset(ctx: &Ctx<'_>, dataset: &str, work: &Path, out: &mut Vec<Row>) -> Res<()> {
    let a = ctx.args;
    let data_dir = a.data.as_ref().expect("checked");
    let npy_path = data_dir.join(format!("{dataset}.npy"));
    let npy = Npy::read(&npy_path)?;
    let row = npy.row_bytes();
    let n = npy.rows();
    let subset = a.dict_subset.unwrap_or(n).min(n);
    let wanted = |group: &str| a.groups.iter().any(|g| g == group);
    eprintln!("== {dataset}: {n} records of {row} B; {}", a.groups.join(","));

    if wanted("bounds") {
        out.extend(bench_bounds(ctx, dataset, &npy, &npy_path)?);
    }

    let default = Options::default();
    let spec = |group, name: &str, codec, options, records, reps, note| AppendSpec {
        group,
        name: name.into(),
        codec,
        options,
        records,
        reps,
        note,
    };
    let dict_levels = |level| Options { dict_level: level, ..default.clone() };
    let mut specs = vec![
        spec("raw", "raw", Codec::Raw, default.clone(), n, a.append_reps, ""),
        spec("zstd", "zstd", Codec::Zstd, default.clone(), n, a.append_reps, ""),
        spec("zstd_dict", "zstd_dict", Codec::ZstdDict, default.clone(), subset, a.append_reps, "dict_level 9"),
        spec("extra", "zstd_dict level=16", Codec::ZstdDict, dict_levels(16), subset, 1, "dict_level 16"),
        spec("extra", "zstd_dict level=19", Codec::ZstdDict, dict_levels(19), subset, 1, "the reference's level"),
    ];
    if subset < n {
        specs.push(spec(
            "extra",
            "zstd_dict all",
            Codec::ZstdDict,
            default.clone(),
            n,
            1,
            "every record, dict_level 9",
        ));
    }
    if dataset == "float" {
        let options = Options { min_saving: 0.1, ..default.clone() };
        specs.push(spec(
            "extra",
            "zstd min_saving=0.1",
            Codec::Zstd,
            options,
            n,
            a.append_reps,
            "raw unless zstd saves 10%",
        ));
    }
    for spec in specs.iter().filter(|s| wanted(s.group)) {
        let (append, path) = bench_append(dataset, &npy, work, spec)?;
        eprintln!(
            "   append {:<22} {:>8.0} MiB/s  ratio {:.3}",
            spec.name,
            append.median(),
            append.ratio.unwrap_or(0.0)
        );
        let gather = bench_gather(ctx, row, &path, &append)?;
        eprintln!("   gather {:<22} {:>8.0} MiB/s", spec.name, gather.median());
        out.push(append);
        out.push(gather);
        fs::remove_dir_all(&path)?;
    }
    Ok(())
}

fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The 1-minute load average (the machine is shared: a busy neighbour shows here).
fn load_average() -> f64 {
    fs::read_to_string("/proc/loadavg").ok().and_then(|s| s.split_whitespace().next()?.parse().ok()).unwrap_or(f64::NAN)
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_num(x: Option<f64>) -> String {
    match x {
        Some(x) if x.is_finite() => format!("{x:.6}"),
        _ => "null".into(),
    }
}

fn to_json(args: &Args, rows: &[Row], batch: usize, load: (f64, f64)) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{{\n  \"side\": \"crate\",");
    let _ = writeln!(
        s,
        "  \"machine\": {{\"nproc\": {}, \"cpu\": {}, \"threads\": {}, \"load_start\": {}, \"load_end\": {}}},",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        json_str(&cpu_model()),
        rayon::current_num_threads(),
        json_num(Some(load.0)),
        json_num(Some(load.1))
    );
    let _ = writeln!(
        s,
        "  \"config\": {{\"batch\": {batch}, \"batches\": {}, \"reps\": {}, \"warmup\": {}, \"append_reps\": {}, \"round\": {}}},",
        args.batches, args.reps, args.warmup, args.append_reps, args.round
    );
    s.push_str("  \"results\": [\n");
    for (k, r) in rows.iter().enumerate() {
        let runs: Vec<String> = r.runs.iter().map(|x| format!("{x:.3}")).collect();
        let _ = write!(
            s,
            "    {{\"dataset\": {}, \"kind\": {}, \"name\": {}, \"mib_s\": {}, \"mib_s_best\": {}, \"runs\": [{}], \
             \"records\": {}, \"ratio\": {}, \"train_s\": {}, \"note\": {}}}",
            json_str(&r.dataset),
            json_str(r.kind),
            json_str(&r.name),
            json_num(Some(r.median())),
            json_num(Some(r.best())),
            runs.join(", "),
            r.records,
            json_num(r.ratio),
            json_num(r.train_s),
            json_str(&r.note)
        );
        s.push_str(if k + 1 < rows.len() { ",\n" } else { "\n" });
    }
    s.push_str("  ]\n}\n");
    s
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<7} {:<7} {:<22} {:>8} {:>11} {:>11} {:>8} {:>8}",
        "dataset", "op", "name", "records", "MiB/s med", "MiB/s best", "ratio", "train s"
    );
    for r in rows {
        println!(
            "{:<7} {:<7} {:<22} {:>8} {:>11.0} {:>11.0} {:>8} {:>8}",
            r.dataset,
            r.kind,
            r.name,
            r.records,
            r.median(),
            r.best(),
            r.ratio.map_or(String::new(), |x| format!("{x:.3}x")),
            r.train_s.map_or(String::new(), |x| format!("{x:.2}")),
        );
    }
}

fn main() -> Res<()> {
    let args = parse_args()?;
    let Some(data) = args.data.clone() else {
        eprintln!(
            "store bench: no data directory (give --data DIR or LOADERX_BENCH_DATA); \
             run benches/compare/run.sh, which makes the data and compares with the reference package"
        );
        return Ok(());
    };
    let idx_npy = Npy::read(&data.join("indices.npy"))?;
    if idx_npy.itemsize != 8 || idx_npy.shape.len() != 2 {
        return Err("indices.npy must be (batches, batch) uint64".into());
    }
    let batch = idx_npy.shape[1];
    let idx: Vec<Vec<u64>> = idx_npy
        .data()
        .chunks(batch * 8)
        .map(|b| b.chunks(8).map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes"))).collect())
        .collect();
    let work = args.work.clone().unwrap_or_else(|| data.join("crate-stores"));
    fs::create_dir_all(&work)?;
    eprintln!(
        "store bench: {} threads, batch {batch}, {} x {} batches after {} warm-up, append median of {}",
        rayon::current_num_threads(),
        args.reps,
        args.batches,
        args.warmup,
        args.append_reps
    );
    let ctx = Ctx { args: &args, idx: &idx, batch };
    let load_start = load_average();
    let mut rows = Vec::new();
    for dataset in &args.datasets {
        bench_dataset(&ctx, dataset, &work, &mut rows)?;
    }
    print_table(&rows);
    if let Some(path) = &args.json {
        fs::write(path, to_json(&args, &rows, batch, (load_start, load_average())))?;
        eprintln!("results: {}", path.display());
    }
    Ok(())
}
