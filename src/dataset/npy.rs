//! A `.npy` file as a source of fixed-shape records: the header parsed by
//! `npyz`, the data read through a read-only mapping (the I/O boundary's
//! [`VfsFile::map_read`]), chunk by chunk, so a file larger than memory
//! converts: the kernel pages the mapping in as it is read and may drop
//! those pages again, nothing is copied to the heap but the dictionary sample.

use std::path::{Path, PathBuf};

use super::dtype::DType;
use super::error::DatasetError;
use crate::io::{OpenMode, ReadMap, Vfs, VfsFile};

/// Largest `.npy` header read (NumPy writes a few hundred bytes).
const NPY_HEADER_BYTES_MAX: u64 = 1 << 20;

/// An opened `.npy` file: `count` records of `record_shape`, C order,
/// starting at `data_offset`.
#[derive(Debug)]
pub(crate) struct NpyFile {
    path: PathBuf,
    /// Kept open for as long as the mapping is used.
    _file: Box<dyn VfsFile>,
    map: Box<dyn ReadMap>,
    data_offset: u64,
    pub(crate) dtype: DType,
    pub(crate) count: u64,
    pub(crate) record_shape: Vec<usize>,
    pub(crate) record_bytes: usize,
}

impl NpyFile {
    pub(crate) fn open(vfs: &dyn Vfs, path: &Path) -> Result<NpyFile, DatasetError> {
        let io = |op| move |source| DatasetError::Io { path: path.to_path_buf(), op, source };
        let bad = |reason: String| DatasetError::Npy { path: path.to_path_buf(), reason };
        let file = vfs.open(path, OpenMode::Read).map_err(io("open .npy"))?;
        let file_len = file.len().map_err(io("stat .npy"))?;
        let map_len = usize::try_from(file_len).map_err(|_| bad("file too large to map".into()))?;
        if map_len == 0 {
            return Err(bad("empty file, not a .npy file".into()));
        }
        let map = file.map_read(map_len).map_err(io("map .npy"))?;
        let head_len = file_len.min(NPY_HEADER_BYTES_MAX) as usize;
        let mut scratch = Vec::new();
        let head = map.bytes(0, head_len, &mut scratch).map_err(io("read .npy header"))?;
        let mut rest = head;
        let header =
            npyz::NpyHeader::from_reader(&mut rest).map_err(|e| bad(format!("not a readable .npy header: {e}")))?;
        let data_offset = (head.len() - rest.len()) as u64;
        if header.order() != npyz::Order::C {
            return Err(bad("Fortran-order array: save it C-contiguous (np.ascontiguousarray)".into()));
        }
        let dtype = match header.dtype() {
            npyz::DType::Plain(ty) => DType::parse(&ty.to_string())?,
            other => return Err(bad(format!("structured dtype {} is not supported", other.descr()))),
        };
        let shape: Vec<usize> = header
            .shape()
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<_, _>>()
            .map_err(|_| bad("dimension too large".into()))?;
        let Some((&count, record_shape)) = shape.split_first() else {
            return Err(bad("a 0-dimensional array has no sample axis".into()));
        };
        let record_bytes = record_shape
            .iter()
            .try_fold(dtype.itemsize(), |a, &d| a.checked_mul(d))
            .ok_or_else(|| bad("record size overflows".into()))?;
        let data_bytes = (count as u64).checked_mul(record_bytes as u64);
        if data_bytes.and_then(|b| b.checked_add(data_offset)).is_none_or(|end| end > file_len) {
            return Err(bad(format!(
                "the header describes {count} records of {record_bytes} bytes, more than the file holds (truncated?)"
            )));
        }
        Ok(NpyFile {
            path: path.to_path_buf(),
            _file: file,
            map,
            data_offset,
            dtype,
            count: count as u64,
            record_shape: record_shape.to_vec(),
            record_bytes,
        })
    }

    /// The bytes of records `start..start + n`, borrowed from the mapping
    /// (copied into `scratch` on a filesystem that cannot lend them).
    pub(crate) fn records<'a>(
        &'a self,
        start: u64,
        n: usize,
        scratch: &'a mut Vec<u8>,
    ) -> Result<&'a [u8], DatasetError> {
        let offset = self.data_offset + start * self.record_bytes as u64;
        let len = n * self.record_bytes;
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
