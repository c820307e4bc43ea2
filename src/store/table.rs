//! The mapped `meta.zr`: header words and record table entries.
//!
//! Invariant (the lock-free read path rests on it): an entry below the
//! published length is written only under `&mut Zrecord` (delete, compact,
//! recovery); appends write entries at and past the published length, which
//! readers never read. So the `unsafe` accesses below never race within this
//! process.

use std::io;

use bytemuck::Zeroable;

use crate::format::{Entry, HEADER_BYTES, HEADER_WORD1_OFFSET, Header, Tail, entry_offset};
use crate::io::SharedMap;

/// The mapping of `meta.zr`, typed.
#[derive(Debug)]
pub(crate) struct Table {
    map: Box<dyn SharedMap>,
    /// Entries the mapping covers (fewer than `RECORDS_MAX` for a short
    /// read-only `meta.zr`).
    capacity: u32,
}

impl Table {
    pub(crate) fn new(map: Box<dyn SharedMap>) -> Table {
        let capacity = ((map.len() as u64).saturating_sub(HEADER_BYTES) / 16).min(u64::from(u32::MAX)) as u32;
        Table { map, capacity }
    }

    /// Entries the mapping covers.
    pub(crate) fn capacity(&self) -> u32 {
        self.capacity
    }

    /// The header as it is in the mapping now.
    pub(crate) fn header(&self) -> Header {
        let mut header = Header::zeroed();
        // SAFETY: header words are stored only by the writer holding the
        // writer mutex or `&mut`, and this is called only by that same writer
        // or during open, before the store is shared.
        unsafe { self.map.read(0, bytemuck::bytes_of_mut(&mut header)) };
        header
    }

    /// The header's `length` field, loaded atomically (another process may be
    /// writing it).
    pub(crate) fn header_length(&self) -> u32 {
        u32::from_le(self.map.load_u32(crate::format::HEADER_LENGTH_OFFSET as usize))
    }

    /// Entry `index`, which must be below `capacity`.
    pub(crate) fn entry(&self, index: u32) -> Entry {
        debug_assert!(index < self.capacity);
        let mut entry = Entry::zeroed();
        // SAFETY: see the module invariant: no thread of this process writes
        // an entry a reader may read.
        unsafe { self.map.read(entry_offset(index) as usize, bytemuck::bytes_of_mut(&mut entry)) };
        entry
    }

    /// Writes entry `index`.
    ///
    /// # Safety
    /// `index` is at or past the published length (append), or the caller
    /// holds `&mut Zrecord` (delete, compact, recovery).
    pub(crate) unsafe fn set_entry(&self, index: u32, entry: &Entry) {
        // SAFETY: forwarded contract.
        unsafe { self.map.write(entry_offset(index) as usize, bytemuck::bytes_of(entry)) }
    }

    /// Stores the first 8-byte word of entry `index` (offset, phys_length)
    /// with one store: a move within a chunk changes nothing else, so a
    /// crash sees the old or the new location, never a mix.
    ///
    /// # Safety
    /// As for [`Table::set_entry`].
    pub(crate) unsafe fn set_entry_word0(&self, index: u32, entry: &Entry) {
        let word = u64::from_ne_bytes(bytemuck::bytes_of(entry)[..8].try_into().expect("8 bytes"));
        // SAFETY: forwarded contract; entry offsets are 16 + 16 i, 8-aligned.
        unsafe { self.map.store_word(entry_offset(index) as usize, word) }
    }

    /// Stores header word 0 (magic, version, tail_chunk).
    ///
    /// # Safety
    /// The caller is the one writer (writer mutex or `&mut`).
    pub(crate) unsafe fn set_header_word0(&self, tail_chunk: u16) {
        let header = Header::new(Tail { chunk: tail_chunk, offset: 0 }, 0);
        let word = u64::from_ne_bytes(bytemuck::bytes_of(&header)[..8].try_into().expect("8 bytes"));
        // SAFETY: forwarded contract.
        unsafe { self.map.store_word(0, word) }
    }

    /// Stores header word 1 (tail_offset, length).
    ///
    /// # Safety
    /// The caller is the one writer (writer mutex or `&mut`).
    pub(crate) unsafe fn set_header_word1(&self, tail_offset: u32, length: u32) {
        let header = Header::new(Tail { chunk: 0, offset: tail_offset }, length);
        let word = u64::from_ne_bytes(bytemuck::bytes_of(&header)[8..].try_into().expect("8 bytes"));
        // SAFETY: forwarded contract.
        unsafe { self.map.store_word(HEADER_WORD1_OFFSET as usize, word) }
    }

    /// Makes the header durable.
    pub(crate) fn flush_header(&self) -> io::Result<()> {
        self.map.flush_range(0, HEADER_BYTES as usize)
    }

    /// Makes entries `first..end` durable.
    pub(crate) fn flush_entries(&self, first: u32, end: u32) -> io::Result<()> {
        if first >= end {
            return Ok(());
        }
        let start = entry_offset(first) as usize;
        self.map.flush_range(start, entry_offset(end) as usize - start)
    }
}
