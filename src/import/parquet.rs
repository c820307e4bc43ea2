//! [`ParquetSource`]: Parquet files (a file, a directory of them, or a
//! glob), read in order with the `parquet` crate's Arrow reader in batches
//! of bounded rows. Every file's footer is read when the source opens: the
//! files must share one schema, and the row counts give the progress's
//! total and let a resumed import skip whole files and row groups.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_reader::ArrowReaderMetadata;

use super::error::{ImportError, Position};
use super::input::{Fingerprint, InputFile, input_files, same_schema};
use super::parquet_decode::{Decoding, units};
use super::source::Source;
use crate::io::Vfs;

/// Rows per batch unless the caller says.
pub const BATCH_ROWS_DEFAULT: usize = 8192;
/// The values a batch holds at most, about (see `batch_rows`).
const BATCH_BYTES: u64 = 64 << 20;
/// Decoded batches held ready by all the decoders, about.
const READ_AHEAD_BYTES: u64 = 256 << 20;
/// The most decoding threads a source starts.
pub const DECODE_THREADS_MAX: usize = 16;

/// One input file and its footer.
pub(super) struct ParquetFile {
    pub(super) input: InputFile,
    pub(super) metadata: ArrowReaderMetadata,
}

impl ParquetFile {
    /// Its rows by the footer, which [`ParquetSource::open_in`] checked
    /// against its row groups'.
    fn rows(&self) -> u64 {
        self.metadata.metadata().file_metadata().num_rows().max(0) as u64
    }
}

/// Parquet files as a [`Source`]: the row groups decoded on
/// [`ParquetSource::with_threads`] threads ([`decode`]), delivered in order.
pub struct ParquetSource {
    files: Arc<Vec<ParquetFile>>,
    schema: SchemaRef,
    batch_rows: usize,
    threads: usize,
    fingerprint: String,
    /// Rows to skip (a resumed import's), applied when decoding starts.
    to_skip: u64,
    /// The decoders, from the first batch on.
    decoding: Option<Decoding>,
    /// The file being delivered, and its rows delivered.
    at: (usize, u64),
    /// Bytes of the files delivered to their end, or skipped.
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
            let file = ParquetFile { input, metadata };
            check_rows(&file)?;
            files.push(file);
        }
        let fingerprint = print.finish();
        let schema = files[0].metadata.schema().clone();
        for file in &files[1..] {
            same_schema(&schema, file.metadata.schema(), &files[0].input.path, &file.input.path)?;
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(DECODE_THREADS_MAX);
        Ok(ParquetSource {
            files: Arc::new(files),
            schema,
            batch_rows,
            threads,
            fingerprint,
            to_skip: 0,
            decoding: None,
            at: (0, 0),
            bytes_done: 0,
        })
    }

    /// Decodes on `threads` threads (1 to [`DECODE_THREADS_MAX`]; by
    /// default the cores, at most that). The batches and their order do
    /// not depend on it.
    pub fn with_threads(mut self, threads: usize) -> ParquetSource {
        self.threads = threads.clamp(1, DECODE_THREADS_MAX);
        self
    }

    /// Starts the decoders on the row groups past the rows to skip.
    fn start(&mut self) -> &mut Decoding {
        let units = units(&self.files, self.to_skip);
        let first = units.first().map_or(self.files.len(), |u| u.file);
        self.bytes_done = self.files[..first].iter().map(|f| f.input.len).sum();
        self.at = (first, units.first().map_or(0, |u| u.row));
        let depth = read_ahead(&self.files, self.batch_rows, self.threads);
        self.decoding.insert(Decoding::start(self.files.clone(), units, self.batch_rows, self.threads, depth))
    }
}

/// Refuses a footer whose row count is not its row groups'.
fn check_rows(file: &ParquetFile) -> Result<(), ImportError> {
    let groups = file.metadata.metadata().row_groups();
    let sum = groups.iter().map(|g| g.num_rows().max(0) as u64).fold(0u64, u64::saturating_add);
    if sum != file.rows() {
        let reason = format!("the footer counts {} rows, its row groups {sum}", file.rows());
        return Err(bad(&file.input.path, Position::File, reason));
    }
    Ok(())
}

/// Rows in a batch of `file`: at most `rows`, and at most about
/// [`BATCH_BYTES`] of values by the row groups' uncompressed sizes (a file
/// of 100 KB images read 8,192 rows at a time would hold 800 MB a batch).
/// The footer's sizes are untrusted: they only shrink a batch, never below
/// one row.
pub(super) fn batch_rows(file: &ParquetFile, rows: usize) -> usize {
    rows.min((BATCH_BYTES / row_bytes(file).max(1)).max(1) as usize)
}

/// The uncompressed bytes of a row of `file`, by its footer (untrusted).
fn row_bytes(file: &ParquetFile) -> u64 {
    let groups = file.metadata.metadata().row_groups();
    let bytes: u64 = groups.iter().map(|g| g.total_byte_size().max(0) as u64).fold(0, u64::saturating_add);
    bytes / file.rows().max(1)
}

/// Batches each decoder holds ready: [`READ_AHEAD_BYTES`] shared by the
/// decoders, by the largest batch the footers announce; 1 to 4.
fn read_ahead(files: &[ParquetFile], rows: usize, threads: usize) -> usize {
    let batch = files.iter().map(|f| batch_rows(f, rows) as u64 * row_bytes(f)).max().unwrap_or(0);
    (READ_AHEAD_BYTES / threads as u64 / batch.max(1)).clamp(1, 4) as usize
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
        let within = match self.files.get(self.at.0) {
            Some(file) if file.rows() > 0 => (file.input.len as u128 * self.at.1 as u128 / file.rows() as u128) as u64,
            _ => 0,
        };
        self.bytes_done + within
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ImportError> {
        let decoding = match self.decoding.as_mut() {
            Some(decoding) => decoding,
            None => self.start(),
        };
        let Some((unit, batch)) = decoding.next()? else {
            self.bytes_done = self.files.iter().map(|f| f.input.len).sum();
            self.at = (self.files.len(), 0);
            return Ok(None);
        };
        if unit.file != self.at.0 {
            self.bytes_done += self.files[self.at.0..unit.file].iter().map(|f| f.input.len).sum::<u64>();
            self.at = (unit.file, unit.row);
        }
        self.at.1 += batch.num_rows() as u64;
        Ok(Some(batch))
    }

    fn skip(&mut self, rows: u64) -> Result<(), ImportError> {
        if self.decoding.is_some() {
            return Err(ImportError::InvalidArgument("a Parquet source skips before its first batch".to_string()));
        }
        let total: u64 = self.files.iter().map(ParquetFile::rows).sum::<u64>() - self.to_skip;
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
pub(super) fn bad(path: &Path, at: Position, e: impl std::fmt::Display) -> ImportError {
    ImportError::BadInput { path: path.to_path_buf(), at, reason: format!("{e}") }
}
