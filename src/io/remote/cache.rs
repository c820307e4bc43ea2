//! The optional local cache of a remote store: fixed-size blocks of the
//! chunk objects, one file each, in a directory with a size cap
//! (`docs/remote.md`, "Caching"). Files are reached through the I/O
//! boundary (`RealFs`).
//!
//! A block file is `{object}/{block}`: `object` names the object by a hash
//! of its URL, size and entity tag (a re-published object is another
//! object), `block` its index; the file holds the block's bytes and their
//! CRC-32 (4 bytes, little-endian). A block is written to a temporary name
//! and renamed, so a reader finds it whole or not at all; a file of another
//! length or whose CRC-32 does not match is taken as missing (the block is
//! fetched again and the file replaced). Nothing is synced: a block lost to
//! a crash is fetched again.
//!
//! The cap: the bytes of the blocks this process knows of (those it found
//! at its first use of the directory and those it wrote); past it, the
//! oldest are removed first. Other processes sharing the directory may
//! hold it over the cap between their evictions.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::fetch::ObjectRef;
use crate::io::real::RealFs;
use crate::io::{FileKind, OpenMode, Vfs, read_file, write_all_at};

/// The cache directory and what this process knows of it.
#[derive(Debug)]
pub(crate) struct BlockCache {
    dir: PathBuf,
    block_bytes: u64,
    cap: u64,
    known: Mutex<Known>,
}

#[derive(Debug, Default)]
struct Known {
    scanned: bool,
    bytes: u64,
    /// Block files, oldest first, with their sizes.
    order: VecDeque<(PathBuf, u64)>,
}

/// FNV-1a, 64 bits: a stable name for an object version.
fn object_name(object: &ObjectRef) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let etag = object.etag.as_deref().unwrap_or("");
    for b in object.url.bytes().chain(object.size.to_le_bytes()).chain(etag.bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl BlockCache {
    pub(crate) fn new(dir: PathBuf, block_bytes: u64, cap: u64) -> BlockCache {
        BlockCache { dir, block_bytes: block_bytes.max(4096), cap, known: Mutex::new(Known::default()) }
    }

    pub(crate) fn block_bytes(&self) -> u64 {
        self.block_bytes
    }

    fn path(&self, object: &ObjectRef, block: u64) -> PathBuf {
        self.dir.join(object_name(object)).join(block.to_string())
    }

    /// The bytes of `block` of `object` (`len` of them), if cached whole.
    pub(crate) fn get(&self, object: &ObjectRef, block: u64, len: usize) -> Option<Vec<u8>> {
        let mut bytes = read_file(&RealFs, &self.path(object, block), len as u64 + 4).ok()?;
        if bytes.len() != len + 4 {
            return None;
        }
        let crc = u32::from_le_bytes(bytes[len..].try_into().expect("4 bytes"));
        bytes.truncate(len);
        (crc32fast::hash(&bytes) == crc).then_some(bytes)
    }

    /// Stores `bytes` as `block` of `object`, then evicts past the cap. A
    /// failure leaves the cache without the block (the read goes on).
    pub(crate) fn put(&self, object: &ObjectRef, block: u64, bytes: &[u8]) {
        let path = self.path(object, block);
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        if !known.scanned {
            known.scanned = true;
            self.scan(&mut known);
        }
        if self.write(&path, bytes).is_err() {
            return;
        }
        // A block written again (its file was damaged) replaces itself.
        if let Some(at) = known.order.iter().position(|(p, _)| *p == path) {
            let (_, size) = known.order.remove(at).expect("found");
            known.bytes -= size;
        }
        let size = bytes.len() as u64 + 4;
        known.bytes += size;
        known.order.push_back((path, size));
        while known.bytes > self.cap {
            let Some((old, size)) = known.order.pop_front() else { break };
            let _ = RealFs.remove_file(&old);
            known.bytes -= size;
        }
    }

    fn write(&self, path: &Path, bytes: &[u8]) -> io::Result<()> {
        let fs = RealFs;
        let dir = path.parent().expect("a block file has a directory");
        fs.create_dir_all(dir)?;
        let tmp = dir.join(format!(
            ".{}.{}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("block"),
            std::process::id()
        ));
        let file = fs.open(&tmp, OpenMode::Create)?;
        file.set_len(0)?;
        write_all_at(&*file, bytes, 0)?;
        write_all_at(&*file, &crc32fast::hash(bytes).to_le_bytes(), bytes.len() as u64)?;
        drop(file);
        fs.rename(&tmp, path)
    }

    /// Counts the block files already in the directory (oldest: unknown,
    /// so in listing order).
    fn scan(&self, known: &mut Known) {
        let fs = RealFs;
        let Ok(objects) = fs.list_dir(&self.dir) else { return };
        for object in objects {
            let dir = self.dir.join(&object);
            let Ok(blocks) = fs.list_dir(&dir) else { continue };
            for block in blocks.iter().filter(|b| !b.starts_with('.')) {
                let path = dir.join(block);
                if fs.kind(&path).ok().flatten() != Some(FileKind::File) {
                    continue;
                }
                let Ok(len) = fs.open(&path, OpenMode::Read).and_then(|f| f.stat()).map(|s| s.len) else { continue };
                known.bytes += len;
                known.order.push_back((path, len));
            }
        }
    }
}
