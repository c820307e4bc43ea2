//! `codec`: one stored record with an arbitrary codec tag, physical and
//! logical lengths, stored bytes and dictionary, read through the public
//! store API. The store is one entry in a real `meta.zr` (on the simulated
//! filesystem) and a chunk holding the bytes; `get` must give an error or
//! exactly `logic_length` bytes, equal to what an independent zstd decode
//! (or, raw, the chunk itself) gives; the batch paths must agree and leave no
//! byte of the caller's buffer unwritten.

use std::borrow::Cow;

use loaderx::format::{META_BYTES, RECORD_BYTES_MAX};

use crate::frames::{Dict, HIGH_LEVEL_MAX, PLAIN_LENS, compress, plain, plain_frame, trained_dict};
use crate::input::In;
use crate::store::{Disk, FileModel, Model, check_reads, entry_bytes};

/// The `codec` target.
pub fn codec(data: &[u8]) {
    crate::in_pool(|| run(data));
}

fn run(data: &[u8]) {
    let mut u = In::new(data);
    let tag = match u.below(8) {
        0 | 1 => 0,
        2 | 3 => 1,
        4 | 5 => 2,
        6 => 3,
        _ => u.u8(),
    };
    let dict = match u.below(5) {
        0 | 1 => None,
        2 | 3 => Some(trained_dict().to_vec()),
        _ => Some(u.bytes(1024)),
    };
    // The plain record: input bytes (zeros once the input runs out), or a
    // generated plain whose frames are kept (frames.rs).
    // Large plains (past 4 KiB: several blocks, long matches) one time in
    // 512: an input with one costs as much as a hundred without (each of
    // the reads below decodes it, and under AddressSanitizer each buffer of
    // that size is a fresh mapping). The second draw is made only after a
    // first 0, so the other inputs' bytes keep their meaning.
    let large = |u: &mut In| u.below(64) == 0 && u.below(8) == 0;
    let small = PLAIN_LENS.iter().filter(|&&n| n <= HIGH_LEVEL_MAX).count() as u64;
    let generated = match u.bool() {
        true if large(&mut u) => Some(u.below(PLAIN_LENS.len() as u64) as usize),
        true => Some(u.below(small) as usize),
        false => None,
    };
    let plain: Cow<'static, [u8]> = match generated {
        Some(k) => Cow::Borrowed(plain(k)),
        None => {
            let len = if large(&mut u) { u.upto(300_000) } else { u.upto(2048) };
            Cow::Owned(u.fill(len))
        }
    };
    // High levels (other block types and match finders) only for generated
    // plains up to 4 KiB, whose frames are computed once: compressing is the
    // harness's cost, not the decoder's.
    let level = if generated.is_some() && plain.len() <= HIGH_LEVEL_MAX {
        [1, 3, 9, 19, -5][u.below(5) as usize]
    } else {
        [1, 3, -5][u.below(3) as usize]
    };
    let checksum = u.bool();
    // Kept frames for generated plains; a dictionary from the input is
    // digested per call, at a low level.
    let frame = |dict: Dict, level: i32, checksum: bool| match (generated, dict) {
        (Some(k), Dict::None) => Some(plain_frame(k, level, false, checksum).to_vec()),
        (Some(k), Dict::Trained) => Some(plain_frame(k, level, true, checksum).to_vec()),
        _ => compress(&plain, level.min(3), dict, checksum),
    };
    let mut stored = match u.below(6) {
        0 => plain.to_vec(),
        1 | 2 => frame(Dict::None, level, checksum).unwrap_or_else(|| plain.to_vec()),
        3 => {
            let dict = dict.as_deref().map_or(Dict::Trained, |d| Dict::of(Some(d)));
            frame(dict, level, checksum).unwrap_or_else(|| plain.to_vec())
        }
        4 => {
            // Two frames back to back, or a frame and trailing bytes.
            let mut two = frame(Dict::None, level, checksum).unwrap_or_default();
            two.extend(if u.bool() { frame(Dict::None, 1, false).unwrap_or_default() } else { u.bytes(16) });
            two
        }
        _ => u.bytes(4096),
    };
    // Damage: flipped bytes, cut short, bytes appended.
    for _ in 0..u.below(4) {
        if !stored.is_empty() {
            let at = u.below(stored.len() as u64) as usize;
            stored[at] ^= 1 | u.u8();
        }
    }
    match u.below(8) {
        0 => stored.truncate(u.upto(stored.len())),
        1 => stored.extend(u.bytes(32)),
        _ => {}
    }
    let near = |u: &mut In, n: u32| n.saturating_add(u.below(5) as u32).saturating_sub(2);
    let phys = match u.below(8) {
        0 => near(&mut u, stored.len() as u32),
        1 => u.u32(),
        _ => stored.len() as u32,
    };
    let logic = match u.below(8) {
        0 => near(&mut u, plain.len() as u32),
        1 => u.u32(),
        2 => RECORD_BYTES_MAX + u.below(2) as u32,
        _ if tag == 0 => phys,
        _ => plain.len() as u32,
    };
    let offset = match u.below(8) {
        0 => u.below(4096) as u32,
        1 => u.u32(),
        2 => u32::MAX - u.below(8) as u32,
        _ => 0,
    };
    let mut chunk =
        FileModel { len: u64::from(offset) + stored.len() as u64, pieces: vec![(u64::from(offset), stored)] };
    match u.below(8) {
        0 => chunk.len = u.below(chunk.len + 1),
        1 => chunk.len += u64::from(u.u16()),
        _ => {}
    }
    let reserved = if u.below(8) == 0 { u.u8() } else { 0 };
    let entry = entry_bytes(offset, phys, logic, 0, tag, reserved);

    let mut model = Model { length: 1, tail_chunk: 0, dict, ..Model::default() };
    model.entries.insert(0, entry);
    model.chunks.insert(0, chunk);
    let disk = Disk::new();
    disk.mkdir(&Disk::dir());
    disk.put_model(&model);
    let tail = model.chunks[&0].len.min(u64::from(u32::MAX)) as u32;
    let mut header = Vec::with_capacity(16);
    header.extend_from_slice(b"ZREC");
    header.extend_from_slice(&3u16.to_le_bytes());
    header.extend_from_slice(&0u16.to_le_bytes());
    header.extend_from_slice(&tail.to_le_bytes());
    header.extend_from_slice(&1u32.to_le_bytes());
    disk.put_meta(&header, &mut model, META_BYTES, None);

    let store = match disk.open(true) {
        Ok(store) => store,
        // Only the dictionary can make the open fail.
        Err(e) => {
            assert!(model.dict.is_some(), "a one-record store with no dictionary does not open: {e}");
            return;
        }
    };
    if let Ok(bytes) = store.get(0) {
        assert_eq!(bytes.len() as u64, u64::from(logic), "get returned a length other than logic_length");
    }
    check_reads(&store, &disk, Some(&model), &[0], false);
}
