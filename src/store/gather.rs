//! The read path: gather records straight into the caller's memory, in
//! parallel, lock-free, each through the one-record read of `read.rs`
//! (every index and entry validated before a byte is trusted; a stored
//! length that does not match the caller's layout is an error). This file
//! owns the caller's buffers: their validation and their split into outputs.

use rayon::prelude::*;

use super::read::View;
use super::{ReadMode, Zrecord};
use crate::error::{Error, Result};

/// Below this many bytes a gather runs on the calling thread (always, under
/// loom, which must see every thread).
const PARALLEL_BYTES_MIN: usize = if cfg!(loom) { usize::MAX } else { 128 << 10 };

/// The fewest bytes a task of a mapped gather copies or decodes.
const TASK_BYTES_MIN: usize = 64 << 10;

/// Tasks per thread a batched gather is cut into. Records are decoded as
/// their reads complete (`batch.rs`); a second task per thread keeps the
/// device busy while the first's last reads drain. One task per thread
/// measured no better (`docs/benchmarks.md`, "Cold cache").
const BATCHED_TASKS_PER_THREAD: usize = 2;

impl Zrecord {
    /// Decodes records `indices` into `dst`, record `k` at
    /// `dst[k * stride..(k + 1) * stride]`. Every record must be exactly
    /// `stride` bytes long.
    pub fn gather(&self, indices: &[u64], dst: &mut [u8], stride: usize) -> Result<()> {
        let need = indices.len().checked_mul(stride).filter(|&need| need <= dst.len()).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{} records of {stride} bytes do not fit a {}-byte buffer",
                indices.len(),
                dst.len()
            ))
        })?;
        let view = self.view();
        if stride == 0 {
            return indices.iter().try_for_each(|&index| self.read_into(index, view, &mut []));
        }
        let items = indices.iter().copied().zip(dst[..need].chunks_mut(stride)).collect();
        self.read_all(view, items, need)
    }

    /// Decodes record `indices[k]` into `dst[offsets[k]..offsets[k] + lens[k]]`.
    /// `lens[k]` must be the record's length ([`Zrecord::lengths`]); the
    /// regions must lie inside `dst` and not overlap.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use loaderx::{Codec, Zrecord};
    /// let store = Zrecord::open(dir.path())?;
    /// store.append_var(b"abcdefgh", &[0, 2, 5], &[2, 3, 3], Codec::Raw)?;
    /// let indices = [2, 0];
    /// let mut lens = [0; 2];
    /// store.lengths(&indices, &mut lens)?;
    /// let mut packed = vec![0; 5];
    /// store.gather_var(&indices, &mut packed, &[0, 3], &lens)?;
    /// assert_eq!(packed, b"fghab");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn gather_var(&self, indices: &[u64], dst: &mut [u8], offsets: &[u64], lens: &[u32]) -> Result<()> {
        if indices.len() != offsets.len() || indices.len() != lens.len() {
            return Err(Error::InvalidArgument(format!(
                "{} indices, {} offsets, {} lengths",
                indices.len(),
                offsets.len(),
                lens.len()
            )));
        }
        let outs = split_regions(dst, offsets, lens)?;
        let total: usize = lens.iter().map(|&l| l as usize).sum();
        self.read_all(self.view(), indices.iter().copied().zip(outs).collect(), total)
    }

    /// Reads each `(index, out)` of `items` (`total` bytes in all), on the
    /// path [`ReadMode`] picks, in parallel unless the batch is small.
    pub(crate) fn read_all(&self, view: View, mut items: Vec<(u64, &mut [u8])>, total: usize) -> Result<()> {
        let serial = total < PARALLEL_BYTES_MIN || !self.read_engine().splits_gathers();
        let tasks = rayon::current_num_threads() * BATCHED_TASKS_PER_THREAD;
        let mode = self.read_mode_for(&items, view);
        let started = std::time::Instant::now();
        if mode != ReadMode::Mapped {
            let per_task = if serial { items.len() } else { items.len().div_ceil(tasks) }.max(1);
            let read = items.par_chunks_mut(per_task).try_for_each(|task| self.read_batched(view, task, mode));
            self.reads.note(mode, total, started.elapsed());
            return read;
        }
        let read = if serial {
            items.iter_mut().try_for_each(|(index, out)| self.read_into(*index, view, out))
        } else {
            // Four tasks a thread, none under TASK_BYTES_MIN: a small
            // gather (a mixture's part) is not cut into tasks whose
            // hand-off costs more than their copy.
            let by_count = items.len() / (rayon::current_num_threads() * 4);
            let by_bytes = TASK_BYTES_MIN / (total / items.len().max(1)).max(1);
            let min_len = by_count.max(by_bytes).max(1);
            items.par_iter_mut().with_min_len(min_len).try_for_each(|(index, out)| self.read_into(*index, view, out))
        };
        let elapsed = started.elapsed();
        if self.options.read_mode == ReadMode::Auto {
            self.residency.note_mapped(total, elapsed);
        }
        self.reads.note(mode, total, elapsed);
        read
    }

    /// What this handle's gathers have read since it was opened, by
    /// where the bytes came from: memory (the mapped path) or the device
    /// or network (positional reads). See [`ReadStats`](super::ReadStats).
    pub fn read_stats(&self) -> super::ReadStats {
        self.reads.snapshot()
    }

    /// The logical length of each record of `indices`, into `out`.
    pub fn lengths(&self, indices: &[u64], out: &mut [u32]) -> Result<()> {
        if indices.len() != out.len() {
            return Err(Error::InvalidArgument(format!("{} indices but {} outputs", indices.len(), out.len())));
        }
        let view = self.view();
        for (len, &index) in out.iter_mut().zip(indices) {
            *len = self.valid_entry(index, view)?.logic();
        }
        Ok(())
    }

    /// One record, decoded into a new buffer (on the path [`ReadMode`]
    /// picks, as a gather of one).
    pub fn get(&self, index: u64) -> Result<Vec<u8>> {
        let view = self.view();
        let logic = self.valid_entry(index, view)?.logic();
        let mut out = vec![0; logic as usize];
        self.read_all(view, vec![(index, &mut out[..])], logic as usize)?;
        Ok(out)
    }
}

/// Splits `dst` into the disjoint regions `offsets[k]..offsets[k] + lens[k]`,
/// in the order given; an error if one leaves `dst` or two overlap.
fn split_regions<'a>(dst: &'a mut [u8], offsets: &[u64], lens: &[u32]) -> Result<Vec<&'a mut [u8]>> {
    let bad = |k: usize, why: &str| {
        Error::InvalidArgument(format!("region {k} ({} bytes at offset {}) {why}", lens[k], offsets[k]))
    };
    let end = |k: usize| offsets[k].checked_add(u64::from(lens[k]));
    for k in 0..offsets.len() {
        if end(k).is_none_or(|e| e > dst.len() as u64) {
            return Err(bad(k, &format!("runs past the {}-byte buffer", dst.len())));
        }
    }
    // Walk the regions by offset (the given order when sorted, the common case).
    let sorted = offsets.windows(2).all(|w| w[0] <= w[1]);
    let order: Vec<usize> = if sorted {
        (0..offsets.len()).collect()
    } else {
        let mut order: Vec<usize> = (0..offsets.len()).collect();
        order.sort_by_key(|&k| (offsets[k], lens[k]));
        order
    };
    let mut outs: Vec<&mut [u8]> = Vec::with_capacity(offsets.len());
    outs.resize_with(offsets.len(), Default::default);
    let mut rest = dst;
    let mut consumed = 0u64;
    for &k in &order {
        if offsets[k] < consumed {
            return Err(bad(k, "overlaps another region"));
        }
        let skip = (offsets[k] - consumed) as usize;
        let (out, tail) = std::mem::take(&mut rest)[skip..].split_at_mut(lens[k] as usize);
        outs[k] = out;
        rest = tail;
        consumed = offsets[k] + u64::from(lens[k]);
    }
    Ok(outs)
}
