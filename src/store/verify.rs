//! `verify`: a full integrity check of a store (fsck), reading everything.

use super::Zrecord;
use super::entry::ValidEntry;
use super::read::View;
use super::sums::Verdict;
use crate::error::{Corruption, Error, Result};
use crate::format::Loc;

/// [`Zrecord::verify_with_progress`] reports once per this many records.
const PROGRESS_RECORDS: u32 = 4096;
/// Most records read at once.
const GROUP_RECORDS: usize = 1024;
/// Most decoded bytes read at once.
const GROUP_BYTES: usize = 32 << 20;

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
    /// Records whose stored bytes matched their checksum (`sums.zr`;
    /// empty records included).
    pub checksummed: u32,
    /// Records no checksum covers: a store without `sums.zr`, records
    /// another writer (the reference package) appended or moved, or a
    /// mismatch after another writer changed the table (not an error: it
    /// may be that writer's change), or, after a crash, past the covered
    /// word, whose slot the crash may have lost (the next writer's open
    /// sums those again). `loaderx checksum` covers them all.
    pub unchecked: u32,
    /// The checksums' seal holds: no writer without checksums changed the
    /// table since they were kept, so a mismatch is corruption. False for a
    /// store without `sums.zr`, or after the reference package wrote to it
    /// (`loaderx checksum` mends it).
    pub sealed: bool,
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
        let len = view.len();
        let sealed = self.meta.sums().is_some_and(|sums| sums.sealed(|| self.meta.header()));
        let mut report = VerifyReport { records: len, sealed, ..VerifyReport::default() };
        let mut extents: Vec<(Loc, u32, u32)> = Vec::with_capacity(len as usize);
        // Records are read a group at a time, on the path the read mode
        // picks (batched reads for a store not in memory).
        let mut group: Vec<Result<ValidEntry>> = Vec::new();
        let mut group_bytes = 0usize;
        for index in 0..len {
            if index % PROGRESS_RECORDS == 0 {
                progress(index, len);
            }
            let valid = self.valid_entry(u64::from(index), view);
            group_bytes += valid.as_ref().map_or(0, |v| v.logic() as usize);
            group.push(valid);
            if group.len() >= GROUP_RECORDS || group_bytes >= GROUP_BYTES || index + 1 == len {
                self.verify_group(view, std::mem::take(&mut group), &mut report, &mut extents)?;
                group_bytes = 0;
            }
        }
        progress(len, len);
        extents.sort_unstable();
        // (end, index) of the furthest-reaching extent so far.
        let mut reach: Option<(u64, u32)> = None;
        for (loc, phys, index) in extents.into_iter().filter(|e| e.1 > 0) {
            if let Some((end, other)) = reach.filter(|(end, _)| loc.address() < *end) {
                report.note(Error::Corrupt {
                    path: self.path().to_path_buf(),
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

    /// Reads and decodes the records of `group` (entries validated or not,
    /// in index order): all at once, and one by one only if that fails, to
    /// tell which did. Problems are noted in index order.
    fn verify_group(
        &self,
        view: View,
        group: Vec<Result<ValidEntry>>,
        report: &mut VerifyReport,
        extents: &mut Vec<(Loc, u32, u32)>,
    ) -> Result<()> {
        let valid: Vec<ValidEntry> = group.iter().filter_map(|v| v.as_ref().ok().copied()).collect();
        let total: usize = valid.iter().map(|v| v.logic() as usize).sum();
        let mut buf = vec![0u8; total];
        let mut items: Vec<(u64, &mut [u8])> = Vec::with_capacity(valid.len());
        let mut rest = &mut buf[..];
        for v in &valid {
            let (out, tail) = std::mem::take(&mut rest).split_at_mut(v.logic() as usize);
            items.push((v.index(), out));
            rest = tail;
        }
        let whole_read = self.read_all(view, items, total).is_ok();
        for entry in group {
            let read = entry.and_then(|v| {
                if !whole_read {
                    self.read_into(v.index(), view, &mut buf[..v.logic() as usize])?;
                }
                Ok(v)
            });
            let v = match read {
                Ok(v) => v,
                Err(e @ Error::Io { .. }) => return Err(e),
                Err(e) => {
                    report.note(e);
                    continue;
                }
            };
            // A record that decoded takes part in the overlap check even
            // when its sum fails: a misdirected entry is then also named
            // with the record whose bytes it points into.
            extents.push((v.loc(), v.phys(), v.index() as u32));
            match self.verify_sum(&v, report) {
                Err(e @ Error::Io { .. }) => return Err(e),
                Err(e) => report.note(e),
                Ok(()) => {}
            }
        }
        Ok(())
    }

    /// Checks a record that decoded against its sum, counting it in
    /// `report`; `Err` for a mismatch (noted by the caller).
    fn verify_sum(&self, valid: &ValidEntry, report: &mut VerifyReport) -> Result<()> {
        let Some(sums) = self.meta.sums() else {
            report.unchecked += 1;
            return Ok(());
        };
        let mut scratch = Vec::new();
        let stored = self.chunks.stored(valid, &mut scratch)?;
        match sums.judge(valid.index() as u32, valid.entry(), stored, || self.meta.header()) {
            Verdict::Good => report.checksummed += 1,
            Verdict::Unchecked => report.unchecked += 1,
            Verdict::Bad { .. } => return self.check_sum(valid, stored),
        }
        Ok(())
    }
}
