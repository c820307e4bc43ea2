//! [`ParquetSource`]: Parquet files (a file, a directory of them, or a
//! glob), read in order with the `parquet` crate's Arrow reader in batches
//! of bounded rows. Every file's footer is read when the source opens: the
//! files must share one schema, and the row counts give the progress's
//! total and let a resumed import skip whole files and row groups.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};

use super::error::{ImportError, Position};
use super::input::{Fingerprint, InputFile, input_files, same_schema};
use super::source::Source;
use crate::io::Vfs;

/// Rows per batch unless the caller says.
pub const BATCH_ROWS_DEFAULT: usize = 8192;
/// The values a batch holds at most, about (see `batch_rows`).
const BATCH_BYTES: u64 = 64 << 20;

/// One input file and its footer.
struct ParquetFile {
    input: InputFile,
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
        ParquetSource::open_in(Arc::new(crate::io::real::RealFs), inputs, batch_rows)
    }

    /// [`ParquetSource::open`] on any filesystem implementation.
    pub fn open_in(vfs: Arc<dyn Vfs>, inputs: &[PathBuf], batch_rows: usize) -> Result<ParquetSource, ImportError> {
        if batch_rows == 0 {
            return Err(ImportError::InvalidArgument("batch rows must be at least 1".to_string()));
        }
        let paths = input_files(&*vfs, inputs, "parquet")?;
        let mut files = Vec::with_capacity(paths.len());
        let mut print = Fingerprint::new("parquet");
        for path in paths {
            let input = InputFile::open(&*vfs, &path)?;
            let metadata =
                ArrowReaderMetadata::load(&input, Default::default()).map_err(|e| ImportError::BadInput {
                    path: path.clone(),
                    at: Position::File,
                    reason: format!("not a readable Parquet file: {e}"),
                })?;
            print.file(&input)?;
            files.push(ParquetFile { input, metadata });
        }
        let fingerprint = print.finish();
        let schema = files[0].metadata.schema().clone();
        for file in &files[1..] {
            same_schema(&schema, file.metadata.schema(), &files[0].input.path, &file.input.path)?;
        }
        Ok(ParquetSource { files, schema, batch_rows, fingerprint, next: 0, reading: None, to_skip: 0, bytes_done: 0 })
    }

    /// Opens the next file past the rows still to skip; `false` at the end.
    fn open_next(&mut self) -> Result<bool, ImportError> {
        while let Some(file) = self.files.get(self.next) {
            self.next += 1;
            if self.to_skip >= file.rows() {
                self.to_skip -= file.rows();
                self.bytes_done += file.input.len;
                continue;
            }
            let mut builder =
                ParquetRecordBatchReaderBuilder::new_with_metadata(file.input.clone(), file.metadata.clone())
                    .with_batch_size(batch_rows(file, self.batch_rows));
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
            let reader = builder.build().map_err(|e| bad(&file.input.path, Position::File, e))?;
            self.reading = Some(Reading { reader, row: self.to_skip });
            self.to_skip = 0;
            return Ok(true);
        }
        Ok(false)
    }
}

/// Rows in a batch of `file`: at most `rows`, and at most about
/// [`BATCH_BYTES`] of values by the row groups' uncompressed sizes (a file
/// of 100 KB images read 8,192 rows at a time would hold 800 MB a batch).
/// The footer's sizes are untrusted: they only shrink a batch, never below
/// one row.
fn batch_rows(file: &ParquetFile, rows: usize) -> usize {
    let groups = file.metadata.metadata().row_groups();
    let bytes: u64 = groups.iter().map(|g| g.total_byte_size().max(0) as u64).fold(0, u64::saturating_add);
    let per_row = bytes / file.rows().max(1);
    rows.min((BATCH_BYTES / per_row.max(1)).max(1) as usize)
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
        Some(self.files.iter().map(|f| f.input.len).sum())
    }

    fn bytes_read(&self) -> u64 {
        let within = match (&self.reading, self.next.checked_sub(1).and_then(|k| self.files.get(k))) {
            (Some(reading), Some(file)) if file.rows() > 0 => {
                (file.input.len as u128 * reading.row as u128 / file.rows() as u128) as u64
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
                Some(Err(e)) => return Err(bad(&file.input.path, Position::Row(reading.row), e)),
                None => {
                    if reading.row != file.rows() {
                        let reason =
                            format!("the footer counts {} rows, the row groups gave {}", file.rows(), reading.row);
                        return Err(ImportError::BadInput {
                            path: file.input.path.clone(),
                            at: Position::File,
                            reason,
                        });
                    }
                    self.bytes_done += file.input.len;
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
