//! The input files of the file-based sources (JSONL, WebDataset tars, image
//! folders): opening and listing them through the I/O layer, reading one
//! front to back, and the fingerprint of their paths, sizes and
//! modification times that tells a rerun it resumes the same input.

use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::io::real::RealFs;
use crate::io::{FileKind, OpenMode, Vfs, VfsFile};

use super::error::ImportError;

/// The most rows a batch of a file source may be asked to hold (a batch
/// size from a caller never sizes an allocation unchecked: arrow-json
/// reserves room for a whole batch of rows up front).
pub const SOURCE_BATCH_ROWS_MAX: usize = 1 << 20;

/// The bytes of input a source reads ahead to decide its columns (JSON
/// lines, tar samples), at most: inference ends at this or at its count.
pub const SOURCE_INFER_BYTES_MAX: usize = 256 << 20;

/// Refuses a batch size of 0 or more than [`SOURCE_BATCH_ROWS_MAX`].
pub(crate) fn check_batch_rows(rows: usize) -> Result<(), ImportError> {
    if rows == 0 || rows > SOURCE_BATCH_ROWS_MAX {
        return Err(ImportError::InvalidArgument(format!(
            "batch_rows is {rows}: give from 1 to {SOURCE_BATCH_ROWS_MAX}"
        )));
    }
    Ok(())
}

/// One input file as it was when the source opened it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct InputFile {
    /// Its path, as the caller gave it or as a listing found it.
    pub path: PathBuf,
    /// Its length in bytes.
    pub len: u64,
    /// Its modification time, nanoseconds since the Unix epoch.
    pub modified: u128,
}

impl InputFile {
    /// Looks at the regular file at `path`.
    pub fn stat(path: &Path) -> Result<InputFile, ImportError> {
        let io_error = |op, source| ImportError::Io { path: path.to_path_buf(), op, source };
        let len = open(path)?.stat().map_err(|e| io_error("read the size of", e))?.len;
        let modified = RealFs::modified_nanos(path).map_err(|e| io_error("read the modification time of", e))?;
        Ok(InputFile { path: path.to_path_buf(), len, modified })
    }
}

/// Opens the regular file at `path` to read.
pub(crate) fn open(path: &Path) -> Result<Box<dyn VfsFile>, ImportError> {
    RealFs.open(path, OpenMode::Read).map_err(|source| ImportError::Io { path: path.to_path_buf(), op: "open", source })
}

/// What `path` is: a file, a directory, something else, or nothing.
pub(crate) fn kind(path: &Path) -> Result<Option<FileKind>, ImportError> {
    RealFs.kind(path).map_err(|source| ImportError::Io { path: path.to_path_buf(), op: "look at", source })
}

/// The names in the directory `dir`, sorted by their bytes.
pub(crate) fn list_sorted(dir: &Path) -> Result<Vec<String>, ImportError> {
    let mut names =
        RealFs.list_dir(dir).map_err(|source| ImportError::Io { path: dir.to_path_buf(), op: "list", source })?;
    names.sort_unstable();
    Ok(names)
}

/// Reads one file front to back with positional reads, counting the bytes.
#[derive(Debug)]
pub(crate) struct FileReader {
    file: Box<dyn VfsFile>,
    offset: u64,
}

impl FileReader {
    /// Reads `path` from its start.
    pub fn open(path: &Path) -> Result<FileReader, ImportError> {
        Ok(FileReader { file: open(path)?, offset: 0 })
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

impl Read for FileReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.offset)?;
        self.offset += n as u64;
        Ok(n)
    }
}

/// A digest of an input (its files and the options that shape its rows),
/// stable from one run and one build to the next: FNV-1a, 128 bits, over
/// length-prefixed fields. It tells a rerun it resumes the same input; it is
/// not a defence against a crafted collision.
#[derive(Clone, Debug)]
pub(crate) struct Fingerprint {
    kind: &'static str,
    hash: u128,
    files: u64,
    bytes: u64,
}

impl Fingerprint {
    const OFFSET: u128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d;
    const PRIME: u128 = 0x0000_0000_0100_0000_0000_0000_0000_013b;

    /// A fingerprint of a source of `kind` (`jsonl`, `webdataset`, ...).
    pub fn new(kind: &'static str) -> Fingerprint {
        let mut f = Fingerprint { kind, hash: Fingerprint::OFFSET, files: 0, bytes: 0 };
        f.text(kind);
        f
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.hash ^= u128::from(b);
            self.hash = self.hash.wrapping_mul(Fingerprint::PRIME);
        }
    }

    /// Adds a string (an option, a schema), length-prefixed.
    pub fn text(&mut self, text: &str) {
        self.bytes(&(text.len() as u64).to_le_bytes());
        self.bytes(text.as_bytes());
    }

    /// Adds a file: its path, size and modification time.
    pub fn file(&mut self, file: &InputFile) {
        self.text(&file.path.to_string_lossy());
        self.bytes(&file.len.to_le_bytes());
        self.bytes(&file.modified.to_le_bytes());
        self.files += 1;
        self.bytes += file.len;
    }

    /// The fingerprint: the kind, the files and bytes counted, the digest.
    pub fn finish(&self) -> String {
        format!("{} files={} bytes={} fnv128={:032x}", self.kind, self.files, self.bytes, self.hash)
    }
}
