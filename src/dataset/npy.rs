//! A `.npy` file as a source of fixed-shape records: the header parsed by
//! `npyz`, the data read through a read-only mapping (the I/O boundary's
//! [`VfsFile::map_read`]), chunk by chunk, so a file larger than memory
//! converts: the kernel pages the mapping in as it is read and may drop
//! those pages again, nothing is copied to the heap but the dictionary sample.

use std::path::{Path, PathBuf};

use super::dtype::DType;
use super::error::DatasetError;
use crate::io::{FileKind, OpenMode, ReadMap, Vfs, VfsFile};

/// Largest `.npy` header read (NumPy writes a few hundred bytes).
const NPY_HEADER_BYTES_MAX: u64 = 1 << 20;

/// Deepest bracket nesting accepted in a header. NumPy's own headers nest
/// two levels (`{'shape': (..)}`), a structured dtype a few more; `npyz`'s
/// parser takes time exponential in the depth (fuzzing finding F5).
const NPY_HEADER_NESTING_MAX: usize = 8;

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

/// Checks the header text before `npyz` parses it, for what would hang or
/// overflow inside the parser: bracket nesting deeper than
/// [`NPY_HEADER_NESTING_MAX`] (F5), and integers outside quotes whose
/// product overflows `u64` (F4: `npyz` multiplies the shape's dimensions
/// unchecked). In a header NumPy writes, those integers are the shape's
/// dimensions, so their product is the element count. A header this
/// function cannot locate is left to `npyz`, which refuses it.
fn precheck_header(head: &[u8]) -> Result<(), String> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    if head.len() < 10 || !head.starts_with(MAGIC) {
        return Ok(());
    }
    let (text_at, text_len) = match head[6] {
        1 => (10usize, u16::from_le_bytes([head[8], head[9]]) as usize),
        _ if head.len() >= 12 => (12, u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize),
        _ => return Ok(()),
    };
    let text = &head[text_at..head.len().min(text_at.saturating_add(text_len))];
    let (mut depth, mut quote, mut escaped) = (0usize, None, false);
    let (mut number, mut in_number, mut product) = (0u64, false, 1u64);
    let mut end_number = |number: u64, in_number: &mut bool| -> Result<(), String> {
        if std::mem::take(in_number) && number != 0 {
            product = product.checked_mul(number).ok_or("the shape's element count overflows 64 bits")?;
        }
        Ok(())
    };
    for &byte in text {
        if let Some(q) = quote {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                _ if byte == q => quote = None,
                _ => {}
            }
            continue;
        }
        if byte.is_ascii_digit() {
            let digit = u64::from(byte - b'0');
            number = if in_number { number.checked_mul(10).and_then(|n| n.checked_add(digit)) } else { Some(digit) }
                .ok_or("a dimension overflows 64 bits")?;
            in_number = true;
            continue;
        }
        end_number(number, &mut in_number)?;
        match byte {
            b'\'' | b'"' => quote = Some(byte),
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > NPY_HEADER_NESTING_MAX {
                    return Err(format!("header nests brackets deeper than {NPY_HEADER_NESTING_MAX} levels"));
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    end_number(number, &mut in_number)
}

impl NpyFile {
    pub(crate) fn open(vfs: &dyn Vfs, path: &Path) -> Result<NpyFile, DatasetError> {
        let io = |op| move |source| DatasetError::Io { path: path.to_path_buf(), op, source };
        let bad = |reason: String| DatasetError::Npy { path: path.to_path_buf(), reason };
        if vfs.kind(path).map_err(io("stat .npy"))? == Some(FileKind::Dir) {
            return Err(bad("is a directory, not a .npy file".into()));
        }
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
        precheck_header(head).map_err(bad)?;
        let mut rest = head;
        let header =
            npyz::NpyHeader::from_reader(&mut rest).map_err(|e| bad(format!("not a readable .npy header: {e}")))?;
        let data_offset = (head.len() - rest.len()) as u64;
        if header.order() != npyz::Order::C {
            return Err(bad("Fortran-order array: save it C-contiguous (np.ascontiguousarray)".into()));
        }
        let dtype = match header.dtype() {
            npyz::DType::Plain(ty) => DType::parse(&ty.to_string()).map_err(|e| match e {
                DatasetError::UnknownDtype { dtype, reason } => bad(format!("dtype {dtype:?}: {reason}")),
                e => e,
            })?,
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
        let record_bytes =
            super::tensor::array_bytes(dtype, record_shape).map_err(|_| bad("record size overflows".into()))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A version 1.0 `.npy` header around `dict`.
    fn header(dict: &str) -> Vec<u8> {
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out
    }

    #[test]
    fn precheck_passes_what_numpy_writes() {
        for dict in [
            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
            "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 4294967296, 4294967295), }",
            "{'descr': [('a', '<f4', (2,)), ('b', [('c', '<i8')])], 'fortran_order': False, 'shape': (7,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551615,), }",
            // Brackets and digits inside quotes count for nothing.
            "{'descr': '((((((((((99999999999999999999', 'fortran_order': False, 'shape': (1,), }",
        ] {
            assert_eq!(precheck_header(&header(dict)), Ok(()), "{dict}");
        }
    }

    #[test]
    fn precheck_refuses_what_would_overflow_or_hang_npyz() {
        let deep = format!("{}{}", "[".repeat(54), "]".repeat(54));
        for (dict, why) in [
            ("{'shape': (4294967296, 4294967296), }", "element count"),
            ("{'shape': (0, 4294967296, 4294967296), }", "element count"),
            ("{'shape': (18446744073709551616,), }", "dimension"),
            (deep.as_str(), "deeper than 8"),
            ("{'a': ((((((((1,),),),),),),),)}", "deeper than 8"),
        ] {
            let err = precheck_header(&header(dict)).unwrap_err();
            assert!(err.contains(why), "{dict}: {err}");
        }
    }
}
