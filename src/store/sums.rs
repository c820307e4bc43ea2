//! `sums.zr`: a checksum for every record, whatever its codec, and the seal
//! that says when a mismatch is corruption. Layout: `docs/format.md`,
//! "Checksums"; order: `docs/crash-safety.md`, "Checksums".
//!
//! Slot `i` holds a [`Sum`] of record `i`: `sum`, the CRC-32C of its stored
//! bytes followed by its codec and logical length, and `tag`, the CRC-32C of
//! the table entry it was taken for (0: the slot covers no record). The sum
//! depends on the bytes only, not on where they lie, so a record that moves
//! (compaction, or a delete's swap) keeps it; the tag is what tells a damaged
//! entry from damaged bytes.
//!
//! The seal, one 8-byte word, names the two table headers this store's
//! writer last moved between (each header word hashed): while `meta.zr`'s
//! header is one of them, word for word, no other writer (the reference
//! package, which keeps no sums) has changed the table since, and a record
//! whose bytes do not match its slot is corrupt. When the header is neither,
//! the seal is broken: a mismatch may be another writer's change, and is not
//! reported (the record counts as unchecked) until `loaderx checksum`
//! covers the store again. So the sums never report a false error.
//!
//! This file is the only code that reads or writes `sums.zr`; [`super::meta::Meta`]
//! calls it in the table's crash order, and the reads call [`Sums::judge`].

use std::io;
use std::path::Path;

use bytemuck::Zeroable;

use crate::format::{
    Entry, Header, RECORDS_MAX, SUM_BYTES, SUMS_BYTES, SUMS_FILE, SUMS_HEADER_BYTES, SUMS_MAGIC, SUMS_TMP_FILE,
    SUMS_VERSION, sum_offset,
};
use crate::io::{Map, MapMode, OpenMode, SyncKind, Vfs, VfsFile, read_exact_at, write_all_at, write_mapped};
use crate::sync::{AtomicBool, AtomicU32, Ordering};

/// The seal's word in `sums.zr`'s header.
const SEAL_OFFSET: usize = 8;
/// How often a reader loads the seal and the header again when they did not
/// match: a commit running meanwhile moves both.
const SEAL_TRIES: usize = 3;
/// How far past an append's end the zeroing first reaches, in slots (one
/// page of them); each later step is twice the one before, up to
/// [`ZERO_STEP_MAX`].
const ZERO_STEP_MIN: u32 = 512;
/// The zeroing's largest step: 1 MiB of slots.
const ZERO_STEP_MAX: u32 = 1 << 17;
/// What the zeroing copies, a piece at a time.
static ZEROS: [u8; 1 << 16] = [0; 1 << 16];

/// One slot of `sums.zr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sum {
    /// CRC-32C of the stored bytes, the codec tag and the logical length.
    pub(crate) sum: u32,
    /// [`tag_of`] the entry the sum was taken for; 0 for none.
    pub(crate) tag: u32,
}

impl Sum {
    /// A slot that covers no record.
    pub(crate) const NONE: Sum = Sum { sum: 0, tag: 0 };

    /// The sum of a record stored as `stored` under `entry`.
    pub(crate) fn of(entry: &Entry, stored: &[u8]) -> Sum {
        Sum { sum: stored_sum(entry.codec, entry.logic_length(), stored), tag: tag_of(entry) }
    }

    /// True when the slot covers a record.
    pub(crate) fn covers(self) -> bool {
        self.tag != 0
    }

    /// This sum, moved with its bytes to `to` (the record's new entry): the
    /// same bytes, a new tag; a slot that covered no record, or another
    /// entry than `from`, stays as it was.
    pub(crate) fn moved(self, from: &Entry, to: &Entry) -> Sum {
        if self.tag == tag_of(from) { Sum { sum: self.sum, tag: tag_of(to) } } else { self }
    }

    /// The 8 bytes on disk (`sum`, then `tag`, little-endian) as the word
    /// the mapping stores.
    pub(crate) fn to_word(self) -> u64 {
        let mut bytes = [0; 8];
        bytes[..4].copy_from_slice(&self.sum.to_le_bytes());
        bytes[4..].copy_from_slice(&self.tag.to_le_bytes());
        u64::from_ne_bytes(bytes)
    }

    /// The inverse of [`Sum::to_word`].
    pub(crate) fn from_word(word: u64) -> Sum {
        let bytes = word.to_ne_bytes();
        let half = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        Sum { sum: half(0), tag: half(4) }
    }
}

/// The tag of a table entry: its CRC-32C with the low bit set, so that no
/// entry's tag is 0, the mark of an empty slot.
pub(crate) fn tag_of(entry: &Entry) -> u32 {
    crc32c::crc32c(bytemuck::bytes_of(entry)) | 1
}

/// The sum of bytes stored with codec tag `codec`, `logic` bytes decoded:
/// their CRC-32C, extended by the codec tag and the logical length (which
/// decide what the bytes mean).
pub(crate) fn stored_sum(codec: u8, logic: u32, stored: &[u8]) -> u32 {
    let mut tail = [0; 5];
    tail[0] = codec;
    tail[1..].copy_from_slice(&logic.to_le_bytes());
    crc32c::crc32c_append(crc32c::crc32c(stored), &tail)
}

/// What a record's bytes are, against its slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// No sum to check against: a slot that covers no record, or a
    /// mismatch under a broken seal.
    Unchecked,
    /// The bytes match their sum (or the record is empty).
    Good,
    /// The bytes do not match, under an intact seal. `entry_matches`: the
    /// slot was taken for this very entry, so the stored bytes (or the slot)
    /// changed; otherwise the entry did.
    Bad { entry_matches: bool },
}

/// `sums.zr`, open and mapped.
#[derive(Debug)]
pub(crate) struct Sums {
    /// The open file, kept for as long as its mapping.
    file: Box<dyn VfsFile>,
    map: Box<dyn Map>,
    /// Slots the mapping covers (fewer than `RECORDS_MAX` for a short
    /// read-only file).
    capacity: u32,
    /// A writer's: the seal was broken at open (or since); it stays broken,
    /// stored as 0, until the store is covered again.
    broken: AtomicBool,
    /// A writer's: the end of the slots it zeroed and synced since its
    /// open ([`Sums::zero_ahead`]); 0 at open.
    zeroed: AtomicU32,
    /// A writer's: how many slots past an append's end its next zeroing
    /// reaches.
    zero_step: AtomicU32,
}

/// The hash of one header word in the seal: 16 bits of its CRC-32C, never 0.
fn word_hash(word: u64) -> u16 {
    (crc32c::crc32c(&word.to_ne_bytes()) as u16) | 1
}

/// The seal of a move of the table header from `from` to `to`: the hashes of
/// both headers' two words. A header whose word 0 is either one's word 0 and
/// whose word 1 either one's word 1 matches (so do the mixed headers that
/// the header protocol passes through).
fn seal_word(from: Header, to: Header) -> u64 {
    let (a, b) = (bytemuck::cast::<Header, [u64; 2]>(from), bytemuck::cast::<Header, [u64; 2]>(to));
    let mut bytes = [0; 8];
    for (k, word) in [a[0], a[1], b[0], b[1]].into_iter().enumerate() {
        bytes[2 * k..2 * k + 2].copy_from_slice(&word_hash(word).to_le_bytes());
    }
    u64::from_ne_bytes(bytes)
}

/// True when `header` is one the seal `seal` names (0 names none).
fn seal_names(seal: u64, header: Header) -> bool {
    let bytes = seal.to_ne_bytes();
    let hash = |k: usize| u16::from_le_bytes([bytes[2 * k], bytes[2 * k + 1]]);
    let words = bytemuck::cast::<Header, [u64; 2]>(header);
    let (h0, h1) = (word_hash(words[0]), word_hash(words[1]));
    seal != 0 && (h0 == hash(0) || h0 == hash(2)) && (h1 == hash(1) || h1 == hash(3))
}

impl Sums {
    /// Opens and maps `sums.zr` in the store directory `dir`, `None` if
    /// there is none or its header is not one this build reads (the store
    /// is then unchecked; `loaderx checksum` writes a new one).
    pub(crate) fn open(vfs: &dyn Vfs, dir: &Path, read_only: bool) -> io::Result<Option<Sums>> {
        let path = dir.join(SUMS_FILE);
        if vfs.kind(&path)?.is_none() {
            return Ok(None);
        }
        let file = vfs.open(&path, if read_only { OpenMode::Read } else { OpenMode::Write })?;
        let len = file.stat()?.len;
        if len < SUMS_HEADER_BYTES {
            return Ok(None);
        }
        let mut head = [0; 8];
        read_exact_at(&*file, &mut head, 0)?;
        if head[..4] != SUMS_MAGIC || u32::from_le_bytes(head[4..].try_into().expect("4 bytes")) != SUMS_VERSION {
            return Ok(None);
        }
        if !read_only && len < SUMS_BYTES {
            file.set_len(SUMS_BYTES)?;
            file.sync(SyncKind::All)?;
        }
        let map_len = if read_only { len.min(SUMS_BYTES) } else { SUMS_BYTES };
        let map = file.map(map_len as usize, MapMode::Shared { writable: !read_only })?;
        let capacity = ((map_len - SUMS_HEADER_BYTES) / SUM_BYTES).min(u64::from(RECORDS_MAX)) as u32;
        Ok(Some(Sums {
            file,
            map,
            capacity,
            broken: AtomicBool::new(false),
            zeroed: AtomicU32::new(0),
            zero_step: AtomicU32::new(ZERO_STEP_MIN),
        }))
    }

    /// Writes a new `sums.zr` into `dir`, whole, by rename, covering no
    /// record and sealed for `header` (`docs/crash-safety.md`, "Checksums":
    /// SYNC K0; the caller syncs the directory).
    pub(crate) fn create(vfs: &dyn Vfs, dir: &Path, header: Header) -> io::Result<()> {
        let tmp = dir.join(SUMS_TMP_FILE);
        if vfs.kind(&tmp)?.is_some() {
            vfs.remove_file(&tmp)?;
        }
        let file = vfs.open(&tmp, OpenMode::Create)?;
        file.set_len(SUMS_BYTES)?;
        let mut head = [0u8; 16];
        head[..4].copy_from_slice(&SUMS_MAGIC);
        head[4..8].copy_from_slice(&SUMS_VERSION.to_le_bytes());
        head[8..].copy_from_slice(&seal_word(header, header).to_ne_bytes());
        write_all_at(&*file, &head, 0)?;
        file.sync(SyncKind::All)?; // SYNC K0
        vfs.rename(&tmp, &dir.join(SUMS_FILE))
    }

    /// Slot `index`, [`Sum::NONE`] past the mapping.
    pub(crate) fn get(&self, index: u32) -> Sum {
        if index >= self.capacity {
            return Sum::NONE;
        }
        Sum::from_word(self.map.load_word(sum_offset(index) as usize))
    }

    /// Stores slot `index` (not durable until [`Sums::flush`]).
    ///
    /// # Safety
    /// The caller is the store's one writer (the append mutex or `&mut
    /// Meta`); slots are only ever loaded with [`Map::load_word`].
    pub(crate) unsafe fn put(&self, index: u32, sum: Sum) {
        assert!(index < self.capacity, "sum slot {index} past the {} slots", self.capacity);
        // SAFETY: the forwarded contract; slot offsets are 64 + 8 i, 8-aligned.
        unsafe { self.map.store_word(sum_offset(index) as usize, sum.to_word()) };
    }

    /// Puts slots `first..first + sums.len()` (an append's, past the
    /// length) in one write ([`write_mapped`]); not durable until
    /// [`Sums::flush`].
    ///
    /// # Safety
    /// As [`Sums::put`]; no reader loads slots at or past `first`.
    pub(crate) unsafe fn put_all(&self, first: u32, sums: &[Sum]) -> io::Result<()> {
        let end = first as usize + sums.len();
        assert!(end <= self.capacity as usize, "sum slots {first}..{end} past the {} slots", self.capacity);
        let words: Vec<u64> = sums.iter().map(|sum| sum.to_word()).collect();
        // SAFETY: the forwarded contract: slots past the length, one writer.
        unsafe { write_mapped(&*self.file, &*self.map, sum_offset(first), bytemuck::cast_slice(&words)) }
    }

    /// Before an append writes slots `first..end` (`first`: the length):
    /// unless this writer zeroed them already, zeros over the slots from
    /// `first` (or the end of the last zeroing) to some way past `end`, made
    /// durable (SYNC K4). Their blocks are then allocated and written, so
    /// K1 over them overwrites in place: a sparse file's hole filled would
    /// be a journal commit (ext4) on every append's K1. The step doubles
    /// from one page of slots to 1 MiB, which amortizes the zeroing's own
    /// sync. Slots below `first` are never touched: the zeroing changes only
    /// slots past the length, which cover no live record.
    ///
    /// # Safety
    /// As [`Sums::put`]; no reader loads slots at or past `first`.
    pub(crate) unsafe fn zero_ahead(&self, first: u32, end: u32) -> io::Result<()> {
        let zeroed = self.zeroed.load(Ordering::Relaxed);
        if end <= zeroed {
            return Ok(());
        }
        let step = self.zero_step.load(Ordering::Relaxed);
        let to = end.saturating_add(step).min(self.capacity);
        let (start, stop) = (sum_offset(zeroed.max(first)) as usize, sum_offset(to) as usize);
        for at in (start..stop).step_by(ZEROS.len()) {
            let zeros = &ZEROS[..(stop - at).min(ZEROS.len())];
            // SAFETY: slots at or past the length, which readers never load;
            // the caller is the one writer.
            unsafe { write_mapped(&*self.file, &*self.map, at as u64, zeros)? };
        }
        self.map.flush_range(start, stop - start)?; // SYNC K4
        self.zeroed.store(to, Ordering::Relaxed);
        self.zero_step.store(step.saturating_mul(2).min(ZERO_STEP_MAX), Ordering::Relaxed);
        Ok(())
    }

    /// Makes slots `first..end` durable (SYNC K1).
    pub(crate) fn flush(&self, first: u32, end: u32) -> io::Result<()> {
        if first >= end {
            return Ok(());
        }
        let start = sum_offset(first) as usize;
        self.map.flush_range(start, sum_offset(end) as usize - start) // SYNC K1
    }

    /// The header and slots `0..len` as a file of their own, sealed to
    /// `header` if `sealed` (see `Zrecord::sums_image`).
    pub(crate) fn image(&self, len: u32, header: Header, sealed: bool) -> Vec<u8> {
        let mut image = vec![0u8; SUMS_HEADER_BYTES as usize];
        image[..4].copy_from_slice(&SUMS_MAGIC);
        image[4..8].copy_from_slice(&SUMS_VERSION.to_le_bytes());
        let seal = if sealed { seal_word(header, header) } else { 0 };
        image[SEAL_OFFSET..SEAL_OFFSET + 8].copy_from_slice(&seal.to_ne_bytes());
        image.reserve(len as usize * SUM_BYTES as usize);
        for index in 0..len {
            image.extend_from_slice(&self.get(index).to_word().to_ne_bytes());
        }
        image
    }

    /// A writer's open: slots `0..len` and the seal durable, whatever a
    /// process whose sync failed left in the page cache (see
    /// `Zrecord::settle`). The seal's skip in [`Sums::seal`] relies on it.
    pub(crate) fn settle(&self, len: u32) -> io::Result<()> {
        self.flush(0, len.min(self.capacity))?;
        self.map.flush_range(0, SUMS_HEADER_BYTES as usize)?;
        self.file.sync(SyncKind::All)
    }

    /// Before the table header moves from `from` to `to`: the seal names
    /// both, durably (SYNC K2). A broken seal stays broken.
    pub(crate) fn seal(&self, from: Header, to: Header) -> io::Result<()> {
        if !self.store_seal(from, to) {
            return Ok(());
        }
        self.map.flush_range(0, SUMS_HEADER_BYTES as usize) // SYNC K2
    }

    /// Stores the seal of a move from `from` to `to`, not durable until a
    /// sync of the header ([`Sums::seal`], [`Sums::flush_sealed`]); false
    /// when the seal holds that word already, durably (a failed sync
    /// poisons the writer, and the reopen settles the seal before anything
    /// relies on it).
    pub(crate) fn store_seal(&self, from: Header, to: Header) -> bool {
        let word = if self.broken.load(Ordering::Relaxed) { 0 } else { seal_word(from, to) };
        if self.map.load_word(SEAL_OFFSET) == word {
            return false;
        }
        // SAFETY: the seal's word is 8-aligned and only ever accessed with
        // word loads and stores; its one writer is the store's writer.
        unsafe { self.map.store_word(SEAL_OFFSET, word) };
        true
    }

    /// Makes the seal and the slots below `end` durable in one sync (an
    /// append's SYNC K1 and K2 at once: one flush of the device, not two;
    /// the slots already durable cost nothing).
    pub(crate) fn flush_sealed(&self, end: u32) -> io::Result<()> {
        self.map.flush_range(0, sum_offset(end) as usize) // SYNC K1 + K2
    }

    /// A writer's open: the seal against the table's header; a broken one
    /// is stored as broken for good (a later header equal to one it named
    /// must not mend it).
    pub(crate) fn check_seal_at_open(&self, header: Header) -> io::Result<()> {
        if seal_names(self.map.load_word(SEAL_OFFSET), header) {
            return Ok(());
        }
        self.broken.store(true, Ordering::Relaxed);
        self.seal(header, header)
    }

    /// Before slots are summed again: the seal broken, durably.
    pub(crate) fn break_seal(&self) -> io::Result<()> {
        self.broken.store(true, Ordering::Relaxed);
        self.seal(Header::zeroed(), Header::zeroed())
    }

    /// After the whole store was covered again: the seal names `header`.
    pub(crate) fn mend(&self, header: Header) -> io::Result<()> {
        self.broken.store(false, Ordering::Relaxed);
        self.seal(header, header)
    }

    /// True when the seal names the table's header now. `header` loads it;
    /// a commit may run meanwhile, so both are loaded again until two loads
    /// of the seal agree around the header's.
    pub(crate) fn sealed(&self, header: impl Fn() -> Header) -> bool {
        (0..SEAL_TRIES).any(|_| {
            let before = self.map.load_word(SEAL_OFFSET);
            let now = header();
            before == self.map.load_word(SEAL_OFFSET) && seal_names(before, now)
        })
    }

    /// Record `index`, stored as `stored` under `entry`, against its slot.
    pub(crate) fn judge(&self, index: u32, entry: &Entry, stored: &[u8], header: impl Fn() -> Header) -> Verdict {
        if entry.logic_length() == 0 {
            return Verdict::Good; // no byte to return that is not the record's
        }
        let slot = self.get(index);
        if !slot.covers() {
            return Verdict::Unchecked;
        }
        if stored_sum(entry.codec, entry.logic_length(), stored) == slot.sum {
            return Verdict::Good;
        }
        if !self.sealed(header) {
            return Verdict::Unchecked;
        }
        Verdict::Bad { entry_matches: slot.tag == tag_of(entry) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Codec, Frontier, Loc};

    #[test]
    fn a_sum_round_trips_through_its_word_and_moves_with_its_bytes() {
        let entry = Entry::new(Loc { chunk: 1, offset: 7 }, 3, 3, Codec::Raw);
        let sum = Sum::of(&entry, b"abc");
        assert!(sum.covers());
        assert_eq!(Sum::from_word(sum.to_word()), sum);
        assert_eq!(Sum::from_word(Sum::NONE.to_word()), Sum::NONE);
        let moved = entry.moved_to(Loc { chunk: 0, offset: 0 });
        assert_eq!(sum.moved(&entry, &moved), Sum { sum: sum.sum, tag: tag_of(&moved) });
        assert_eq!(Sum::NONE.moved(&entry, &moved), Sum::NONE);
        // Bytes, codec and logical length each change the sum.
        assert_ne!(Sum::of(&entry, b"abd").sum, sum.sum);
        let zstd = Entry::new(Loc { chunk: 1, offset: 7 }, 3, 3, Codec::Zstd);
        assert_ne!(Sum::of(&zstd, b"abc").sum, sum.sum);
        let longer = Entry::new(Loc { chunk: 1, offset: 7 }, 3, 4, Codec::Zstd);
        assert_ne!(Sum::of(&longer, b"abc").sum, Sum::of(&zstd, b"abc").sum);
    }

    #[test]
    fn the_seal_names_both_headers_and_their_mixes_and_nothing_else() {
        let h = |chunk, offset, len| Header::new(Frontier { chunk, offset }, len);
        let (from, to) = (h(0, 100, 5), h(1, 40, 6));
        let seal = seal_word(from, to);
        for header in [from, to, h(1, 100, 5), h(0, 40, 6)] {
            assert!(seal_names(seal, header), "{header:?}");
        }
        for header in [h(0, 100, 4), h(2, 40, 6), h(1, 41, 6)] {
            assert!(!seal_names(seal, header), "{header:?}");
        }
        assert!(!seal_names(0, from), "0 is a broken seal");
    }
}
