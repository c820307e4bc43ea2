//! The store's O(n) invariant checks, run after every mutation in builds
//! with debug assertions (the simulator's debug build in CI): the cheap
//! checks stay on in release where they are made (`entry.rs`, `meta.rs`).
//!
//! Checked: Invariant F of `docs/crash-safety.md` (every readable record
//! ends at or below the frontier), and that no chunk's known length exceeds
//! its file's.

use super::Zrecord;
use super::entry::ValidEntry;
use crate::format::{CHUNK_BYTES_MAX, CHUNKS_MAX, Frontier};

impl Zrecord {
    /// [`Zrecord::check_invariants`] in builds with debug assertions.
    pub(crate) fn debug_check_invariants(&self) {
        if cfg!(debug_assertions) {
            self.check_invariants();
        }
    }

    /// Panics if an invariant does not hold.
    pub(crate) fn check_invariants(&self) {
        let view = self.view();
        let frontier = self.meta.frontier();
        let Ok(()) = self.meta.try_for_each_written_entry(view.len(), |index, entry| {
            // Entries that do not validate are unreadable (damaged input, a
            // typed error), not a broken invariant.
            if let Ok(valid) = self.check_entry(u64::from(index), entry, view) {
                self.check_invariant_f(&valid, frontier);
            }
            Ok::<(), std::convert::Infallible>(())
        });
        for id in 0..=frontier.chunk {
            if let Some(chunk) = self.chunks.opened(id) {
                let file_len = chunk.file_len().unwrap_or(u64::MAX);
                assert!(chunk.len() <= file_len, "chunk {id}: known length {} past the file's {file_len}", chunk.len());
            }
        }
    }

    /// Invariant F for one readable record: it ends at or below the frontier
    /// if it lies inside its file. Only chunks already open are looked at:
    /// the check makes no I/O that could change what a simulation does next.
    fn check_invariant_f(&self, valid: &ValidEntry, frontier: Frontier) {
        let end = valid.loc().address() + u64::from(valid.phys());
        let inside = self
            .chunks
            .opened(valid.loc().chunk)
            .is_some_and(|c| u64::from(valid.loc().offset) + u64::from(valid.phys()) <= c.len());
        // A record ending at the last possible chunk's very end (written
        // by the reference) is past every frontier the format can hold.
        let unrepresentable = end.is_multiple_of(CHUNK_BYTES_MAX) && u32::from(frontier.chunk) + 1 >= CHUNKS_MAX;
        assert!(
            !inside || end <= frontier.address() || unrepresentable,
            "Invariant F: record {} ends at {end}, past the frontier {frontier:?}",
            valid.index()
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::format::{Frontier, Header};
    use crate::io::{OpenMode, Vfs, real::RealFs, write_all_at};
    use crate::{Codec, Zrecord};

    /// The check fails on a store whose header puts the frontier below a
    /// record (as a damaged header would, before a writer's open repairs it).
    #[test]
    fn a_frontier_below_a_record_is_caught() {
        let dir = tempfile::tempdir().unwrap();
        let store = Zrecord::open(dir.path()).unwrap();
        store.append(&[7u8; 300], 3, 100, Codec::Raw).unwrap();
        store.check_invariants();
        drop(store);
        let meta = RealFs.open(&dir.path().join("meta.zr"), OpenMode::Write).unwrap();
        let header = Header::new(Frontier { chunk: 0, offset: 150 }, 3);
        write_all_at(&*meta, bytemuck::bytes_of(&header), 0).unwrap();
        drop(meta);
        let reader = Zrecord::open_read_only(dir.path()).unwrap();
        reader.get(2).unwrap(); // opens chunk 0
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| reader.check_invariants()));
        assert!(caught.is_err(), "a record past the frontier went unnoticed");
        // A writer's open raises the frontier past it.
        Zrecord::open(dir.path()).unwrap().check_invariants();
    }
}
