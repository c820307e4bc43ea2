//! The I/O boundary's batched read on the real filesystem: every read is
//! filled whole, its `Then` runs once it is (exactly once), `Then`s run
//! while other reads of the batch are still in flight, and a panic in a
//! `Then` leaves no read in flight behind it.
//!
//! CI runs the workspace tests with the engine this machine picks (io_uring
//! where it works); these tests and the batched-store tests run with
//! `LOADERX_READ_ENGINE=threads` too.

use std::io::{self, Read, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use loaderx::io::real::RealFs;
use loaderx::io::{BatchRead, Handle, LockKind, Map, MapMode, OpenMode, Stat, SyncKind, Vfs, VfsFile};

/// Reads per batch: more than two rings' worth (128 in flight each).
const READS: usize = 300;
const LEN: usize = 1000;
/// What a buffer holds before its read fills it: no byte of the file.
const UNREAD: u8 = 0xFF;

fn byte(position: u64) -> u8 {
    (position % 251) as u8
}

fn data_file(dir: &std::path::Path) -> Box<dyn VfsFile> {
    let path = dir.join("data");
    let bytes: Vec<u8> = (0..(READS * LEN * 2) as u64).map(byte).collect();
    std::fs::write(&path, bytes).unwrap();
    RealFs.open(&path, OpenMode::Read).unwrap()
}

/// Read `k`'s offset: scattered over the file, out of order.
fn offset(k: usize) -> u64 {
    ((k * 7919) % (READS * 2)) as u64 * LEN as u64
}

fn holds_its_bytes(k: usize, buf: &[u8]) -> bool {
    buf.iter().enumerate().all(|(i, &b)| b == byte(offset(k) + i as u64))
}

#[test]
fn each_then_sees_its_read_whole_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = data_file(dir.path());
    let mut bufs = vec![vec![UNREAD; LEN]; READS];
    let mut outs = vec![vec![0u8; LEN]; READS];
    let mut reads: Vec<BatchRead<'_>> = (bufs.iter_mut().zip(outs.iter_mut()).enumerate())
        .map(|(k, (buf, out))| BatchRead { offset: offset(k), buf, out })
        .collect();
    let calls = Mutex::new(vec![0u32; READS]);
    let files: Vec<&dyn VfsFile> = vec![&*file; READS];
    RealFs
        .read_batch(&files, &mut reads, &|k, read| {
            assert!(holds_its_bytes(k, read.buf), "read {k} handed to its Then before it was whole");
            read.out.copy_from_slice(read.buf);
            calls.lock().unwrap()[k] += 1;
        })
        .unwrap();
    drop(reads);
    assert!(calls.into_inner().unwrap().iter().all(|&c| c == 1), "every Then ran exactly once");
    for (k, (buf, out)) in bufs.iter().zip(&outs).enumerate() {
        assert!(holds_its_bytes(k, buf) && holds_its_bytes(k, out), "read {k}");
    }
}

/// The read end of a pipe, as a file of a batch: its read completes only
/// once something writes the other end.
#[derive(Debug)]
struct PipeEnd(io::PipeReader);

impl VfsFile for PipeEnd {
    fn stat(&self) -> io::Result<Stat> {
        Ok(Stat::of_len(u64::MAX))
    }
    fn read_at(&self, buf: &mut [u8], _offset: u64) -> io::Result<usize> {
        (&self.0).read(buf)
    }
    #[cfg(unix)]
    fn handle(&self) -> Handle {
        use std::os::fd::AsRawFd;
        Handle(self.0.as_raw_fd() as u64)
    }
    #[cfg(windows)]
    fn handle(&self) -> Handle {
        use std::os::windows::io::AsRawHandle;
        Handle(self.0.as_raw_handle() as u64)
    }
    fn write_at(&self, _: &[u8], _: u64) -> io::Result<usize> {
        unreachable!("only read")
    }
    fn set_len(&self, _: u64) -> io::Result<()> {
        unreachable!("only read")
    }
    fn sync(&self, _: SyncKind) -> io::Result<()> {
        unreachable!("only read")
    }
    fn lock(&self, _: LockKind, _: bool) -> io::Result<bool> {
        unreachable!("only read")
    }
    fn map(&self, _: usize, _: MapMode) -> io::Result<Box<dyn Map>> {
        unreachable!("only read")
    }
}

/// The last read of the batch waits on a pipe that only the `Then` of the
/// first read writes (a watchdog writes it after 20 s, so a batch that ran
/// its `Then`s only after every read completed fails instead of hanging).
#[test]
fn thens_run_while_other_reads_are_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let file = data_file(dir.path());
    let (reader, writer) = io::pipe().unwrap();
    let (pipe, writer) = (PipeEnd(reader), Mutex::new(Some(writer)));
    let by_then = AtomicBool::new(false);
    let wake = |from_then: bool| {
        if let Some(mut w) = writer.lock().unwrap().take() {
            by_then.store(from_then, Ordering::SeqCst);
            w.write_all(&[7; 8]).unwrap();
        }
    };
    let mut bufs = vec![vec![UNREAD; 8]; 11];
    let mut reads: Vec<BatchRead<'_>> =
        bufs.iter_mut().enumerate().map(|(k, buf)| BatchRead::new(offset(k), buf)).collect();
    let mut files: Vec<&dyn VfsFile> = vec![&*file; 10];
    files.push(&pipe);
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let wake = &wake;
    std::thread::scope(|s| {
        s.spawn(move || {
            if finished.recv_timeout(Duration::from_secs(20)).is_err() {
                wake(false);
            }
        });
        let read = RealFs.read_batch(&files, &mut reads, &|k, _| {
            if k == 0 {
                wake(true)
            }
        });
        drop(done);
        read.unwrap();
    });
    assert!(by_then.load(Ordering::SeqCst), "the first read's Then ran only after the pipe's read completed");
    assert_eq!(bufs[10], [7; 8]);
}

#[test]
fn a_panic_in_a_then_leaves_no_read_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let file = data_file(dir.path());
    let files: Vec<&dyn VfsFile> = vec![&*file; READS];
    let batch = |panic_at: Option<usize>| {
        let mut bufs = vec![vec![UNREAD; LEN]; READS];
        let mut reads: Vec<BatchRead<'_>> =
            bufs.iter_mut().enumerate().map(|(k, buf)| BatchRead::new(offset(k), buf)).collect();
        let result = catch_unwind(AssertUnwindSafe(|| {
            RealFs.read_batch(&files, &mut reads, &|k, _| assert_ne!(Some(k), panic_at, "asked to panic"))
        }));
        drop(reads);
        (result.is_err(), bufs)
    };
    let (panicked, _) = batch(Some(5));
    assert!(panicked);
    // The same thread's ring takes the next batch, and every read is whole.
    let (panicked, bufs) = batch(None);
    assert!(!panicked);
    assert!(bufs.iter().enumerate().all(|(k, buf)| holds_its_bytes(k, buf)));
}

#[test]
fn a_read_past_the_end_fails_and_its_then_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let file = data_file(dir.path());
    let end = file.stat().unwrap().len;
    let (mut good, mut past) = (vec![UNREAD; LEN], vec![UNREAD; LEN]);
    let mut reads = vec![BatchRead::new(0, &mut good), BatchRead::new(end - 10, &mut past)];
    let files: Vec<&dyn VfsFile> = vec![&*file; 2];
    let ran = Mutex::new(Vec::new());
    let error = RealFs.read_batch(&files, &mut reads, &|k, _| ran.lock().unwrap().push(k)).unwrap_err();
    assert_eq!((error.index, error.error.kind()), (1, io::ErrorKind::UnexpectedEof));
    assert!(!ran.into_inner().unwrap().contains(&1));
}
