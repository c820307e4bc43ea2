//! The batched read: records that are not in memory, read with many reads
//! in flight ([`crate::io::VfsFile::read_batch`]: io_uring, or a pool of
//! I/O threads) instead of one page fault at a time. A raw record is read
//! straight into its slot; a compressed one into this thread's reused read
//! buffer, then decoded into its slot. Every entry is validated and located
//! inside its chunk file first, as on the mapped path (`read.rs`), and a
//! slot must be exactly its record's length, so no slot ever holds bytes
//! that are not its record's.
//!
//! Which path a gather takes is [`ReadMode`]'s choice: `Auto` samples the
//! batch's residency ([`Zrecord::read_mode_for`]), less often once the
//! store has been found in memory many gathers in a row ([`Residency`]).

use std::cell::Cell;

use super::codec;
use super::entry::ValidEntry;
use super::read::View;
use super::{ReadMode, Zrecord};
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
    /// The path a gather of `items` (record index, slot) takes: `Mapped`
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

    /// Reads `items` (record index, its slot) on the batched path.
    pub(crate) fn read_batched(&self, view: View, items: &mut [(u64, &mut [u8])]) -> Result<()> {
        let mut plans = Vec::with_capacity(items.len());
        let mut compressed = 0usize;
        for (index, slot) in items.iter() {
            let valid = self.valid_entry(*index, view)?;
            if valid.logic() as usize != slot.len() {
                return Err(Error::LengthMismatch {
                    path: self.path.clone(),
                    index: *index,
                    stored: valid.logic(),
                    expected: slot.len() as u64,
                });
            }
            if valid.codec() != Codec::Raw {
                compressed += valid.phys() as usize;
            }
            self.chunks.locate(&valid)?; // inside its chunk file, which is open
            plans.push(valid);
        }
        // Taken out for the reads: a read on the I/O thread pool may run
        // another gather's task on this thread while it waits.
        let mut buffer = READ_BUFFER.take();
        if buffer.len() < compressed {
            buffer.resize(compressed, 0);
        }
        let read = self.read_planned(&plans, items, &mut buffer[..compressed]);
        READ_BUFFER.set(buffer);
        read
    }

    /// Submits the reads of `plans` (raw ones into their slots, compressed
    /// ones into `buffer`), then decodes the compressed ones.
    fn read_planned(&self, plans: &[ValidEntry], items: &mut [(u64, &mut [u8])], buffer: &mut [u8]) -> Result<()> {
        let mut reads: Vec<(u16, BatchRead<'_>)> = Vec::with_capacity(plans.len());
        let mut decodes: Vec<(&ValidEntry, &mut [u8], std::ops::Range<usize>)> = Vec::new();
        let mut rest = &mut *buffer;
        let mut at = 0;
        for (plan, (_, slot)) in plans.iter().zip(items.iter_mut()) {
            let offset = u64::from(plan.loc().offset);
            if plan.codec() == Codec::Raw {
                reads.push((plan.loc().chunk, BatchRead { offset, buf: slot }));
            } else {
                let phys = plan.phys() as usize;
                let (piece, tail) = std::mem::take(&mut rest).split_at_mut(phys);
                rest = tail;
                reads.push((plan.loc().chunk, BatchRead { offset, buf: piece }));
                decodes.push((plan, &mut **slot, at..at + phys));
                at += phys;
            }
        }
        self.chunks.read_many(reads)?;
        for (valid, slot, range) in decodes {
            codec::decode(valid.codec(), &buffer[range], slot, self.dict.get()).map_err(|what| Error::Corrupt {
                path: self.path.clone(),
                index: Some(valid.index()),
                what,
            })?;
        }
        Ok(())
    }
}
