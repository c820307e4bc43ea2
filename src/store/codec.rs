//! Per-record compression: raw, zstd, zstd with the store's dictionary.
//!
//! Every worker thread keeps one compression and one decompression context
//! and reuses it for every record it handles; the dictionary is prepared once
//! (`DDict`, and a `CDict` per level) and shared, read-only, by all threads.
//! Every zstd frame carries zstd's content checksum, so a damaged compressed
//! record is an error, not silently wrong bytes.

use std::cell::RefCell;
use std::io::Cursor;
use std::sync::{Arc, Mutex};

use zstd::zstd_safe::{self, CCtx, CDict, CParameter, DCtx, DDict};

use crate::error::Corruption;
use crate::format::Codec;

/// A trained dictionary, prepared for both directions.
pub(crate) struct Dictionary {
    bytes: Vec<u8>,
    ddict: DDict<'static>,
    cdict: Mutex<Option<(i32, Arc<CDict<'static>>)>>,
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary").field("bytes", &self.bytes.len()).finish()
    }
}

impl Dictionary {
    /// Prepares `bytes` (the content of `dict.zr`).
    pub(crate) fn new(bytes: Vec<u8>) -> Result<Dictionary, Corruption> {
        let ddict = DDict::try_create(&bytes).ok_or_else(|| Corruption::Dictionary("zstd rejected it".into()))?;
        Ok(Dictionary { bytes, ddict, cdict: Mutex::new(None) })
    }

    /// The bytes of `dict.zr`.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The compression dictionary for `level`, prepared once per level.
    fn cdict(&self, level: i32) -> Arc<CDict<'static>> {
        let mut cached = self.cdict.lock().unwrap_or_else(|e| e.into_inner());
        match &*cached {
            Some((l, cdict)) if *l == level => cdict.clone(),
            _ => {
                let cdict = Arc::new(CDict::create(&self.bytes, level));
                *cached = Some((level, cdict.clone()));
                cdict
            }
        }
    }
}

/// How records of one append are encoded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Encoding<'d> {
    pub(crate) codec: Codec,
    pub(crate) level: i32,
    pub(crate) dict: Option<&'d Dictionary>,
    /// Store raw a record whose compression saves less than this fraction.
    pub(crate) min_saving: f64,
}

/// How one record ended up stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Encoded {
    pub(crate) phys: u32,
    pub(crate) logic: u32,
    pub(crate) codec: Codec,
    /// The stored bytes' sum (`sums.zr`), taken where they were made.
    pub(crate) sum: u32,
}

impl Encoded {
    /// A record stored as `stored`, `logic` bytes once decoded.
    pub(crate) fn new(stored: &[u8], logic: u32, codec: Codec) -> Encoded {
        Encoded { phys: stored.len() as u32, logic, codec, sum: super::sums::stored_sum(codec as u8, logic, stored) }
    }

    /// A raw record of `len` bytes whose sum is taken later (at the commit,
    /// while the chunk data syncs): `sum` is 0 until then.
    pub(crate) fn raw_unsummed(len: u32) -> Encoded {
        Encoded { phys: len, logic: len, codec: Codec::Raw, sum: 0 }
    }
}

/// Encoded records packed back to back.
#[derive(Debug, Default)]
pub(crate) struct Block {
    pub(crate) data: Vec<u8>,
    pub(crate) records: Vec<Encoded>,
}

thread_local! {
    static CCTX: RefCell<Option<(i32, CCtx<'static>)>> = const { RefCell::new(None) };
    static DCTX: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

fn zstd_error(code: usize) -> String {
    zstd_safe::get_error_name(code).to_string()
}

/// Encodes `records` into one block, its bytes in `buf` (cleared first;
/// a buffer reused from an earlier block keeps its capacity, and one with
/// room for [`block_bytes_max`] of the records never reallocates). Codec
/// `Raw` copies.
pub(crate) fn encode_block<'r>(
    records: impl Iterator<Item = &'r [u8]>,
    enc: Encoding<'_>,
    mut buf: Vec<u8>,
) -> Result<Block, String> {
    buf.clear();
    let mut block = Block { data: buf, records: Vec::new() };
    match enc.codec {
        Codec::Raw => {
            for record in records {
                push_raw(&mut block, record);
            }
        }
        Codec::Zstd => CCTX.with_borrow_mut(|cached| {
            if cached.as_ref().is_none_or(|(level, _)| *level != enc.level) {
                let mut cctx = CCtx::create();
                cctx.set_parameter(CParameter::CompressionLevel(enc.level)).map_err(zstd_error)?;
                set_frame_parameters(&mut cctx)?;
                *cached = Some((enc.level, cctx));
            }
            let (_, cctx) = cached.as_mut().expect("just set");
            for record in records {
                push_compressed(&mut block, record, enc, |dst, src| cctx.compress2(dst, src))?;
            }
            Ok::<(), String>(())
        })?,
        Codec::ZstdDict => {
            let dict = enc.dict.expect("checked by the caller");
            let cdict = dict.cdict(enc.level);
            let mut cctx = CCtx::create();
            cctx.ref_cdict(&cdict).map_err(zstd_error)?;
            set_frame_parameters(&mut cctx)?;
            for record in records {
                push_compressed(&mut block, record, enc, |dst, src| cctx.compress2(dst, src))?;
            }
        }
    }
    Ok(block)
}

/// The frame header fields every record gets: zstd's content checksum (a
/// damaged record is an error), and neither the content size nor the
/// dictionary id, which the table entry and the store already hold. The two
/// omissions save the 4 bytes the checksum costs, so a checksummed store is
/// no larger than the reference's; its decoder reads such frames (checked by
/// the interop test).
fn set_frame_parameters(cctx: &mut CCtx<'_>) -> Result<(), String> {
    cctx.set_parameter(CParameter::ChecksumFlag(true)).map_err(zstd_error)?;
    cctx.set_parameter(CParameter::ContentSizeFlag(false)).map_err(zstd_error)?;
    cctx.set_parameter(CParameter::DictIdFlag(false)).map_err(zstd_error)?;
    Ok(())
}

fn push_raw(block: &mut Block, record: &[u8]) {
    block.data.extend_from_slice(record);
    block.records.push(Encoded::new(record, record.len() as u32, Codec::Raw));
}

fn push_compressed(
    block: &mut Block,
    record: &[u8],
    enc: Encoding<'_>,
    mut compress: impl FnMut(&mut Cursor<&mut Vec<u8>>, &[u8]) -> zstd_safe::SafeResult,
) -> Result<(), String> {
    let start = block.data.len();
    // The frame goes into the spare capacity after `start`, without
    // zeroing it first: zstd's `WriteBuf` for a cursor over the vector sets
    // its length to `start + n` once the frame is written.
    block.data.reserve(zstd_safe::compress_bound(record.len()));
    let mut cursor = Cursor::new(&mut block.data);
    cursor.set_position(start as u64);
    let n = compress(&mut cursor, record).map_err(zstd_error)?;
    assert_eq!(block.data.len(), start + n, "zstd wrote the frame it reported");
    let worth = (n as f64) < record.len() as f64 * (1.0 - enc.min_saving) && n < record.len();
    if worth {
        let logic = record.len() as u32;
        block.records.push(Encoded::new(&block.data[start..], logic, enc.codec));
    } else {
        block.data.truncate(start);
        push_raw(block, record);
    }
    Ok(())
}

/// The most bytes [`encode_block`] writes for `records` of these lengths
/// with any codec.
pub(crate) fn block_bytes_max(lengths: impl Iterator<Item = usize>) -> usize {
    lengths.map(zstd_safe::compress_bound).sum()
}

/// The most bytes a single-shot zstd frame of `logic` bytes takes
/// (`ZSTD_compressBound`), whatever the level or dictionary: no stored
/// record this crate or the reference writes is longer.
pub(crate) fn frame_bytes_max(logic: u32) -> u64 {
    zstd_safe::compress_bound(logic as usize) as u64
}

/// Decodes stored bytes `src` of a record with `codec` into `dst`, whose
/// length is the record's logical length (already checked against the
/// entry). `dict` is required for `ZstdDict` (checked by the caller).
pub(crate) fn decode(codec: Codec, src: &[u8], dst: &mut [u8], dict: Option<&Dictionary>) -> Result<(), Corruption> {
    if codec == Codec::Raw {
        if src.len() != dst.len() {
            return Err(Corruption::RawLengthMismatch { phys: src.len() as u32, logic: dst.len() as u32 });
        }
        dst.copy_from_slice(src);
        return Ok(());
    }
    let got = DCTX.with_borrow_mut(|cached| {
        let dctx = cached.get_or_insert_with(DCtx::create);
        match (codec, dict) {
            (Codec::ZstdDict, Some(dict)) => dctx.decompress_using_ddict(dst, src, &dict.ddict),
            (Codec::ZstdDict, None) => unreachable!("checked by the caller"),
            _ => dctx.decompress(dst, src),
        }
    });
    match got {
        Ok(n) if n == dst.len() => Ok(()),
        Ok(n) => Err(Corruption::DecodedLength { got: n, want: dst.len() as u32 }),
        Err(code) => Err(Corruption::Decode(zstd_error(code))),
    }
}

/// Trains a dictionary of at most `max_bytes` from `samples`, the
/// concatenation of samples of the given `sizes`.
pub(crate) fn train(samples: &[u8], sizes: &[usize], max_bytes: usize) -> Result<Vec<u8>, String> {
    let total = sizes.iter().try_fold(0usize, |sum, &s| sum.checked_add(s));
    if total != Some(samples.len()) {
        return Err(format!("sample sizes add up to {total:?}, the samples are {} bytes", samples.len()));
    }
    let mut dict = Vec::with_capacity(max_bytes);
    zstd_safe::train_from_buffer(&mut dict, samples, sizes).map_err(zstd_error)?;
    Ok(dict)
}
