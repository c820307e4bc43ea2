//! Helpers shared by the store tests: record generators and a naive model.
#![allow(dead_code)]

pub mod write_mode;

use loaderx::{Codec, Zrecord};

/// Deterministic bytes: mildly compressible (a ramp with noise), so zstd
/// shrinks them but not to nothing.
pub fn record(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (i as u8 / 4).wrapping_add((x % 4) as u8)
        })
        .collect()
}

/// Appends `records` (any sizes) in one call and returns the first index.
pub fn append_all(store: &Zrecord, records: &[Vec<u8>], codec: Codec) -> u64 {
    try_append_all(store, records, codec).expect("append_var")
}

/// As [`append_all`], returning the error.
pub fn try_append_all(store: &Zrecord, records: &[Vec<u8>], codec: Codec) -> loaderx::Result<u64> {
    let mut src = Vec::new();
    let mut offsets = Vec::new();
    let mut lens = Vec::new();
    for r in records {
        offsets.push(src.len() as u64);
        lens.push(r.len() as u32);
        src.extend_from_slice(r);
    }
    store.append_var(&src, &offsets, &lens, codec)
}

/// Reads every record through `gather_var` and compares with `model`.
pub fn assert_matches(store: &Zrecord, model: &[Vec<u8>]) {
    assert_eq!(store.len() as usize, model.len(), "length");
    let indices: Vec<u64> = (0..model.len() as u64).collect();
    let mut lens = vec![0u32; model.len()];
    store.lengths(&indices, &mut lens).expect("lengths");
    let mut offsets = Vec::with_capacity(model.len());
    let mut total = 0u64;
    for (k, (len, want)) in lens.iter().zip(model).enumerate() {
        assert_eq!(*len as usize, want.len(), "length of record {k}");
        offsets.push(total);
        total += u64::from(*len);
    }
    let mut dst = vec![0u8; total as usize];
    store.gather_var(&indices, &mut dst, &offsets, &lens).expect("gather_var");
    for (k, want) in model.iter().enumerate() {
        let got = &dst[offsets[k] as usize..][..want.len()];
        assert!(got == &want[..], "record {k} differs");
    }
}

/// Swap-with-last in descending order, as the store deletes.
pub fn model_delete(model: &mut Vec<Vec<u8>>, indices: &[u64]) {
    let mut doomed = indices.to_vec();
    doomed.sort_unstable_by(|a, b| b.cmp(a));
    doomed.dedup();
    for d in doomed {
        model.swap_remove(d as usize);
    }
}

/// Records `indices` (below a length the caller saw), read through
/// `lengths` and `gather_var`.
pub fn gathered(store: &Zrecord, indices: &[u64]) -> Vec<Vec<u8>> {
    let mut lens = vec![0u32; indices.len()];
    store.lengths(indices, &mut lens).unwrap();
    let mut offsets = Vec::with_capacity(indices.len());
    let mut total = 0u64;
    for &l in &lens {
        offsets.push(total);
        total += u64::from(l);
    }
    let mut dst = vec![0u8; total as usize];
    store.gather_var(indices, &mut dst, &offsets, &lens).unwrap();
    offsets.iter().zip(&lens).map(|(&at, &l)| dst[at as usize..][..l as usize].to_vec()).collect()
}

/// A self-describing record: its id (8 bytes), its length (4), then bytes
/// derived from both, so that any record read back names the one it is, or
/// shows that it is no record at all ([`identify`]).
pub fn described(id: u64) -> Vec<u8> {
    let len = 12 + (id * 37 % 700) as usize;
    let mut bytes = Vec::with_capacity(len);
    bytes.extend_from_slice(&id.to_le_bytes());
    bytes.extend_from_slice(&(len as u32).to_le_bytes());
    bytes.extend((12..len).map(|k| (id as usize * 31 + k * 7) as u8));
    bytes
}

/// The id of a [`described`] record, `None` for bytes that are not one
/// whole.
pub fn identify(bytes: &[u8]) -> Option<u64> {
    let id = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
    (bytes == described(id).as_slice()).then_some(id)
}

/// A command that runs this test binary again (a child process of a
/// test), through `LOADERX_TEST_RUNNER` where it is set: the emulator that
/// runs a foreign target's binaries (tests/platforms/test.sh sets it to
/// qemu-aarch64's command line), as cargo's runner ran this one.
pub fn this_test_binary() -> std::process::Command {
    let exe = std::env::current_exe().expect("the test binary's path");
    let runner = std::env::var("LOADERX_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut command = std::process::Command::new(program);
            command.args(words).arg(exe);
            command
        }
        None => std::process::Command::new(exe),
    }
}

/// Reads and writes at an offset of a file on every platform (std's
/// `FileExt` is Unix's or Windows', with other names): the fault tests flip
/// bytes in place.
pub trait FileAt {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<usize>;

    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset)? {
                0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                n => (buf, offset) = (&mut buf[n..], offset + n as u64),
            }
        }
        Ok(())
    }

    fn write_all_at(&self, mut buf: &[u8], mut offset: u64) -> std::io::Result<()> {
        while !buf.is_empty() {
            match self.write_at(buf, offset)? {
                0 => return Err(std::io::ErrorKind::WriteZero.into()),
                n => (buf, offset) = (&buf[n..], offset + n as u64),
            }
        }
        Ok(())
    }
}

impl FileAt for std::fs::File {
    #[cfg(unix)]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }
    #[cfg(unix)]
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<usize> {
        std::os::unix::fs::FileExt::write_at(self, buf, offset)
    }
    #[cfg(windows)]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        std::os::windows::fs::FileExt::seek_read(self, buf, offset)
    }
    #[cfg(windows)]
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<usize> {
        std::os::windows::fs::FileExt::seek_write(self, buf, offset)
    }
}

/// Flock waiters blocked on the file `path` now, from `/proc/locks` (a
/// blocked request is listed with `->`): how a test knows that a wait has
/// begun without timing it.
#[cfg(target_os = "linux")]
pub fn lock_waiters(path: &std::path::Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let suffix = format!(":{}", std::fs::metadata(path).expect("the locked file").ino());
    let locks = std::fs::read_to_string("/proc/locks").expect("/proc/locks");
    locks
        .lines()
        .filter(|line| line.contains("->") && line.split_whitespace().any(|field| field.ends_with(&suffix)))
        .count()
}

/// Polls until `done()` or `blocked()`, whichever comes first; true if
/// `blocked()` did (a bounded wait for a blocking call to show up in
/// `/proc/locks`, not a timed assertion).
pub fn until_blocked(mut blocked: impl FnMut() -> bool, mut done: impl FnMut() -> bool) -> bool {
    loop {
        if blocked() {
            return true;
        }
        if done() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Makes a FIFO at `path` (`mkfifo(3)`; not the command: a child process
/// would hold copies of other tests' store locks until it execs).
#[cfg(unix)]
pub fn mkfifo(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("a path without NUL");
    // SAFETY: `mkfifo` reads the NUL-terminated name, alive for the call.
    let rc = unsafe { libc::mkfifo(name.as_ptr(), 0o600) };
    assert_eq!(rc, 0, "mkfifo {}: {}", path.display(), std::io::Error::last_os_error());
}

/// While alive, opens the FIFO at `path` for writing whenever a reader has
/// it open, and closes it at once: code that blocked opening it for reading
/// (the bug) then goes on and reads an empty file, so a test of the FIFO
/// case fails on its assertions instead of hanging.
#[cfg(unix)]
pub struct Unblocker {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[cfg(unix)]
impl Unblocker {
    pub fn new(path: &std::path::Path) -> Unblocker {
        use std::os::unix::fs::OpenOptionsExt;
        use std::sync::atomic::Ordering;
        /// Linux's `O_NONBLOCK`: an open for writing fails (ENXIO) while no
        /// reader has the FIFO open, instead of waiting for one.
        const O_NONBLOCK: i32 = 0o4000;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (flag, path) = (stop.clone(), path.to_path_buf());
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                let _ = std::fs::OpenOptions::new().write(true).custom_flags(O_NONBLOCK).open(&path);
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        });
        Unblocker { stop, thread: Some(thread) }
    }
}

#[cfg(unix)]
impl Drop for Unblocker {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
