//! The fill plan of a compaction: which live records move where, so that
//! the bytes written are about the bytes reclaimed. Pure: it reads the live
//! extents and returns moves; `compact.rs` runs them in rounds.
//!
//! Records are taken from the end of the live data, highest address first,
//! and each goes to the lowest hole below it that holds it (first fit): the
//! gaps between live records, the free end of every chunk before the last,
//! whole chunks with no live record. A record only ever moves to a lower
//! address, into bytes no entry points to, and a hole shrinks from its
//! start as it fills. The fill stops at the first record that fits no hole
//! below it (it and everything under it stay), or when the next move would
//! pass the byte budget. Moving records can open a hole under a record
//! placed earlier in the pass (the source of a record that then moved
//! further down), so passes repeat until one moves nothing (at most
//! [`PASSES_MAX`]). With records of one stored size every hole is a
//! whole number of records long, so the fill stops only when no hole is
//! left below the tail: every deleted byte comes back and each moved byte
//! frees one. With stored sizes that vary (compressed or ragged records)
//! the bound is this: **every hole left under the record the fill stopped
//! at is smaller than that record**.

use super::moves::{Group, Move};
use crate::first_fit::FirstFit;
use crate::format::{CHUNK_BYTES_MAX, Loc};

/// A free extent: `len` bytes at address `start` (`chunk * 4 GiB + offset`),
/// inside one chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hole {
    pub start: u64,
    pub len: u64,
}

/// Passes of the fill at most; a pass after the first moves only records
/// that the one before opened a hole under.
const PASSES_MAX: usize = 8;

/// What the fill does with `groups` (live extents).
#[derive(Debug, Default)]
pub(super) struct FillPlan {
    /// The passes' moves, each pass highest source first; a
    /// `Move::group` indexes `groups`.
    pub passes: Vec<Vec<Move>>,
    /// Bytes the moves past the budget would still move (0 when the budget
    /// did not stop the fill).
    pub remaining_bytes: u64,
}

impl FillPlan {
    /// Every move, in order.
    pub fn moves(&self) -> impl Iterator<Item = &Move> {
        self.passes.iter().flatten()
    }
}

/// A live extent: `phys > 0` bytes at `address`, of group `group`.
#[derive(Clone, Copy, Debug)]
struct Extent {
    address: u64,
    phys: u32,
    group: usize,
}

/// The live extents of `groups` at `locs`, in address order.
fn extents(groups: &[Group], locs: &[Loc]) -> Vec<Extent> {
    let mut extents: Vec<Extent> = (0..groups.len())
        .filter(|&g| groups[g].phys > 0)
        .map(|g| Extent { address: locs[g].address(), phys: groups[g].phys, group: g })
        .collect();
    extents.sort_unstable_by_key(|e| e.address);
    extents
}

/// The last usable address of the chunk holding `address`, plus one (a
/// chunk's last byte is never used: the frontier must stay a `u32`).
fn chunk_limit(address: u64) -> u64 {
    (address / CHUNK_BYTES_MAX + 1) * CHUNK_BYTES_MAX - 1
}

/// The free extents below the last live record: every gap between
/// consecutive extents, split at chunk boundaries.
fn holes(extents: &[Extent]) -> Vec<Hole> {
    let mut holes = Vec::new();
    let mut at = 0u64;
    for extent in extents {
        let start = extent.address;
        while at < start {
            let end = chunk_limit(at).min(start);
            if end > at {
                holes.push(Hole { start: at, len: end - at });
            }
            // The rest of this chunk is unusable: on to the next one.
            at = if end == start { start } else { (at / CHUNK_BYTES_MAX + 1) * CHUNK_BYTES_MAX };
        }
        at = at.max(start + u64::from(extent.phys));
    }
    holes
}

/// First fit over holes in address order ([`crate::first_fit`]), so that
/// "the lowest hole of at least `len` bytes" is found in O(log holes)
/// however fragmented the store.
struct Holes {
    holes: Vec<Hole>,
    fit: FirstFit,
}

impl Holes {
    fn new(holes: Vec<Hole>) -> Holes {
        let fit = FirstFit::new(holes.iter().map(|h| h.len));
        Holes { holes, fit }
    }

    /// The lowest hole of at least `len` bytes that starts below `below`.
    fn find(&self, len: u64, below: u64) -> Option<usize> {
        self.fit.find(len).filter(|&k| k < self.holes.len() && self.holes[k].start < below)
    }

    /// Takes `len` bytes from the start of hole `k`; returns where they are.
    fn take(&mut self, k: usize, len: u64) -> u64 {
        let hole = &mut self.holes[k];
        debug_assert!(hole.len >= len);
        let at = hole.start;
        (hole.start, hole.len) = (hole.start + len, hole.len - len);
        self.fit.set(k, hole.len);
        at
    }
}

/// The fill of `groups` (live extents in address order), moving at most
/// `budget` bytes.
pub(super) fn plan(groups: &[Group], budget: u64) -> FillPlan {
    let mut locs: Vec<Loc> = groups.iter().map(|g| g.loc).collect();
    let mut plan = FillPlan::default();
    let mut moved = 0u64;
    for pass in 0..=PASSES_MAX {
        let (moves, remaining) = one_pass(&extents(groups, &locs), budget - moved);
        if pass == PASSES_MAX || moves.is_empty() {
            // Past the last pass, what one more would move is left.
            plan.remaining_bytes = if pass == PASSES_MAX { moves.iter().map(|m| u64::from(m.phys)).sum() } else { 0 };
            plan.remaining_bytes += remaining;
            break;
        }
        for m in &moves {
            locs[m.group] = m.to;
            moved += u64::from(m.phys);
        }
        plan.passes.push(moves);
        if remaining > 0 {
            plan.remaining_bytes = remaining;
            break;
        }
    }
    plan
}

/// One pass over `extents` (in address order) from the highest: its moves
/// within `budget`, and the bytes it would have moved past the budget.
fn one_pass(extents: &[Extent], budget: u64) -> (Vec<Move>, u64) {
    let mut fit = Holes::new(holes(extents));
    let mut moves = Vec::new();
    let mut moved = 0u64;
    for (k, extent) in extents.iter().enumerate().rev() {
        let len = u64::from(extent.phys);
        let Some(hole) = fit.find(len, extent.address) else { break };
        if moved + len > budget {
            return (moves, remaining(&mut fit, &extents[..=k]));
        }
        let to = fit.take(hole, len);
        debug_assert!(to + len <= extent.address && to + len <= chunk_limit(to));
        let to = Loc { chunk: (to / CHUNK_BYTES_MAX) as u16, offset: (to % CHUNK_BYTES_MAX) as u32 };
        moves.push(Move { to, phys: extent.phys, group: extent.group });
        moved += len;
    }
    (moves, 0)
}

/// Bytes the pass would still move over `extents`, from the highest down.
fn remaining(fit: &mut Holes, extents: &[Extent]) -> u64 {
    let mut bytes = 0;
    for extent in extents.iter().rev() {
        let len = u64::from(extent.phys);
        let Some(k) = fit.find(len, extent.address) else { break };
        fit.take(k, len);
        bytes += len;
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(address: u64, phys: u32) -> Group {
        let loc = Loc { chunk: (address / CHUNK_BYTES_MAX) as u16, offset: (address % CHUNK_BYTES_MAX) as u32 };
        Group { loc, phys, indices: vec![0] }
    }

    fn holes_of(groups: &[Group]) -> Vec<Hole> {
        let locs: Vec<Loc> = groups.iter().map(|g| g.loc).collect();
        holes(&extents(groups, &locs))
    }

    fn moves(plan: &FillPlan) -> Vec<(u64, usize)> {
        plan.moves().map(|m| (m.to.address(), m.group)).collect()
    }

    #[test]
    fn holes_are_the_gaps_split_at_chunk_ends() {
        let c = CHUNK_BYTES_MAX;
        let groups = [group(10, 5), group(20, 0), group(30, 10), group(2 * c + 7, 1)];
        let holes = holes_of(&groups);
        let want = [
            Hole { start: 0, len: 10 },
            Hole { start: 15, len: 15 },
            Hole { start: 40, len: c - 1 - 40 },
            Hole { start: c, len: c - 1 },
            Hole { start: 2 * c, len: 7 },
        ];
        assert_eq!(holes, want);
    }

    #[test]
    fn equal_records_fill_every_hole_from_the_tail() {
        // Records of 100 bytes at 0..1000 with 1, 4 and 7 deleted.
        let groups: Vec<Group> = (0..10).filter(|k| ![1, 4, 7].contains(k)).map(|k| group(k * 100, 100)).collect();
        let plan = plan(&groups, u64::MAX);
        let moves = moves(&plan);
        // The tail (9, 8) goes into the holes 1 and 4; the hole at 7 is
        // then past the last record (6): 300 bytes freed for 200 moved.
        assert_eq!(moves, vec![(100, 6), (400, 5)]);
        assert_eq!(plan.remaining_bytes, 0);
    }

    #[test]
    fn the_budget_stops_the_fill_and_counts_what_is_left() {
        let groups: Vec<Group> = (0..10).filter(|k| ![1, 4, 7].contains(k)).map(|k| group(k * 100, 100)).collect();
        let plan = plan(&groups, 150);
        assert_eq!(plan.moves().count(), 1);
        assert_eq!(plan.remaining_bytes, 100);
    }

    #[test]
    fn a_record_that_fits_no_hole_stops_the_fill_and_the_holes_left_are_smaller() {
        // Holes of 50 and 30 bytes; the tail record is 60 bytes, the one
        // under it 20.
        let groups = [group(0, 100), group(150, 100), group(280, 20), group(300, 60)];
        let plan = plan(&groups, u64::MAX);
        assert!(plan.passes.is_empty(), "{:?}", plan.passes);
        let left = holes_of(&groups);
        assert!(left.iter().all(|h| h.len < 60), "{left:?}");
    }

    #[test]
    fn first_fit_takes_the_lowest_hole_that_holds_the_record() {
        let groups = [group(0, 10), group(20, 10), group(100, 10), group(200, 50)];
        // Holes: 10..20 (10), 30..100 (70), 110..200 (90). The tail (50)
        // goes to 30; then the record at 100 (10) to 10.
        let plan = plan(&groups, u64::MAX);
        assert_eq!(moves(&plan), vec![(30, 3), (10, 2)]);
    }

    #[test]
    fn a_second_pass_takes_a_hole_the_first_opened() {
        // Holes 10..21, 31..40, 41..70. Pass 1: the tail (20 at 70) goes to
        // 41, the record at 40 to 10, the one at 21 to 11. That frees
        // 21..41 under the record now at 41: pass 2 moves it there.
        let groups = [group(0, 10), group(21, 10), group(40, 1), group(70, 20)];
        let plan = plan(&groups, u64::MAX);
        let passes: Vec<Vec<(u64, usize)>> =
            plan.passes.iter().map(|p| p.iter().map(|m| (m.to.address(), m.group)).collect()).collect();
        assert_eq!(passes, vec![vec![(41, 3), (10, 2), (11, 1)], vec![(21, 3)]]);
    }

    #[test]
    fn random_layouts_move_down_into_free_bytes_and_end_at_a_fixed_point() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for _ in 0..500 {
            let mut groups = Vec::new();
            let mut at = next(50);
            for _ in 0..1 + next(40) {
                let phys = if next(8) == 0 { 0 } else { 1 + next(60) as u32 };
                groups.push(group(at, phys));
                at += u64::from(phys) + if next(3) == 0 { next(80) } else { 0 };
            }
            let plan = plan(&groups, u64::MAX);
            let mut locs: Vec<Loc> = groups.iter().map(|g| g.loc).collect();
            for m in plan.moves() {
                assert!(m.to.address() < locs[m.group].address(), "a move goes down");
                locs[m.group] = m.to;
            }
            let after = extents(&groups, &locs);
            for w in after.windows(2) {
                assert!(w[0].address + u64::from(w[0].phys) <= w[1].address, "no overlap: {after:?}");
            }
            if plan.passes.len() < PASSES_MAX {
                assert!(one_pass(&after, u64::MAX).0.is_empty(), "a fixed point");
            }
        }
    }
}
