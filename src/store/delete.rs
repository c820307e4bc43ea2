//! Delete: swap-with-last in descending index order, batch-atomic across a
//! crash through an intent record. Steps: `docs/crash-safety.md`, "Delete".

use std::collections::HashMap;

use super::Zrecord;
use super::intent::Intent;
use super::sums::Sum;
use crate::error::{Error, Result};

/// The effect of deleting `indices` from `0..len` by swap-with-last, applied
/// in descending order: the new length and, for each hole below it, the
/// original index whose entry fills it. Duplicates and any order are fine;
/// every index must be below `len`.
pub(crate) fn plan_delete(len: u32, indices: &[u64]) -> (u32, Vec<(u32, u32)>) {
    let mut doomed: Vec<u32> = indices.iter().map(|&i| i as u32).collect();
    doomed.sort_unstable_by(|a, b| b.cmp(a));
    doomed.dedup();
    // Index -> original index whose entry it holds, for the indices that changed.
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
    assert!(
        moves.iter().all(|&(to, from)| to < cur && from >= cur),
        "a hole below the new length is filled from above it"
    );
    (cur, moves)
}

impl Zrecord {
    /// Removes records, keeping the index space dense: the last record is
    /// swapped into each hole, holes taken in descending index order (an
    /// index names a survivor only until the next delete). Duplicates and any
    /// order are accepted. Atomic across a crash: afterwards the store is
    /// exactly as before the call or exactly as after it. The space is
    /// reclaimed by [`Zrecord::compact`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// use loaderx::{Codec, Zrecord};
    /// let mut store = Zrecord::open(dir.path())?;
    /// store.append(b"abcde", 5, 1, Codec::Raw)?;
    /// store.delete(&[1, 1, 4])?; // e is dropped, then d fills the hole at 1
    /// let mut out = [0; 3];
    /// store.gather(&[0, 1, 2], &mut out, 1)?;
    /// assert_eq!(&out, b"adc");
    /// store.compact()?;
    /// assert_eq!(store.stats()?.reclaimable, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn delete(&mut self, indices: &[u64]) -> Result<()> {
        self.check_writable()?;
        let len = self.len();
        if let Some(&index) = indices.iter().find(|&&i| i >= u64::from(len)) {
            return Err(Error::IndexOutOfRange { path: self.path().to_path_buf(), index, len });
        }
        if indices.is_empty() {
            return Ok(());
        }
        let _readers = self.exclude_readers()?; // no reader elsewhere until the end
        let intent = self.delete_intent(len, indices);
        if !intent.items.is_empty() {
            self.meta.write_intent(&intent).map_err(|e| self.sync_failed(e))?; // step D1
        }
        // Only the length changes when no hole is below it: one aligned
        // word, no intent needed.
        self.meta.apply_intent(&intent).map_err(|e| self.sync_failed(e))?; // steps D2, D3
        if !intent.items.is_empty() {
            self.meta.clear_intent().map_err(|e| self.sync_failed(e))?; // step D4
        }
        self.debug_check_invariants();
        Ok(())
    }

    /// The intent of deleting `indices` from `0..len`: each hole's new
    /// entry, and its sum, moved with it as it is.
    fn delete_intent(&self, len: u32, indices: &[u64]) -> Intent {
        let (new_len, moves) = plan_delete(len, indices);
        let items = moves.iter().map(|&(to, from)| (to, self.meta.raw_entry(from))).collect();
        let sums = moves.iter().map(|&(_, from)| self.meta.sums().map_or(Sum::NONE, |s| s.get(from))).collect();
        Intent { old_len: len, new_len, items, sums }
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

    use crate::format::Codec;
    use crate::store::Zrecord;

    /// A store of 20 one-byte records `[k]`, and its model.
    fn twenty(dir: &std::path::Path) -> (Zrecord, Vec<Vec<u8>>) {
        let store = Zrecord::open(dir).unwrap();
        let src: Vec<u8> = (0..20).collect();
        store.append(&src, 20, 1, Codec::Raw).unwrap();
        (store, src.iter().map(|&b| vec![b]).collect())
    }

    fn contents(store: &Zrecord) -> Vec<Vec<u8>> {
        (0..u64::from(store.len())).map(|i| store.get(i).unwrap()).collect()
    }

    /// A crash after the intent is durable and `applied` of its entries
    /// were written, before the length commit: recovery rolls forward.
    #[test]
    fn interrupted_delete_rolls_forward() {
        let doomed = [2u64, 5, 5, 19, 0];
        for applied in [0, 1, 3] {
            let dir = tempfile::tempdir().unwrap();
            let (mut store, _) = twenty(dir.path());
            let intent = store.delete_intent(20, &doomed);
            assert_eq!(intent.items.len(), 3);
            store.meta.write_intent(&intent).unwrap();
            let (items, sums) = (intent.items[..applied].to_vec(), intent.sums[..applied].to_vec());
            let partial = Intent { items, sums, new_len: 20, ..intent.clone() };
            store.meta.apply_intent(&partial).unwrap();
            drop(store);
            let store = Zrecord::open(dir.path()).unwrap();
            let mut want: Vec<Vec<u8>> = (0..20u8).map(|b| vec![b]).collect();
            let mut ds = doomed.to_vec();
            ds.sort_unstable_by(|a, b| b.cmp(a));
            ds.dedup();
            for d in ds {
                want.swap_remove(d as usize);
            }
            assert_eq!(contents(&store), want, "applied {applied}");
            assert_eq!(store.meta.read_intent().unwrap(), None, "the intent is cleared");
            // Windows keeps the length where a mapping stops the truncation.
            let meta_len = store.meta.file_len().unwrap();
            assert!(cfg!(windows) || meta_len == crate::format::META_BYTES, "meta.zr is {meta_len} bytes");
        }
    }

    /// A reader cannot finish an interrupted delete: it says so.
    #[test]
    fn read_only_open_of_an_interrupted_delete_asks_for_recovery() {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = twenty(dir.path());
        store.meta.write_intent(&store.delete_intent(20, &[0])).unwrap();
        drop(store);
        let err = Zrecord::open_read_only(dir.path()).unwrap_err();
        assert!(matches!(err, crate::Error::RecoveryNeeded { .. }), "{err}");
        assert_eq!(Zrecord::open(dir.path()).unwrap().len(), 19);
    }

    /// An intent from disk that would take the length past the table (no
    /// mutation grows it) is corruption, not a length to trust.
    #[test]
    fn an_intent_that_grows_the_length_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (store, model) = twenty(dir.path());
        store
            .meta
            .write_intent(&Intent { old_len: 20, new_len: 1 << 31, items: Vec::new(), sums: Vec::new() })
            .unwrap();
        drop(store);
        let err = Zrecord::open(dir.path()).unwrap_err();
        assert!(matches!(err, crate::Error::Corrupt { what: crate::Corruption::Intent(_), .. }), "{err}");
        // Nothing was changed: without the bogus intent the store is intact.
        let meta =
            crate::io::Vfs::open(&crate::io::real::RealFs, &dir.path().join("meta.zr"), crate::io::OpenMode::Write)
                .unwrap();
        meta.set_len(crate::format::META_BYTES).unwrap();
        drop(meta);
        assert_eq!(contents(&Zrecord::open(dir.path()).unwrap()), model);
    }

    /// A crash after the length committed, before the intent was cleared:
    /// recovery only clears it (and does not delete again).
    #[test]
    fn committed_delete_is_not_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let (mut store, _) = twenty(dir.path());
        let intent = store.delete_intent(20, &[1, 2]);
        store.meta.write_intent(&intent).unwrap();
        store.meta.apply_intent(&intent).unwrap();
        let after = contents(&store);
        drop(store);
        let store = Zrecord::open(dir.path()).unwrap();
        assert_eq!(contents(&store), after);
        assert_eq!(store.len(), 18);
    }

    /// A torn intent (the crash hit while it was written) is discarded.
    #[test]
    fn torn_intent_is_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let (store, model) = twenty(dir.path());
        let bytes = store.delete_intent(20, &[0]).encode();
        store.meta.write_torn_intent_for_test(&bytes[..bytes.len() - 3]);
        drop(store);
        // The torn intent announces nothing: even a reader may ignore it.
        assert_eq!(contents(&Zrecord::open_read_only(dir.path()).unwrap()), model);
        let store = Zrecord::open(dir.path()).unwrap();
        assert_eq!(contents(&store), model);
    }

    proptest::proptest! {
        #[test]
        fn matches_swap_remove_prop(len in 1u32..200, picks in proptest::collection::vec(0u64..1000, 0..60)) {
            let indices: Vec<u64> = picks.into_iter().map(|p| p % u64::from(len)).collect();
            proptest::prop_assert_eq!(apply(len, &indices), model(len, &indices));
        }
    }
}
