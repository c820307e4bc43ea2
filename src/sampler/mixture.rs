//! The sampler of a mixture: which source, and which of its records, each
//! sample of a step is.
//!
//! A mixture's samples are numbered across steps: sample `n` is slot `n %
//! batch` of step `n / batch` (the global batch). A [`Schedule`] gives the
//! weights from each of its start steps on, and how many of the first `n`
//! samples each source gets (an [`Allocation`] per segment, its counts
//! continuing from the counts at the segment's start). Source `i` takes its
//! `j`-th index, for its `j`-th sample, from position `j` of its own
//! [`Sampler`] (batches of one, in the source's mode), so each source keeps
//! its own position: a cyclic source covers its records once a cycle
//! however the sources are mixed. [`MixedSampler`] puts the two together:
//! every batch a pure function of `(seed, step, schedule)`.

use super::allocation::Allocation;
use super::error::SamplerError;
use super::hash::hash2;
use super::{Mode, Sampler};

/// The tag mixed into the seed for the sources' samplers ("MIXT").
const MIX_TAG: u64 = 0x4d49_5854;

/// One segment of a [`Schedule`]: its weights from `start` on.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Segment {
    start: u64,
    /// The sample number `start * batch`.
    first_sample: u64,
    allocation: Allocation,
    /// Each source's count of the samples before `first_sample`.
    base: Vec<u64>,
}

/// Weights over steps: segment `s` holds from its start step up to the
/// next segment's. The counts of a segment continue from the counts at its
/// start, so the samples before a change of weights are what they were
/// without it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    batch: u64,
    segments: Vec<Segment>,
}

impl Schedule {
    /// A schedule of `segments`, each `(start_step, weights)`, for a global
    /// batch of `batch` samples. The first starts at step 0, the starts go
    /// up, every weight list has one positive finite weight per source.
    pub fn new(batch: usize, segments: &[(u64, Vec<f64>)]) -> Result<Schedule, SamplerError> {
        if batch == 0 {
            return Err(SamplerError::ZeroBatch);
        }
        let batch = batch as u64;
        let Some((_, first)) = segments.first() else {
            return Err(SamplerError::NoWeights);
        };
        let mut out: Vec<Segment> = Vec::with_capacity(segments.len());
        for (segment, (start, weights)) in segments.iter().enumerate() {
            let after = out.last().map(|s| s.start);
            let in_order = match after {
                None => *start == 0,
                Some(previous) => *start > previous,
            };
            if !in_order {
                return Err(SamplerError::ScheduleOrder { segment, start: *start, after });
            }
            if weights.len() != first.len() {
                return Err(SamplerError::WeightCount { segment, expected: first.len(), got: weights.len() });
            }
            let allocation = Allocation::new(weights).map_err(|e| match e {
                SamplerError::BadWeight { source, weight, .. } => SamplerError::BadWeight { segment, source, weight },
                other => other,
            })?;
            let first_sample = start.checked_mul(batch).ok_or(SamplerError::PositionOverflow { step: *start })?;
            let base = match out.last() {
                None => vec![0; weights.len()],
                Some(previous) => {
                    let mut counts = vec![0; weights.len()];
                    previous.allocation.counts(first_sample - previous.first_sample, &mut counts)?;
                    counts.iter().zip(&previous.base).map(|(c, b)| c + b).collect()
                }
            };
            out.push(Segment { start: *start, first_sample, allocation, base });
        }
        Ok(Schedule { batch, segments: out })
    }

    /// The number of sources.
    pub fn sources(&self) -> usize {
        self.segments[0].base.len()
    }

    /// The global batch.
    pub fn batch(&self) -> usize {
        self.batch as usize
    }

    /// The allocation of the segment holding `step`.
    pub fn allocation_at(&self, step: u64) -> &Allocation {
        &self.segment_at(step).allocation
    }

    /// Writes how many of samples `0..n` each source gets into `out` (one
    /// slot per source). O(sources + log segments).
    pub fn counts(&self, n: u64, out: &mut [u64]) -> Result<(), SamplerError> {
        let segment = self.segment_at(n / self.batch);
        segment.allocation.counts(n - segment.first_sample, out)?;
        for (count, base) in out.iter_mut().zip(&segment.base) {
            *count += base;
        }
        Ok(())
    }

    fn segment_at(&self, step: u64) -> &Segment {
        let after = self.segments.partition_point(|s| s.start <= step);
        &self.segments[after - 1] // segment 0 starts at step 0
    }
}

/// The samples of one host's share of a mixture's step: source after
/// source, each source's in the order of its own stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Draw {
    /// The source of each sample.
    pub sources: Vec<u32>,
    /// The record index of each sample, in its source.
    pub indices: Vec<u64>,
    /// How many samples each source has here (`sources` is `counts[0]`
    /// zeros, then `counts[1]` ones, ...).
    pub counts: Vec<usize>,
}

/// A mixture's sampler: the [`Schedule`] and one [`Sampler`] per source,
/// optionally one host's share. See the [module docs](self).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MixedSampler {
    schedule: Schedule,
    sources: Vec<Sampler>,
    index: usize,
    count: usize,
    shard_len: usize,
}

impl MixedSampler {
    /// A mixture of sources of `lens` records, each sampled in its `modes`
    /// entry, batches of `batch` samples, weights by `schedule` (see
    /// [`Schedule::new`]). Source `i`'s sampler is `Sampler::new(lens[i], 1,
    /// modes[i], hash2(hash2(seed, MIX_TAG), i))`: its `j`-th index is its
    /// batch of step `j`.
    pub fn new(
        lens: &[u64],
        modes: &[Mode],
        seed: u64,
        batch: usize,
        schedule: &[(u64, Vec<f64>)],
    ) -> Result<MixedSampler, SamplerError> {
        let schedule = Schedule::new(batch, schedule)?;
        if lens.len() != schedule.sources() || modes.len() != schedule.sources() {
            let expected = if lens.len() != schedule.sources() { lens.len() } else { modes.len() };
            return Err(SamplerError::WeightCount { segment: 0, expected, got: schedule.sources() });
        }
        let key = hash2(seed, MIX_TAG);
        let sources = lens
            .iter()
            .zip(modes)
            .enumerate()
            .map(|(i, (&len, &mode))| Sampler::new(len, 1, mode, hash2(key, i as u64)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(MixedSampler { schedule, sources, index: 0, count: 1, shard_len: batch })
    }

    /// Host `index` of `count`'s share: slots `index * b .. (index + 1) * b`
    /// of every global batch, `b = batch / count`. The same checks as
    /// [`Sampler::shard`].
    pub fn shard(&self, index: usize, count: usize) -> Result<MixedSampler, SamplerError> {
        if count == 0 {
            return Err(SamplerError::ZeroShards);
        }
        if index >= count {
            return Err(SamplerError::ShardIndexOutOfRange { index, count });
        }
        let batch_len = self.schedule.batch();
        if !batch_len.is_multiple_of(count) {
            return Err(SamplerError::ShardsDoNotDivideBatch { batch_len, count });
        }
        Ok(MixedSampler { index, count, shard_len: batch_len / count, ..self.clone() })
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// Source `i`'s sampler (batches of one: its `j`-th index is position `j`).
    pub fn source(&self, i: usize) -> Option<&Sampler> {
        self.sources.get(i)
    }

    /// Samples per step on this host.
    pub fn batch_len(&self) -> usize {
        self.shard_len
    }

    /// This host's index and the host count.
    pub fn host(&self) -> (usize, usize) {
        (self.index, self.count)
    }

    /// This host's samples of `step`. O(samples + sources).
    pub fn draw(&self, step: u64) -> Result<Draw, SamplerError> {
        let first = u128::from(step) * u128::from(self.schedule.batch) + (self.index * self.shard_len) as u128;
        let last = first + self.shard_len as u128;
        let (first, last) = match (u64::try_from(first), u64::try_from(last)) {
            (Ok(first), Ok(last)) => (first, last),
            _ => return Err(SamplerError::PositionOverflow { step }),
        };
        let m = self.sources.len();
        let (mut before, mut after) = (vec![0; m], vec![0; m]);
        self.schedule.counts(first, &mut before)?;
        self.schedule.counts(last, &mut after)?;
        let mut draw = Draw {
            sources: Vec::with_capacity(self.shard_len),
            indices: vec![0; self.shard_len],
            counts: Vec::with_capacity(m),
        };
        let mut at = 0;
        for (i, sampler) in self.sources.iter().enumerate() {
            let n = (after[i] - before[i]) as usize;
            sampler.fill_stream(before[i], &mut draw.indices[at..at + n]);
            draw.sources.extend(std::iter::repeat_n(i as u32, n));
            draw.counts.push(n);
            at += n;
        }
        debug_assert_eq!(at, self.shard_len, "the counts of a slice sum to its length");
        Ok(draw)
    }
}
