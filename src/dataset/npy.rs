//! A `.npy` file as a source of fixed-shape records: the header parsed by
//! [`npy_header`](super::npy_header) and checked against the file here, the
//! data read through a read-only mapping (the I/O boundary's
//! [`VfsFile::map`]), chunk by chunk, so a file larger than memory
//! converts: the kernel pages the mapping in as it is read and may drop
//! those pages again, nothing is copied to the heap but the dictionary
//! sample.

use std::path::{Path, PathBuf};

use super::dtype::DType;
use super::error::DatasetError;
use super::npy_header::{Descr, HeaderDict, NPY_HEADER_BYTES_MAX, parse_header};
use crate::io::{FileKind, Map, MapMode, OpenMode, Vfs, VfsFile};

/// What a `.npy` file's header says, checked against the file: `count`
/// records of `record_shape` elements of `dtype` (`row_bytes` each), C
/// order, starting at `data_offset`, all within the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    /// The element type (`descr`).
    pub dtype: DType,
    /// Records: the first dimension of `shape`.
    pub count: u64,
    /// A record's shape: the other dimensions.
    pub record_shape: Vec<usize>,
    /// A record's size in bytes (0 when a dimension is 0).
    pub row_bytes: usize,
    /// Where the data starts: the header's end.
    pub data_offset: u64,
}

/// Reads and checks the header of the `.npy` file at `path`: what
/// [`write_dataset_npy`](super::write_dataset_npy) would convert, or the
/// error it would give for the file, without converting.
pub fn read_npy_header(path: impl AsRef<Path>) -> Result<NpyHeader, DatasetError> {
    read_npy_header_in(&crate::io::real::RealFs, path.as_ref())
}

/// Reads and checks the header of the `.npy` file at `path` on `vfs`: what
/// [`write_dataset_npy`](super::write_dataset_npy) would convert, or the
/// error it would give for the file, without converting.
pub fn read_npy_header_in(vfs: &dyn Vfs, path: &Path) -> Result<NpyHeader, DatasetError> {
    let file = NpyFile::open(vfs, path)?;
    Ok(NpyHeader {
        dtype: file.dtype,
        count: file.count,
        record_shape: file.record_shape.clone(),
        row_bytes: file.row_bytes,
        data_offset: file.data_offset,
    })
}

/// An opened `.npy` file: `count` records of `record_shape`, C order,
/// starting at `data_offset`.
#[derive(Debug)]
pub(crate) struct NpyFile {
    path: PathBuf,
    /// Kept open for as long as the mapping is used.
    _file: Box<dyn VfsFile>,
    map: Box<dyn Map>,
    data_offset: u64,
    pub(crate) dtype: DType,
    pub(crate) count: u64,
    pub(crate) record_shape: Vec<usize>,
    pub(crate) row_bytes: usize,
}

/// The records a parsed header describes: C order, a plain dtype, a
/// first axis, all within a file of `file_len` bytes.
fn checked_layout(dict: HeaderDict, file_len: u64) -> Result<NpyHeader, String> {
    if dict.fortran_order {
        return Err("Fortran-order array: save it C-contiguous (np.ascontiguousarray)".into());
    }
    let dtype = match &dict.descr {
        Descr::Plain(descr) => DType::parse(descr).map_err(|e| match e {
            DatasetError::UnknownDtype { dtype, reason } => format!("dtype {dtype:?}: {reason}"),
            e => e.to_string(),
        })?,
        Descr::Structured(fields) => {
            // The list as written, cut short: it may run to the header's 1 MiB.
            let shown: String = fields.chars().take(200).collect();
            let cut = if shown.len() < fields.len() { "..." } else { "" };
            return Err(format!("structured dtype {shown}{cut} is not supported"));
        }
    };
    let shape: Vec<usize> =
        dict.shape.iter().map(|&d| usize::try_from(d)).collect::<Result<_, _>>().map_err(|_| "dimension too large")?;
    let Some((&count, record_shape)) = shape.split_first() else {
        return Err("a 0-dimensional array has no sample axis".into());
    };
    let row_bytes = super::tensor::array_bytes(dtype, record_shape).map_err(|_| "record size overflows")?;
    let data_offset = dict.data_offset as u64;
    let data_bytes = (count as u64).checked_mul(row_bytes as u64);
    if data_bytes.and_then(|b| b.checked_add(data_offset)).is_none_or(|end| end > file_len) {
        return Err(format!(
            "the header describes {count} records of {row_bytes} bytes, more than the file holds (truncated?)"
        ));
    }
    Ok(NpyHeader { dtype, count: count as u64, record_shape: record_shape.to_vec(), row_bytes, data_offset })
}

impl NpyFile {
    pub(crate) fn open(vfs: &dyn Vfs, path: &Path) -> Result<NpyFile, DatasetError> {
        let io = |op| move |source| DatasetError::Io { path: path.to_path_buf(), op, source };
        let bad = |reason: String| DatasetError::Npy { path: path.to_path_buf(), reason };
        if vfs.kind(path).map_err(io("stat .npy"))? == Some(FileKind::Dir) {
            return Err(bad("is a directory, not a .npy file".into()));
        }
        let file = vfs.open(path, OpenMode::Read).map_err(io("open .npy"))?;
        let file_len = file.stat().map_err(io("stat .npy"))?.len;
        let map_len = usize::try_from(file_len).map_err(|_| bad("file too large to map".into()))?;
        if map_len == 0 {
            return Err(bad("empty file, not a .npy file".into()));
        }
        let map = file.map(map_len, MapMode::Read).map_err(io("map .npy"))?;
        let head_len = file_len.min(NPY_HEADER_BYTES_MAX) as usize;
        let mut scratch = Vec::new();
        let head = map.bytes(0, head_len, &mut scratch).map_err(io("read .npy header"))?;
        let header = parse_header(head).and_then(|dict| checked_layout(dict, file_len)).map_err(bad)?;
        let NpyHeader { dtype, count, record_shape, row_bytes, data_offset } = header;
        Ok(NpyFile { path: path.to_path_buf(), _file: file, map, data_offset, dtype, count, record_shape, row_bytes })
    }

    /// The bytes of records `start..start + n`, borrowed from the mapping
    /// (copied into `scratch` on a filesystem that cannot lend them).
    pub(crate) fn records<'a>(
        &'a self,
        start: u64,
        n: usize,
        scratch: &'a mut Vec<u8>,
    ) -> Result<&'a [u8], DatasetError> {
        let offset = self.data_offset + start * self.row_bytes as u64;
        let len = n * self.row_bytes;
        if len == 0 {
            return Ok(&[]);
        }
        self.map.bytes(offset, len, scratch).map_err(|source| DatasetError::Io {
            path: self.path.clone(),
            op: "read .npy data",
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dict(descr: Descr, fortran_order: bool, shape: &[u64]) -> HeaderDict {
        HeaderDict { descr, fortran_order, shape: shape.to_vec(), data_offset: 128 }
    }

    #[test]
    fn a_layout_is_c_order_plain_and_within_the_file() {
        let f4 = || Descr::Plain("<f4".into());
        let ok = checked_layout(dict(f4(), false, &[3, 2]), 128 + 24).unwrap();
        assert_eq!((ok.count, ok.record_shape.as_slice(), ok.row_bytes, ok.data_offset), (3, &[2][..], 8, 128));
        for (header, file_len, why) in [
            (dict(f4(), true, &[3, 2]), 1 << 20, "Fortran-order"),
            (dict(f4(), false, &[]), 1 << 20, "0-dimensional"),
            (dict(f4(), false, &[3, 2]), 128 + 23, "more than the file holds"),
            (dict(f4(), false, &[2, 1 << 62]), u64::MAX, "record size overflows"),
            (dict(f4(), false, &[1 << 62, 2]), u64::MAX, "more than the file holds"),
            (dict(Descr::Plain("<M8[ns]".into()), false, &[1]), 1 << 20, "dtype \"<M8[ns]\""),
        ] {
            let err = checked_layout(header, file_len).unwrap_err();
            assert!(err.contains(why), "{err}");
        }
    }

    #[test]
    fn a_long_structured_descr_is_named_cut_short() {
        let fields = format!("[{}]", "('a', '<f4'), ".repeat(10_000));
        let err = checked_layout(dict(Descr::Structured(fields), false, &[1]), 1 << 20).unwrap_err();
        assert!(err.starts_with("structured dtype [('a', '<f4'),") && err.ends_with("... is not supported"), "{err}");
        assert!(err.len() < 300, "{} bytes", err.len());
    }
}
