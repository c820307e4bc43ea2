//! Batched positional reads on Linux io_uring: a batch's reads are queued
//! on this thread's ring and submitted together, up to [`RING_ENTRIES`] in
//! flight; short reads continue where they stopped. Each completed read's
//! [`Then`] runs after the queue has been refilled and submitted, so the
//! device works on the next reads while this thread decodes.
//!
//! The safety argument rests on one rule: [`read_batch`] does not return,
//! and does not unwind, while a read it submitted is in flight. The kernel
//! writes into the callers' buffers only while their reads are in flight,
//! and the buffers are borrowed (`&mut`) for the whole call, so no buffer is
//! freed, moved or read by anyone else while the kernel may write it. The
//! [`Drain`] guard enforces the rule on every exit, an early error and a
//! panic included (one in a [`Then`] too); if the ring cannot be drained at
//! all, the process aborts rather than free memory the kernel may still
//! write. A [`Then`] only ever sees a read that is no longer in flight.

use std::cell::RefCell;
use std::io;
use std::os::fd::RawFd;

use io_uring::{IoUring, opcode, types};

use super::{BatchError, BatchRead, Then};

/// Submission queue entries of each thread's ring: the most reads one
/// thread keeps in flight.
pub(crate) const RING_ENTRIES: u32 = 128;

thread_local! {
    /// This thread's ring, created on first use (`None`: creation failed).
    static RING: RefCell<Option<Option<IoUring>>> = const { RefCell::new(None) };
}

/// True if io_uring works here: a ring can be set up and completes a no-op
/// (old kernels lack it; container seccomp profiles often block it).
pub(crate) fn available() -> bool {
    let Ok(mut ring) = IoUring::new(2) else { return false };
    let nop = opcode::Nop::new().build().user_data(7);
    // SAFETY: a no-op references no memory.
    if unsafe { ring.submission().push(&nop) }.is_err() || ring.submit_and_wait(1).is_err() {
        return false;
    }
    ring.completion().next().is_some_and(|cqe| cqe.user_data() == 7 && cqe.result() >= 0)
}

/// Reads every request whole, request `i` from descriptor `fd_of(i)`, on
/// this thread's ring; `Ok(false)` if this thread has no ring (the caller
/// falls back).
pub(crate) fn read_batch(
    fd_of: &dyn Fn(usize) -> RawFd,
    reqs: &mut [BatchRead<'_>],
    then: Then<'_>,
) -> Result<bool, BatchError> {
    RING.with_borrow_mut(|slot| {
        let ring = slot.get_or_insert_with(|| IoUring::new(RING_ENTRIES).ok());
        match ring {
            Some(ring) => run(ring, fd_of, reqs, then).map(|()| true),
            None => Ok(false),
        }
    })
}

/// Waits for every read still in flight when dropped.
struct Drain<'r> {
    ring: &'r mut IoUring,
    in_flight: usize,
}

impl Drop for Drain<'_> {
    fn drop(&mut self) {
        let mut failures = 0;
        while self.in_flight > 0 {
            match self.ring.submit_and_wait(1) {
                Ok(_) => failures = 0,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) if failures < 1000 => failures += 1,
                // The kernel may still write into buffers about to be freed.
                Err(_) => std::process::abort(),
            }
            self.in_flight -= self.ring.completion().count();
        }
    }
}

fn run(
    ring: &mut IoUring,
    fd_of: &dyn Fn(usize) -> RawFd,
    reqs: &mut [BatchRead<'_>],
    then: Then<'_>,
) -> Result<(), BatchError> {
    // Bytes of each request read so far; `pending` lists what to (re)submit,
    // `complete` what is read whole and waits for its `then`.
    let mut done = vec![0usize; reqs.len()];
    // Empty reads are done already (a read of 0 bytes would look like EOF).
    let mut pending: Vec<usize> = (0..reqs.len()).rev().filter(|&i| !reqs[i].buf.is_empty()).collect();
    let mut complete: Vec<usize> = (0..reqs.len()).filter(|&i| reqs[i].buf.is_empty()).collect();
    let mut failed: Option<BatchError> = None;
    let mut drain = Drain { ring, in_flight: 0 };
    loop {
        while failed.is_none() && drain.in_flight < RING_ENTRIES as usize {
            let Some(i) = pending.pop() else { break };
            submit(&mut drain, fd_of(i), &mut reqs[i], done[i], i);
        }
        if failed.is_none() && !complete.is_empty() {
            // The refilled queue goes to the kernel before the decoding
            // (one system call, saved when nothing was queued).
            if !drain.ring.submission().is_empty()
                && let Err(error) = submit_now(drain.ring)
            {
                failed.get_or_insert(BatchError { index: 0, error });
                break;
            }
            for i in complete.drain(..) {
                then(i, &mut reqs[i]);
            }
            continue;
        }
        if drain.in_flight == 0 {
            break;
        }
        match drain.ring.submit_and_wait(1) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => {
                failed.get_or_insert(BatchError { index: 0, error });
                break; // `drain` waits for what is in flight
            }
        }
        for cqe in drain.ring.completion() {
            drain.in_flight -= 1;
            let i = cqe.user_data() as usize;
            match cqe.result() {
                n if n > 0 => {
                    done[i] += n as usize;
                    if done[i] < reqs[i].buf.len() { pending.push(i) } else { complete.push(i) }
                }
                0 => {
                    let error = io::Error::new(io::ErrorKind::UnexpectedEof, "file ends early");
                    failed.get_or_insert(BatchError { index: i, error });
                }
                n if -n == libc::EINTR || -n == libc::EAGAIN => pending.push(i),
                n => {
                    failed.get_or_insert(BatchError { index: i, error: io::Error::from_raw_os_error(-n) });
                }
            }
        }
    }
    drop(drain);
    failed.map_or(Ok(()), Err)
}

/// Queues the rest of request `i` (its first `done` bytes are read).
fn submit(drain: &mut Drain<'_>, fd: RawFd, req: &mut BatchRead<'_>, done: usize, i: usize) {
    let rest = &mut req.buf[done..];
    let len = u32::try_from(rest.len()).expect("a record fits a u32");
    let read = opcode::Read::new(types::Fd(fd), rest.as_mut_ptr(), len)
        .offset(req.offset + done as u64)
        .build()
        .user_data(i as u64);
    // SAFETY: the buffer is `reqs[i].buf`, borrowed mutably for the whole
    // batch and not touched until the read completes (its `then` runs only
    // after); `Drain` keeps the batch from returning before it does (module
    // docs). The queue has room: at most `RING_ENTRIES` are in flight.
    unsafe { drain.ring.submission().push(&read) }.expect("room in the submission queue");
    drain.in_flight += 1;
}

/// Hands the queued reads to the kernel without waiting for any.
fn submit_now(ring: &mut IoUring) -> io::Result<()> {
    loop {
        match ring.submit() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            other => return other.map(drop),
        }
    }
}
