//! The moves that compaction's two plans share: a plan (the fill's,
//! `fill.rs`, or the repack's, `repack.rs`) says which live record
//! ([`Group`]) goes where ([`Move`]); this file carries them out. Steps and
//! the argument: `docs/crash-safety.md`, "Compaction".
//!
//! Moves are batched into rounds. Within a round no destination overlaps a
//! byte that a durable table entry points to: neither the record's own source
//! nor the source of any record moved earlier in the round (their entries
//! still point there until the round's table update is durable). So a round
//! is: copy, `sync_data` (C1), repoint the entries, `msync` (C2); the sources
//! become free only after C2, for the next round. Each record's bytes are
//! checked against its sum as they are copied. `Zrecord::finish` then
//! commits the new frontier and drops what lies past it.

use super::Zrecord;
use super::chunks::Chunk;
use super::entry::assert_committable;
use super::intent::Intent;
use super::sums::Sum;
use crate::error::{Corruption, Error, Result};
use crate::format::{CHUNKS_MAX, Entry, Frontier, Loc};
use crate::io::BatchRead;

/// Most bytes one round copies before it syncs.
pub(super) const ROUND_BYTES_MAX: u64 = 64 << 20;

/// What a compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Records moved.
    pub moved_records: u64,
    /// Bytes moved.
    pub moved_bytes: u64,
    /// Rounds (each one data sync and one table sync).
    pub rounds: u64,
    /// Chunk bytes before (see [`crate::Stats::chunk_file_bytes`]).
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
    /// The live records grouped by stored extent, in physical order; every
    /// entry validated, overlapping extents refused.
    pub(super) fn live_groups(&self) -> Result<Vec<Group>> {
        let view = self.view();
        let mut live: Vec<(Loc, u32, u32)> = Vec::with_capacity(view.len() as usize);
        for index in 0..view.len() {
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
                        path: self.path().to_path_buf(),
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
            let sums = self.moved_sums(&items);
            let intent = Intent { old_len: len, new_len: len, items, sums };
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
            // Checked while they move: damaged bytes stop the compaction
            // before they are copied anywhere.
            self.check_sum(source, bytes)?;
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

    /// The sums of the round's entries at their destinations: the same
    /// bytes' sums, the new entries' tags.
    fn moved_sums(&self, items: &[(u32, Entry)]) -> Vec<Sum> {
        let Some(sums) = self.meta.sums() else { return vec![Sum::NONE; items.len()] };
        items.iter().map(|(i, entry)| sums.get(*i).moved(&self.meta.raw_entry(*i), entry)).collect()
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

/// Records that chunk `loc.chunk` holds bytes up to `loc.offset + phys`.
pub(super) fn note_end(ends: &mut [u64], loc: Loc, phys: u32) {
    let end = &mut ends[usize::from(loc.chunk)];
    *end = (*end).max(u64::from(loc.offset) + u64::from(phys));
}

fn items_count(groups: &[Group], round: &[Move]) -> u64 {
    round.iter().map(|m| groups[m.group].indices.len() as u64).sum()
}
