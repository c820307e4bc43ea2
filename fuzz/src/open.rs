//! `open`: a whole store directory from the fuzzer's bytes, opened read-only
//! and for writing, every record read, `verify`, then a few mutations.
//!
//! `meta.zr` is 268,435,472 bytes at rest, so it is described, not spelled
//! out: the input chooses the header's fields, a handful of table entries at
//! chosen indices, the file's length (shorter than the header needs, exact,
//! or longer, with an intent record, CRC valid or not, after the table), and
//! the simulated filesystem stores it sparsely. Chunk files are built from
//! segments (raw, zstd, zstd with the dictionary; from the input or
//! generated) that the first entries point at, then damaged: flipped bytes,
//! cut short, extended with holes (also past 4 GiB). `dict.zr` is absent, a
//! trained dictionary, or arbitrary bytes; `schema.json` and leftover
//! temporary files are arbitrary bytes. `sums.zr` is absent, or a header
//! (this build's, version 1's or not) whose seal is 0, arbitrary, or names
//! the table's header (so that its slots are believed), whose covered word
//! is arbitrary or checks (any count, or the table's length), with
//! arbitrary slot words at
//! hinted indices: a read then gives the record's bytes or a checksum
//! error, never other bytes.

use loaderx::format::{
    ENTRY_BYTES, HEADER_BYTES, META_BYTES, RECORDS_MAX, SUMS_BYTES, SUMS_FILE, SUMS_HEADER_BYTES, SUMS_MAGIC,
    SUMS_VERSION, entry_offset, sum_offset,
};
use loaderx::io::OpenMode;
use loaderx::{Codec, Zrecord};

use crate::frames::{Dict, compress, trained_dict};
use crate::input::In;
use crate::store::{Disk, FULL_CHECK_MAX, FileModel, Model, RawEntry, check_reads, entry_bytes};

/// Where a generated record went: the entry that points at it.
struct Seg {
    chunk: u16,
    offset: u32,
    phys: u32,
    logic: u32,
    codec: u8,
}

impl Seg {
    fn entry(&self) -> RawEntry {
        let reserved = u8::from(self.chunk == 0 && self.offset == 0 && self.phys == 0 && self.codec == 0);
        entry_bytes(self.offset, self.phys, self.logic, self.chunk, self.codec, reserved)
    }
}

/// The `open` target.
pub fn open(data: &[u8]) {
    crate::in_pool(|| run(data));
}

fn run(data: &[u8]) {
    let mut u = In::new(data);
    let mut model = Model::default();
    let disk = Disk::new();

    model.dict = match u.below(6) {
        0 | 1 => None,
        2 | 3 => Some(trained_dict().to_vec()),
        4 => Some(trained_dict()[..u.upto(trained_dict().len())].to_vec()),
        _ => Some(u.bytes(512)),
    };

    // Chunk files built from segments.
    let mut segs = Vec::new();
    let n_chunks = u.below(4) as u16;
    for id in 0..n_chunks {
        let mut content = Vec::new();
        for _ in 0..u.below(6) {
            // Long records are rare: compressing them is the harness's own
            // cost, and every read check decodes them again (some twenty
            // times an input). Past 4 KB rarer still, one draw in 256 (the
            // second draw made only after the first, so that other inputs'
            // bytes keep their meaning); `codec` covers long records.
            let len = match u.below(32) {
                0 if u.below(8) == 0 => u.upto(70_000),
                0 => u.upto(4_000),
                _ => u.upto(700),
            };
            let plain = u.content(len);
            let level = 1 + u.below(4) as i32;
            let checksum = u.bool();
            let mut codec = u.below(3) as u8;
            let stored = match codec {
                1 => compress(&plain, level, Dict::None, checksum),
                2 => model.dict.as_deref().and_then(|d| compress(&plain, level, Dict::of(Some(d)), checksum)),
                _ => None,
            };
            let stored = stored.unwrap_or_else(|| {
                codec = 0;
                plain.clone()
            });
            segs.push(Seg {
                chunk: id,
                offset: content.len() as u32,
                phys: stored.len() as u32,
                logic: plain.len() as u32,
                codec,
            });
            content.extend_from_slice(&stored);
            if u.below(8) == 0 {
                content.extend(u.bytes(64)); // slack between records
            }
        }
        for _ in 0..u.below(3) {
            if !content.is_empty() {
                let at = u.below(content.len() as u64) as usize;
                content[at] ^= 1 | u.u8();
            }
        }
        let mut file = FileModel::whole(content);
        match u.below(8) {
            0 => file.len = u.below(file.len + 1),          // cut short
            1 => file.len += 1 + u64::from(u.u16()),        // a hole after the data
            2 => file.len = u64::from(u.u32()),             // anywhere below 4 GiB
            3 => file.len = (1 << 32) + u64::from(u.u16()), // past 4 GiB
            _ => {}
        }
        file.pieces[0].1.truncate(file.len as usize);
        model.chunks.insert(id, file);
    }
    if u.below(8) == 0 {
        // A chunk file past the tail, or a gap in the numbering.
        let id = u.below(8) as u16;
        model.chunks.entry(id).or_insert_with(|| FileModel::whole(u.bytes(256)));
    }

    // The table: an entry per segment, then entries at chosen indices.
    for (i, seg) in segs.iter().enumerate() {
        model.entries.insert(i as u32, seg.entry());
    }
    let mut hints: Vec<u64> = Vec::new();
    for _ in 0..u.below(6) {
        // Indices near the table's end are rare (see the length below).
        let index = match u.below(4) {
            0 => u.below(segs.len() as u64 + 4) as u32,
            1 => u32::from(u.u16()),
            2 if u.below(16) == 0 => u.below(u64::from(RECORDS_MAX)) as u32,
            2 => u.below(u64::from(FULL_CHECK_MAX) * 2) as u32,
            _ if u.below(16) == 0 => RECORDS_MAX - 1 - u.below(4) as u32,
            _ => FULL_CHECK_MAX - 1 + u.below(4) as u32,
        };
        let entry = match (u.below(4), segs.is_empty()) {
            (0, false) | (1, false) => {
                // A segment's entry with one field changed.
                let seg = &segs[u.below(segs.len() as u64) as usize];
                let mut e = seg.entry();
                let field = [(0, 4), (4, 4), (8, 4), (12, 2), (14, 1), (15, 1)][u.below(6) as usize];
                let value = u.fill(field.1);
                e[field.0..field.0 + field.1].copy_from_slice(&value);
                e
            }
            (2, _) => RawEntry::default(),
            _ => u.fill(ENTRY_BYTES as usize).try_into().expect("16 bytes"),
        };
        model.entries.insert(index, entry);
        hints.push(u64::from(index));
    }

    for e in model.entries.values_mut() {
        cap_phys(e);
    }

    // The header.
    let last = n_chunks.saturating_sub(1);
    model.tail_chunk = match u.below(8) {
        0 => u.u16(),
        1 => u.below(8) as u16,
        _ => last,
    };
    let tail_offset = match u.below(8) {
        0 => u.u32(),
        1 => 0,
        2 => u32::MAX,
        _ => model.chunks.get(&last).map_or(0, |f| f.len.min(u64::from(u32::MAX)) as u32),
    };
    // A long table costs a writer's open a pass over it when the last chunk
    // is longer than the frontier (`repair_frontier`; 2^24 entries are 268
    // MB to copy on the simulated filesystem): the full table is rare, the
    // lengths just past the exhaustive checks are not; past the limit is
    // refused before anything is read.
    model.length = match u.below(10) {
        0 => u.u32(),
        1 => u.below(segs.len() as u64 + 8) as u32,
        2 if u.below(32) == 0 => RECORDS_MAX,
        2 => FULL_CHECK_MAX + u.below(64) as u32,
        3 => RECORDS_MAX + 1,
        // Every hint in range. A hint near the table's end makes this a
        // length of millions (as common as the full table above, 1 in 125
        // inputs, unless kept rare too): past the exhaustive checks' bound
        // one time in 8, else cut to just past it. The draw is made only
        // for such a length, so the other inputs' bytes keep their meaning.
        4 => match hints.iter().max().map_or(0, |&h| h as u32 + 1) {
            n if n > FULL_CHECK_MAX + 64 && u.below(8) != 0 => FULL_CHECK_MAX + n % 64,
            n => n,
        },
        _ => segs.len() as u32,
    };
    let mut header = Vec::with_capacity(16);
    header.extend_from_slice(if u.below(32) == 0 { b"ZRFC" } else { b"ZREC" });
    header.extend_from_slice(&(if u.below(32) == 0 { u.u16() } else { 3 }).to_le_bytes());
    header.extend_from_slice(&model.tail_chunk.to_le_bytes());
    header.extend_from_slice(&tail_offset.to_le_bytes());
    header.extend_from_slice(&model.length.to_le_bytes());

    // Its length, and what lies past the table.
    let needed = entry_offset(model.length.min(RECORDS_MAX));
    let mut intent = None;
    let meta_len = match u.below(12) {
        0 => u.below(HEADER_BYTES + 24),                          // not even a header
        1 => needed.saturating_sub(1 + u.below(ENTRY_BYTES * 2)), // shorter than the header needs
        2 => needed,                                              // exactly what the header needs
        3 => entry_offset(u.below(u64::from(FULL_CHECK_MAX)) as u32),
        // Anywhere up to a little past the table. (Not far past it: open
        // reads up to 335 MB of intent area, 0.5 s here; see docs/fuzzing.md.)
        4 => u.below(META_BYTES + 4096),
        5 | 6 => {
            let bytes = intent_bytes(&mut u, &model, &segs);
            let len = META_BYTES + bytes.len() as u64;
            intent = Some((META_BYTES, bytes));
            len
        }
        _ => META_BYTES,
    };

    // The directory.
    let dir = Disk::dir();
    let layout = u.below(32);
    match layout {
        0 => {
            // The store path is a file.
            disk.mkdir(dir.parent().expect("a parent"));
            let _ = disk.vfs.open(&dir, OpenMode::Create);
        }
        1 => {
            // Data without meta.zr.
            disk.mkdir(&dir);
            disk.put_model(&model);
        }
        2 => {
            // meta.zr is a directory.
            disk.mkdir(&dir.join("meta.zr"));
            disk.put_model(&model);
        }
        3 => {} // nothing at all
        _ => {
            disk.mkdir(&dir);
            disk.put_model(&model);
            disk.put_meta(&header, &mut model, meta_len, intent.clone());
        }
    }
    if u.bool() {
        disk.put("schema.json", &FileModel::whole(u.bytes(256)));
    }
    let sums = (layout > 3 && u.below(3) == 0).then(|| sums_file(&mut u, &header, &hints));
    if let Some(file) = &sums {
        disk.put(SUMS_FILE, file);
    }
    if u.below(8) == 0 {
        let name = ["meta.zr.tmp", "dict.zr.tmp", "x.zr", "12a.zr"][u.below(4) as usize];
        disk.put(name, &FileModel::whole(u.bytes(64)));
    }

    if verbose() {
        eprintln!(
            "layout {layout}, meta.zr {meta_len} bytes, header length {} tail {}:{tail_offset}, {} entries, chunks {:?}, dict {:?}",
            model.length,
            model.tail_chunk,
            model.entries.len(),
            model.chunks.iter().map(|(id, f)| (*id, f.len)).collect::<Vec<_>>(),
            model.dict.as_ref().map(Vec::len),
        );
    }
    // Read-only: the table is exactly as written.
    match disk.open(true) {
        Ok(store) => {
            assert!(store.is_read_only());
            check_reads(&store, &disk, (layout > 3).then_some(&model), &hints, sums.is_some());
            assert!(store.append(b"x", 1, 1, Codec::Raw).is_err(), "a read-only store accepted an append");
        }
        Err(e) => refused(&e),
    }
    disk.assert_no_fault();

    // For writing: recovery may rewrite entries (an intent); without one the
    // table is still exactly as written.
    let exact = meta_len <= META_BYTES && layout > 3;
    let store = match disk.open(false) {
        Ok(store) => {
            if verbose() {
                eprintln!("opened for writing: {} records", store.len());
            }
            store
        }
        Err(e) => {
            refused(&e);
            disk.assert_no_fault();
            return;
        }
    };
    // A writer's open raises a damaged header's frontier past every
    // readable record (F7, F9): the chunks up to its new last one count.
    let mut opened = model.clone();
    if let Ok(stats) = store.stats() {
        opened.tail_chunk = opened.tail_chunk.max((stats.chunks - 1) as u16);
    }
    check_reads(&store, &disk, exact.then_some(&opened), &hints, sums.is_some());
    mutate(&mut u, store, &disk, sums.is_some());
}

/// Keeps an entry's `phys_length` below 16 MiB. The store bounds it only by
/// the chunk's length (up to 4 GiB, here a sparse file): on the real
/// filesystem such a read borrows the mapping, on the simulated one it is a
/// copy, seconds per read. Larger values take no other path.
fn cap_phys(e: &mut RawEntry) {
    e[7] = 0;
}

/// An open refused: any typed error will do, but say what it was when
/// replaying by hand.
fn refused(e: &loaderx::Error) {
    if verbose() {
        eprintln!("open refused: {e}");
    }
}

/// `LOADERX_FUZZ_VERBOSE=1` when replaying by hand: what was built, what
/// was refused.
fn verbose() -> bool {
    std::env::var_os("LOADERX_FUZZ_VERBOSE").is_some()
}

/// Bytes past the table: an intent (CRC right unless the input says
/// otherwise) or garbage.
fn intent_bytes(u: &mut In, model: &Model, segs: &[Seg]) -> Vec<u8> {
    if u.below(4) == 0 {
        return u.bytes(128);
    }
    let len = model.length;
    let pick = |u: &mut In| match u.below(5) {
        0 => len,
        1 => len.saturating_sub(1 + u.below(3) as u32),
        2 => len.wrapping_add(1),
        3 => u.u32(),
        _ => len.saturating_sub(1),
    };
    let (old_len, new_len) = (pick(u), pick(u));
    let count = u.below(5) as usize;
    let mut out = Vec::new();
    out.extend_from_slice(b"ZINT");
    out.extend_from_slice(&old_len.to_le_bytes());
    out.extend_from_slice(&new_len.to_le_bytes());
    let claimed = if u.below(16) == 0 { u.u32() } else { count as u32 };
    out.extend_from_slice(&claimed.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    for _ in 0..count {
        let index = match u.below(3) {
            0 => u.below(u64::from(len) + 2) as u32,
            1 => u.u32(),
            _ => len.saturating_sub(1),
        };
        out.extend_from_slice(&index.to_le_bytes());
        let mut entry: RawEntry = match (u.below(3), segs.is_empty()) {
            (0, _) | (_, true) => u.fill(16).try_into().expect("16 bytes"),
            _ => segs[u.below(segs.len() as u64) as usize].entry(),
        };
        cap_phys(&mut entry);
        out.extend_from_slice(&entry);
    }
    if u.below(8) != 0 {
        let crc = crc32(&out);
        out[16..20].copy_from_slice(&crc.to_le_bytes());
    }
    if u.below(8) == 0 {
        out.truncate(u.upto(out.len()));
    }
    out
}

/// CRC-32 (IEEE), as the intent record uses (`crc32fast::hash`).
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// A writer's mutations on whatever was opened: each is `Ok` or a typed
/// error, an append reads back, and the store reopens.
fn mutate(u: &mut In, mut store: Zrecord, disk: &Disk, sums: bool) {
    let len = store.len();
    if len <= FULL_CHECK_MAX {
        let n = 1 + u.below(3) as usize;
        let records: Vec<Vec<u8>> = (0..n)
            .map(|_| {
                let len = u.upto(900);
                u.content(len)
            })
            .collect();
        let codec = match u.below(3) {
            0 => Codec::Raw,
            1 => Codec::Zstd,
            _ if store.has_dict() => Codec::ZstdDict,
            _ => Codec::Zstd,
        };
        let src = records.concat();
        let mut offsets = Vec::new();
        let mut at = 0u64;
        for r in &records {
            offsets.push(at);
            at += r.len() as u64;
        }
        let lens: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
        if let Ok(first) = store.append_var(&src, &offsets, &lens, codec) {
            assert_eq!(first, u64::from(len), "append's first index");
            assert_eq!(store.len(), len + n as u32);
            for (k, r) in records.iter().enumerate() {
                let got = store.get(first + k as u64);
                assert!(matches!(&got, Ok(b) if b == r), "appended record {k} reads back as {got:?}");
            }
        }
        disk.assert_no_fault();
        let len = store.len();
        if len > 0 && u.bool() {
            let picks = [0, u64::from(len) - 1, u.below(u64::from(len))];
            let _ = store.delete(&picks[..1 + u.below(3) as usize]);
        }
        if u.bool() {
            let _ = store.compact();
        }
        check_reads(&store, disk, None, &[], sums);
    }
    drop(store);
    match disk.open(true) {
        Ok(store) => check_reads(&store, disk, None, &[], sums),
        Err(e) => refused(&e),
    }
    disk.assert_no_fault();
}

/// A `sums.zr` from the input (see the module's doc); `header` is the
/// table's header as written.
fn sums_file(u: &mut In, header: &[u8], hints: &[u64]) -> FileModel {
    let mut head = Vec::with_capacity(24);
    head.extend_from_slice(if u.below(16) == 0 { b"ZSUX" } else { &SUMS_MAGIC });
    let version = match u.below(16) {
        0 => u.u32(),
        1..4 => 1, // before the covered word: read as covering every slot
        _ => SUMS_VERSION,
    };
    head.extend_from_slice(&version.to_le_bytes());
    let seal = match u.below(4) {
        0 => [0; 8],
        1 => u.u64().to_le_bytes(),
        // docs/format.md, "Checksums": four 16-bit hashes, of the header
        // words of the move's two ends (here both this header).
        _ => {
            let hash = |word: &[u8]| ((crc32c::crc32c(word) as u16) | 1).to_le_bytes();
            let (h0, h1) = (hash(&header[..8]), hash(&header[8..16]));
            [h0[0], h0[1], h1[0], h1[1], h0[0], h0[1], h1[0], h1[1]]
        }
    };
    head.extend_from_slice(&seal);
    // The covered word: a count that checks (any, or the table's length),
    // or any 8 bytes.
    let covered = match u.below(4) {
        0 => u.u32(),
        1 => u32::from_le_bytes(header[12..16].try_into().expect("4 bytes")),
        _ => u32::MAX,
    };
    match covered {
        u32::MAX => head.extend_from_slice(&u.u64().to_le_bytes()),
        n => {
            head.extend_from_slice(&n.to_le_bytes());
            head.extend_from_slice(&(crc32c::crc32c(&n.to_le_bytes()) | 1).to_le_bytes());
        }
    }
    let len = match u.below(4) {
        0 => u.below(SUMS_HEADER_BYTES + 16),
        1 => SUMS_HEADER_BYTES,
        _ => SUMS_BYTES,
    };
    let mut file = FileModel { pieces: vec![(0, head)], len };
    for &index in hints.iter().filter(|&&i| i < u64::from(RECORDS_MAX)).take(u.below(4) as usize) {
        file.pieces.push((sum_offset(index as u32), u.u64().to_le_bytes().to_vec()));
    }
    file
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc_matches_crc32fast_vectors() {
        assert_eq!(super::crc32(b"123456789"), 0xCBF4_3926);
    }
}
