//! `verify`: a full integrity check of a store (fsck), reading everything.

use super::Zrecord;
use crate::error::{Corruption, Error, Result};
use crate::format::Loc;

/// What [`Zrecord::verify`] found.
#[derive(Debug, Default)]
pub struct VerifyReport {
    /// Records checked.
    pub records: u32,
    /// Every problem, with the record it concerns when it concerns one.
    pub problems: Vec<Error>,
}

impl VerifyReport {
    /// True when no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

impl Zrecord {
    /// Checks the whole store: every entry valid and inside its chunk file,
    /// no two records sharing bytes, every record decoding to exactly its
    /// length (zstd checksums included), the dictionary present where needed.
    /// O(records + bytes). `Err` only for I/O failures; corruption is
    /// reported in the [`VerifyReport`].
    pub fn verify(&self) -> Result<VerifyReport> {
        let len = self.len();
        let mut report = VerifyReport { records: len, problems: Vec::new() };
        let mut extents: Vec<(Loc, u32, u32)> = Vec::with_capacity(len as usize);
        let mut buf = Vec::new();
        for index in 0..len {
            let index64 = u64::from(index);
            let entry = match self.entry(index64, len) {
                Ok((entry, _)) => entry,
                Err(e) => {
                    report.problems.push(e);
                    continue;
                }
            };
            buf.resize(entry.logic_length() as usize, 0);
            match self.read_into(index64, len, &mut buf) {
                Ok(()) => extents.push((entry.loc(), entry.phys_length(), index)),
                Err(e @ Error::Io { .. }) => return Err(e),
                Err(e) => report.problems.push(e),
            }
        }
        extents.sort_unstable();
        // (end, index) of the furthest-reaching extent so far.
        let mut reach: Option<(u64, u32)> = None;
        for (loc, phys, index) in extents.into_iter().filter(|e| e.1 > 0) {
            if let Some((end, other)) = reach.filter(|(end, _)| loc.address() < *end) {
                report.problems.push(Error::Corrupt {
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
