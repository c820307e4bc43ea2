//! Covering a store with checksums: `sums.zr` written for a store that has
//! none (one written before checksums), and every record another writer
//! (the reference package) appended or moved summed again, then the seal
//! mended. `loaderx checksum` runs it. Order: `docs/crash-safety.md`,
//! "Checksums".

use super::Zrecord;
use super::codec;
use super::sums::{Sum, Sums};
use crate::error::{Error, Result};

/// What [`Zrecord::cover`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoverReport {
    /// Records in the store.
    pub records: u32,
    /// Records whose checksum was written (the others were covered already).
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
        let mut report = CoverReport { records: self.len(), ..CoverReport::default() };
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
        sums.mend(header).map_err(|e| self.sync_failed(e))?; // SYNC K2
        Ok(report)
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
