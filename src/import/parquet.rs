//! [`ParquetSource`]: Parquet files (a file, a directory of them, or a
//! glob), read in order with the `parquet` crate's Arrow reader in batches
//! of bounded rows. Every file's footer is read when the source opens: the
//! files must share one schema, and the row counts give the progress's
//! total and let a resumed import skip whole files and row groups.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use super::error::{ImportError, Position};
use super::source::Source;

/// Rows per batch unless the caller says.
pub const BATCH_ROWS_DEFAULT: usize = 8192;

/// One input file: its path, size and footer.
struct ParquetFile {
    path: PathBuf,
    size: u64,
    metadata: ArrowReaderMetadata,
}

impl ParquetFile {
    fn rows(&self) -> u64 {
        self.metadata.metadata().file_metadata().num_rows().max(0) as u64
    }
}

/// The file being read: its reader and the file's row it is at.
struct Reading {
    reader: ParquetRecordBatchReader,
    row: u64,
}

/// Parquet files as a [`Source`].
pub struct ParquetSource {
    files: Vec<ParquetFile>,
    schema: SchemaRef,
    batch_rows: usize,
    fingerprint: String,
    /// The next file to open.
    next: usize,
    reading: Option<Reading>,
    /// Rows still to skip (a resumed import's), applied as files open.
    to_skip: u64,
    /// Bytes of the files read to their end.
    bytes_done: u64,
}

impl ParquetSource {
    /// The Parquet files `inputs` name (files, directories of `.parquet`
    /// files, globs like `dir/*.parquet`), in batches of `batch_rows`.
    pub fn open(inputs: &[PathBuf], batch_rows: usize) -> Result<ParquetSource, ImportError> {
        if batch_rows == 0 {
            return Err(ImportError::InvalidArgument("batch rows must be at least 1".to_string()));
        }
        let paths = input_files(inputs, "parquet")?;
        let mut files = Vec::with_capacity(paths.len());
        let mut fingerprint = String::from("parquet\n");
        for path in paths {
            let (file, size, stamp) = open_file(&path)?;
            let metadata = ArrowReaderMetadata::load(&file, Default::default()).map_err(|e| ImportError::BadInput {
                path: path.clone(),
                at: Position::File,
                reason: format!("not a readable Parquet file: {e}"),
            })?;
            fingerprint.push_str(&format!("{}\t{size}\t{stamp}\n", path.display()));
            files.push(ParquetFile { path, size, metadata });
        }
        let schema = files[0].metadata.schema().clone();
        for file in &files[1..] {
            same_schema(&schema, file.metadata.schema(), &files[0].path, &file.path)?;
        }
        Ok(ParquetSource { files, schema, batch_rows, fingerprint, next: 0, reading: None, to_skip: 0, bytes_done: 0 })
    }

    /// Opens the next file past the rows still to skip; `false` at the end.
    fn open_next(&mut self) -> Result<bool, ImportError> {
        while let Some(file) = self.files.get(self.next) {
            self.next += 1;
            if self.to_skip >= file.rows() {
                self.to_skip -= file.rows();
                self.bytes_done += file.size;
                continue;
            }
            let (handle, _, _) = open_file(&file.path)?;
            let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(handle, file.metadata.clone())
                .with_batch_size(self.batch_rows);
            let (mut groups, mut row) = (Vec::new(), 0u64);
            for (k, group) in file.metadata.metadata().row_groups().iter().enumerate() {
                let n = group.num_rows().max(0) as u64;
                if groups.is_empty() && row + n <= self.to_skip {
                    row += n;
                } else {
                    groups.push(k);
                }
            }
            let within = self.to_skip - row;
            builder = builder.with_row_groups(groups).with_offset(within as usize);
            let reader = builder.build().map_err(|e| bad(&file.path, Position::File, e))?;
            self.reading = Some(Reading { reader, row: self.to_skip });
            self.to_skip = 0;
            return Ok(true);
        }
        Ok(false)
    }
}

impl Source for ParquetSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn rows_hint(&self) -> Option<u64> {
        Some(self.files.iter().map(ParquetFile::rows).sum())
    }

    fn bytes_hint(&self) -> Option<u64> {
        Some(self.files.iter().map(|f| f.size).sum())
    }

    fn bytes_read(&self) -> u64 {
        let within = match (&self.reading, self.next.checked_sub(1).and_then(|k| self.files.get(k))) {
            (Some(reading), Some(file)) if file.rows() > 0 => {
                (file.size as u128 * reading.row as u128 / file.rows() as u128) as u64
            }
            _ => 0,
        };
        self.bytes_done + within
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ImportError> {
        loop {
            if self.reading.is_none() && !self.open_next()? {
                return Ok(None);
            }
            let file = &self.files[self.next - 1];
            let reading = self.reading.as_mut().expect("a file is open");
            match reading.reader.next() {
                Some(Ok(batch)) => {
                    reading.row += batch.num_rows() as u64;
                    return Ok(Some(batch));
                }
                Some(Err(e)) => return Err(bad(&file.path, Position::Row(reading.row), e)),
                None => {
                    if reading.row != file.rows() {
                        let reason =
                            format!("the footer counts {} rows, the row groups gave {}", file.rows(), reading.row);
                        return Err(ImportError::BadInput { path: file.path.clone(), at: Position::File, reason });
                    }
                    self.bytes_done += file.size;
                    self.reading = None;
                }
            }
        }
    }

    fn skip(&mut self, rows: u64) -> Result<(), ImportError> {
        if self.reading.is_some() {
            return Err(ImportError::InvalidArgument("a Parquet source skips before its first batch".to_string()));
        }
        let total: u64 = self.files[self.next..].iter().map(ParquetFile::rows).sum();
        if rows > total {
            return Err(ImportError::InvalidArgument(format!(
                "the input has {total} rows, fewer than the {rows} the table already holds from it: it changed \
                 since the import began"
            )));
        }
        self.to_skip += rows;
        Ok(())
    }
}

/// A malformed file's error.
fn bad(path: &Path, at: Position, e: impl std::fmt::Display) -> ImportError {
    ImportError::BadInput { path: path.to_path_buf(), at, reason: format!("{e}") }
}

/// `path` opened, with its size and modification time (nanoseconds).
pub(crate) fn open_file(path: &Path) -> Result<(File, u64, u128), ImportError> {
    let io = |op| move |source| ImportError::Io { path: path.to_path_buf(), op, source };
    let file = File::open(path).map_err(io("open"))?;
    let meta = file.metadata().map_err(io("stat"))?;
    let stamp = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
    Ok((file, meta.len(), stamp.map_or(0, |d| d.as_nanos())))
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
pub(crate) fn input_files(inputs: &[PathBuf], ext: &str) -> Result<Vec<PathBuf>, ImportError> {
    let mut out = Vec::new();
    for input in inputs {
        let name = input.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let (dir, pattern) = if name.contains(['*', '?']) {
            (input.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")), name.to_string())
        } else if input.is_dir() {
            (input.as_path(), format!("*.{ext}"))
        } else {
            out.push(input.clone());
            continue;
        };
        let entries = std::fs::read_dir(dir).map_err(|source| ImportError::Io {
            path: dir.to_path_buf(),
            op: "list the directory",
            source,
        })?;
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_str().is_some_and(|n| matches(pattern.as_bytes(), n.as_bytes())))
            .map(|e| e.path())
            .filter(|p| p.is_file())
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
