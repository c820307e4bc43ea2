//! The endless sampler: which record indices make up the batch of each step.
//!
//! A training loader never ends an epoch; it asks for the batch of step 0,
//! 1, 2, ... forever. [`Sampler`] answers with a batch of record indices in
//! `0..len`, in one of three [`Mode`]s:
//!
//! - [`Mode::Sequential`]: a sliding window over the index space taken as a
//!   circular queue (`len` 10, batch 4: `[0,1,2,3]`, `[4,5,6,7]`,
//!   `[8,9,0,1]`, ...).
//! - [`Mode::Iid`]: every index drawn uniformly with replacement, unbiased
//!   (Lemire's multiply-shift with rejection).
//! - [`Mode::Cyclic`]: without replacement. Each cycle is a fresh
//!   [`Permutation`] of the whole index space; a step takes the next `batch`
//!   positions of it, `len / batch` full steps per cycle, and the remainder
//!   of `len % batch` positions is dropped — a different remainder each cycle.
//!
//! **Every batch is a pure function of `(seed, step)`.** Randomness comes
//! from a counter-based hash of (seed, step or cycle, position), never from a
//! generator's state, so any step is computed directly in O(batch) time (for
//! the cyclic mode on average over a cycle: its permutation's cycle-walking
//! costs fewer than 2 network passes per index in all, see [`Permutation`])
//! and O(1) memory in `len`: resuming a run is [`Batches::seek`] to the step it
//! stopped at. With fewer records than one batch (`len < batch`), a batch is
//! every record exactly once, in every mode (see [`Sampler::new`]).
//!
//! **Sharding.** [`Sampler::shard`] splits each step's global batch across
//! hosts: host `i` of `n` takes the `i`-th contiguous slice of `batch_len / n`
//! indices. Since the global batch depends on the global step only, a run
//! checkpointed at step `k` on 8 hosts resumes at step `k` on 4 with the same
//! global order. `docs/sampler.md` has the design.
//!
//! **Mixtures.** [`MixedSampler`] draws each step's samples from several
//! sources by weights ([`Schedule`], [`Allocation`]): which source each
//! sample is, and which record of it, is a pure function of `(seed, step,
//! weights)` too, sharded and resumed the same way (`docs/loader.md`,
//! "Mixtures").
//!
//! ```
//! use loaderx::sampler::{Mode, Sampler};
//!
//! let s = Sampler::new(10, 4, Mode::Sequential, 0).unwrap();
//! assert_eq!(s.batch(2), [8, 9, 0, 1]);
//!
//! let mut it = s.iter();
//! it.seek(2);
//! assert_eq!(it.next().unwrap(), [8, 9, 0, 1]);
//! assert_eq!(it.step(), 3);
//! ```

mod allocation;
#[cfg(target_arch = "x86_64")]
mod cpu;
mod error;
mod feistel;
mod hash;
mod iid;
mod iter;
mod mixture;
mod shard;

pub use allocation::{Allocation, MAX_SOURCES};
pub use error::SamplerError;
pub use feistel::{FEISTEL_ROUNDS, Permutation};
pub use iter::Batches;
pub use mixture::{Draw, MixedSampler, Schedule};
pub use shard::ShardedSampler;

use hash::hash2;

/// How a [`Sampler`] picks the indices of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// In order, through a window sliding over the circular index space.
    /// The seed is ignored.
    Sequential,
    /// Uniformly at random, with replacement, independently per index.
    Iid,
    /// Without replacement: each cycle a fresh permutation of `0..len`,
    /// `len / batch` full batches per cycle, the remainder dropped.
    Cyclic,
}

impl Mode {
    /// A tag mixed into the seed so that modes sharing a seed share no
    /// randomness.
    fn tag(self) -> u64 {
        match self {
            Self::Sequential => 0x5345_5155, // "SEQU"
            Self::Iid => 0x4949_4400,        // "IID"
            Self::Cyclic => 0x4359_434c,     // "CYCL"
        }
    }
}

/// An endless stream of batches of record indices in `0..len`, one per
/// step, each a pure function of `(seed, step)`. See the [module
/// docs](self).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sampler {
    len: u64,
    batch_len: usize,
    /// `batch > len`: every batch is all of `0..len` once.
    clamped: bool,
    mode: Mode,
    seed: u64,
    /// `seed` mixed with the mode's tag.
    key: u64,
}

impl Sampler {
    /// A sampler of batches of `batch` indices from `0..len`.
    ///
    /// Errors if `len` or `batch` is 0. Any `len` up to `u64::MAX` works.
    ///
    /// If `len < batch`, every batch holds each of the `len` records exactly
    /// once and [`batch_len`](Self::batch_len) is `len`: in sequential mode
    /// in order `0..len`; in cyclic mode in a fresh permutation each step
    /// (each step is a whole cycle); in IID mode too, as a fresh permutation
    /// keyed by `(seed, step)` — drawing with replacement would repeat
    /// records in a batch that can hold them all, and the reference gives
    /// every record once.
    pub fn new(len: u64, batch: usize, mode: Mode, seed: u64) -> Result<Self, SamplerError> {
        if len == 0 {
            return Err(SamplerError::EmptyIndexSpace);
        }
        if batch == 0 {
            return Err(SamplerError::ZeroBatch);
        }
        // `batch > len` also when `batch` does not fit a u64; then `len`
        // fits a usize.
        let clamped = u64::try_from(batch).map_or(true, |b| b > len);
        let batch_len = if clamped { len as usize } else { batch };
        Ok(Self { len, batch_len, clamped, mode, seed, key: hash2(seed, mode.tag()) })
    }

    /// The size of the index space.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: a sampler has at least one index (`len >= 1`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The number of indices in every batch: the `batch` asked for, or `len`
    /// if that is smaller.
    pub fn batch_len(&self) -> usize {
        self.batch_len
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// In cyclic mode, the number of steps in one cycle, `len / batch_len`
    /// (cycle `c` is steps `c * n .. (c + 1) * n`); `None` in the other modes.
    pub fn steps_per_cycle(&self) -> Option<u64> {
        (self.mode == Mode::Cyclic).then(|| self.len / self.batch_len as u64)
    }

    /// Writes the batch of `step` into `out`, whose length must be
    /// [`batch_len`](Self::batch_len). O(`batch_len`), no allocation.
    pub fn fill(&self, step: u64, out: &mut [u64]) -> Result<(), SamplerError> {
        if out.len() != self.batch_len {
            return Err(SamplerError::OutputLength { expected: self.batch_len, got: out.len() });
        }
        self.fill_range(step, 0, out);
        Ok(())
    }

    /// The batch of `step`, in a new vector of [`batch_len`](Self::batch_len)
    /// indices.
    pub fn batch(&self, step: u64) -> Vec<u64> {
        let mut out = vec![0; self.batch_len];
        self.fill_range(step, 0, &mut out);
        out
    }

    /// An endless iterator over the batches, from step 0.
    pub fn iter(&self) -> Batches {
        Batches::new(*self, 0, self.batch_len)
    }

    /// Host `index` of `count`'s share of every batch: the contiguous slice
    /// `index * b .. (index + 1) * b` of the global batch, `b = batch_len /
    /// count`. Errors if `count` is 0, `index >= count`, or `count` does not
    /// divide [`batch_len`](Self::batch_len) (uneven shards would give hosts
    /// different batch sizes; pick a batch the host count divides).
    pub fn shard(&self, index: usize, count: usize) -> Result<ShardedSampler, SamplerError> {
        ShardedSampler::new(*self, index, count)
    }

    /// Writes positions `start .. start + out.len()` of the sampler's
    /// stream: its batches one after the other, position `p` being slot `p %
    /// batch_len` of the batch of step `p / batch_len` (a mixture's source
    /// takes its `j`-th index at position `j`). Positions past `u64::MAX`
    /// wrap to 0. O(`out.len()`), plus one permutation set-up per cycle (or,
    /// IID, per step) the range crosses.
    pub fn fill_stream(&self, start: u64, out: &mut [u64]) {
        let batch_len = self.batch_len as u64;
        let mut at = start;
        let mut rest = out;
        while !rest.is_empty() {
            let (run, next) = match self.mode {
                // Sequential: position `p` is index `p mod len`, batches or not.
                Mode::Sequential => (rest.len() as u64, 0),
                Mode::Cyclic => {
                    // A cycle is `len / batch_len` whole batches: its positions are contiguous.
                    let cycle_len = self.len / batch_len * batch_len;
                    (cycle_len - at % cycle_len, cycle_len)
                }
                Mode::Iid => (batch_len - at % batch_len, batch_len),
            };
            let take = run.min(rest.len() as u64) as usize;
            let (part, tail) = rest.split_at_mut(take);
            self.fill_stream_run(at, next, part);
            at = at.wrapping_add(take as u64);
            rest = tail;
        }
    }

    /// A run of [`fill_stream`](Self::fill_stream) inside one cycle (cyclic,
    /// `unit` its length) or one batch (IID, `unit` the batch length).
    fn fill_stream_run(&self, at: u64, unit: u64, out: &mut [u64]) {
        match self.mode {
            Mode::Sequential => fill_sequential(self.len, at % self.len, out),
            Mode::Cyclic => self.fill_permuted(hash2(self.key, at / unit), at % unit, out),
            Mode::Iid => self.fill_range(at / unit, (at % unit) as usize, out),
        }
    }

    /// Writes positions `offset .. offset + out.len()` of the batch of `step`.
    pub(crate) fn fill_range(&self, step: u64, offset: usize, out: &mut [u64]) {
        assert!(offset <= self.batch_len && out.len() <= self.batch_len - offset, "a range past the batch");
        let batch_len = self.batch_len as u64;
        let offset = offset as u64;
        match self.mode {
            Mode::Sequential => {
                let start = (u128::from(step) * u128::from(batch_len) + u128::from(offset)) % u128::from(self.len);
                fill_sequential(self.len, start as u64, out);
            }
            Mode::Iid if self.clamped => self.fill_permuted(hash2(self.key, step), offset, out),
            Mode::Iid => iid::fill(self.len, hash2(self.key, step), offset, out),
            Mode::Cyclic => {
                let steps_per_cycle = self.len / batch_len;
                let cycle = step / steps_per_cycle;
                let start = (step % steps_per_cycle) * batch_len + offset;
                self.fill_permuted(hash2(self.key, cycle), start, out);
            }
        }
    }

    /// Positions `start..` of the permutation of `0..len` keyed by `key`.
    fn fill_permuted(&self, key: u64, start: u64, out: &mut [u64]) {
        Permutation::keyed(self.len, key).fill(start, out);
    }
}

/// Positions `start, start + 1, ...` of `0..len` taken as a circular queue:
/// runs of consecutive indices, the next starting at 0 where one reaches
/// `len`. A run is a loop without a branch per index.
fn fill_sequential(len: u64, start: u64, out: &mut [u64]) {
    assert!(start < len, "a sequential start past the index space");
    let mut index = start;
    let mut rest = out;
    while !rest.is_empty() {
        let run = (len - index).min(rest.len() as u64) as usize;
        let (head, tail) = rest.split_at_mut(run);
        for (k, slot) in head.iter_mut().enumerate() {
            // `index + k < len`: no wrap.
            *slot = index.wrapping_add(k as u64);
        }
        index = 0;
        rest = tail;
    }
}
