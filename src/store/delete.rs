//! Delete: swap-with-last in descending index order, batch-atomic across a
//! crash through an intent record. Steps: `docs/crash-safety.md`, "Delete".

use std::collections::HashMap;

use super::Zrecord;
use super::intent::Intent;
use crate::error::{Error, Result};

/// The effect of deleting `indices` from `0..len` by swap-with-last, applied
/// in descending order: the new length and, for each hole below it, the
/// original slot whose entry fills it. Duplicates and any order are fine;
/// every index must be below `len`.
pub(crate) fn plan_delete(len: u32, indices: &[u64]) -> (u32, Vec<(u32, u32)>) {
    let mut doomed: Vec<u32> = indices.iter().map(|&i| i as u32).collect();
    doomed.sort_unstable_by(|a, b| b.cmp(a));
    doomed.dedup();
    // Slot -> original slot whose entry it holds, for the slots that changed.
    let mut holds: HashMap<u32, u32> = HashMap::new();
    let mut cur = len;
    for &d in &doomed {
        let last = cur - 1;
        let from = holds.remove(&last).unwrap_or(last);
        if d != last {
            holds.insert(d, from);
        }
        cur -= 1;
    }
    let mut moves: Vec<(u32, u32)> = holds.into_iter().collect();
    moves.sort_unstable();
    debug_assert!(moves.iter().all(|&(to, from)| to < cur && from >= cur));
    (cur, moves)
}

impl Zrecord {
    /// Removes records, keeping the index space dense: the last record is
    /// swapped into each hole, holes taken in descending index order (an
    /// index names a survivor only until the next delete). Duplicates and any
    /// order are accepted. Atomic across a crash: afterwards the store is
    /// exactly as before the call or exactly as after it. The space is
    /// reclaimed by [`Zrecord::compact`].
    pub fn delete(&mut self, indices: &[u64]) -> Result<()> {
        self.check_writable()?;
        let len = self.len();
        if let Some(&index) = indices.iter().find(|&&i| i >= u64::from(len)) {
            return Err(Error::IndexOutOfRange { path: self.path.clone(), index, len });
        }
        if indices.is_empty() {
            return Ok(());
        }
        let (new_len, moves) = plan_delete(len, indices);
        let items = moves.iter().map(|&(to, from)| (to, self.table.entry(from))).collect();
        let intent = Intent { old_len: len, new_len, items };
        if intent.items.is_empty() {
            // Only the length changes: one aligned word, no intent needed.
            return self.apply_intent(&intent);
        }
        intent.write(&*self.meta).map_err(|e| self.sync_failed(e))?; // SYNC D1
        self.apply_intent(&intent)?; // SYNC D2, D3
        Intent::clear(&*self.meta).map_err(|e| self.sync_failed(e)) // SYNC D4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive model: `Vec::swap_remove` in descending order.
    fn model(len: u32, indices: &[u64]) -> Vec<u32> {
        let mut v: Vec<u32> = (0..len).collect();
        let mut doomed: Vec<u64> = indices.to_vec();
        doomed.sort_unstable_by(|a, b| b.cmp(a));
        doomed.dedup();
        for d in doomed {
            v.swap_remove(d as usize);
        }
        v
    }

    fn apply(len: u32, indices: &[u64]) -> Vec<u32> {
        let (new_len, moves) = plan_delete(len, indices);
        let mut v: Vec<u32> = (0..len).collect();
        for (to, from) in moves {
            v[to as usize] = from;
        }
        v.truncate(new_len as usize);
        v
    }

    #[test]
    fn matches_swap_remove() {
        for (len, indices) in [
            (10, vec![9, 5]),
            (10, vec![8, 7]),
            (10, vec![0, 0, 9, 1]),
            (10, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9]),
            (5, vec![4]),
            (5, vec![1, 3]),
            (1, vec![0]),
        ] {
            assert_eq!(apply(len, &indices), model(len, &indices), "len {len} delete {indices:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn matches_swap_remove_prop(len in 1u32..200, picks in proptest::collection::vec(0u64..1000, 0..60)) {
            let indices: Vec<u64> = picks.into_iter().map(|p| p % u64::from(len)).collect();
            proptest::prop_assert_eq!(apply(len, &indices), model(len, &indices));
        }
    }
}
