//! `verify`: a full integrity check of a store (fsck), reading everything.

use super::Zrecord;
use crate::error::{Corruption, Error, Result};
use crate::format::Loc;

/// [`Zrecord::verify_with_progress`] reports once per this many records.
const PROGRESS_RECORDS: u32 = 4096;

/// What [`Zrecord::verify`] found.
///
/// Every problem is counted in [`problems_total`](Self::problems_total);
/// only the first [`PROBLEMS_KEPT`](Self::PROBLEMS_KEPT) are kept, so a
/// store whose whole table is garbage costs bounded memory.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Records checked.
    pub records: u32,
    /// The first problems found (at most [`PROBLEMS_KEPT`](Self::PROBLEMS_KEPT)),
    /// with the record each concerns when it concerns one: entry checks and
    /// decoding in index order, then overlaps in physical order.
    pub problems: Vec<Error>,
    /// Every problem found, the ones not kept in `problems` included.
    pub problems_total: u64,
}

impl VerifyReport {
    /// Most problems kept in [`problems`](Self::problems).
    pub const PROBLEMS_KEPT: usize = 1000;

    /// True when no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems_total == 0
    }

    /// Counts a problem, keeping it if there is room.
    fn note(&mut self, problem: Error) {
        self.problems_total += 1;
        if self.problems.len() < Self::PROBLEMS_KEPT {
            self.problems.push(problem);
        }
    }
}

impl Zrecord {
    /// Checks the whole store: every entry valid and inside its chunk file,
    /// no two records sharing bytes, every record decoding to exactly its
    /// length (zstd checksums included), the dictionary present where needed.
    /// O(records + bytes). `Err` only for I/O failures; corruption is
    /// reported in the [`VerifyReport`].
    pub fn verify(&self) -> Result<VerifyReport> {
        self.verify_with_progress(|_, _| {})
    }

    /// [`verify`](Self::verify), calling `progress(checked, records)` from
    /// the calling thread every 4096 records read and once at the end
    /// (`checked == records`, before the overlap check, which reads no
    /// record bytes).
    pub fn verify_with_progress(&self, mut progress: impl FnMut(u32, u32)) -> Result<VerifyReport> {
        let view = self.view();
        let len = view.len;
        let mut report = VerifyReport { records: len, ..VerifyReport::default() };
        let mut extents: Vec<(Loc, u32, u32)> = Vec::with_capacity(len as usize);
        let mut buf = Vec::new();
        for index in 0..len {
            if index % PROGRESS_RECORDS == 0 {
                progress(index, len);
            }
            let index64 = u64::from(index);
            let valid = match self.valid_entry(index64, view) {
                Ok(valid) => valid,
                Err(e) => {
                    report.note(e);
                    continue;
                }
            };
            buf.resize(valid.logic() as usize, 0);
            match self.read_into(index64, view, &mut buf) {
                Ok(()) => extents.push((valid.loc(), valid.phys(), index)),
                Err(e @ Error::Io { .. }) => return Err(e),
                Err(e) => report.note(e),
            }
        }
        progress(len, len);
        extents.sort_unstable();
        // (end, index) of the furthest-reaching extent so far.
        let mut reach: Option<(u64, u32)> = None;
        for (loc, phys, index) in extents.into_iter().filter(|e| e.1 > 0) {
            if let Some((end, other)) = reach.filter(|(end, _)| loc.address() < *end) {
                report.note(Error::Corrupt {
                    path: self.path.clone(),
                    index: Some(u64::from(index)),
                    what: Corruption::Overlap { other: u64::from(other) },
                });
                reach = Some((end.max(loc.address() + u64::from(phys)), other));
            } else {
                reach = Some((loc.address() + u64::from(phys), index));
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn keeps_the_first_problems_and_counts_all() {
        let mut report = VerifyReport::default();
        assert!(report.is_ok());
        let total = VerifyReport::PROBLEMS_KEPT as u64 + 5;
        for index in 0..total {
            report.note(Error::Corrupt {
                path: PathBuf::from("s"),
                index: Some(index),
                what: Corruption::UnwrittenEntry,
            });
        }
        assert!(!report.is_ok());
        assert_eq!(report.problems_total, total);
        assert_eq!(report.problems.len(), VerifyReport::PROBLEMS_KEPT);
        assert!(matches!(report.problems[0], Error::Corrupt { index: Some(0), .. }));
        let last = VerifyReport::PROBLEMS_KEPT as u64 - 1;
        assert!(matches!(report.problems.last(), Some(Error::Corrupt { index: Some(i), .. }) if *i == last));
    }

    #[test]
    fn progress_counts_up_to_the_records() {
        let dir = tempfile::tempdir().unwrap();
        let store = Zrecord::open(dir.path()).unwrap();
        let n = 2 * PROGRESS_RECORDS + 5;
        store.append(&vec![3u8; n as usize], n as usize, 1, crate::Codec::Raw).unwrap();
        let mut calls = Vec::new();
        let report = store.verify_with_progress(|checked, records| calls.push((checked, records))).unwrap();
        assert!(report.is_ok());
        assert_eq!(calls, [(0, n), (PROGRESS_RECORDS, n), (2 * PROGRESS_RECORDS, n), (n, n)]);
    }
}
