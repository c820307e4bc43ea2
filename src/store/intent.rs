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

use crate::format::{ENTRY_BYTES, Entry, META_BYTES, RECORDS_MAX};
use crate::io::{VfsFile, read_exact_at};

const MAGIC: [u8; 4] = *b"ZINT";
const HEAD_BYTES: usize = 20;
const ITEM_BYTES: usize = 4 + ENTRY_BYTES as usize;

/// A pending set of table writes and the length change that commits them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Intent {
    pub(crate) old_len: u32,
    pub(crate) new_len: u32,
    pub(crate) items: Vec<(u32, Entry)>,
}

impl Intent {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEAD_BYTES + self.items.len() * ITEM_BYTES);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.old_len.to_le_bytes());
        out.extend_from_slice(&self.new_len.to_le_bytes());
        out.extend_from_slice(&(self.items.len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        for (index, entry) in &self.items {
            out.extend_from_slice(&index.to_le_bytes());
            out.extend_from_slice(bytemuck::bytes_of(entry));
        }
        let crc = crc32fast::hash(&out);
        out[16..20].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes an intent, `None` when the bytes are not a whole, intact one
    /// (a crash while it was written: the mutation never started).
    pub(crate) fn decode(bytes: &[u8]) -> Option<Intent> {
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        if bytes.len() < HEAD_BYTES || bytes[..4] != MAGIC {
            return None;
        }
        let count = word(12) as usize;
        let end = HEAD_BYTES.checked_add(count.checked_mul(ITEM_BYTES)?)?;
        if count > RECORDS_MAX as usize || bytes.len() < end {
            return None;
        }
        let mut copy = bytes[..end].to_vec();
        copy[16..20].fill(0);
        if crc32fast::hash(&copy) != word(16) {
            return None;
        }
        let items = bytes[HEAD_BYTES..end]
            .chunks_exact(ITEM_BYTES)
            .map(|item| {
                let index = u32::from_le_bytes(item[..4].try_into().expect("4 bytes"));
                (index, *bytemuck::from_bytes::<Entry>(&item[4..]))
            })
            .collect();
        Some(Intent { old_len: word(4), new_len: word(8), items })
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
        if head[..4] != MAGIC || count > u64::from(RECORDS_MAX) {
            return Ok(None);
        }
        let want = HEAD_BYTES as u64 + count * ITEM_BYTES as u64;
        if extra < want {
            return Ok(None);
        }
        let mut bytes = vec![0; want as usize];
        read_exact_at(meta, &mut bytes, META_BYTES)?;
        Ok(Intent::decode(&bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Codec, Loc};

    #[test]
    fn round_trip_and_damage() {
        let entry = Entry::new(Loc { chunk: 1, offset: 7 }, 3, 9, Codec::Zstd);
        let intent = Intent { old_len: 10, new_len: 8, items: vec![(2, entry), (5, entry)] };
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
}
