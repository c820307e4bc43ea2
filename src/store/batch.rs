//! The batched read: records that are not in memory, read with many reads
//! in flight ([`crate::io::VfsFile::read_batch`]: io_uring, or a pool of
//! I/O threads) instead of one page fault at a time. A raw record is read
//! straight into its output; a compressed one into this thread's reused read
//! buffer, then decoded into its output as soon as its read completes, while
//! the batch's other reads are in flight. Every entry is validated and located
//! inside its chunk file first, as on the mapped path (`read.rs`), and a
//! output must be exactly its record's length, so no output ever holds bytes
//! that are not its record's.
//!
//! Which path a gather takes is [`ReadMode`]'s choice: `Auto` samples the
//! batch's residency ([`Zrecord::read_mode_for`]), less often once the
//! store has been found in memory many gathers in a row ([`Residency`]).

use std::cell::Cell;
use std::sync::OnceLock;

use super::chunks::Via;
use super::codec;
use super::entry::ValidEntry;
use super::read::View;
use super::{ReadMode, VerifyReads, Zrecord};
use crate::error::{Error, Result};
use crate::format::Codec;
use crate::io::BatchRead;
use crate::sync::{AtomicU32, Ordering};

/// Records an `Auto` gather samples for residency.
const RESIDENCY_SAMPLES: usize = 8;
/// Gathers in a row found in memory after which `Auto` samples one record,
/// on every [`WARM_CHECK_EVERY`]th gather only: a residency probe costs
/// about as much as copying a few KiB, and warm batches must stay at the
/// copy bound.
const WARM_STREAK: u32 = 16;
/// See [`WARM_STREAK`].
const WARM_CHECK_EVERY: u32 = 4;

/// A mapped gather slower than this (plus [`SLOW_FIXED_MICROS`]) took page
/// faults: `Auto` forgets its warm streak and samples again in full.
const SLOW_BYTES_PER_SECOND: f64 = 256.0 * (1u64 << 20) as f64;
/// See [`SLOW_BYTES_PER_SECOND`].
const SLOW_FIXED_MICROS: f64 = 50.0;

/// What `Auto` remembers of recent gathers: how many in a row found their
/// sampled records in memory.
#[derive(Debug, Default)]
pub(crate) struct Residency {
    warm_streak: AtomicU32,
}

impl Residency {
    /// Notes how long an `Auto` gather that took the mapped path needed for
    /// `bytes`: far slower than memory means the store went cold between
    /// samples (a warm streak samples rarely), and the next gather samples
    /// in full. Costs two clock reads per gather.
    pub(crate) fn note_mapped(&self, bytes: usize, elapsed: std::time::Duration) {
        let allowed = SLOW_FIXED_MICROS * 1e-6 + bytes as f64 / SLOW_BYTES_PER_SECOND;
        if elapsed.as_secs_f64() > allowed {
            self.warm_streak.store(0, Ordering::Relaxed);
        }
    }
}

thread_local! {
    /// This thread's read buffer for compressed records (grown, never shrunk).
    static READ_BUFFER: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

impl Zrecord {
    /// The path a gather of `items` (record index, output) takes: `Mapped`
    /// or `Batched`.
    pub(crate) fn read_mode_for(&self, items: &[(u64, &mut [u8])], view: View) -> ReadMode {
        match self.options.read_mode {
            ReadMode::Auto => {}
            mode => return mode,
        }
        let streak = self.residency.warm_streak.load(Ordering::Relaxed);
        let samples = if streak < WARM_STREAK {
            RESIDENCY_SAMPLES
        } else if streak.is_multiple_of(WARM_CHECK_EVERY) {
            1
        } else {
            0
        };
        let step = items.len().div_ceil(samples.max(1)).max(1);
        let cold = items.iter().step_by(step).take(samples).any(|&(index, _)| {
            // An entry that does not validate is reported by the read itself.
            self.valid_entry(index, view).is_ok_and(|valid| !self.chunks.resident(&valid))
        });
        let next = if cold { 0 } else { streak.checked_add(1).unwrap_or(WARM_STREAK) };
        self.residency.warm_streak.store(next, Ordering::Relaxed);
        if cold { ReadMode::Batched } else { ReadMode::Mapped }
    }

    /// Reads `items` (record index, its output) on the batched path, through
    /// the page cache or, in [`ReadMode::Direct`], past it.
    pub(crate) fn read_batched(&self, view: View, items: &mut [(u64, &mut [u8])], mode: ReadMode) -> Result<()> {
        if let Some(sums) = self.meta.sums().filter(|_| self.options.verify_reads != VerifyReads::Never) {
            sums.read_ahead(view.len());
        }
        let mut plans = Vec::with_capacity(items.len());
        let (mut staged, mut align) = (0usize, 1usize);
        for (index, out) in items.iter() {
            let valid = self.valid_entry(*index, view)?;
            if valid.logic() as usize != out.len() {
                return Err(Error::LengthMismatch {
                    path: self.path().to_path_buf(),
                    index: *index,
                    stored: valid.logic(),
                    expected: out.len() as u64,
                });
            }
            let chunk_len = self.chunks.locate(&valid)?.len(); // inside its chunk file, which is open
            let stage = self.stage(&valid, chunk_len, mode, &mut staged, &mut align)?;
            plans.push((valid, stage));
        }
        // Taken out for the reads: a read on the I/O thread pool may run
        // another gather's task on this thread while it waits.
        let mut buffer = READ_BUFFER.take();
        if buffer.len() < staged + align {
            buffer.resize(staged + align, 0);
        }
        let base = buffer.as_ptr().align_offset(align);
        let read = self.read_planned(&plans, items, &mut buffer[base..base + staged]);
        READ_BUFFER.set(buffer);
        read
    }

    /// Where a validated record's stored bytes are read to; a staged one
    /// is placed at `*staged` in the read buffer (which it advances), at
    /// the direct alignment, which `*align` keeps the largest of.
    fn stage(
        &self,
        valid: &ValidEntry,
        chunk_len: u64,
        mode: ReadMode,
        staged: &mut usize,
        align: &mut usize,
    ) -> Result<Stage> {
        let (offset, phys) = (u64::from(valid.loc().offset), valid.phys() as usize);
        if mode == ReadMode::Direct && phys > 0 {
            let unit = self.chunks.direct_alignment(valid.loc().chunk)?;
            let from = offset / unit as u64 * unit as u64;
            let to = (offset + phys as u64).next_multiple_of(unit as u64);
            // The sector holding the chunk's last bytes may run past the
            // file's end: that record goes through the page cache.
            if to <= chunk_len {
                let at = staged.next_multiple_of(unit);
                let len = (to - from) as usize;
                *staged = at + len;
                *align = (*align).max(unit);
                return Ok(Stage::Buffer { via: Via::Direct, from, at, len, skip: (offset - from) as usize });
            }
        }
        if valid.codec() == Codec::Raw {
            return Ok(Stage::Out);
        }
        let at = *staged;
        *staged += phys;
        Ok(Stage::Buffer { via: Via::Cache, from: offset, at, len: phys, skip: 0 })
    }

    /// Submits the reads of `plans` (into their outputs, or into `buffer`);
    /// each staged record is copied or decoded into its output as soon as its
    /// read completes, while the others are still in flight.
    fn read_planned(
        &self,
        plans: &[(ValidEntry, Stage)],
        items: &mut [(u64, &mut [u8])],
        buffer: &mut [u8],
    ) -> Result<()> {
        let mut reads: Vec<(u16, Via, BatchRead<'_>)> = Vec::with_capacity(plans.len());
        let (mut rest, mut cursor) = (&mut *buffer, 0);
        for ((plan, stage), (_, out)) in plans.iter().zip(items.iter_mut()) {
            let chunk = plan.loc().chunk;
            match *stage {
                Stage::Out => reads.push((chunk, Via::Cache, BatchRead::new(u64::from(plan.loc().offset), out))),
                Stage::Buffer { via, from, at, len, .. } => {
                    let (_, tail) = std::mem::take(&mut rest).split_at_mut(at - cursor);
                    let (piece, tail) = tail.split_at_mut(len);
                    (rest, cursor) = (tail, at + len);
                    reads.push((chunk, via, BatchRead { offset: from, buf: piece, out }));
                }
            }
        }
        let failed = OnceLock::new();
        let read = self.chunks.read_via(reads, &|k, read| {
            if let Err(e) = self.unstage(&plans[k], read) {
                let _ = failed.set(e);
            }
        });
        for (plan, _) in plans {
            self.unchanged(plan)?;
        }
        read?;
        failed.into_inner().map_or(Ok(()), Err)
    }

    /// Checks a record of `plan` against its sum, then copies or decodes a
    /// staged one, read into `read.buf`, into its output (`read.out`).
    fn unstage(&self, (plan, stage): &(ValidEntry, Stage), read: &mut BatchRead<'_>) -> Result<()> {
        let check = self.options.verify_reads != VerifyReads::Never;
        let Stage::Buffer { skip, .. } = *stage else {
            return if check { self.check_sum(plan, read.buf) } else { Ok(()) };
        };
        let stored = &read.buf[skip..][..plan.phys() as usize];
        if check {
            self.check_sum(plan, stored)?;
        }
        if plan.codec() == Codec::Raw {
            read.out.copy_from_slice(stored);
            return Ok(());
        }
        codec::decode(plan.codec(), stored, read.out, self.dict.get()).map_err(|what| Error::Corrupt {
            path: self.path().to_path_buf(),
            index: Some(plan.index()),
            what,
        })
    }
}

/// Where one record's stored bytes are read to.
#[derive(Clone, Copy, Debug)]
enum Stage {
    /// Straight into its output (a raw record, through the page cache).
    Out,
    /// `len` bytes at `from` in the chunk file into the read buffer at
    /// `at`; the record's stored bytes start `skip` bytes in. Then copied
    /// (raw) or decoded into the output.
    Buffer { via: Via, from: u64, at: usize, len: usize, skip: usize },
}
