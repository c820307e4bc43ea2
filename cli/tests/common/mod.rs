//! Helpers shared by the CLI tests: running the binary, building stores and
//! datasets with the library, damaging them, and a model of delete.
#![allow(dead_code)] // each test file uses its own subset

use std::cell::Cell;
use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::Output;
use std::sync::{Mutex, MutexGuard};

use loaderx::format::{ENTRY_BYTES, META_FILE, entry_offset};
use loaderx::{Codec, Zrecord, default_dict_size};

/// Serializes tests that write stores in-process against every spawn. A
/// child process starts as a copy of this one: until it execs, it holds a
/// duplicate of every open descriptor, and with it the advisory lock of any
/// store another test thread has open for writing at that moment. That
/// test's next open for writing (its own, or a `loaderx compact` it runs)
/// would then see `Locked`. So a test that opens stores for writing holds
/// [`exclusive`] throughout, and [`loaderx`] spawns under the same mutex.
static SPAWNS: Mutex<()> = Mutex::new(());

thread_local! {
    static HELD: Cell<bool> = const { Cell::new(false) };
}

/// Held by a test that opens stores for writing in-process; see [`SPAWNS`].
pub struct Exclusive(#[allow(dead_code)] MutexGuard<'static, ()>);

pub fn exclusive() -> Exclusive {
    let guard = SPAWNS.lock().unwrap_or_else(|e| e.into_inner());
    HELD.set(true);
    Exclusive(guard)
}

impl Drop for Exclusive {
    fn drop(&mut self) {
        HELD.set(false);
    }
}

/// Runs `f` holding the spawn mutex, unless this thread holds it already.
pub fn spawning<R>(f: impl FnOnce() -> R) -> R {
    if HELD.get() {
        return f();
    }
    let _guard = SPAWNS.lock().unwrap_or_else(|e| e.into_inner());
    f()
}

/// Runs `loaderx ARGS` (an import into the table `dest`) once per
/// `(target, extra)` of `kills`, each run killed once the table holds
/// `target` committed rows and `extra` ms later (at a commit, within an
/// append, between the two); returns the rows each kill left, checked
/// never to go down (a rerun never loses committed rows).
pub fn import_killed_at(args: &[&str], dest: &Path, kills: &[(u64, u64)]) -> Vec<u64> {
    let rows = || loaderx::table::Table::open(dest).map(|t| t.rows()).unwrap_or(0);
    let mut killed_with_rows = Vec::with_capacity(kills.len());
    for &(target, extra) in kills {
        let mut child = spawning(|| {
            std::process::Command::new(env!("CARGO_BIN_EXE_loaderx"))
                .args(args)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        });
        while rows() < target && child.try_wait().unwrap().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(extra));
        let _ = child.kill();
        child.wait().unwrap();
        killed_with_rows.push(rows());
    }
    assert!(killed_with_rows.windows(2).all(|w| w[0] <= w[1]), "a rerun lost committed rows: {killed_with_rows:?}");
    killed_with_rows
}

/// Runs `loaderx ARGS`.
pub fn loaderx(args: &[&str]) -> Output {
    spawning(|| assert_cmd::cargo::cargo_bin_cmd!("loaderx").args(args).output().expect("run loaderx"))
}

/// Runs `loaderx ARGS` with `input` on standard input.
pub fn loaderx_stdin(args: &[&str], input: &str) -> Output {
    spawning(|| {
        assert_cmd::cargo::cargo_bin_cmd!("loaderx").args(args).write_stdin(input).output().expect("run loaderx")
    })
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Asserts success and returns stdout.
pub fn ok(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(0), "stderr: {}\nstdout: {}", stderr(out), stdout(out));
    stdout(out)
}

/// Asserts success and parses stdout as one JSON object on one line.
pub fn ok_json(out: &Output) -> serde_json::Value {
    let text = ok(out);
    assert_eq!(text.lines().count(), 1, "{text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Asserts a failure with exit code 1 and one line `loaderx: ...` containing `needle`.
pub fn assert_fails(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "stderr: {err}");
    assert!(err.starts_with("loaderx: "), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "one line, got: {err}");
    assert!(err.contains(needle), "expected {needle:?} in: {err}");
}

/// Asserts a usage error: exit code 2.
pub fn assert_usage(out: &Output) {
    assert_eq!(out.status.code(), Some(2), "stderr: {}", stderr(out));
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Record `k` of the test stores: `k + 1` copies of a letter, then a
/// compressible tail, so lengths and contents differ per record.
pub fn record(k: usize) -> Vec<u8> {
    let mut r = vec![b'a' + (k % 26) as u8; k + 1];
    r.extend(std::iter::repeat_n(b"tensor ".as_slice(), 20 + k % 50).flatten());
    r
}

/// Appends `records` (any lengths) with `codec`.
pub fn append_records(store: &Zrecord, records: &[Vec<u8>], codec: Codec) {
    let src = records.concat();
    let lens: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
    let mut offsets = Vec::new();
    let mut at = 0u64;
    for &l in &lens {
        offsets.push(at);
        at += u64::from(l);
    }
    store.append_var(&src, &offsets, &lens, codec).unwrap();
}

/// A store of `n` variable-size records with `codec`; returns the records.
pub fn make_store(dir: &Path, n: usize, codec: Codec) -> Vec<Vec<u8>> {
    let records: Vec<Vec<u8>> = (0..n).map(record).collect();
    let store = Zrecord::open(dir).unwrap();
    if codec == Codec::ZstdDict {
        let sizes: Vec<usize> = records.iter().map(Vec::len).collect();
        let flat = records.concat();
        store.train_dict(&flat, &sizes, default_dict_size(flat.len())).unwrap();
    }
    append_records(&store, &records, codec);
    records
}

/// Every record of the store at `dir`, read with the library.
pub fn read_all(dir: &Path) -> Vec<Vec<u8>> {
    let store = Zrecord::open_read_only(dir).unwrap();
    (0..u64::from(store.len())).map(|i| store.get(i).unwrap()).collect()
}

/// The model of swap-with-last delete: holes taken from the highest index
/// down, each filled by the current last record.
pub fn model_delete(records: &mut Vec<Vec<u8>>, indices: &[u64]) {
    let mut doomed: Vec<usize> = indices.iter().map(|&i| i as usize).collect();
    doomed.sort_unstable_by(|a, b| b.cmp(a));
    doomed.dedup();
    for d in doomed {
        let last = records.pop().unwrap();
        if d < records.len() {
            records[d] = last;
        }
    }
}

/// Overwrites bytes of a file in place.
pub fn poke(path: &Path, offset: u64, bytes: &[u8]) {
    let mut file = OpenOptions::new().write(true).open(path).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(bytes).unwrap();
}

/// The 16 bytes of table entry `index` of the store at `dir`.
pub fn entry_bytes(dir: &Path, index: u32) -> [u8; ENTRY_BYTES as usize] {
    let mut out = [0u8; ENTRY_BYTES as usize];
    let mut meta = std::fs::File::open(dir.join(META_FILE)).unwrap();
    meta.seek(SeekFrom::Start(entry_offset(index))).unwrap();
    meta.read_exact(&mut out).unwrap();
    out
}

/// (offset in its chunk, stored length) of record `index`.
pub fn stored_extent(dir: &Path, index: u32) -> (u64, u64) {
    let e = entry_bytes(dir, index);
    let word = |at: usize| u64::from(u32::from_le_bytes(e[at..at + 4].try_into().unwrap()));
    (word(0), word(4))
}

/// Writes a C-order `.npy` file of `<f4` values with `shape`.
pub fn write_npy_f32(path: &Path, shape: &[u64], values: &[f32]) {
    use npyz::WriterBuilder;
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(file).begin_nd().unwrap();
    w.extend(values.iter().copied()).unwrap();
    w.finish().unwrap();
}

/// `(shape, values)` of a `.npy` file of `<f4` values.
pub fn read_npy_f32(bytes: &[u8]) -> (Vec<u64>, Vec<f32>) {
    let npy = npyz::NpyFile::new(bytes).unwrap();
    assert!(npy.dtype().descr().contains("<f4"), "{}", npy.dtype().descr());
    let shape = npy.shape().to_vec();
    (shape, npy.into_vec::<f32>().unwrap())
}

/// Inverts the byte at `offset` of a file.
pub fn flip_byte(path: &Path, offset: u64) {
    let mut file = OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut b = [0u8];
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.read_exact(&mut b).unwrap();
    file.seek(SeekFrom::Start(offset)).unwrap();
    file.write_all(&[!b[0]]).unwrap();
}

/// CRC-32 (IEEE), as the intent record's checksum.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// Leaves the store at `dir` as a crash right after a delete's intent was
/// made durable would (`docs/format.md`, "Intent"): the length drops from
/// `old_len` to `old_len - 1` and entry `hole` takes the last record's entry.
/// Returns the records the store must hold once recovered.
pub fn pending_delete(dir: &Path, records: &[Vec<u8>], hole: u32) -> Vec<Vec<u8>> {
    let old_len = records.len() as u32;
    let mut intent = b"ZINT".to_vec();
    for word in [old_len, old_len - 1, 1, 0] {
        intent.extend_from_slice(&word.to_le_bytes());
    }
    intent.extend_from_slice(&hole.to_le_bytes());
    intent.extend_from_slice(&entry_bytes(dir, old_len - 1));
    let crc = crc32(&intent);
    intent[16..20].copy_from_slice(&crc.to_le_bytes());
    poke(&dir.join(META_FILE), loaderx::format::META_BYTES, &intent);
    let mut after = records.to_vec();
    model_delete(&mut after, &[u64::from(hole)]);
    after
}
