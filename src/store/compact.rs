//! Compaction, in place, power-loss safe and resumable: the options, the
//! plan, and the on-disk steps every compaction runs (rounds of moves, then
//! the new frontier and the trim). Which records move where is the fill's
//! choice (`fill.rs`, the default) or the repack's (`repack.rs`). Steps and
//! the argument: `docs/crash-safety.md`, "Compaction".
//!
//! Moves are batched into rounds. Within a round no destination overlaps a
//! byte that a durable table entry points to: neither the record's own source
//! nor the source of any record moved earlier in the round (their entries
//! still point there until the round's table update is durable). So a round
//! is: copy, `sync_data` (C1), repoint the entries, `msync` (C2); the sources
//! become free only after C2, for the next round.

use super::Zrecord;
use super::chunks::Chunk;
use super::entry::assert_committable;
use super::fill;
use super::intent::Intent;
use crate::error::{Corruption, Error, Result};
use crate::format::{CHUNKS_MAX, Entry, Frontier, Loc};
use crate::io::BatchRead;

/// Most bytes one round copies before it syncs.
pub(super) const ROUND_BYTES_MAX: u64 = 64 << 20;

/// The repack reports progress at least once per this many records left
/// in place.
pub(super) const PROGRESS_RECORDS: usize = 4096;

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
    /// Chunk bytes now (see [`crate::Stats::chunk_bytes`]).
    pub bytes_before: u64,
    /// Chunk bytes after.
    pub bytes_after: u64,
    /// Chunk files that would be removed.
    pub removed_chunks: u32,
    /// Bytes a later run would still move (past `max_bytes`).
    pub remaining_bytes: u64,
}

/// What a compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Records moved.
    pub moved_records: u64,
    /// Bytes moved.
    pub moved_bytes: u64,
    /// Rounds (each one data sync and one table sync).
    pub rounds: u64,
    /// Chunk bytes before (see [`crate::Stats::chunk_bytes`]).
    pub bytes_before: u64,
    /// Chunk bytes after.
    pub bytes_after: u64,
    /// Chunk files removed.
    pub removed_chunks: u32,
    /// Bytes the fill would still move, had `max_bytes` not stopped it.
    pub remaining_bytes: u64,
}

/// Live records sharing one stored extent (more than one only in a store
/// damaged elsewhere, e.g. by a crash of the reference mid-delete).
pub(super) struct Group {
    pub loc: Loc,
    pub phys: u32,
    pub indices: Vec<u32>,
}

/// One record's (group's) move: `phys` bytes to `to`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Move {
    pub to: Loc,
    pub phys: u32,
    pub group: usize,
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
        self.fail_stop.check_writable()?;
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
        let bytes_before = self.stats()?.chunk_bytes;
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
        let bytes_before = self.stats()?.chunk_bytes;
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
        report.bytes_after = self.stats()?.chunk_bytes;
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

    /// The live records grouped by stored extent, in physical order; every
    /// entry validated, overlapping extents refused.
    pub(super) fn live_groups(&self) -> Result<Vec<Group>> {
        let view = self.view();
        let mut live: Vec<(Loc, u32, u32)> = Vec::with_capacity(view.len as usize);
        for index in 0..view.len {
            let valid = self.valid_entry(u64::from(index), view)?;
            self.chunks.locate(&valid)?; // inside its chunk file
            live.push((valid.loc(), valid.phys(), index));
        }
        live.sort_unstable();
        let mut groups: Vec<Group> = Vec::new();
        for (loc, phys, index) in live {
            if let Some(last) = groups.last_mut() {
                if last.loc == loc && last.phys == phys {
                    last.indices.push(index);
                    continue;
                }
                if last.loc.address() + u64::from(last.phys) > loc.address() {
                    return Err(Error::Corrupt {
                        path: self.path.clone(),
                        index: Some(u64::from(index)),
                        what: Corruption::Overlap { other: u64::from(last.indices[0]) },
                    });
                }
            }
            groups.push(Group { loc, phys, indices: vec![index] });
        }
        Ok(groups)
    }

    /// Copies a round's records, makes them durable, moves the frontier
    /// out to `beyond` if given, then repoints their entries durably.
    pub(super) fn flush_round(
        &mut self,
        groups: &[Group],
        round: &[Move],
        beyond: Option<Frontier>,
        report: &mut CompactReport,
    ) -> Result<()> {
        self.copy_round(groups, round)?;
        if let Some(frontier) = beyond {
            self.meta.move_frontier(frontier).map_err(|e| self.sync_failed(e))?; // the frontier out (H1, H2)
        }
        let items = self.moved_entries(groups, round);
        let word1 = |e: &Entry| bytemuck::bytes_of(e)[8..].to_vec();
        if items.iter().any(|(i, e)| word1(e) != word1(&self.meta.raw_entry(*i))) {
            // A move across chunks (or the mark of an empty record moving to
            // chunk 0 offset 0) changes both 8-byte words of an entry; a torn
            // entry must be repaired from the intent.
            let len = self.len();
            let intent = Intent { old_len: len, new_len: len, items };
            self.meta.write_intent(&intent).map_err(|e| self.sync_failed(e))?; // step C2a
            self.meta.apply_intent(&intent).map_err(|e| self.sync_failed(e))?; // step C2
            self.meta.clear_intent().map_err(|e| self.sync_failed(e))?; // step C2b
        } else {
            self.meta.repoint_within_chunks(&items).map_err(|e| self.sync_failed(e))?; // step C2
        }
        report.rounds += 1;
        report.moved_records += items_count(groups, round);
        report.moved_bytes += round.iter().map(|m| u64::from(m.phys)).sum::<u64>();
        Ok(())
    }

    /// Copies each record of the round to its destination and makes the
    /// copies durable (steps 1 and C1). The sources are read with batched
    /// reads (the chunk mappings read no more than a record's own pages
    /// when it is not in memory), at most a round's bytes at once.
    fn copy_round(&self, groups: &[Group], round: &[Move]) -> Result<()> {
        let view = self.view();
        let sources: Vec<_> = round
            .iter()
            .map(|m| self.valid_entry(u64::from(groups[m.group].indices[0]), view))
            .collect::<Result<_>>()?;
        let mut buf = vec![0u8; sources.iter().map(|v| v.phys() as usize).sum()];
        let mut reads = Vec::with_capacity(sources.len());
        let mut rest = &mut buf[..];
        for source in &sources {
            self.chunks.locate(source)?; // inside its chunk file, which is open
            let (piece, tail) = std::mem::take(&mut rest).split_at_mut(source.phys() as usize);
            reads.push((source.loc().chunk, BatchRead::new(u64::from(source.loc().offset), piece)));
            rest = tail;
        }
        self.chunks.read_many(reads)?;
        let mut touched: Vec<&Chunk> = Vec::new();
        let mut created = false;
        let mut at = 0;
        for (m, source) in round.iter().zip(&sources) {
            let bytes = &buf[at..at + source.phys() as usize];
            at += bytes.len();
            let (dst, new) = self.chunks.create(m.to.chunk).map_err(|e| self.io("open chunk", e))?;
            created |= new;
            dst.write(bytes, u64::from(m.to.offset)).map_err(|e| self.io("write chunk", e))?;
            if !touched.iter().any(|t| std::ptr::eq(*t, dst)) {
                touched.push(dst);
            }
        }
        if created {
            self.chunks.sync_dir().map_err(|e| self.sync_failed(e))?; // SYNC C0
        }
        for dst in touched {
            dst.sync_data().map_err(|e| self.sync_failed(e))?; // SYNC C1
        }
        Ok(())
    }

    /// The round's entries at their destinations, each asserted committable
    /// against the frontier (which lies past every destination).
    fn moved_entries(&self, groups: &[Group], round: &[Move]) -> Vec<(u32, Entry)> {
        let (frontier, has_dict) = (self.meta.frontier(), self.has_dict());
        let items: Vec<(u32, Entry)> = round
            .iter()
            .flat_map(|m| groups[m.group].indices.iter().map(move |&i| (i, m)))
            .map(|(i, m)| (i, self.meta.raw_entry(i).moved_to(m.to)))
            .collect();
        for (_, entry) in &items {
            assert_committable(entry, frontier, has_dict);
        }
        items
    }

    /// Commits the packed frontier, then drops what lies past it: later
    /// chunk files and the slack at the end of each remaining chunk.
    pub(super) fn finish(&mut self, cursor: Frontier, ends: &mut [u64], report: &mut CompactReport) -> Result<()> {
        self.meta.move_frontier(cursor).map_err(|e| self.sync_failed(e))?; // step C3 (H2, H3)
        // Chunk files past the frontier (also any a failed append left).
        report.removed_chunks = self.chunks.remove_past(cursor.chunk).map_err(|e| self.io("remove chunk", e))?;
        if report.removed_chunks > 0 {
            self.chunks.sync_dir().map_err(|e| self.sync_failed(e))?; // SYNC C4
        }
        // Trim each remaining chunk to its last record.
        ends[usize::from(cursor.chunk)] = u64::from(cursor.offset);
        for id in 0..=cursor.chunk.min(CHUNKS_MAX as u16 - 1) {
            self.chunks.trim(id, ends[usize::from(id)]).map_err(|e| self.io("truncate chunk", e))?;
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

/// Records that chunk `loc.chunk` holds bytes up to `loc.offset + phys`.
pub(super) fn note_end(ends: &mut [u64], loc: Loc, phys: u32) {
    let end = &mut ends[usize::from(loc.chunk)];
    *end = (*end).max(u64::from(loc.offset) + u64::from(phys));
}

fn items_count(groups: &[Group], round: &[Move]) -> u64 {
    round.iter().map(|m| groups[m.group].indices.len() as u64).sum()
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
            let n = 3 * super::PROGRESS_RECORDS + 17;
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
