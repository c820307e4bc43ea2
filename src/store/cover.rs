//! Covering a store with checksums: `sums.zr` written for a store that has
//! none (one written before checksums), and every record another writer
//! (the reference package) appended or moved summed again, then the seal
//! mended. `loaderx checksum` runs it. Order: `docs/crash-safety.md`,
//! "Checksums".

use super::Zrecord;
use super::codec;
use super::sums::{SealAtOpen, Sum, Sums};
use crate::error::{Error, Result};

/// What [`Zrecord::cover`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoverReport {
    /// Records in the store.
    pub records: u32,
    /// Records whose checksum was written: by this call, or by the
    /// writer's open before it (records past the covered word, such as
    /// another writer's appends; the first `cover` after an open reports
    /// them). The others were covered already.
    pub summed: u32,
    /// Records left uncovered: their bytes do not decode, so no checksum is
    /// taken of them (`verify` names them).
    pub failed: u32,
    /// `sums.zr` was created.
    pub created: bool,
}

impl Zrecord {
    /// Covers every record with a checksum: creates `sums.zr` if the store
    /// has none, sums each record that no checksum covers (one another writer
    /// appended or moved; its compressed bytes must decode, its raw bytes
    /// are taken as they are), then seals the table. O(records + bytes);
    /// readers may read meanwhile (they check nothing they cannot).
    pub fn cover(&mut self) -> Result<CoverReport> {
        self.check_writable()?;
        let summed = std::mem::take(&mut self.summed_at_open);
        let mut report = CoverReport { records: self.len(), summed, ..CoverReport::default() };
        if self.meta.sums().is_none() {
            self.create_sums()?;
            report.created = true;
        }
        let appends = self.meta.lock_appends();
        let sums = self.meta.sums().expect("created above");
        let header = self.meta.header();
        // Broken while slots change: a reader judges nothing by them.
        sums.break_seal().map_err(|e| self.sync_failed(e))?;
        let view = self.view();
        let (mut scratch, mut decoded) = (Vec::new(), Vec::new());
        for index in 0..view.len() {
            let Ok(valid) = self.valid_entry(u64::from(index), view) else {
                report.failed += 1;
                continue;
            };
            let stored = self.chunks.stored(&valid, &mut scratch)?;
            let sum = Sum::of(valid.entry(), stored);
            if sums.get(index) == sum {
                continue;
            }
            decoded.resize(valid.logic() as usize, 0);
            if codec::decode(valid.codec(), stored, &mut decoded, self.dict.get()).is_err() {
                report.failed += 1;
                continue;
            }
            appends.put_sum(index, sum);
            report.summed += 1;
        }
        sums.flush(0, view.len()).map_err(|e| self.sync_failed(e))?; // SYNC K1
        sums.covered_to(view.len());
        sums.mend(header).map_err(|e| self.sync_failed(e))?; // SYNC K2, K5
        Ok(report)
    }

    /// A writer's open, before recovery: a version 1 `sums.zr` rewritten as
    /// version 2, and the seal checked against the header. A stale seal is
    /// this crate's own (an append's seal, not synced, lost in a crash) when
    /// no intent is pending (`intent`: a delete or compaction syncs the seal
    /// before its intent), the header is one appends reach from the sealed
    /// one, and every slot below the covered word holds its record's sum
    /// (its entry's tag, or the bytes match); otherwise another writer
    /// changed the table, and the seal is broken. O(1) unless a crash lost
    /// the seal: then one pass over the table below the covered word.
    pub(super) fn settle_seal(&self, intent: bool) -> Result<()> {
        let Some(sums) = self.meta.sums() else { return Ok(()) };
        let sync_failed = |e| self.sync_failed(e);
        sums.upgrade(self.len()).map_err(sync_failed)?;
        let header = self.meta.header();
        let at_open = sums.seal_at_open(header);
        let ours = at_open == SealAtOpen::Stale && !intent && sums.appends_reach(header) && self.slots_fit(sums)?;
        sums.settle_seal(header, at_open, ours).map_err(sync_failed)
    }

    /// Whether every slot below the covered word holds the sum of the
    /// record its index names now ([`Sums::fits`]). A read that fails
    /// fails the open (it may not fail again): no seal is broken for it.
    fn slots_fit(&self, sums: &Sums) -> Result<bool> {
        let view = self.view();
        let below = sums.covered().min(view.len());
        let mut scratch = Vec::new();
        let scan = self.meta.try_for_each_written_entry(below, |index, entry| {
            let mut failed = None;
            let stored = || {
                let valid = self.valid_entry(u64::from(index), view).ok()?;
                match self.chunks.stored(&valid, &mut scratch) {
                    Ok(stored) => Some(stored.to_vec()),
                    Err(e) => {
                        failed = Some(e).filter(|e| matches!(e, Error::Io { .. }));
                        None
                    }
                }
            };
            let fits = sums.fits(index, &entry, stored);
            match failed {
                Some(e) => Err(Some(e)),
                None if fits => Ok(()),
                None => Err(None),
            }
        });
        match scan {
            Ok(()) => Ok(true),
            Err(None) => Ok(false),
            Err(Some(e)) => Err(e),
        }
    }

    /// A writer's open: the records past the covered word (whose slots a
    /// crash may have lost, `Sums`) summed again from their bytes, durable
    /// before their commit, and the covered word moved up to the length
    /// (SYNC K1, then K5). Nothing under a broken seal (mismatches are
    /// unchecked there; `cover` mends it). A record whose entry does not
    /// validate gets a slot that covers nothing (verify names it).
    /// O(records past the word): at most the lag
    /// ([`super::Options::checksum_lag_bytes`]) and the last append.
    /// Returns how many records it summed (not those given such a slot).
    pub(super) fn cover_tail(&self) -> Result<u32> {
        let Some(sums) = self.meta.sums().filter(|s| s.sealed(|| self.meta.header())) else { return Ok(0) };
        let view = self.view();
        let from = sums.covered().min(view.len());
        if from == view.len() {
            return Ok(0);
        }
        let appends = self.meta.lock_appends();
        let (mut scratch, mut summed) = (Vec::new(), 0);
        for index in from..view.len() {
            let sum = match self.valid_entry(u64::from(index), view) {
                Err(_) => Sum::NONE,
                Ok(valid) => match self.chunks.stored(&valid, &mut scratch) {
                    Ok(stored) => Sum::of(valid.entry(), stored),
                    // A read that failed may not fail again: the open
                    // fails, the covered word where it was.
                    Err(e @ Error::Io { .. }) => return Err(e),
                    Err(_) => Sum::NONE,
                },
            };
            summed += u32::from(sum != Sum::NONE);
            appends.put_sum(index, sum);
        }
        sums.flush(from, view.len()).map_err(|e| self.sync_failed(e))?; // SYNC K1
        sums.covered_to(view.len());
        sums.flush_header().map_err(|e| self.sync_failed(e))?; // SYNC K5
        Ok(summed)
    }

    /// Writes `sums.zr` for a store that has none and opens it.
    fn create_sums(&mut self) -> Result<()> {
        let path = self.path().to_path_buf();
        let io = |op: &'static str| {
            let path = path.clone();
            move |source| Error::Io { path, op, source }
        };
        let vfs = self.home.vfs();
        Sums::create(vfs, &path, self.meta.header()).map_err(io("create sums.zr"))?; // SYNC K0
        vfs.sync_dir(&path).map_err(|e| self.sync_failed(e))?; // SYNC K3
        let sums = Sums::open(vfs, &path, false).map_err(io("open sums.zr"))?;
        let sums =
            sums.ok_or_else(|| io("open sums.zr")(std::io::Error::other("the sums.zr just written does not open")))?;
        self.meta.install_sums(sums);
        Ok(())
    }
}
