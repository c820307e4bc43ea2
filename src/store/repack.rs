//! The repack: every live record packed from the start of chunk 0 in
//! physical order, as the reference compacts. It reclaims every deleted
//! byte, records of any size, at the cost of rewriting everything behind
//! the first hole; the fill (`fill.rs`) is the default.
//! [`CompactOptions::repack`](super::CompactOptions::repack) asks for it.
//!
//! A round may take a move only if its destination overlaps neither its own
//! source nor the source of a move already in the round (their entries
//! still point there until the round's table update is durable); a record
//! that would overlap its own source is evacuated past the live data first
//! (`docs/crash-safety.md`, "Compaction").

use super::Zrecord;
use super::moves::{CompactReport, Group, Move, ROUND_BYTES_MAX, note_end};
use crate::error::{Error, Result};
use crate::format::{CHUNKS_MAX, Frontier};

/// The repack reports progress at least once per this many records left
/// in place.
pub(super) const PROGRESS_RECORDS: usize = 4096;

/// Most rounds sliding records down behind a hole may take per
/// [`ROUND_BYTES_MAX`] of them. A round can fill only the free space in
/// front of it, so a hole of `h` bytes slides the data after it in rounds of
/// `h` bytes: a few small deleted records would cost a round (two syncs)
/// per few records. Past this, the next round's worth of records is
/// evacuated past the frontier and brought back down instead: two rounds,
/// every byte copied twice.
const SLIDE_ROUNDS_MAX: u64 = 16;

impl Zrecord {
    /// Packs every live record from the start of chunk 0 in physical
    /// order, calling `progress(settled_bytes, live_bytes)`: `settled_bytes`
    /// of the live records, taken in physical order, are where they stay.
    pub(super) fn repack(&mut self, mut progress: impl FnMut(u64, u64)) -> Result<CompactReport> {
        let bytes_before = self.stats()?.chunk_file_bytes;
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
        report.bytes_after = self.stats()?.chunk_file_bytes;
        self.debug_check_invariants();
        progress(live_bytes, live_bytes);
        Ok(report)
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
            let (to, next) =
                frontier.place(group.phys).ok_or_else(|| Error::StoreFull { path: self.path().to_path_buf() })?;
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
}

/// The moves a repack makes, evacuations left out: each live record to
/// the lowest free address, in physical order, where that is not above it.
pub(super) fn placements(groups: &[Group]) -> Vec<Move> {
    let mut cursor = Frontier::default();
    let mut moves = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        match cursor.place(group.phys).filter(|(to, _)| to.address() <= group.loc.address()) {
            Some((to, next)) => {
                if to != group.loc {
                    moves.push(Move { to, phys: group.phys, group: g });
                }
                cursor = next;
            }
            None => cursor = Frontier::after(group.loc, group.phys),
        }
    }
    moves
}
