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
//! The covered word says how many slots, from the first, were durable when
//! it was stored. An append writes its slots before its commit, as every
//! mutation does, but does not sync them: they are synced, with the seal,
//! once the appends since the last sync reach a bound (the lag), before a
//! delete or compaction, and when the writer closes; the covered word then
//! moves up. After a crash the slots past it may hold what an earlier
//! record left there, so a mismatch past the covered word is unchecked, not
//! corruption, and a writer's open sums those records again from their
//! bytes (durable before the commit) and moves the word up.
//!
//! This file is the only code that reads or writes `sums.zr`; [`super::meta::Meta`]
//! calls it in the table's crash order, and the reads call [`Sums::judge`].

use std::io;
use std::path::Path;

use bytemuck::Zeroable;

use crate::format::{
    Entry, Header, RECORDS_MAX, SUM_BYTES, SUMS_BYTES, SUMS_COVERED_OFFSET, SUMS_FILE, SUMS_HEADER_BYTES, SUMS_MAGIC,
    SUMS_SEAL_OFFSET, SUMS_TMP_FILE, SUMS_VERSION, sum_offset,
};
use crate::io::{Map, MapMode, OpenMode, SyncKind, Vfs, VfsFile, read_exact_at, write_all_at, write_mapped};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The magic and the version's word in `sums.zr`'s header.
const VERSION_OFFSET: usize = 0;
/// The seal's word in `sums.zr`'s header.
const SEAL_OFFSET: usize = SUMS_SEAL_OFFSET as usize;
/// The covered word's offset in `sums.zr`'s header (version 2).
const COVERED_OFFSET: usize = SUMS_COVERED_OFFSET as usize;
/// The version without the covered word, whose writers synced every slot
/// before its commit: read as covering them all.
const VERSION_STRICT: u32 = 1;
/// The most records whose slots an append leaves unsynced before the lag's
/// sync (512 KiB of slots).
pub(crate) const LAG_RECORDS_MAX: u32 = 1 << 16;
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

/// The CRC-32C (Castagnoli, `crc-fast`'s CRC-32/ISCSI) of `bytes`: the one
/// checksum `sums.zr` holds, of records, entries and its own words.
fn crc32c(bytes: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(bytes)
}

/// The tag of a table entry: its CRC-32C with the low bit set, so that no
/// entry's tag is 0, the mark of an empty slot.
pub(crate) fn tag_of(entry: &Entry) -> u32 {
    crc32c(bytemuck::bytes_of(entry)) | 1
}

/// The sum of bytes stored with codec tag `codec`, `logic` bytes decoded:
/// their CRC-32C, extended by the codec tag and the logical length (which
/// decide what the bytes mean).
pub(crate) fn stored_sum(codec: u8, logic: u32, stored: &[u8]) -> u32 {
    let mut tail = [0; 5];
    tail[0] = codec;
    tail[1..].copy_from_slice(&logic.to_le_bytes());
    let mut digest = crc_fast::Digest::new(crc_fast::CrcAlgorithm::Crc32Iscsi);
    digest.update(stored);
    digest.update(&tail);
    digest.finalize() as u32
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
    /// A version 1 file, read as covering every slot (a writer's open
    /// rewrites it as version 2 first: [`Sums::upgrade`]).
    strict: AtomicBool,
    /// A writer's: the stored bytes of the records appended since the lag's
    /// last sync, at least 1 once any was (records of 0 bytes included); 0
    /// when none was, and [`Sums::flush_lag`] has nothing to do.
    lag_bytes: AtomicU64,
    /// The slots were asked of the kernel ahead ([`Sums::read_ahead`]).
    read_ahead: AtomicBool,
}

/// What a writer's open finds the seal to say of the table's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SealAtOpen {
    /// It names the header: this crate's writers alone moved it.
    Names,
    /// It names other headers: this crate's appends moved the header past
    /// a seal a crash lost, or another writer moved it. The caller tells
    /// the two apart (`Zrecord::settle_seal`, with [`Sums::appends_reach`]
    /// and [`Sums::fits`]).
    Stale,
    /// Broken (0): another writer changed the table, and no cover since.
    Broken,
}

/// The hash of one header word in the seal: 16 bits of its CRC-32C, never 0.
fn word_hash(word: u64) -> u16 {
    (crc32c(&word.to_ne_bytes()) as u16) | 1
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

/// The covered word for `covered` slots: the count, then its CRC-32C with
/// the low bit set (so that a zero word, a version 1 file's, or a damaged
/// one, covers nothing).
fn covered_word(covered: u32) -> u64 {
    let mut bytes = [0; 8];
    bytes[..4].copy_from_slice(&covered.to_le_bytes());
    bytes[4..].copy_from_slice(&(crc32c(&covered.to_le_bytes()) | 1).to_le_bytes());
    u64::from_ne_bytes(bytes)
}

/// The slots a covered word says were durable: 0 for a word that does not
/// check.
fn covered_of(word: u64) -> u32 {
    let bytes = word.to_ne_bytes();
    let covered = u32::from_le_bytes(bytes[..4].try_into().expect("4 bytes"));
    if covered_word(covered) == word { covered } else { 0 }
}

/// The word at [`VERSION_OFFSET`] of a file of version `version`.
fn version_word(version: u32) -> u64 {
    let mut bytes = [0; 8];
    bytes[..4].copy_from_slice(&SUMS_MAGIC);
    bytes[4..].copy_from_slice(&version.to_le_bytes());
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
        let version = u32::from_le_bytes(head[4..].try_into().expect("4 bytes"));
        if head[..4] != SUMS_MAGIC || (version != SUMS_VERSION && version != VERSION_STRICT) {
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
            strict: AtomicBool::new(version == VERSION_STRICT),
            lag_bytes: AtomicU64::new(0),
            read_ahead: AtomicBool::new(false),
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
        let mut head = [0u8; 24];
        head[..8].copy_from_slice(&version_word(SUMS_VERSION).to_ne_bytes());
        head[8..16].copy_from_slice(&seal_word(header, header).to_ne_bytes());
        head[16..].copy_from_slice(&covered_word(header.length()).to_ne_bytes());
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
    /// `header` if `sealed`, covering what this file covers of them (see
    /// `Zrecord::sums_image`).
    pub(crate) fn image(&self, len: u32, header: Header, sealed: bool) -> Vec<u8> {
        let mut image = vec![0u8; SUMS_HEADER_BYTES as usize];
        image[..8].copy_from_slice(&version_word(SUMS_VERSION).to_ne_bytes());
        let seal = if sealed { seal_word(header, header) } else { 0 };
        image[SEAL_OFFSET..SEAL_OFFSET + 8].copy_from_slice(&seal.to_ne_bytes());
        let covered = covered_word(self.covered().min(len));
        image[COVERED_OFFSET..COVERED_OFFSET + 8].copy_from_slice(&covered.to_ne_bytes());
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
        self.flush_header()?;
        self.file.sync(SyncKind::All)
    }

    /// Before the table header moves from `from` to `to`: the seal names
    /// both, and the covered word covers no slot past `to`'s length,
    /// durably (SYNC K2). A broken seal stays broken.
    pub(crate) fn seal(&self, from: Header, to: Header) -> io::Result<()> {
        let lowered = self.covered() > to.length() && !self.strict.load(Ordering::Relaxed);
        if lowered {
            // A shorter table: the slots past its length cover nothing, and
            // an append over them must not find them counted as durable.
            self.store_covered(to.length());
        }
        if !self.store_seal(from, to) && !lowered {
            return Ok(());
        }
        self.flush_header() // SYNC K2
    }

    /// How many slots, from the first, were durable when the covered word
    /// was stored (every slot, for a version 1 file).
    pub(crate) fn covered(&self) -> u32 {
        if self.strict.load(Ordering::Relaxed) {
            return u32::MAX;
        }
        covered_of(self.map.load_word(COVERED_OFFSET))
    }

    /// Stores the covered word (durable with the header's next sync): only
    /// once the slots below `covered` are durable.
    fn store_covered(&self, covered: u32) {
        // SAFETY: the covered word is 8-aligned and only ever accessed with
        // word loads and stores; its one writer is the store's writer.
        unsafe { self.map.store_word(COVERED_OFFSET, covered_word(covered)) };
    }

    /// A writer's open of a version 1 file (every slot below `len` durable,
    /// as its writers synced each before its commit): the covered word for
    /// `len`, then the version 2 word, durably. The two lie in one sector.
    pub(crate) fn upgrade(&self, len: u32) -> io::Result<()> {
        if !self.strict.load(Ordering::Relaxed) {
            return Ok(());
        }
        self.store_covered(len);
        // SAFETY: as `store_covered`.
        unsafe { self.map.store_word(VERSION_OFFSET, version_word(SUMS_VERSION)) };
        self.strict.store(false, Ordering::Relaxed);
        self.flush_header()
    }

    /// An append of records `..end`, `bytes` of them stored, whose slots
    /// were stored and not synced: true when the lag's sync is due with
    /// this append's (its slots past [`LAG_RECORDS_MAX`], or their bytes
    /// past `lag_bytes`); the caller then runs [`Sums::flush_sealed`]
    /// before its commit and [`Sums::covered_to`] after it.
    pub(crate) fn lagging(&self, end: u32, bytes: u64, lag_bytes: u64) -> bool {
        let lag = self.lag_bytes.load(Ordering::Relaxed).saturating_add(bytes).max(1);
        self.lag_bytes.store(lag, Ordering::Relaxed);
        lag >= lag_bytes || end.saturating_sub(self.covered()) >= LAG_RECORDS_MAX
    }

    /// After a commit at length `end` whose slots and seal were synced
    /// ([`Sums::flush_sealed`]): the covered word moves up to `end`.
    pub(crate) fn covered_to(&self, end: u32) {
        self.store_covered(end);
        self.lag_bytes.store(0, Ordering::Relaxed);
    }

    /// The lag's sync, outside an append: before a delete or compaction
    /// writes its intent, and at the writer's close. The slots below `len`
    /// and the seal durable (SYNC K1 + K2), then the covered word moved up
    /// to `len`. Nothing when no append left slots unsynced since.
    pub(crate) fn flush_lag(&self, len: u32) -> io::Result<()> {
        if self.lag_bytes.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        self.flush_sealed(len)?; // SYNC K1 + K2
        self.covered_to(len);
        self.flush_header() // SYNC K5
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

    /// A writer's open: what the seal says of the table's header.
    pub(crate) fn seal_at_open(&self, header: Header) -> SealAtOpen {
        match self.map.load_word(SEAL_OFFSET) {
            0 => SealAtOpen::Broken,
            seal if seal_names(seal, header) => SealAtOpen::Names,
            _ => SealAtOpen::Stale,
        }
    }

    /// A writer's open that found the seal stale: true when `header`'s
    /// length is at least the covered word. This crate never leaves a
    /// length below it: the word moves up only to a committed length, and
    /// down, durably, before a delete shrinks the table. Another writer's
    /// delete lowers the length (and its swap moves an entry below the
    /// word, which [`Sums::fits`] finds).
    pub(crate) fn appends_reach(&self, header: Header) -> bool {
        header.length() >= self.covered()
    }

    /// Whether slot `index` holds the sum of the record `entry` names:
    /// taken for that very entry, or (a move within a chunk whose slot kept
    /// the old tag, a crash between C2 and K1) a sum that `stored`, the
    /// bytes, match; a slot that covers no record holds nothing false.
    pub(crate) fn fits(&self, index: u32, entry: &Entry, stored: impl FnOnce() -> Option<Vec<u8>>) -> bool {
        let slot = self.get(index);
        if !slot.covers() || slot.tag == tag_of(entry) || entry.logic_length() == 0 {
            return true;
        }
        stored().is_some_and(|bytes| stored_sum(entry.codec, entry.logic_length(), &bytes) == slot.sum)
    }

    /// A writer's open: the seal as `at_open` and `ours` (the caller's
    /// judgement of a stale one) make it. A seal that names the header is
    /// kept, and a covered word past the length lowered to it (SYNC K2; an
    /// earlier build's open could leave one: docs/fuzzing.md, F11); a stale
    /// one of this crate's appends is made to name the header (K2); any
    /// other is stored as broken for good (a later header equal to one it
    /// named must not mend it).
    pub(crate) fn settle_seal(&self, header: Header, at_open: SealAtOpen, ours: bool) -> io::Result<()> {
        match at_open {
            SealAtOpen::Names if self.covered() > header.length() => self.seal(header, header),
            SealAtOpen::Names => Ok(()),
            SealAtOpen::Stale if ours => self.seal(header, header),
            _ => {
                self.broken.store(true, Ordering::Relaxed);
                self.seal(header, header)
            }
        }
    }

    /// Before slots are summed again: the seal broken, durably.
    pub(crate) fn break_seal(&self) -> io::Result<()> {
        self.broken.store(true, Ordering::Relaxed);
        self.seal(Header::zeroed(), Header::zeroed())
    }

    /// Makes `sums.zr`'s header durable: the seal and the covered word.
    pub(crate) fn flush_header(&self) -> io::Result<()> {
        self.map.flush_range(0, SUMS_HEADER_BYTES as usize)
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

    /// The first check of a batched read (records read from the device):
    /// the slots of `len` records asked of the kernel ahead, once, so that
    /// the checks find them in memory, not in a fault of `sums.zr` that
    /// the completions of the batch's other reads wait behind. A hint. A
    /// load first: every later batched gather costs one shared read, not
    /// a write that gathering threads would pass between them.
    pub(crate) fn read_ahead(&self, len: u32) {
        if !self.read_ahead.load(Ordering::Relaxed) && !self.read_ahead.swap(true, Ordering::Relaxed) {
            self.map.will_need(0, sum_offset(len.min(self.capacity)) as usize);
        }
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
        // Past the covered word a slot may be one an earlier record left
        // there, if a crash lost an append's unsynced slots.
        if index >= self.covered() || !self.sealed(header) {
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

    /// The store's CRC-32C against an independent one (the `crc32c`
    /// crate, the crc32 instruction): every length up to 300 bytes and
    /// lengths around the folding paths' block sizes, at odd alignments.
    #[test]
    fn the_crc_is_crc32c_at_every_length_and_alignment() {
        let bytes: Vec<u8> = (0..70_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let lens = (0..300).chain([511, 512, 513, 1023, 1024, 4095, 4096, 4097, 16_383, 65_536, 69_999]);
        for len in lens {
            for start in [0, 1, 3, 7] {
                let piece = &bytes[start..][..len.min(bytes.len() - start)];
                assert_eq!(crc32c(piece), ::crc32c::crc32c(piece), "{len} bytes at {start}");
                let want = ::crc32c::crc32c_append(::crc32c::crc32c(piece), &[7, 1, 2, 3, 4]);
                assert_eq!(stored_sum(7, u32::from_le_bytes([1, 2, 3, 4]), piece), want, "{len} at {start}");
            }
        }
        assert_eq!(crc32c(b"123456789"), 0xe306_9283, "the check value of CRC-32C");
    }

    #[test]
    fn a_covered_word_checks_and_a_damaged_or_zero_one_covers_nothing() {
        for n in [0, 1, 12, RECORDS_MAX] {
            assert_eq!(covered_of(covered_word(n)), n);
            for bit in 0..64 {
                let flipped = covered_word(n) ^ (1 << bit);
                assert_eq!(covered_of(flipped), 0, "{n}, bit {bit}");
            }
        }
        assert_eq!(covered_of(0), 0, "a version 1 file's zeros");
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
