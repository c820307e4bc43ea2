//! Holes on the simulated filesystem: `Map::residency` says so only
//! of bytes that read as zeros, and a store whose table and chunk files are
//! sparse reads, scans and counts the same as its bytes say (the scans skip
//! what the mapping knows to be a hole, and list the directory once for a
//! far frontier).

use std::path::Path;
use std::sync::Arc;

use loaderx::format::{MAGIC, VERSION, entry_offset};
use loaderx::io::{MapMode, OpenMode, Residency, Vfs, write_all_at};
use loaderx::{Options, Zrecord};
use loaderx_sim::fs::{Faults, SimFs};
use loaderx_sim::rng::Rng;

fn fs() -> (SimFs, Arc<dyn Vfs>) {
    let fs = SimFs::new(Rng::new(1), Faults::default());
    let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
    (fs, vfs)
}

#[test]
fn a_hole_only_where_no_page_was_written_within_the_file() {
    let (_fs, vfs) = fs();
    vfs.create_dir_all(Path::new("/d")).unwrap();
    let file = vfs.open(Path::new("/d/f"), OpenMode::Create).unwrap();
    file.set_len(64 << 10).unwrap();
    write_all_at(&*file, &[0, 7], 3 * 4096 + 100).unwrap();
    let map = file.map(64 << 10, MapMode::Shared { writable: false }).unwrap();
    assert!(map.residency(0, 3 * 4096) == Residency::Hole, "pages 0..3 were never written");
    assert!(map.residency(4 * 4096, (64 << 10) - 4 * 4096) == Residency::Hole, "pages 4.. were never written");
    assert!(map.residency(3 * 4096 + 4000, 200) != Residency::Hole, "the range reaches page 3, which was written");
    assert!(map.residency(0, 64 << 10) != Residency::Hole, "the whole file holds page 3");
    assert!(map.residency(0, 0) != Residency::Hole, "an empty range says nothing");
    file.set_len(2 * 4096).unwrap();
    assert!(map.residency(4096, 2 * 4096) != Residency::Hole, "past the file's end is no hole: a read there faults");
    assert!(map.residency(0, 2 * 4096) == Residency::Hole);
    let mut bytes = [1u8; 2 * 4096];
    // SAFETY: no thread writes the mapping.
    unsafe { map.read(0, &mut bytes) };
    assert!(bytes.iter().all(|&b| b == 0), "what residency claimed, read gives");
}

/// A store on the simulated filesystem whose header claims 3 × 4,096 + 10
/// records in chunks up to 3,000, with records only in chunk files 0 and 2
/// and entries only at the given indices; every other entry is a hole.
fn sparse_store(vfs: &Arc<dyn Vfs>, written: &[u32]) -> Zrecord {
    let dir = Path::new("/s");
    drop(Zrecord::open_in(vfs.clone(), dir, Options::default()).unwrap());
    let chunk = |id: u16, bytes: &[u8]| {
        let f = vfs.open(&dir.join(format!("{id}.zr")), OpenMode::Create).unwrap();
        write_all_at(&*f, bytes, 0).unwrap();
    };
    chunk(0, &[b'a'; 10]);
    chunk(2, &[b'c'; 30]);
    let meta = vfs.open(&dir.join("meta.zr"), OpenMode::Write).unwrap();
    // The header (`docs/format.md`): the frontier at chunk 3,000, offset 5.
    let mut header = MAGIC.to_vec();
    header.extend(VERSION.to_le_bytes());
    header.extend(3000u16.to_le_bytes());
    header.extend(5u32.to_le_bytes());
    header.extend((3 * 4096u32 + 10).to_le_bytes());
    write_all_at(&*meta, &header, 0).unwrap();
    for (k, &index) in written.iter().enumerate() {
        // Raw records of 10 bytes, the first in chunk 0, the others in chunk 2.
        let (chunk, offset) = if k == 0 { (0u16, 0u32) } else { (2, 10 * (k as u32 - 1)) };
        let mut entry = [0u8; 16];
        entry[0..4].copy_from_slice(&offset.to_le_bytes());
        entry[4..8].copy_from_slice(&10u32.to_le_bytes());
        entry[8..12].copy_from_slice(&10u32.to_le_bytes());
        entry[12..14].copy_from_slice(&chunk.to_le_bytes());
        write_all_at(&*meta, &entry, entry_offset(index)).unwrap();
    }
    drop(meta);
    Zrecord::open_in(vfs.clone(), dir, Options { read_only: true, ..Options::default() }).unwrap()
}

#[test]
fn a_sparse_table_and_a_far_frontier_count_what_their_bytes_say() {
    let (_fs, vfs) = fs();
    // One entry in the first block of 4,096, none in the second (a hole),
    // two in the third and the last, partial, block.
    let written = [5, 2 * 4096 + 1, 3 * 4096 + 9];
    let store = sparse_store(&vfs, &written);
    let stats = store.stats().unwrap();
    assert_eq!(stats.records, 3 * 4096 + 10);
    assert_eq!(stats.live_bytes, 30);
    assert_eq!(stats.codec_records, [3 * 4096 + 10, 0, 0], "unwritten entries count as raw records of 0 bytes");
    // Chunks 0 and 2 exist below the frontier's chunk 3,000: their bytes and its offset.
    assert_eq!(stats.chunk_file_bytes, 10 + 30 + 5);
    assert_eq!(stats.chunks, 3001);
    for (k, &index) in written.iter().enumerate() {
        let want = if k == 0 { vec![b'a'; 10] } else { vec![b'c'; 10] };
        assert_eq!(store.get(u64::from(index)).unwrap(), want, "record {index}");
    }
    assert!(store.get(4096 + 7).is_err(), "an entry in the hole is unwritten");
    let report = store.verify().unwrap();
    assert_eq!(report.problems_total, 3 * 4096 + 10 - 3, "every unwritten entry is a problem");
}
