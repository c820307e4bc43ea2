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

/// What a `.npy` file's header says, checked against the file: `count`
/// records of `record_shape` elements of `dtype` (`record_bytes` each), C
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
    pub record_bytes: usize,
    /// Where the data starts: the header's end.
    pub data_offset: u64,
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
        record_bytes: file.record_bytes,
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
    map: Box<dyn ReadMap>,
    data_offset: u64,
    pub(crate) dtype: DType,
    pub(crate) count: u64,
    pub(crate) record_shape: Vec<usize>,
    pub(crate) record_bytes: usize,
}

/// Where the header text of a `.npy` file starts and the length its length
/// field gives it, for the versions `npyz` reads (1.0: a 16-bit field; 2.0
/// and 3.0: 32-bit). `None` for a prefix `npyz` refuses before it reads a
/// length (no magic, another version, cut before the field).
fn header_text_field(head: &[u8]) -> Option<(usize, usize)> {
    const MAGIC: &[u8] = b"\x93NUMPY";
    if !head.starts_with(MAGIC) {
        return None;
    }
    match (head.get(6)?, head.get(7)?) {
        (1, 0) => Some((10, u16::from_le_bytes([*head.get(8)?, *head.get(9)?]) as usize)),
        (2, 0) | (3, 0) => Some((12, u32::from_le_bytes(head.get(8..12)?.try_into().ok()?) as usize)),
        _ => None,
    }
}

/// Checks the header before `npyz` parses it, for what would allocate, hang
/// or overflow inside the parser: a length field that runs past `head` (the
/// file's first bytes, at most [`NPY_HEADER_BYTES_MAX`]; `npyz` allocates a
/// buffer of the field's size before reading into it, up to 4 GiB from a
/// 12-byte file), bracket nesting deeper than [`NPY_HEADER_NESTING_MAX`]
/// (F5), and integers outside quotes whose product overflows `u64` (F4:
/// `npyz` multiplies the shape's dimensions unchecked). In a header NumPy
/// writes, those integers are the shape's dimensions, so their product is
/// the element count. A header this function cannot locate is left to
/// `npyz`, which refuses it before reading a length.
fn precheck_header(head: &[u8]) -> Result<(), String> {
    let Some((text_at, text_len)) = header_text_field(head) else { return Ok(()) };
    let Some(text) = text_at.checked_add(text_len).and_then(|end| head.get(text_at..end)) else {
        return Err(format!(
            "the header length field says {text_len} bytes, past the end of the file or the \
             {NPY_HEADER_BYTES_MAX}-byte header limit ({} bytes after the length field)",
            head.len() - text_at.min(head.len())
        ));
    };
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

    #[test]
    fn precheck_refuses_a_header_length_past_the_bytes_read() {
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
        let mut v1 = header(dict);
        v1[8..10].copy_from_slice(&(dict.len() as u16 + 1).to_le_bytes());
        assert!(precheck_header(&v1).unwrap_err().contains(&format!("says {} bytes", dict.len() + 1)));
        // Version 2.0: a 32-bit field, 0xFFFF_FFFE in a 12-byte file.
        let v2 = b"\x93NUMPY\x02\x00\xfe\xff\xff\xff";
        let err = precheck_header(v2).unwrap_err();
        assert!(err.contains("says 4294967294 bytes") && err.contains("(0 bytes after"), "{err}");
        // Exactly the bytes there are passes; cut before the field is left to npyz.
        assert_eq!(precheck_header(&header(dict)), Ok(()));
        assert_eq!(header_text_field(b"\x93NUMPY\x02\x00\xfe\xff"), None);
        assert_eq!(header_text_field(b"\x93NUMPY\x04\x00\xfe\xff\xff\xff"), None);
    }
}
