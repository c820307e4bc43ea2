//! The intent record: how delete and compaction stay atomic across a crash
//! without a log. Byte layout: `docs/format.md`, "Intent"; protocol:
//! `docs/crash-safety.md`.
//!
//! This file is the intent's encoding; [`super::meta::Meta`] writes, reads
//! and clears it. An intent lists table entries to set ("entry `index` becomes `E`") and the
//! header length before and after. It lives in `meta.zr` past the end of the
//! table, where the reference package never reads, so a store at rest is
//! exactly the reference's size and an interrupted mutation is found on open
//! in O(1) by the file's length alone.

use super::sums::Sum;
use crate::format::{ENTRY_BYTES, Entry, META_BYTES, RECORDS_MAX, SUM_BYTES};
use crate::io::{VfsFile, read_exact_at, write_all_at};

/// An intent whose items carry their slots of `sums.zr`.
const MAGIC: [u8; 4] = *b"ZIN2";
/// An intent an earlier build wrote: items without sums.
const MAGIC_V1: [u8; 4] = *b"ZINT";
const HEAD_BYTES: usize = 20;
const ITEM_BYTES: usize = 4 + ENTRY_BYTES as usize + SUM_BYTES as usize;
const ITEM_V1_BYTES: usize = 4 + ENTRY_BYTES as usize;

/// A pending set of table writes and the length change that commits them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Intent {
    pub(crate) old_len: u32,
    pub(crate) new_len: u32,
    pub(crate) items: Vec<(u32, Entry)>,
    /// Each item's slot of `sums.zr`, in `items`' order; empty for an
    /// intent an earlier build wrote (its slots then cover no record).
    pub(crate) sums: Vec<Sum>,
}

impl Intent {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD_BYTES + self.items.len() * ITEM_BYTES);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.old_len.to_le_bytes());
        out.extend_from_slice(&self.new_len.to_le_bytes());
        out.extend_from_slice(&(self.items.len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        assert!(self.sums.len() == self.items.len(), "an intent carries one sum per item");
        for ((index, entry), sum) in self.items.iter().zip(&self.sums) {
            out.extend_from_slice(&index.to_le_bytes());
            out.extend_from_slice(bytemuck::bytes_of(entry));
            out.extend_from_slice(&sum.to_word().to_ne_bytes());
        }
        let crc = crc32fast::hash(&out);
        out[16..20].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes an intent, `None` when the bytes are not a whole, intact one
    /// (a crash while it was written: the mutation never started).
    pub(crate) fn decode(bytes: &[u8]) -> Option<Intent> {
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        if bytes.len() < HEAD_BYTES {
            return None;
        }
        let item_bytes = item_bytes(&bytes[..4])?;
        let count = word(12) as usize;
        let end = HEAD_BYTES.checked_add(count.checked_mul(item_bytes)?)?;
        if count > RECORDS_MAX as usize || bytes.len() < end {
            return None;
        }
        let mut copy = bytes[..end].to_vec();
        copy[16..20].fill(0);
        if crc32fast::hash(&copy) != word(16) {
            return None;
        }
        let mut items = Vec::with_capacity(count);
        let mut sums = Vec::with_capacity(if item_bytes == ITEM_BYTES { count } else { 0 });
        for item in bytes[HEAD_BYTES..end].chunks_exact(item_bytes) {
            let index = u32::from_le_bytes(item[..4].try_into().expect("4 bytes"));
            items.push((index, *bytemuck::from_bytes::<Entry>(&item[4..4 + ENTRY_BYTES as usize])));
            if item_bytes == ITEM_BYTES {
                let word = u64::from_ne_bytes(item[4 + ENTRY_BYTES as usize..].try_into().expect("8 bytes"));
                sums.push(Sum::from_word(word));
            }
        }
        Some(Intent { old_len: word(4), new_len: word(8), items, sums })
    }

    /// Makes the intent area of `meta.zr` read as no intent, where the file
    /// cannot be shrunk to drop it: its magic zeroed, which no intent has
    /// (a torn write leaves the old magic or none). Durable after the
    /// caller's sync.
    pub(crate) fn erase(meta: &dyn VfsFile) -> std::io::Result<()> {
        write_all_at(meta, &[0; MAGIC.len()], META_BYTES)
    }

    /// Reads the intent area of `meta.zr`, if the file extends past the table.
    pub(crate) fn read(meta: &dyn VfsFile) -> std::io::Result<Option<Intent>> {
        let len = meta.stat()?.len;
        if len <= META_BYTES {
            return Ok(None);
        }
        let extra = len - META_BYTES;
        // The head first, then only as many items as it claims (at most
        // `RECORDS_MAX`), so garbage past the table costs one small read,
        // not an allocation sized by the file.
        let mut head = [0; HEAD_BYTES];
        if extra < HEAD_BYTES as u64 {
            return Ok(None);
        }
        read_exact_at(meta, &mut head, META_BYTES)?;
        let count = u32::from_le_bytes(head[12..16].try_into().expect("4 bytes")) as u64;
        let Some(item_bytes) = item_bytes(&head[..4]).filter(|_| count <= u64::from(RECORDS_MAX)) else {
            return Ok(None);
        };
        let want = HEAD_BYTES as u64 + count * item_bytes as u64;
        if extra < want {
            return Ok(None);
        }
        let mut bytes = vec![0; want as usize];
        read_exact_at(meta, &mut bytes, META_BYTES)?;
        Ok(Intent::decode(&bytes))
    }
}

/// The size of an item under the intent's magic, `None` for no intent's.
fn item_bytes(magic: &[u8]) -> Option<usize> {
    match magic {
        m if m == MAGIC => Some(ITEM_BYTES),
        m if m == MAGIC_V1 => Some(ITEM_V1_BYTES),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Codec, Loc};

    #[test]
    fn round_trip_and_damage() {
        let entry = Entry::new(Loc { chunk: 1, offset: 7 }, 3, 9, Codec::Zstd);
        let sums = vec![Sum { sum: 0xDEAD_BEEF, tag: 3 }, Sum::NONE];
        let intent = Intent { old_len: 10, new_len: 8, items: vec![(2, entry), (5, entry)], sums };
        let bytes = intent.encode();
        assert_eq!(Intent::decode(&bytes), Some(intent));
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert_eq!(Intent::decode(&bad), None, "flipped byte {i}");
        }
        assert_eq!(Intent::decode(&bytes[..bytes.len() - 1]), None);
        assert_eq!(Intent::decode(&[]), None);
    }

    #[test]
    fn an_intent_an_earlier_build_wrote_decodes_without_sums() {
        let entry = Entry::new(Loc { chunk: 1, offset: 7 }, 3, 9, Codec::Zstd);
        let mut bytes = Vec::new();
        bytes.extend_from_slice(b"ZINT");
        for word in [10u32, 8, 1, 0] {
            bytes.extend_from_slice(&word.to_le_bytes());
        }
        bytes.extend_from_slice(&2u32.to_le_bytes());
        bytes.extend_from_slice(bytemuck::bytes_of(&entry));
        let crc = crc32fast::hash(&bytes);
        bytes[16..20].copy_from_slice(&crc.to_le_bytes());
        let want = Intent { old_len: 10, new_len: 8, items: vec![(2, entry)], sums: Vec::new() };
        assert_eq!(Intent::decode(&bytes), Some(want));
    }
}
