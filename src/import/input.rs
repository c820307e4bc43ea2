//! The input files of every file source (Parquet, Arrow IPC, JSONL,
//! WebDataset tars, image folders), through the crate's I/O boundary
//! ([`Vfs`]): which files a source's inputs name (files, directories,
//! globs), the one [`Fingerprint`] that tells a rerun it resumes the same
//! input, a file read positionally as the Parquet crate's [`ChunkReader`]
//! and as `Read + Seek`, one schema across files, and the bounds a
//! caller's batch size and a source's read-ahead keep to.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_schema::SchemaRef;
use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

use super::error::ImportError;
use crate::io::{FileKind, OpenMode, Vfs, VfsFile, read_exact_at};

/// Bytes of a file's end that its fingerprint hashes where the filesystem
/// keeps no modification time (a Parquet file's footer, an IPC file's tail).
const TAIL_BYTES: u64 = 64 << 10;

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

/// An input file open for positional reads, its length and modification
/// time as it was when the source opened it.
#[derive(Clone, Debug)]
pub(crate) struct InputFile {
    /// Its path, as the caller gave it or as a listing found it.
    pub(crate) path: PathBuf,
    file: Arc<dyn VfsFile>,
    pub(crate) len: u64,
    /// Nanoseconds since the Unix epoch, where the filesystem keeps it.
    pub(crate) modified: Option<u64>,
    /// The content's stamp, where the filesystem keeps one ([`crate::io::Stat::version`]).
    pub(crate) version: Option<u64>,
    /// Bytes read through [`InputFile::reader`]s (for progress).
    read: Arc<AtomicU64>,
}

impl InputFile {
    /// `path` opened for reading.
    pub(crate) fn open(vfs: &dyn Vfs, path: &Path) -> Result<InputFile, ImportError> {
        let io = |op| move |source| ImportError::Io { path: path.to_path_buf(), op, source };
        if vfs.kind(path).map_err(io("stat"))? != Some(FileKind::File) {
            let source = io::Error::new(io::ErrorKind::InvalidInput, "not a regular file");
            return Err(io("open")(source));
        }
        let file: Arc<dyn VfsFile> = Arc::from(vfs.open(path, OpenMode::Read).map_err(io("open"))?);
        let stat = file.stat().map_err(io("stat"))?;
        let read = Arc::new(AtomicU64::new(0));
        Ok(InputFile {
            path: path.to_path_buf(),
            file,
            len: stat.len,
            modified: stat.modified,
            version: stat.version,
            read,
        })
    }

    /// The file's last [`TAIL_BYTES`] (at most), for a fingerprint where
    /// the filesystem keeps no modification time.
    fn tail(&self) -> Result<Vec<u8>, ImportError> {
        let n = self.len.min(TAIL_BYTES);
        let mut tail = vec![0u8; n as usize];
        read_exact_at(&*self.file, &mut tail, self.len - n).map_err(|source| ImportError::Io {
            path: self.path.clone(),
            op: "read",
            source,
        })?;
        Ok(tail)
    }

    /// `len` bytes at `offset`, checked to lie in the file (a length from
    /// untrusted bytes never sizes an allocation past the file).
    pub(crate) fn read_at(&self, offset: u64, len: u64) -> Result<Vec<u8>, ImportError> {
        let io = |source| ImportError::Io { path: self.path.clone(), op: "read", source };
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            let reason = format!("{len} bytes at {offset} asked of a file of {} bytes", self.len);
            return Err(io(io::Error::new(io::ErrorKind::UnexpectedEof, reason)));
        }
        let mut buf = vec![0u8; len as usize];
        read_exact_at(&*self.file, &mut buf, offset).map_err(io)?;
        self.read.fetch_add(len, Ordering::Relaxed);
        Ok(buf)
    }

    /// A reader from byte `start`, counting what it reads into [`InputFile::bytes_read`].
    pub(crate) fn reader(&self, start: u64) -> FileReader {
        FileReader { file: self.file.clone(), pos: start, len: self.len, read: self.read.clone() }
    }

    /// Bytes read so far through this file's readers.
    pub(crate) fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }
}

/// `Read + Seek` over an [`InputFile`] by positional reads.
#[derive(Debug)]
pub(crate) struct FileReader {
    file: Arc<dyn VfsFile>,
    pos: u64,
    len: u64,
    read: Arc<AtomicU64>,
}

impl FileReader {
    /// The byte of the file it reads next.
    pub(crate) fn offset(&self) -> u64 {
        self.pos
    }
}

impl Read for FileReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

impl Seek for FileReader {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "a seek before the start"))?;
        Ok(self.pos)
    }
}

impl Length for InputFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for InputFile {
    type T = io::BufReader<FileReader>;

    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        Ok(io::BufReader::new(self.reader(start)))
    }

    /// `length` bytes at `start`, checked to lie in the file first (the
    /// footer that asks is untrusted: it never sizes an allocation past
    /// the file).
    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        let end = start.checked_add(length as u64).filter(|&e| e <= self.len);
        if end.is_none() {
            return Err(ParquetError::EOF(format!("{length} bytes at {start} asked of a file of {} bytes", self.len)));
        }
        let mut buf = vec![0u8; length];
        read_exact_at(&*self.file, &mut buf, start).map_err(|e| ParquetError::External(Box::new(e)))?;
        self.read.fetch_add(length as u64, Ordering::Relaxed);
        Ok(Bytes::from(buf))
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

    /// A fingerprint of a source of `kind` (`parquet`, `jsonl`, ...).
    pub(crate) fn new(kind: &'static str) -> Fingerprint {
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
    pub(crate) fn text(&mut self, text: &str) {
        self.bytes(&(text.len() as u64).to_le_bytes());
        self.bytes(text.as_bytes());
    }

    /// Adds a file: its path, length, its modification time and content
    /// stamp (an object's entity tag) where the filesystem keeps them,
    /// else the bytes of its tail (read only then: a folder of a million
    /// images on a local disk reads none).
    pub(crate) fn file(&mut self, file: &InputFile) -> Result<(), ImportError> {
        self.text(&file.path.to_string_lossy());
        self.bytes(&file.len.to_le_bytes());
        if let Some(nanos) = file.modified {
            self.text("mtime");
            self.bytes(&nanos.to_le_bytes());
        }
        if let Some(version) = file.version {
            self.text("version");
            self.bytes(&version.to_le_bytes());
        }
        if file.modified.is_none() && file.version.is_none() {
            self.text("tail");
            self.bytes(&file.tail()?);
        }
        self.files += 1;
        self.bytes += file.len;
        Ok(())
    }

    /// The fingerprint: the kind, the files and bytes counted, the digest.
    pub(crate) fn finish(&self) -> String {
        format!("{} files={} bytes={} fnv128={:032x}", self.kind, self.files, self.bytes, self.hash)
    }
}

/// What `path` is: a file, a directory, something else, or nothing.
pub(crate) fn kind(vfs: &dyn Vfs, path: &Path) -> Result<Option<FileKind>, ImportError> {
    vfs.kind(path).map_err(|source| ImportError::Io { path: path.to_path_buf(), op: "look at", source })
}

/// The names in the directory `dir`, sorted by their bytes.
pub(crate) fn list_sorted(vfs: &dyn Vfs, dir: &Path) -> Result<Vec<String>, ImportError> {
    let mut names =
        vfs.list_dir(dir).map_err(|source| ImportError::Io { path: dir.to_path_buf(), op: "list", source })?;
    names.sort_unstable();
    Ok(names)
}

/// Schema `other` (of file `path`) equal to `first` (of `first_path`) in
/// column names and types; else [`ImportError::ColumnType`] naming both.
pub(crate) fn same_schema(
    first: &SchemaRef,
    other: &SchemaRef,
    first_path: &Path,
    path: &Path,
) -> Result<(), ImportError> {
    let names = |s: &SchemaRef| s.fields().iter().map(|f| f.name().clone()).collect::<Vec<_>>();
    if names(first) != names(other) {
        let column = names(first).into_iter().find(|n| !names(other).contains(n)).unwrap_or_default();
        return Err(ImportError::ColumnType {
            column,
            reason: format!(
                "{} has the columns {:?}, {} has {:?}: every file of an import has the same columns",
                path.display(),
                names(other),
                first_path.display(),
                names(first)
            ),
        });
    }
    for (a, b) in first.fields().iter().zip(other.fields()) {
        if a.data_type() != b.data_type() {
            return Err(ImportError::ColumnType {
                column: a.name().clone(),
                reason: format!(
                    "is {} in {}, {} in {}: a column keeps its type across the files",
                    b.data_type(),
                    path.display(),
                    a.data_type(),
                    first_path.display()
                ),
            });
        }
    }
    Ok(())
}

/// The files `inputs` name, each input in turn: a file as is, a directory's
/// files ending in `.ext` in sorted order, a glob (`*` and `?` in the last
/// component) its matches in sorted order. None at all is an error.
pub(crate) fn input_files(vfs: &dyn Vfs, inputs: &[PathBuf], ext: &str) -> Result<Vec<PathBuf>, ImportError> {
    let mut out = Vec::new();
    for input in inputs {
        let name = input.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let io = |op| move |source| ImportError::Io { path: input.clone(), op, source };
        let (dir, pattern) = if name.contains(['*', '?']) {
            (input.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")), name.to_string())
        } else if vfs.kind(input).map_err(io("stat"))? == Some(FileKind::Dir) {
            (input.as_path(), format!("*.{ext}"))
        } else {
            out.push(input.clone());
            continue;
        };
        let names = vfs.list_dir(dir).map_err(io("list the directory"))?;
        let mut found: Vec<PathBuf> = names
            .iter()
            .filter(|n| matches(pattern.as_bytes(), n.as_bytes()))
            .map(|n| dir.join(n))
            .filter(|p| vfs.kind(p).ok().flatten() == Some(FileKind::File))
            .collect();
        if found.is_empty() {
            return Err(ImportError::InvalidArgument(format!("no {} matches {}", pattern, dir.display())));
        }
        found.sort();
        out.extend(found);
    }
    if out.is_empty() {
        return Err(ImportError::InvalidArgument("no input file given".to_string()));
    }
    Ok(out)
}

/// A file name matches a pattern of `*` (any run) and `?` (any one byte).
fn matches(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n, mut star, mut mark) = (0, 0, None, 0);
    while n < name.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == name[n]) {
            (p, n) = (p + 1, n + 1);
        } else if p < pattern.len() && pattern[p] == b'*' {
            (star, mark, p) = (Some(p), n, p + 1);
        } else if let Some(s) = star {
            (p, mark) = (s + 1, mark + 1);
            n = mark;
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn globs_match_runs_and_single_bytes() {
        assert!(matches(b"*.parquet", b"a.parquet"));
        assert!(matches(b"part-?.parquet", b"part-1.parquet"));
        assert!(!matches(b"part-?.parquet", b"part-12.parquet"));
        assert!(!matches(b"*.parquet", b"a.parquet.tmp"));
        assert!(matches(b"*", b""));
    }
}
