//! Compaction: repack live records in physical order, in place, power-loss
//! safe and resumable. Steps and the argument: `docs/crash-safety.md`,
//! "Compaction".
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
use super::intent::Intent;
use crate::error::{Corruption, Error, Result};
use crate::format::{CHUNKS_MAX, Entry, Frontier, Loc};
use crate::io::BatchRead;

/// Most bytes one round copies before it syncs.
const ROUND_BYTES_MAX: u64 = 64 << 20;

/// Most rounds sliding records down behind a hole may take per
/// [`ROUND_BYTES_MAX`] of them. A round can fill only the free space in
/// front of it, so a hole of `h` bytes slides the data after it in rounds of
/// `h` bytes: a few small deleted records would cost a round (two syncs)
/// per few records. Past this, the next round's worth of records is
/// evacuated past the frontier and brought back down instead: two rounds,
/// every byte copied twice.
const SLIDE_ROUNDS_MAX: u64 = 16;
/// [`Zrecord::compact_with_progress`] reports at least once per this many
/// records left in place.
const PROGRESS_RECORDS: usize = 4096;

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
}

/// Live records sharing one stored extent (more than one only in a store
/// damaged elsewhere, e.g. by a crash of the reference mid-delete).
struct Group {
    loc: Loc,
    phys: u32,
    indices: Vec<u32>,
}

#[derive(Clone, Copy)]
struct Move {
    to: Loc,
    phys: u32,
    group: usize,
}

impl Zrecord {
    /// Reclaims the space deleted records left behind, in place. Safe to
    /// interrupt at any point, power loss included: every live record keeps
    /// reading back its exact bytes, and compacting again finishes the job.
    pub fn compact(&mut self) -> Result<CompactReport> {
        self.compact_with_progress(|_, _| {})
    }

    /// [`compact`](Self::compact), calling `progress(settled_bytes,
    /// live_bytes)` as it goes: `live_bytes` is the stored size of the live
    /// records (fixed for the call), `settled_bytes` how much of it, taken in
    /// physical order, is already where it stays (in place, or moved and
    /// durable). It never decreases; the first call reports 0 and the last,
    /// once the compaction is complete, `live_bytes`. Calls come from the
    /// calling thread after each round of moves (at most 64 MiB) and every
    /// 4096 records left in place; keep the callback cheap.
    pub fn compact_with_progress(&mut self, mut progress: impl FnMut(u64, u64)) -> Result<CompactReport> {
        self.fail_stop.check_writable()?;
        let _readers = self.exclude_readers()?; // no reader elsewhere until the end
        let bytes_before = self.stats()?.chunk_bytes;
        let mut groups = self.live_groups()?;
        let live_bytes: u64 = groups.iter().map(|group| u64::from(group.phys)).sum();
        // Stored bytes of `groups[..g]`.
        let mut settled = 0u64;
        progress(settled, live_bytes);
        let mut report = CompactReport { bytes_before, ..CompactReport::default() };
        let mut ends = vec![0u64; CHUNKS_MAX as usize + 1];
        let mut cursor = Frontier::default();
        let mut round: Vec<Move> = Vec::new();
        let mut floor = u64::MAX;
        let mut round_bytes = 0u64;
        // Evacuations start past the live data (and past the header's
        // frontier: a damaged header may lie below live records, the
        // fuzzer's finding F7), so that they reuse one area instead of
        // growing the store by everything they move. That area is free
        // again once an evacuated batch is moved back down; `area_in_use` is
        // set if a record ever stays there, and then evacuations go past the
        // current frontier instead.
        let area =
            groups.iter().map(|group| Frontier::after(group.loc, group.phys)).fold(self.meta.frontier(), Frontier::max);
        let mut area_in_use = false;
        let mut g = 0;
        while g < groups.len() {
            let group = &groups[g];
            let src = group.loc.address();
            let Some((to, next)) = cursor.place(group.phys).filter(|(to, _)| to.address() <= src) else {
                area_in_use |= group.phys > 0 && src >= area.address();
                cursor = Frontier::after(group.loc, group.phys); // stays (it cannot move down)
                note_end(&mut ends, group.loc, group.phys);
                settled += u64::from(group.phys);
                g += 1;
                if round.is_empty() && g % PROGRESS_RECORDS == 0 {
                    progress(settled, live_bytes);
                }
                continue;
            };
            let to_end = to.address() + u64::from(group.phys);
            let fits = to_end <= src && to_end <= floor && round_bytes < ROUND_BYTES_MAX;
            let small_hole = (src - to.address()) * SLIDE_ROUNDS_MAX < (live_bytes - settled).min(ROUND_BYTES_MAX);
            if to.address() == src {
                // Already in place.
                area_in_use |= group.phys > 0 && src >= area.address();
            } else if round.is_empty() && (small_hole || !fits) {
                // It overlaps its own source, or its hole is small: evacuate
                // it and the records after it (a round's worth) past the
                // live data, then move them down from there.
                let base = if area_in_use { None } else { Some(area) };
                self.evacuate(&mut groups, g, base, &mut report)?;
                progress(settled, live_bytes);
                continue;
            } else if fits {
                round.push(Move { to, phys: group.phys, group: g });
                floor = floor.min(src);
                round_bytes += u64::from(group.phys);
            } else {
                self.flush_round(&groups, &round, None, &mut report)?;
                progress(settled, live_bytes);
                round.clear();
                (floor, round_bytes) = (u64::MAX, 0);
                continue; // the sources are free now: try this record again
            }
            note_end(&mut ends, to, group.phys);
            cursor = next;
            // Reported only with no round pending, so every byte reported
            // as settled is durable where it stays.
            settled += u64::from(group.phys);
            g += 1;
            if round.is_empty() && g % PROGRESS_RECORDS == 0 {
                progress(settled, live_bytes);
            }
        }
        if !round.is_empty() {
            self.flush_round(&groups, &round, None, &mut report)?;
        }
        self.finish(cursor, &mut ends, &mut report)?;
        report.bytes_after = self.stats()?.chunk_bytes;
        self.debug_check_invariants();
        progress(live_bytes, live_bytes);
        Ok(report)
    }

    /// The live records grouped by stored extent, in physical order; every
    /// entry validated, overlapping extents refused.
    fn live_groups(&self) -> Result<Vec<Group>> {
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

    /// Moves the records of groups `g..` (at least one, at most a round's
    /// worth) past the live data, starting at `base` (the frontier when
    /// `None`): a record that overlaps its own destination cannot move down
    /// in place, but from there it can. `base` must have no live record at
    /// or past it. The frontier is advanced durably (if the batch ends past
    /// it) before any entry points past it, so an append after a crash
    /// never overwrites an evacuated record.
    fn evacuate(
        &mut self,
        groups: &mut [Group],
        g: usize,
        base: Option<Frontier>,
        report: &mut CompactReport,
    ) -> Result<()> {
        let durable = self.meta.frontier();
        let mut frontier = base.unwrap_or(durable);
        debug_assert!(groups.iter().all(|group| group.loc.address() + u64::from(group.phys) <= frontier.address()));
        let mut round = Vec::new();
        let mut bytes = 0u64;
        for (k, group) in groups.iter().enumerate().skip(g) {
            if !round.is_empty() && bytes + u64::from(group.phys) > ROUND_BYTES_MAX {
                break;
            }
            let (to, next) = frontier.place(group.phys).ok_or_else(|| Error::StoreFull { path: self.path.clone() })?;
            round.push(Move { to, phys: group.phys, group: k });
            frontier = next;
            bytes += u64::from(group.phys);
        }
        let beyond = (frontier > durable).then_some(frontier);
        self.flush_round(groups, &round, beyond, report)?;
        for m in &round {
            groups[m.group].loc = m.to;
        }
        Ok(())
    }

    /// Copies a round's records, makes them durable, moves the frontier
    /// out to `beyond` if given, then repoints their entries durably.
    fn flush_round(
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
            reads.push((source.loc().chunk, BatchRead { offset: u64::from(source.loc().offset), buf: piece }));
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
    fn finish(&mut self, cursor: Frontier, ends: &mut [u64], report: &mut CompactReport) -> Result<()> {
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
fn note_end(ends: &mut [u64], loc: Loc, phys: u32) {
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
    fn progress_is_monotone_and_ends_at_the_live_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Zrecord::open(dir.path()).unwrap();
        let n = 3 * super::PROGRESS_RECORDS + 17;
        let data: Vec<u8> = (0..n * 8).map(|i| (i * 31 % 251) as u8).collect();
        store.append(&data, n, 8, Codec::Raw).unwrap();
        let doomed: Vec<u64> = (0..n as u64).filter(|i| i % 3 == 0).collect();
        store.delete(&doomed).unwrap();
        let live = store.stats().unwrap().live_bytes;
        let mut calls: Vec<(u64, u64)> = Vec::new();
        let report = store.compact_with_progress(|settled, total| calls.push((settled, total))).unwrap();
        assert!(report.moved_records > 0);
        assert_eq!(calls.first(), Some(&(0, live)));
        assert_eq!(calls.last(), Some(&(live, live)));
        assert!(calls.len() > 2, "{calls:?}");
        assert!(calls.windows(2).all(|w| w[0].0 <= w[1].0 && w[1].1 == live), "{calls:?}");
        assert_eq!(store.stats().unwrap().reclaimable, 0);
    }
}
