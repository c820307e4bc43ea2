//! What the `open` and `codec` targets share: writing a store's files byte
//! by byte onto the simulated filesystem (in memory, sparse, no faults), a
//! model of those bytes, and the read checks against it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use loaderx::format::{CHUNK_BYTES_MAX, ENTRY_BYTES, RECORD_BYTES_MAX, chunk_file_name, entry_offset};
use loaderx::io::{OpenMode, Vfs};
use loaderx::{Corruption, Error, Options, VerifyReads, Zrecord};
use loaderx_sim::fs::{Faults, SimFs};
use loaderx_sim::rng::Rng;

use crate::frames::{Dict, decode};

/// Where the targets build their store.
pub(crate) const DIR: &str = "/store";

/// Reads are checked exhaustively (every index, `verify`, `stats`) up to this
/// many records; past it, a sample of indices (a header may claim 2^24
/// records of a sparse table: reading them all is a timeout, not a finding).
pub(crate) const FULL_CHECK_MAX: u32 = 4096;

/// The bytes of a table entry.
pub(crate) type RawEntry = [u8; ENTRY_BYTES as usize];

/// A table entry's fields, in on-disk order.
pub(crate) fn entry_bytes(offset: u32, phys: u32, logic: u32, chunk: u16, codec: u8, reserved: u8) -> RawEntry {
    let mut e = [0; 16];
    e[0..4].copy_from_slice(&offset.to_le_bytes());
    e[4..8].copy_from_slice(&phys.to_le_bytes());
    e[8..12].copy_from_slice(&logic.to_le_bytes());
    e[12..14].copy_from_slice(&chunk.to_le_bytes());
    e[14] = codec;
    e[15] = reserved;
    e
}

/// A file's content: pieces of bytes at offsets over zeros, and a length
/// (bytes past the pieces read as zeros; pieces past it are cut).
#[derive(Clone, Debug, Default)]
pub(crate) struct FileModel {
    pub(crate) pieces: Vec<(u64, Vec<u8>)>,
    pub(crate) len: u64,
}

impl FileModel {
    pub(crate) fn whole(bytes: Vec<u8>) -> FileModel {
        FileModel { len: bytes.len() as u64, pieces: vec![(0, bytes)] }
    }

    /// Bytes `offset..offset + len`, `None` past the end or past `visible`
    /// (the bytes of the file a reader may see).
    pub(crate) fn read_within(&self, offset: u64, len: usize, visible: u64) -> Option<Vec<u8>> {
        let end = offset.checked_add(len as u64)?;
        if end > self.len.min(visible) {
            return None;
        }
        let mut out = vec![0; len];
        for (at, bytes) in &self.pieces {
            let (lo, hi) = (offset.max(*at), end.min(at + bytes.len() as u64));
            if lo < hi {
                out[(lo - offset) as usize..(hi - offset) as usize]
                    .copy_from_slice(&bytes[(lo - at) as usize..(hi - at) as usize]);
            }
        }
        Some(out)
    }
}

/// A store directory as written: what every read of it must return.
#[derive(Clone, Debug, Default)]
pub(crate) struct Model {
    /// Table entries present in `meta.zr` (every other slot is zero).
    pub(crate) entries: BTreeMap<u32, RawEntry>,
    /// Header `length` and `tail_chunk`.
    pub(crate) length: u32,
    pub(crate) tail_chunk: u16,
    pub(crate) chunks: BTreeMap<u16, FileModel>,
    pub(crate) dict: Option<Vec<u8>>,
}

/// What a read of one record must give.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Expect {
    /// An error.
    Fail(&'static str),
    /// Exactly these bytes.
    Bytes(Vec<u8>),
}

impl Model {
    /// The outcome of reading record `index` of the store as modelled,
    /// derived from the format alone (`docs/format.md`) and an independent
    /// zstd decode.
    pub(crate) fn expect(&self, index: u64) -> Expect {
        if index >= u64::from(self.length) {
            return Expect::Fail("index out of range");
        }
        let e = self.entries.get(&(index as u32)).copied().unwrap_or_default();
        let word = |at: usize| u32::from_le_bytes(e[at..at + 4].try_into().expect("4 bytes"));
        let (offset, phys, logic) = (word(0), word(4), word(8));
        let (chunk, codec) = (u16::from_le_bytes([e[12], e[13]]), e[14]);
        if e == RawEntry::default() {
            return Expect::Fail("unwritten entry");
        }
        if codec > 2 {
            return Expect::Fail("unknown codec");
        }
        if logic > RECORD_BYTES_MAX {
            return Expect::Fail("logic length over the limit");
        }
        if codec == 0 && phys != logic {
            return Expect::Fail("raw with phys != logic");
        }
        if codec == 2 && self.dict.is_none() {
            return Expect::Fail("zstd_dict without dict.zr");
        }
        if chunk > self.tail_chunk {
            return Expect::Fail("chunk past the tail");
        }
        let Some(file) = self.chunks.get(&chunk) else { return Expect::Fail("chunk file missing") };
        let Some(stored) = file.read_within(u64::from(offset), phys as usize, CHUNK_BYTES_MAX) else {
            return Expect::Fail("past the chunk's end");
        };
        match codec {
            0 => Expect::Bytes(stored),
            _ => match decode(
                &stored,
                logic as usize,
                if codec == 2 { Dict::of(self.dict.as_deref()) } else { Dict::None },
            ) {
                Some(plain) => Expect::Bytes(plain),
                None => Expect::Fail("zstd refuses it or it decodes to another length"),
            },
        }
    }
}

/// Trace lines a [`Disk`] keeps.
const TRACE_KEPT: usize = 4096;

/// A simulated filesystem with no faults, and the store directory on it.
pub(crate) struct Disk {
    pub(crate) fs: SimFs,
    pub(crate) vfs: Arc<dyn Vfs>,
}

impl Disk {
    pub(crate) fn new() -> Disk {
        let fs = SimFs::new(Rng::new(0), Faults::default());
        // A violation prints its last 40 lines; a whole trace of an open
        // of 2^24 records outgrows libFuzzer's 2 GiB.
        fs.keep_trace(TRACE_KEPT);
        let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
        Disk { fs, vfs }
    }

    pub(crate) fn dir() -> PathBuf {
        PathBuf::from(DIR)
    }

    pub(crate) fn mkdir(&self, path: &Path) {
        self.vfs.create_dir_all(path).expect("no faults");
    }

    /// Writes a file: its pieces, then its length.
    pub(crate) fn put(&self, name: &str, file: &FileModel) {
        // Fails only where the layout has no directory to put it in.
        let Ok(f) = self.vfs.open(&Disk::dir().join(name), OpenMode::Create) else { return };
        for (at, bytes) in &file.pieces {
            loaderx::io::write_all_at(&*f, bytes, *at).expect("no faults");
        }
        f.set_len(file.len).expect("no faults");
    }

    /// Writes every chunk file and `dict.zr` of `model`.
    pub(crate) fn put_model(&self, model: &Model) {
        for (id, file) in &model.chunks {
            self.put(&chunk_file_name(*id), file);
        }
        if let Some(dict) = &model.dict {
            self.put("dict.zr", &FileModel::whole(dict.clone()));
        }
    }

    /// `meta.zr` of `len` bytes: `header` (cut to `len`), `model`'s entries
    /// that fit, and `tail` bytes at offset `tail_at`.
    pub(crate) fn put_meta(&self, header: &[u8], model: &mut Model, len: u64, tail: Option<(u64, Vec<u8>)>) {
        let mut file = FileModel { pieces: vec![(0, header.to_vec())], len };
        model.entries.retain(|&i, _| entry_offset(i) + ENTRY_BYTES <= len);
        for (&i, e) in &model.entries {
            file.pieces.push((entry_offset(i), e.to_vec()));
        }
        file.pieces.extend(tail);
        self.put("meta.zr", &file);
    }

    /// Opens the store with every read checked against `sums.zr` (where
    /// there is one), whichever path it takes: the reads `check_reads`
    /// compares then agree on a record whose checksum fails.
    pub(crate) fn open(&self, read_only: bool) -> loaderx::Result<Zrecord> {
        let options = Options { read_only, verify_reads: VerifyReads::Always, ..Options::default() };
        Zrecord::open_in(self.vfs.clone(), &Disk::dir(), options)
    }

    /// A read past the end of a file (a SIGBUS on a real system) is a finding.
    pub(crate) fn assert_no_fault(&self) {
        if let Some(what) = self.fs.fault_past_eof() {
            panic!("the store made a {what}");
        }
    }
}

/// Reads a store every way there is and checks the answers agree with each
/// other, with `model` when given (the table is exactly as written), and that
/// no output byte depends on what the caller's buffer held.
/// `sums`: the store has a `sums.zr` from the input, whose slots may
/// disagree with the bytes: a read of a record the model says is readable
/// may then fail its checksum (but give no other bytes).
pub(crate) fn check_reads(store: &Zrecord, disk: &Disk, model: Option<&Model>, hints: &[u64], sums: bool) {
    let len = store.len();
    if let Some(model) = model {
        assert_eq!(len, model.length, "the open store's length is not the header's");
    }
    let full = len <= FULL_CHECK_MAX;
    let mut indices: Vec<u64> =
        if full { (0..u64::from(len)).collect() } else { (0..64).chain(u64::from(len) - 16..u64::from(len)).collect() };
    indices.extend(hints.iter().copied().filter(|&i| i < u64::from(len)));
    indices.sort_unstable();
    indices.dedup();
    let out_of_range = [u64::from(len), u64::from(len) + 1, u64::MAX];

    let mut good: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut any_corrupt = false;
    for &i in indices.iter().chain(&out_of_range) {
        let mut l = [0u32];
        let length = store.lengths(&[i], &mut l);
        let got = store.get(i);
        if i >= u64::from(len) {
            assert!(
                matches!(got, Err(Error::IndexOutOfRange { .. })) && length.is_err(),
                "index {i} of {len}: {got:?}"
            );
            continue;
        }
        match (&length, &got) {
            (Ok(()), Ok(bytes)) => assert_eq!(bytes.len(), l[0] as usize, "record {i}: get and lengths disagree"),
            (Err(_), Ok(bytes)) => panic!("record {i}: lengths fails ({length:?}) but get gives {} bytes", bytes.len()),
            _ => {}
        }
        if let Some(model) = model {
            match (model.expect(i), &got) {
                (Expect::Bytes(want), Ok(bytes)) => assert!(want == *bytes, "record {i}: wrong bytes"),
                (Expect::Fail(_), Err(_)) => {}
                (Expect::Bytes(_), Err(Error::Corrupt { what: Corruption::Checksum { .. }, .. })) if sums => {}
                (Expect::Bytes(want), Err(e)) => {
                    panic!("record {i}: the format says {} readable bytes, the store says {e}", want.len())
                }
                (Expect::Fail(why), Ok(bytes)) => panic!("record {i}: {why}, yet get gives {} bytes", bytes.len()),
            }
        }
        match got {
            Ok(bytes) => good.push((i, bytes)),
            Err(Error::Io { .. }) => panic!("record {i}: an I/O error with no fault injected: {got:?}"),
            Err(_) => any_corrupt = true,
        }
    }

    // The batch paths, twice, over buffers holding different garbage: the
    // output may not depend on it (no byte left unwritten).
    if !good.is_empty() {
        let idx: Vec<u64> = good.iter().map(|g| g.0).collect();
        let lens: Vec<u32> = good.iter().map(|g| g.1.len() as u32).collect();
        let mut offsets = Vec::new();
        let mut at = 0u64;
        for &l in &lens {
            offsets.push(at);
            at += u64::from(l) + 1;
        }
        for fill in [0x00, 0xA5] {
            let mut dst = vec![fill; at as usize];
            store.gather_var(&idx, &mut dst, &offsets, &lens).unwrap_or_else(|e| panic!("gather_var: {e}"));
            for (k, g) in good.iter().enumerate() {
                let got = &dst[offsets[k] as usize..][..lens[k] as usize];
                assert!(got == &g.1[..], "gather_var of record {} differs from get", g.0);
                let gap = offsets[k] as usize + lens[k] as usize;
                assert_eq!(dst[gap], fill, "gather_var wrote outside record {}'s region", g.0);
            }
        }
        // Fixed-size gather of the records as long as the first one.
        let stride = good[0].1.len();
        let same: Vec<&(u64, Vec<u8>)> = good.iter().filter(|g| g.1.len() == stride).collect();
        let idx: Vec<u64> = same.iter().map(|g| g.0).collect();
        for fill in [0x00, 0x5A] {
            let mut dst = vec![fill; idx.len() * stride + 3];
            store.gather(&idx, &mut dst, stride).unwrap_or_else(|e| panic!("gather: {e}"));
            for (k, g) in same.iter().enumerate() {
                assert!(dst[k * stride..][..stride] == g.1[..], "gather of record {} differs from get", g.0);
            }
            assert_eq!(&dst[idx.len() * stride..], &[fill; 3], "gather wrote past the records");
        }
        // A wrong slot length is refused, whatever the record.
        let (i, bytes) = &good[0];
        let mut dst = vec![0u8; bytes.len() + 1];
        assert!(store.gather(&[*i], &mut dst, bytes.len() + 1).is_err(), "gather into a too-long slot of {i}");
    }
    if len > 0 {
        // One bad index among good ones fails the whole call cleanly.
        let mut dst = vec![0u8; 64];
        let _ = store.gather(&[0, u64::from(len)], &mut dst, 1);
        let _ = store.gather_var(&[0, u64::MAX], &mut dst, &[0, 8], &[1, 1]);
    }

    if full {
        let report = store.verify().unwrap_or_else(|e| panic!("verify failed with no fault injected: {e}"));
        assert_eq!(report.records, len);
        if report.is_ok() {
            assert!(!any_corrupt, "verify finds nothing, but a record does not read");
        } else if !any_corrupt {
            // Every record reads: the problems can only be overlaps.
            for p in &report.problems {
                assert!(
                    matches!(p, Error::Corrupt { what: loaderx::Corruption::Overlap { .. }, .. }),
                    "verify reports {p} but every record reads"
                );
            }
        }
        store.stats().unwrap_or_else(|e| panic!("stats failed with no fault injected: {e}"));
    }
    disk.assert_no_fault();
}

#[cfg(test)]
mod tests {
    use super::{Disk, FileModel, TRACE_KEPT};

    /// A store's files written piece by piece, more operations than the
    /// trace keeps: the trace stays bounded (the open of 2^24 records that
    /// ran libFuzzer out of memory made 50 M operations).
    #[test]
    fn a_disk_keeps_a_bounded_trace() {
        let disk = Disk::new();
        disk.mkdir(&Disk::dir());
        let pieces = (0..TRACE_KEPT as u64 * 2).map(|i| (i * 4096, vec![1])).collect();
        disk.put("x.zr", &FileModel { pieces, len: TRACE_KEPT as u64 * 8192 });
        let (ops, trace) = (disk.fs.ops(), disk.fs.trace());
        assert!(ops > TRACE_KEPT as u64 * 2, "{ops} operations");
        assert_eq!(trace.len(), TRACE_KEPT + 1, "the kept lines and a count of the rest");
        assert!(trace[0].contains("earlier lines not kept"), "{}", trace[0]);
    }
}
