//! `.npy` files from the fuzzer's bytes: magic, version, header length and
//! header dict each right or not, then data bytes the shape covers or not.
//! `schema` reads their headers ([`read_npy_header_in`]: a typed error, or
//! exactly what an honest header says, within the file); `convert` converts
//! them ([`write_dataset_npy_in`], with each codec; for `zstd_dict` a
//! dictionary trained on the file's records): a typed error, or a dataset of
//! the header's record count whose records are the file's data. Both on the
//! simulated filesystem.

use loaderx::dataset::{
    DType, Dataset, WRITE_CHUNK_BYTES_DEFAULT, WriteOptions, read_npy_header_in, write_dataset_npy_in,
};
use loaderx::{Codec, Options, Zrecord};

use crate::input::In;
use crate::schema::{DTYPES, verbose};
use crate::store::{Disk, FileModel};

/// The `convert` target.
pub fn convert(data: &[u8]) {
    crate::in_pool(|| convert_npy(&mut In::new(data)));
}

/// The record count of a generated `.npy` header whose records are 0 bytes, at most.
const ZERO_SIZE_RECORDS_MAX: u64 = 1 << 16;

/// The data of a `.npy` file whose header `schema` reads, at most: the
/// decoder reads at most 1 MiB of header, and on the simulated filesystem
/// (no mapping to borrow) copies what it reads.
const HEADER_DATA_MAX: usize = 64 << 10;

/// The data of a `.npy` file `convert` converts, at most (with calls of
/// 1 KiB, 64 appends).
const CONVERT_DATA_MAX: usize = 64 << 10;

/// What a header as NumPy writes it (magic, length field and dict) says.
struct Honest {
    descr: String,
    fortran: bool,
    dims: Vec<u64>,
    data_at: usize,
}

/// A `.npy` file up to its data: magic, version, header length and header
/// dict each right or not. Returns those bytes, the data's length (the
/// shape's bytes up to `data_max`, or another length: covering the shape or
/// not) and what the header says when it is honest.
fn npy_bytes(u: &mut In, data_max: usize) -> (Vec<u8>, usize, Option<Honest>) {
    if u.below(8) == 0 {
        return (u.bytes(1024), 0, None);
    }
    let mut honest = true;
    let descr = if u.below(8) == 0 {
        String::from_utf8_lossy(&u.bytes(6)).replace(['\'', '\\'], "")
    } else {
        DTYPES[u.below(DTYPES.len() as u64) as usize].to_string()
    };
    let mut dims: Vec<u64> = (0..u.below(4)).map(|_| if u.below(8) == 0 { u.u64() } else { u.below(6) }).collect();
    if dims.iter().skip(1).any(|&d| d == 0) {
        // Records of 0 bytes: any count fits the file, and a conversion
        // writes a table entry per record (16 bytes each, in memory on the
        // simulated filesystem). Counts past this take no other path.
        dims[0] = dims[0].min(ZERO_SIZE_RECORDS_MAX);
    }
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    };
    let fortran = if u.below(8) == 0 { "True" } else { "False" };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}");
    if u.below(16) == 0 {
        dict = String::from_utf8_lossy(&u.bytes(64)).into_owned();
        honest = false;
    }
    let version = match u.below(8) {
        0 => [2, 0],
        1 => [3, 0],
        2 => [u.u8(), u.u8()],
        _ => [1, 0],
    };
    honest &= matches!(version, [1..=3, 0]);
    let wide = version[0] >= 2;
    let prefix = 6 + 2 + if wide { 4 } else { 2 };
    let mut header = dict.into_bytes();
    while (prefix + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut len = header.len() as u32;
    if u.below(16) == 0 {
        len = u.u32();
        honest = false;
    }
    let mut out = b"\x93NUMPY".to_vec();
    if u.below(32) == 0 {
        out[1] = b'X';
        honest = false;
    }
    out.extend_from_slice(&version);
    if wide {
        out.extend_from_slice(&len.to_le_bytes());
    } else {
        out.extend_from_slice(&(len as u16).to_le_bytes());
    }
    out.extend_from_slice(&header);
    let data_at = out.len();
    let data_len = match u.below(8) {
        0 => u.upto(4096),
        _ => {
            let itemsize = DType::parse(&descr).map_or(4, |d| d.itemsize()) as u64;
            array_bytes(itemsize, &dims).unwrap_or(0).min(data_max as u64) as usize
        }
    };
    let fortran = fortran == "True";
    (out, data_len, honest.then_some(Honest { descr, fortran, dims, data_at }))
}

/// A `.npy` file converted with one of the codecs: a typed error, or a
/// dataset of the header's record count whose records are the file's data.
fn convert_npy(u: &mut In) {
    let (mut bytes, data_len, honest) = npy_bytes(u, CONVERT_DATA_MAX);
    bytes.extend(u.content(data_len));
    let disk = Disk::new();
    disk.mkdir(&Disk::dir());
    disk.put("in.npy", &FileModel::whole(bytes.clone()));
    let ds_dir = Disk::dir().join("ds");
    let codec = [Codec::Raw, Codec::Zstd, Codec::ZstdDict][u.below(3) as usize];
    // Calls of the default 64 MiB, or small ones: a conversion in several appends.
    let chunk_bytes = if u.bool() { 1024 << u.below(4) } else { WRITE_CHUNK_BYTES_DEFAULT };
    let opts = WriteOptions { chunk_bytes, ..WriteOptions::codec(codec) };
    let converted = write_dataset_npy_in(disk.vfs.clone(), &ds_dir, &Disk::dir().join("in.npy"), &opts);
    let count = match converted {
        Ok(count) => count,
        Err(e) => {
            if verbose() {
                eprintln!("npy refused: {e}");
            }
            disk.assert_no_fault();
            return;
        }
    };
    if verbose() {
        eprintln!("npy converted: {count} records");
    }
    // A valid dataset: every record is the matching slice of the data.
    let ds = Dataset::open_in(disk.vfs.clone(), &ds_dir).expect("a converted dataset opens");
    assert_eq!(ds.len(), count);
    let rb = ds.row_bytes();
    let all: Vec<u64> = (0..count.min(256)).collect();
    let batch = ds.gather(&all).expect("a converted dataset reads");
    assert_eq!(batch.as_bytes().len(), all.len() * rb);
    if let Some(at) = honest.map(|h| h.data_at) {
        assert_eq!(batch.as_bytes(), &bytes[at..at + all.len() * rb], "converted records differ from the data");
    }
    let store = Zrecord::open_in(disk.vfs.clone(), &ds_dir, Options { read_only: true, ..Options::default() });
    let _ = store.map(|s| s.verify().map(|r| assert!(r.is_ok(), "{:?}", r.problems)));
    disk.assert_no_fault();
}

/// A `.npy` file's header read: a typed error, or a layout within the file
/// whose record size is the dtype's times the record shape's; for an honest
/// header, exactly its dimensions, dtype size and data offset, and no error
/// when it is [`readable`].
pub(crate) fn header(u: &mut In) {
    // The data is a hole: the decoder reads only the header, and checks it
    // against the file's length.
    let (bytes, data_len, honest) = npy_bytes(u, HEADER_DATA_MAX);
    let file_len = (bytes.len() + data_len) as u64;
    let disk = Disk::new();
    disk.mkdir(&Disk::dir());
    disk.put("in.npy", &FileModel { pieces: vec![(0, bytes)], len: file_len });
    let h = match read_npy_header_in(&*disk.vfs, &Disk::dir().join("in.npy")) {
        Ok(h) => h,
        Err(e) => {
            if verbose() {
                eprintln!("npy refused: {e}");
            }
            if let Some(honest) = honest.filter(|h| readable(h, file_len)) {
                panic!("{e}: refused a readable header ({} {:?})", honest.descr, honest.dims);
            }
            disk.assert_no_fault();
            return;
        }
    };
    let record_shape: Vec<u64> = h.record_shape.iter().map(|&d| d as u64).collect();
    let row_bytes = array_bytes(h.dtype.itemsize() as u64, &record_shape);
    assert_eq!(row_bytes, Some(h.row_bytes as u64), "record size of {h:?}");
    let end = h.count.checked_mul(h.row_bytes as u64).and_then(|n| n.checked_add(h.data_offset));
    assert!(end.is_some_and(|end| end <= file_len), "{h:?} runs past the file's {file_len} bytes");
    if let Some(honest) = honest {
        assert_eq!(h.data_offset, honest.data_at as u64, "data offset");
        let dims: Vec<u64> = std::iter::once(h.count).chain(record_shape.iter().copied()).collect();
        assert_eq!(dims, honest.dims, "the header's shape");
        if let Ok(dtype) = DType::parse(&honest.descr) {
            assert_eq!(h.dtype.itemsize(), dtype.itemsize(), "{} read as {}", honest.descr, h.dtype);
        }
    }
    disk.assert_no_fault();
}

/// Whether an honest header describes what a reader must accept: a dtype
/// this crate has, C order, a first axis, and data within the file.
fn readable(h: &Honest, file_len: u64) -> bool {
    let Ok(dtype) = DType::parse(&h.descr) else { return false };
    if h.fortran || h.dims.is_empty() {
        return false;
    }
    let record = array_bytes(dtype.itemsize() as u64, &h.dims[1..]);
    let end = record.and_then(|r| r.checked_mul(h.dims[0])).and_then(|b| b.checked_add(h.data_at as u64));
    end.is_some_and(|e| e <= file_len)
}

/// The bytes of an array of `dims` of `itemsize`-byte elements: 0 when a
/// dimension is 0, else the product, `None` past `u64` (the harness's own
/// arithmetic, independent of the crate's).
fn array_bytes(itemsize: u64, dims: &[u64]) -> Option<u64> {
    if dims.contains(&0) {
        return Some(0);
    }
    dims.iter().try_fold(itemsize, |a, &d| a.checked_mul(d))
}
