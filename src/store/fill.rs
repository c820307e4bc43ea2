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
//! pass the byte budget. With records of one stored size every hole is a
//! whole number of records long, so the fill stops only when no hole is
//! left below the tail: every deleted byte comes back and each moved byte
//! frees one. With stored sizes that vary (compressed or ragged records)
//! the bound is this: **every hole left under the record the fill stopped
//! at is smaller than that record**.

use super::compact::{Group, Move};
use crate::format::{CHUNK_BYTES_MAX, Loc};

/// A free extent: `len` bytes at address `start` (`chunk * 4 GiB + offset`),
/// inside one chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Hole {
    pub start: u64,
    pub len: u64,
}

/// What the fill does with `groups` (live extents in address order).
#[derive(Debug, Default)]
pub(super) struct FillPlan {
    /// The moves, highest source first; each `Move::group` indexes `groups`.
    pub moves: Vec<Move>,
    /// Bytes the moves past the budget would still move (0 when the budget
    /// did not stop the fill).
    pub remaining_bytes: u64,
}

/// The last usable address of the chunk holding `address`, plus one (a
/// chunk's last byte is never used: the frontier must stay a `u32`).
fn chunk_limit(address: u64) -> u64 {
    (address / CHUNK_BYTES_MAX + 1) * CHUNK_BYTES_MAX - 1
}

/// The free extents below the last live record: every gap between
/// consecutive extents, split at chunk boundaries.
pub(super) fn holes(groups: &[Group]) -> Vec<Hole> {
    let mut holes = Vec::new();
    let mut at = 0u64;
    for group in groups.iter().filter(|g| g.phys > 0) {
        let start = group.loc.address();
        while at < start {
            let end = chunk_limit(at).min(start);
            if end > at {
                holes.push(Hole { start: at, len: end - at });
            }
            // The rest of this chunk is unusable: on to the next one.
            at = if end == start { start } else { (at / CHUNK_BYTES_MAX + 1) * CHUNK_BYTES_MAX };
        }
        at = at.max(start + u64::from(group.phys));
    }
    holes
}

/// First fit over holes in address order: a tree of the largest hole
/// under each node, so that "the lowest hole of at least `len` bytes" is
/// found in O(log holes) however fragmented the store.
struct FirstFit {
    holes: Vec<Hole>,
    /// `tree[1]` is the root; leaf `k` is `tree[leaves + k]`.
    tree: Vec<u64>,
    leaves: usize,
}

impl FirstFit {
    fn new(holes: Vec<Hole>) -> FirstFit {
        let leaves = holes.len().next_power_of_two().max(1);
        let mut tree = vec![0u64; 2 * leaves];
        for (k, hole) in holes.iter().enumerate() {
            tree[leaves + k] = hole.len;
        }
        for node in (1..leaves).rev() {
            tree[node] = tree[2 * node].max(tree[2 * node + 1]);
        }
        FirstFit { holes, tree, leaves }
    }

    /// The lowest hole of at least `len` bytes that starts below `below`.
    fn find(&self, len: u64, below: u64) -> Option<usize> {
        if self.tree[1] < len {
            return None;
        }
        let mut node = 1;
        while node < self.leaves {
            node = if self.tree[2 * node] >= len { 2 * node } else { 2 * node + 1 };
        }
        let k = node - self.leaves;
        (self.holes[k].start < below).then_some(k)
    }

    /// Takes `len` bytes from the start of hole `k`; returns where they are.
    fn take(&mut self, k: usize, len: u64) -> u64 {
        let hole = &mut self.holes[k];
        debug_assert!(hole.len >= len);
        let at = hole.start;
        (hole.start, hole.len) = (hole.start + len, hole.len - len);
        let mut node = self.leaves + k;
        self.tree[node] = hole.len;
        while node > 1 {
            node /= 2;
            self.tree[node] = self.tree[2 * node].max(self.tree[2 * node + 1]);
        }
        at
    }
}

/// The fill of `groups` (live extents in address order), moving at most
/// `budget` bytes.
pub(super) fn plan(groups: &[Group], budget: u64) -> FillPlan {
    let mut fit = FirstFit::new(holes(groups));
    let mut plan = FillPlan::default();
    let mut moved = 0u64;
    for (g, group) in groups.iter().enumerate().rev().filter(|(_, g)| g.phys > 0) {
        let (len, src) = (u64::from(group.phys), group.loc.address());
        let Some(k) = fit.find(len, src) else { break };
        if moved + len > budget {
            plan.remaining_bytes = remaining(&mut fit, groups, g);
            break;
        }
        let to = fit.take(k, len);
        debug_assert!(to + len <= src && to + len <= chunk_limit(to));
        let to = Loc { chunk: (to / CHUNK_BYTES_MAX) as u16, offset: (to % CHUNK_BYTES_MAX) as u32 };
        plan.moves.push(Move { to, phys: group.phys, group: g });
        moved += len;
    }
    plan
}

/// Bytes the fill would still move from group `from` down, past the budget.
fn remaining(fit: &mut FirstFit, groups: &[Group], from: usize) -> u64 {
    let mut bytes = 0;
    for group in groups[..=from].iter().rev().filter(|g| g.phys > 0) {
        let len = u64::from(group.phys);
        let Some(k) = fit.find(len, group.loc.address()) else { break };
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

    #[test]
    fn holes_are_the_gaps_split_at_chunk_ends() {
        let c = CHUNK_BYTES_MAX;
        let groups = [group(10, 5), group(20, 0), group(30, 10), group(2 * c + 7, 1)];
        let holes = holes(&groups);
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
        let moves: Vec<(u64, usize)> = plan.moves.iter().map(|m| (m.to.address(), m.group)).collect();
        // The tail (9, 8) goes into the holes 1 and 4; the hole at 7 is
        // then past the last record (6): 300 bytes freed for 200 moved.
        assert_eq!(moves, vec![(100, 6), (400, 5)]);
        assert_eq!(plan.remaining_bytes, 0);
    }

    #[test]
    fn the_budget_stops_the_fill_and_counts_what_is_left() {
        let groups: Vec<Group> = (0..10).filter(|k| ![1, 4, 7].contains(k)).map(|k| group(k * 100, 100)).collect();
        let plan = plan(&groups, 150);
        assert_eq!(plan.moves.len(), 1);
        assert_eq!(plan.remaining_bytes, 100);
    }

    #[test]
    fn a_record_that_fits_no_hole_stops_the_fill_and_the_holes_left_are_smaller() {
        // Holes of 50 and 30 bytes; the tail record is 60 bytes, the one
        // under it 20.
        let groups = [group(0, 100), group(150, 100), group(280, 20), group(300, 60)];
        let plan = plan(&groups, u64::MAX);
        assert!(plan.moves.is_empty(), "{:?}", plan.moves);
        let left = holes(&groups);
        assert!(left.iter().all(|h| h.len < 60), "{left:?}");
    }

    #[test]
    fn first_fit_takes_the_lowest_hole_that_holds_the_record() {
        let groups = [group(0, 10), group(20, 10), group(100, 10), group(200, 50)];
        // Holes: 10..20 (10), 30..100 (70), 110..200 (90). The tail (50)
        // goes to 30; then the record at 100 (10) to 10.
        let plan = plan(&groups, u64::MAX);
        let moves: Vec<(u64, usize)> = plan.moves.iter().map(|m| (m.to.address(), m.group)).collect();
        assert_eq!(moves, vec![(30, 3), (10, 2)]);
    }
}
