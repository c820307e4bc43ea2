//! One record read: the index checked against the published length, the
//! entry validated ([`ValidEntry`]), the stored bytes found inside their
//! chunk file, and decoding into an output of exactly the record's length, so
//! no output byte is ever left holding anything but its record's bytes.
//!
//! A read-only store loads each entry again after its bytes are read
//! ([`Zrecord::unchanged`]): no writer of this crate changes one under a
//! reader (the readers' lock), but one that ignores the lock moves a record
//! by writing its bytes, then its entry, and only then reusing the old
//! bytes, so an entry that still reads the same after the bytes were read
//! means they were its record's, and one that changed means they may not
//! be (`Error::StoreChanged`, never another record's bytes).

use super::codec;
use super::entry::{Bounds, ValidEntry};
use super::sums::Verdict;
use super::{VerifyReads, Zrecord};
use crate::error::{Corruption, Error, Result};
use crate::format::Entry;
// std's, not `crate::sync`'s: it orders loads of mapped file memory,
// which loom cannot see.
use std::sync::atomic::{Ordering, fence};

/// What one read call goes by, loaded once per call: the published length,
/// then the bounds entries are validated against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct View {
    len: u32,
    bounds: Bounds,
}

impl View {
    /// The published length the call goes by.
    pub(crate) fn len(&self) -> u32 {
        self.len
    }
}

impl Zrecord {
    /// The view reads go by now.
    pub(crate) fn view(&self) -> View {
        let len = self.meta.len();
        // After the length: the writer stores a new last chunk before it
        // publishes a length whose entries name it.
        let bounds = Bounds { last_chunk: self.meta.frontier().chunk, has_dict: self.has_dict() };
        View { len, bounds }
    }

    /// The validated entry of record `index`.
    pub(crate) fn valid_entry(&self, index: u64, view: View) -> Result<ValidEntry> {
        if index >= u64::from(view.len()) {
            return Err(Error::IndexOutOfRange { path: self.path().to_path_buf(), index, len: view.len() });
        }
        self.check_entry(index, self.meta.raw_entry(index as u32), view)
    }

    /// `entry`, read at `index`, checked against `view`.
    pub(crate) fn check_entry(&self, index: u64, entry: Entry, view: View) -> Result<ValidEntry> {
        ValidEntry::check(self.path(), index, entry, view.bounds)
    }

    /// Decodes record `index` into `dst`, which must be exactly its length.
    pub(crate) fn read_into(&self, index: u64, view: View, dst: &mut [u8]) -> Result<()> {
        let valid = self.valid_entry(index, view)?;
        if valid.logic() as usize != dst.len() {
            return Err(Error::LengthMismatch {
                path: self.path().to_path_buf(),
                index,
                stored: valid.logic(),
                expected: dst.len() as u64,
            });
        }
        // Stays empty (no allocation) on the real filesystem.
        let mut scratch = Vec::new();
        let check = self.options.verify_reads == VerifyReads::Always;
        let read = self.chunks.stored(&valid, &mut scratch).and_then(|src| {
            if check {
                self.check_sum(&valid, src)?;
            }
            codec::decode(valid.codec(), src, dst, self.dict.get()).map_err(|what| Error::Corrupt {
                path: self.path().to_path_buf(),
                index: Some(index),
                what,
            })
        });
        self.unchanged(&valid)?;
        read
    }

    /// Checks `stored`, the bytes read for `valid`, against the record's
    /// sum (`sums.zr`): `Err` names the record, whose bytes the caller then
    /// never returns.
    pub(crate) fn check_sum(&self, valid: &ValidEntry, stored: &[u8]) -> Result<()> {
        let Some(sums) = self.meta.sums() else { return Ok(()) };
        match sums.judge(valid.index() as u32, valid.entry(), stored, || self.meta.header()) {
            Verdict::Bad { entry_matches } => Err(Error::Corrupt {
                path: self.path().to_path_buf(),
                index: Some(valid.index()),
                what: Corruption::Checksum { chunk: valid.loc().chunk, offset: valid.loc().offset, entry_matches },
            }),
            Verdict::Good | Verdict::Unchecked => Ok(()),
        }
    }

    /// For a read-only store, after `valid`'s bytes were read: an error if
    /// its table entry is not the validated one any more (see the module
    /// comment); the bytes read may then be another record's, and whatever
    /// else the read found (a decoding failure, a short file) is this.
    pub(crate) fn unchanged(&self, valid: &ValidEntry) -> Result<()> {
        if !self.is_read_only() {
            return Ok(()); // the writer: no other writer exists
        }
        // The entry's load comes after the loads of the bytes.
        fence(Ordering::Acquire);
        if valid.is(&self.meta.raw_entry(valid.index() as u32)) {
            return Ok(());
        }
        Err(Error::StoreChanged {
            path: self.path().to_path_buf(),
            index: Some(valid.index()),
            what: "its table entry changed while it was read".into(),
        })
    }
}
