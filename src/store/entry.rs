//! Entry validation: the one place that decides whether a table entry may be
//! trusted. Every read goes through a [`ValidEntry`], which only
//! [`ValidEntry::check`] produces; every entry the store commits is asserted
//! to pass the same checks first ([`assert_committable`]), so the two sides
//! of the pair cannot drift apart.
//!
//! What is checked (the fields against each other and against the store):
//! never all zero, a known codec, `logic_length` within the limit, raw
//! `phys == logic`, a compressed `phys` within zstd's bound for `logic`, a
//! dictionary present for `zstd_dict`, the chunk at most the last one. That
//! the bytes lie inside the chunk file is checked where the file is known,
//! by [`super::chunks::ChunkSet::stored`].

use std::path::Path;

use super::codec;
use crate::error::{Corruption, Error, Result};
use crate::format::{Codec, Entry, Frontier, Loc, RECORD_BYTES_MAX};

/// What an entry is checked against.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    /// The last chunk (the frontier's).
    pub(crate) last_chunk: u16,
    /// The store has a dictionary.
    pub(crate) has_dict: bool,
}

/// A table entry that passed validation, with the index it was read at.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ValidEntry {
    index: u64,
    entry: Entry,
    codec: Codec,
}

/// Why an entry is not valid.
#[derive(Debug)]
enum Invalid {
    Corrupt(Corruption),
    NoDictionary,
}

impl ValidEntry {
    /// Validates `entry`, read from the table at `index` of the store at `path`.
    pub(crate) fn check(path: &Path, index: u64, entry: Entry, bounds: Bounds) -> Result<ValidEntry> {
        match check_fields(&entry, bounds) {
            Ok(codec) => Ok(ValidEntry { index, entry, codec }),
            Err(Invalid::Corrupt(what)) => Err(Error::Corrupt { path: path.to_path_buf(), index: Some(index), what }),
            Err(Invalid::NoDictionary) => Err(Error::NoDictionary { path: path.to_path_buf(), index: Some(index) }),
        }
    }
    /// The index it was read at.
    pub(crate) fn index(&self) -> u64 {
        self.index
    }
    /// Where the stored bytes start.
    pub(crate) fn loc(&self) -> Loc {
        self.entry.loc()
    }
    /// The stored size.
    pub(crate) fn phys(&self) -> u32 {
        self.entry.phys_length()
    }
    /// The decoded size.
    pub(crate) fn logic(&self) -> u32 {
        self.entry.logic_length()
    }
    /// The codec.
    pub(crate) fn codec(&self) -> Codec {
        self.codec
    }
    /// The entry as validated.
    pub(crate) fn entry(&self) -> &Entry {
        &self.entry
    }
    /// True if `entry` is the one that was validated.
    pub(crate) fn is(&self, entry: &Entry) -> bool {
        self.entry == *entry
    }
}

fn check_fields(entry: &Entry, bounds: Bounds) -> Result<Codec, Invalid> {
    let corrupt = |what| Err(Invalid::Corrupt(what));
    if entry.is_unwritten() {
        return corrupt(Corruption::UnwrittenEntry);
    }
    let Some(codec) = Codec::from_tag(entry.codec) else { return corrupt(Corruption::UnknownCodec(entry.codec)) };
    let (phys, logic) = (entry.phys_length(), entry.logic_length());
    if logic > RECORD_BYTES_MAX {
        return corrupt(Corruption::LogicTooLarge(logic));
    }
    if codec == Codec::Raw && phys != logic {
        return corrupt(Corruption::RawLengthMismatch { phys, logic });
    }
    // A lying stored length must not make one read touch gigabytes.
    let bound = codec::frame_bytes_max(logic);
    if codec != Codec::Raw && u64::from(phys) > bound {
        return corrupt(Corruption::PhysTooLarge { phys, bound });
    }
    if codec == Codec::ZstdDict && !bounds.has_dict {
        return Err(Invalid::NoDictionary);
    }
    if entry.loc().chunk > bounds.last_chunk {
        return corrupt(Corruption::ChunkPastLast { chunk: entry.loc().chunk, last_chunk: bounds.last_chunk });
    }
    Ok(codec)
}

/// The write side of the pair: an entry the store is about to commit passes
/// the read side's checks and ends at or below the frontier it is committed
/// with (Invariant F). A failure is a bug in the store, never bad input:
/// only entries the store built itself are committed through here.
pub(crate) fn assert_committable(entry: &Entry, frontier: Frontier, has_dict: bool) {
    let bounds = Bounds { last_chunk: frontier.chunk, has_dict };
    if let Err(invalid) = check_fields(entry, bounds) {
        panic!("committing an invalid entry {entry:?}: {invalid:?}");
    }
    let end = entry.loc().address() + u64::from(entry.phys_length());
    assert!(end <= frontier.address(), "committing an entry {entry:?} that ends past the frontier {frontier:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_side_refuses_what_the_read_side_refuses() {
        let frontier = Frontier { chunk: 0, offset: 100 };
        let good = Entry::new(Loc { chunk: 0, offset: 10 }, 20, 20, Codec::Raw);
        assert_committable(&good, frontier, false);
        let bounds = Bounds { last_chunk: 0, has_dict: false };
        assert!(ValidEntry::check(Path::new("s"), 0, good, bounds).is_ok());
        let bad = [
            Entry::new(Loc { chunk: 0, offset: 10 }, 20, 21, Codec::Raw),
            Entry::new(Loc { chunk: 0, offset: 10 }, 20, 20, Codec::ZstdDict),
            Entry::new(Loc { chunk: 1, offset: 0 }, 0, 0, Codec::Raw),
            Entry::new(Loc { chunk: 0, offset: 90 }, 20, 20, Codec::Raw), // past the frontier
        ];
        for entry in bad {
            let caught = std::panic::catch_unwind(|| assert_committable(&entry, frontier, false));
            assert!(caught.is_err(), "{entry:?} was accepted for commit");
        }
        for entry in &bad[..3] {
            assert!(ValidEntry::check(Path::new("s"), 0, *entry, bounds).is_err(), "{entry:?}");
        }
    }
}
