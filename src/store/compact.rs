//! Compaction, in place, power-loss safe and resumable: the options, the
//! plan, and the on-disk steps every compaction runs (rounds of moves, then
//! the new frontier and the trim). Which records move where is the fill's
//! choice (`fill.rs`, the default) or the repack's (`repack.rs`). Steps and
//! the argument: `docs/crash-safety.md`, "Compaction".
//!
//! The rounds, the frontier and the trim that both plans end with are
//! `moves.rs`.

use super::Zrecord;
use super::fill;
use super::moves::{CompactReport, Group, Move, ROUND_BYTES_MAX, note_end};
use crate::error::{Error, Result};
use crate::format::{CHUNKS_MAX, Frontier, Loc};

/// How to compact ([`Zrecord::compact_with`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactOptions {
    /// Move at most this many bytes in this run (the fill only); what is
    /// left is [`CompactReport::remaining_bytes`], for the next run. The
    /// space behind the last live record is freed whatever the budget.
    pub max_bytes: Option<u64>,
    /// Repack every live record in physical order, as the reference does:
    /// reclaims every deleted byte whatever the record sizes, but rewrites
    /// everything behind the first hole. The default, the fill, moves
    /// records from the end of the live data into the holes: about a byte
    /// written per byte reclaimed (see `fill.rs` for what it leaves).
    pub repack: bool,
}

/// What a compaction would do ([`Zrecord::compact_plan`], a dry run).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactPlan {
    /// Records to move.
    pub move_records: u64,
    /// Bytes to move (the repack's figure leaves out evacuations, which
    /// copy some records twice).
    pub move_bytes: u64,
    /// Chunk bytes now (see [`crate::Stats::chunk_file_bytes`]).
    pub bytes_before: u64,
    /// Chunk bytes after.
    pub bytes_after: u64,
    /// Chunk files that would be removed.
    pub removed_chunks: u32,
    /// Bytes a later run would still move (past `max_bytes`).
    pub remaining_bytes: u64,
}

impl Zrecord {
    /// Reclaims the space deleted records left behind, in place (the fill,
    /// [`CompactOptions::default`]). Safe to interrupt at any point, power
    /// loss included: every live record keeps reading back its exact bytes,
    /// and compacting again finishes the job.
    pub fn compact(&mut self) -> Result<CompactReport> {
        self.compact_with(CompactOptions::default(), |_, _| {})
    }

    /// [`compact`](Self::compact), calling `progress(done, total)` as it
    /// goes, from the calling thread after each round of moves (at most 64
    /// MiB): for the fill, bytes moved of the bytes it will move; for the
    /// repack, live bytes settled where they stay of all live bytes. `done`
    /// never decreases; the first call reports 0, the last `total`.
    pub fn compact_with_progress(&mut self, progress: impl FnMut(u64, u64)) -> Result<CompactReport> {
        self.compact_with(CompactOptions::default(), progress)
    }

    /// Compacts as `options` say, reporting progress as
    /// [`compact_with_progress`](Self::compact_with_progress) does.
    pub fn compact_with(&mut self, options: CompactOptions, progress: impl FnMut(u64, u64)) -> Result<CompactReport> {
        self.check_writable()?;
        let _readers = self.exclude_readers()?; // no reader elsewhere until the end
        if options.repack {
            if options.max_bytes.is_some() {
                return Err(Error::InvalidArgument("max_bytes applies to the fill, not to a repack".into()));
            }
            return self.repack(progress);
        }
        self.fill(options.max_bytes.unwrap_or(u64::MAX), progress)
    }

    /// What [`compact_with`](Self::compact_with) would do, without a write.
    pub fn compact_plan(&self, options: CompactOptions) -> Result<CompactPlan> {
        let bytes_before = self.stats()?.chunk_file_bytes;
        let mut groups = self.live_groups()?;
        let (moves, remaining_bytes) = if options.repack {
            (super::repack::placements(&groups), 0)
        } else {
            let plan = fill::plan(&groups, options.max_bytes.unwrap_or(u64::MAX));
            (plan.moves().copied().collect(), plan.remaining_bytes)
        };
        let move_records = moves.iter().map(|m| groups[m.group].indices.len() as u64).sum();
        let move_bytes = moves.iter().map(|m| u64::from(m.phys)).sum();
        for m in &moves {
            groups[m.group].loc = m.to;
        }
        let (frontier, ends) = packed(&groups);
        let bytes_after = (0..frontier.chunk).map(|c| ends[usize::from(c)]).sum::<u64>() + u64::from(frontier.offset);
        let removed_chunks = self.chunks.count_past(frontier.chunk).map_err(|e| self.io("list store directory", e))?;
        Ok(CompactPlan { move_records, move_bytes, bytes_before, bytes_after, removed_chunks, remaining_bytes })
    }

    /// The fill (`fill.rs`): records from the end of the live data into
    /// the holes, at most `budget` bytes, pass by pass in rounds; then the
    /// new frontier.
    fn fill(&mut self, budget: u64, mut progress: impl FnMut(u64, u64)) -> Result<CompactReport> {
        let bytes_before = self.stats()?.chunk_file_bytes;
        let mut groups = self.live_groups()?;
        let plan = fill::plan(&groups, budget);
        let total: u64 = plan.moves().map(|m| u64::from(m.phys)).sum();
        let mut report = CompactReport { bytes_before, remaining_bytes: plan.remaining_bytes, ..Default::default() };
        progress(0, total);
        for pass in &plan.passes {
            // Empty records in the holes this pass fills go first: an entry
            // never lies inside another record's bytes.
            let covered = extent_set(pass.iter().map(|m| (m.to.address(), u64::from(m.phys))));
            self.settle_empty_records(&mut groups, |at| covered.holds(at))?;
            for round in rounds(pass) {
                self.flush_round(&groups, round, None, &mut report)?;
                progress(report.moved_bytes, total);
            }
            for m in pass {
                groups[m.group].loc = m.to;
            }
        }
        let end = frontier_of(&groups);
        self.settle_empty_records(&mut groups, |at| at > end.address())?;
        let (frontier, mut ends) = packed(&groups);
        self.finish(frontier, &mut ends, &mut report)?;
        report.bytes_after = self.stats()?.chunk_file_bytes;
        self.debug_check_invariants();
        progress(total, total);
        Ok(report)
    }

    /// Repoints the empty records at an address `doomed` says to chunk 0
    /// offset 0 (one round, no bytes copied; the table changes, so it is
    /// not counted as moved), where no record's bytes can hold them and no
    /// frontier lies below.
    fn settle_empty_records(&mut self, groups: &mut [Group], doomed: impl Fn(u64) -> bool) -> Result<()> {
        let origin = Loc { chunk: 0, offset: 0 };
        let moves: Vec<Move> = (0..groups.len())
            .filter(|&g| groups[g].phys == 0 && groups[g].loc != origin && doomed(groups[g].loc.address()))
            .map(|group| Move { to: origin, phys: 0, group })
            .collect();
        if moves.is_empty() {
            return Ok(());
        }
        let mut uncounted = CompactReport::default();
        self.flush_round(groups, &moves, None, &mut uncounted)?;
        for m in &moves {
            groups[m.group].loc = m.to;
        }
        Ok(())
    }
}

/// `moves` cut into rounds of at most [`ROUND_BYTES_MAX`] bytes (at least
/// one move each).
fn rounds(moves: &[Move]) -> impl Iterator<Item = &[Move]> {
    let mut rest = moves;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = u64::from(rest[0].phys);
        let mut end = 1;
        while end < rest.len() && bytes + u64::from(rest[end].phys) <= ROUND_BYTES_MAX {
            bytes += u64::from(rest[end].phys);
            end += 1;
        }
        let (round, tail) = rest.split_at(end);
        rest = tail;
        Some(round)
    })
}

/// Disjoint extents (start, length), sorted, for "which one holds this
/// address strictly inside".
struct ExtentSet(Vec<(u64, u64)>);

fn extent_set(extents: impl Iterator<Item = (u64, u64)>) -> ExtentSet {
    let mut v: Vec<(u64, u64)> = extents.filter(|&(_, len)| len > 0).collect();
    v.sort_unstable();
    ExtentSet(v)
}

impl ExtentSet {
    /// Whether an extent holds `at` past its first byte.
    fn holds(&self, at: u64) -> bool {
        let k = self.0.partition_point(|&(start, _)| start < at);
        k > 0 && self.0[k - 1].0 + self.0[k - 1].1 > at
    }
}

/// The frontier right after the last live extent of `groups` (empty
/// records aside).
fn frontier_of(groups: &[Group]) -> Frontier {
    groups
        .iter()
        .filter(|g| g.phys > 0)
        .map(|g| Frontier::after(g.loc, g.phys))
        .fold(Frontier::default(), Frontier::max)
}

/// The frontier after `groups` (at their final places) and where each
/// chunk's last record ends, every group's place included (an empty
/// record's entry needs its chunk to reach it).
fn packed(groups: &[Group]) -> (Frontier, Vec<u64>) {
    let frontier = frontier_of(groups);
    let mut ends = vec![0u64; CHUNKS_MAX as usize + 1];
    for g in groups.iter().filter(|g| g.loc.address() <= frontier.address()) {
        note_end(&mut ends, g.loc, g.phys);
    }
    (frontier, ends)
}

#[cfg(test)]
mod tests {
    use crate::{Codec, Zrecord};

    #[test]
    fn progress_is_monotone_from_zero_to_its_total() {
        // The fill counts bytes moved of the bytes it moves; the repack,
        // live bytes settled of all live bytes.
        for repack in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let mut store = Zrecord::open(dir.path()).unwrap();
            let n = 3 * super::super::repack::PROGRESS_RECORDS + 17;
            let data: Vec<u8> = (0..n * 8).map(|i| (i * 31 % 251) as u8).collect();
            store.append(&data, n, 8, Codec::Raw).unwrap();
            let doomed: Vec<u64> = (0..n as u64).filter(|i| i % 3 == 0).collect();
            store.delete(&doomed).unwrap();
            let live = store.stats().unwrap().live_bytes;
            let mut calls: Vec<(u64, u64)> = Vec::new();
            let options = super::CompactOptions { repack, ..Default::default() };
            let report = store.compact_with(options, |done, total| calls.push((done, total))).unwrap();
            assert!(report.moved_records > 0);
            let total = if repack { live } else { report.moved_bytes };
            assert_eq!(calls.first(), Some(&(0, total)));
            assert_eq!(calls.last(), Some(&(total, total)));
            assert!(calls.len() > 2, "{calls:?}");
            assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0 && w[1].1 == total), "{calls:?}");
            assert_eq!(store.stats().unwrap().reclaimable, 0);
        }
    }
}
