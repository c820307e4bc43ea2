//! Export (`docs/import.md`, "Export"): a table back out as Arrow record batches
//! ([`TableBatches`]), and those batches as a Parquet or Arrow IPC file
//! ([`export_file`]), so that a user's data is never held in this format
//! alone. The type mapping is `arrow_types.rs`.
//!
//! Batches are read in row order through the columns' batched gathers, each
//! bounded by [`ExportOptions::batch_rows`] and
//! [`ExportOptions::batch_bytes`]. A file is written beside its name as
//! `DEST.tmp`, synced, and renamed into place only when complete, so an
//! export that fails or is killed leaves no partial file under the name.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, RecordBatchOptions, RecordBatchReader};
use arrow_buffer::MutableBuffer;
use arrow_schema::{ArrowError, Schema, SchemaRef};

use super::arrow_types::ColumnLayout;
use super::error::ImportError;
use crate::io::{OpenMode, SyncKind, Vfs, VfsFile};
use crate::table::{ColumnType, Table, TableColumn};

/// What to export, and in what batches.
#[derive(Clone, Debug)]
pub struct ExportOptions {
    /// The columns, in this order; `None` for all, in the table's order.
    pub columns: Option<Vec<String>>,
    /// Rows per batch at most (at least 1).
    pub batch_rows: usize,
    /// Bytes of values per batch at most (a batch holds at least one row).
    pub batch_bytes: usize,
}

impl Default for ExportOptions {
    fn default() -> ExportOptions {
        ExportOptions { columns: None, batch_rows: 65_536, batch_bytes: 64 << 20 }
    }
}

/// One exported column: how it maps, and its dataset.
#[derive(Clone, Debug)]
struct Exported {
    layout: ColumnLayout,
    column: TableColumn,
}

/// A table's committed rows as Arrow record batches, in row order. Owns
/// its columns' datasets, so it outlives the [`Table`] it came from.
#[derive(Debug)]
pub struct TableBatches {
    columns: Vec<Exported>,
    schema: SchemaRef,
    next: u64,
    rows: u64,
    batch_rows: u64,
    batch_bytes: u64,
}

impl TableBatches {
    /// The batches of `table`'s committed rows, of the columns `opts` selects.
    pub fn new(table: &Table, opts: &ExportOptions) -> Result<TableBatches, ImportError> {
        if opts.batch_rows == 0 || opts.batch_bytes == 0 {
            return Err(ImportError::InvalidArgument("batch_rows and batch_bytes must be at least 1".to_string()));
        }
        let columns = selected(table, opts.columns.as_deref())?;
        let fields = columns.iter().map(|c| c.layout.field()).collect::<Result<Vec<_>, _>>()?;
        Ok(TableBatches {
            columns,
            schema: Arc::new(Schema::new(fields)),
            next: 0,
            rows: table.rows(),
            batch_rows: opts.batch_rows as u64,
            batch_bytes: opts.batch_bytes as u64,
        })
    }

    /// The schema of every batch.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Rows in all.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Rows already returned.
    pub fn rows_done(&self) -> u64 {
        self.next
    }

    /// These batches as an Arrow [`RecordBatchReader`] (for the Arrow C
    /// stream and other Arrow consumers); an error becomes
    /// [`ArrowError::ExternalError`].
    pub fn into_reader(self) -> impl RecordBatchReader + Send + 'static {
        Reader(self)
    }

    /// The end of the next batch: within `batch_rows`, and within
    /// `batch_bytes` unless one row alone is larger.
    fn batch_end(&self) -> Result<u64, ImportError> {
        let end = self.rows.min(self.next.saturating_add(self.batch_rows));
        let fixed: u64 = self.columns.iter().map(|c| fixed_row_bytes(&c.column)).sum();
        let indices: Vec<u64> = (self.next..end).collect();
        let mut row_bytes = vec![fixed; indices.len()];
        for exported in &self.columns {
            if let TableColumn::Ragged(d) = &exported.column {
                let counts = d.row_counts(&indices).map_err(read_error)?;
                for (bytes, count) in row_bytes.iter_mut().zip(counts) {
                    *bytes = bytes.saturating_add(count.saturating_mul(d.row_bytes() as u64));
                }
            }
        }
        let mut total = 0u64;
        let fit = row_bytes.iter().take_while(|&&b| {
            total = total.saturating_add(b);
            total <= self.batch_bytes
        });
        Ok(self.next + (fit.count() as u64).max(1))
    }

    /// The batch of rows `start..end`.
    fn batch(&self, start: u64, end: u64) -> Result<RecordBatch, ImportError> {
        let indices: Vec<u64> = (start..end).collect();
        let arrays = self.columns.iter().map(|c| column_array(c, &indices)).collect::<Result<Vec<ArrayRef>, _>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(indices.len()));
        RecordBatch::try_new_with_options(self.schema.clone(), arrays, &options)
            .map_err(|e| ImportError::InvalidArgument(format!("assembling rows {start}..{end}: {e}")))
    }
}

impl Iterator for TableBatches {
    type Item = Result<RecordBatch, ImportError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.rows {
            return None;
        }
        let batch = self.batch_end().and_then(|end| Ok((end, self.batch(self.next, end)?)));
        match batch {
            Ok((end, batch)) => {
                self.next = end;
                Some(Ok(batch))
            }
            Err(e) => {
                self.next = self.rows; // no batch after an error
                Some(Err(e))
            }
        }
    }
}

/// [`TableBatches`] as a [`RecordBatchReader`].
struct Reader(TableBatches);

impl Iterator for Reader {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        Some(self.0.next()?.map_err(|e| ArrowError::ExternalError(Box::new(e))))
    }
}

impl RecordBatchReader for Reader {
    fn schema(&self) -> SchemaRef {
        self.0.schema()
    }
}

/// The columns `names` selects of `table` (all if `None`), each once.
fn selected(table: &Table, names: Option<&[String]>) -> Result<Vec<Exported>, ImportError> {
    let all: Vec<Exported> = table.columns().map(|(name, kind, column)| exported(name, kind, column)).collect();
    let Some(names) = names else { return Ok(all) };
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let Some(found) = all.iter().find(|c| &c.layout.name == name) else {
            let known: Vec<&str> = all.iter().map(|c| c.layout.name.as_str()).collect();
            return Err(ImportError::InvalidArgument(format!(
                "no column {name:?} in {}; it has {known:?}",
                table.path().display()
            )));
        };
        if out.iter().any(|c: &Exported| &c.layout.name == name) {
            return Err(ImportError::InvalidArgument(format!("column {name:?} selected twice")));
        }
        out.push(found.clone());
    }
    Ok(out)
}

fn exported(name: &str, kind: ColumnType, column: &TableColumn) -> Exported {
    let (dtype, shape) = match column {
        TableColumn::Fixed(d) => (d.dtype(), d.shape().to_vec()),
        TableColumn::Ragged(d) => (d.dtype(), d.item_shape().to_vec()),
    };
    Exported { layout: ColumnLayout { name: name.to_string(), kind, dtype, shape }, column: column.clone() }
}

fn fixed_row_bytes(column: &TableColumn) -> u64 {
    match column {
        TableColumn::Fixed(d) => d.row_bytes() as u64,
        TableColumn::Ragged(_) => 0,
    }
}

/// A column that could not be read (the dataset's error names its path).
fn read_error(e: crate::dataset::DatasetError) -> ImportError {
    ImportError::Table(e.into())
}

/// Rows `indices` of one column as an Arrow array: a fixed column gathered
/// straight into the Arrow buffer, a ragged one packed, then its values
/// moved into one (a single copy).
fn column_array(c: &Exported, indices: &[u64]) -> Result<ArrayRef, ImportError> {
    let name = &c.layout.name;
    match &c.column {
        TableColumn::Fixed(d) => {
            let len = d.row_bytes().checked_mul(indices.len());
            let len = len.ok_or_else(|| ImportError::InvalidArgument(format!("column {name:?}: batch too large")))?;
            let mut buffer = MutableBuffer::from_len_zeroed(len);
            d.gather_bytes(indices, buffer.as_slice_mut()).map_err(read_error)?;
            c.layout.fixed_array(buffer.into(), indices.len())
        }
        TableColumn::Ragged(d) => {
            let packed = d.gather(indices).map_err(read_error)?;
            let bytes = packed.values.as_bytes();
            let mut values = MutableBuffer::from_len_zeroed(bytes.len());
            values.as_slice_mut().copy_from_slice(bytes);
            c.layout.ragged_array(values.into(), &packed.row_splits, indices.first().copied().unwrap_or(0))
        }
    }
}

/// A file format to export to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Parquet, its pages compressed by the codec.
    Parquet(ParquetCodec),
    /// The Arrow IPC file format (Feather v2), uncompressed.
    Ipc,
}

impl ExportFormat {
    /// The format `path`'s extension names: `.parquet` / `.pq` (zstd),
    /// `.arrow` / `.feather` / `.ipc`.
    pub fn of_path(path: &Path) -> Result<ExportFormat, ImportError> {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        match ext.as_str() {
            "parquet" | "pq" => Ok(ExportFormat::Parquet(ParquetCodec::default())),
            "arrow" | "feather" | "ipc" => Ok(ExportFormat::Ipc),
            _ => Err(ImportError::InvalidArgument(format!(
                "{}: name the output .parquet or .arrow (the format is taken from the extension)",
                path.display()
            ))),
        }
    }
}

/// A Parquet file's page codec. The default is zstd at level 1: about
/// as fast to write as snappy and smaller, and read by every Parquet
/// reader in use (pyarrow, Spark, DuckDB, polars).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParquetCodec {
    /// No compression.
    None,
    /// Snappy.
    Snappy,
    /// Zstandard at a level (1 to 22).
    Zstd(i32),
    /// LZ4 (the raw block format, `LZ4_RAW`).
    Lz4,
    /// Gzip at its default level.
    Gzip,
}

impl Default for ParquetCodec {
    fn default() -> ParquetCodec {
        ParquetCodec::Zstd(1)
    }
}

impl ParquetCodec {
    /// Parses `none`, `snappy`, `zstd`, `zstd:LEVEL`, `lz4`, `gzip`.
    pub fn parse(text: &str) -> Result<ParquetCodec, ImportError> {
        let bad = || {
            ImportError::InvalidArgument(format!(
                "unknown Parquet codec {text:?}: use none, snappy, zstd, zstd:LEVEL (1-22), lz4 or gzip"
            ))
        };
        Ok(match text {
            "none" => ParquetCodec::None,
            "snappy" => ParquetCodec::Snappy,
            "zstd" => ParquetCodec::default(),
            "lz4" => ParquetCodec::Lz4,
            "gzip" => ParquetCodec::Gzip,
            _ => {
                let level = text.strip_prefix("zstd:").and_then(|l| l.parse::<i32>().ok()).ok_or_else(bad)?;
                if !(1..=22).contains(&level) {
                    return Err(bad());
                }
                ParquetCodec::Zstd(level)
            }
        })
    }

    fn compression(self) -> parquet::basic::Compression {
        use parquet::basic::{Compression, GzipLevel, ZstdLevel};
        match self {
            ParquetCodec::None => Compression::UNCOMPRESSED,
            ParquetCodec::Snappy => Compression::SNAPPY,
            ParquetCodec::Zstd(level) => Compression::ZSTD(ZstdLevel::try_new(level).unwrap_or_default()),
            ParquetCodec::Lz4 => Compression::LZ4_RAW,
            ParquetCodec::Gzip => Compression::GZIP(GzipLevel::default()),
        }
    }
}

/// What an export wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportSummary {
    /// Rows written.
    pub rows: u64,
    /// Bytes of the file.
    pub bytes: u64,
}

/// Writes `table`'s committed rows (the columns `opts` selects) to `dest`
/// as `format`: to `DEST.tmp`, synced, then renamed to `dest`. `progress`
/// is called after each batch with the rows and file bytes so far.
pub fn export_file(
    table: &Table,
    dest: &Path,
    format: ExportFormat,
    opts: &ExportOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<ExportSummary, ImportError> {
    let vfs: Arc<dyn Vfs> = Arc::new(crate::io::real::RealFs);
    let batches = TableBatches::new(table, opts)?;
    let tmp = tmp_path(dest);
    let out = FileOut::create(vfs.clone(), &tmp)?;
    let written = match format {
        ExportFormat::Parquet(codec) => write_parquet(batches, out, codec, &tmp, progress),
        ExportFormat::Ipc => write_ipc(batches, out, &tmp, progress),
    };
    let summary = match written.and_then(|(out, rows)| Ok(ExportSummary { rows, bytes: out.finish()? })) {
        Ok(summary) => summary,
        Err(e) => {
            let _ = vfs.remove_file(&tmp);
            return Err(e);
        }
    };
    let io = |op| move |source| ImportError::Io { path: dest.to_path_buf(), op, source };
    vfs.rename(&tmp, dest).map_err(io("rename the finished export to"))?;
    vfs.sync_dir(dest.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
        .map_err(io("sync the directory of"))?;
    Ok(summary)
}

/// `DEST.tmp`, beside `dest`.
pub fn tmp_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    dest.with_file_name(name)
}

fn write_parquet(
    batches: TableBatches,
    out: FileOut,
    codec: ParquetCodec,
    path: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(FileOut, u64), ImportError> {
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;
    let failed = |e: parquet::errors::ParquetError| write_error(path, e.to_string());
    let props = WriterProperties::builder().set_compression(codec.compression()).build();
    let mut writer = ArrowWriter::try_new(out, batches.schema(), Some(props)).map_err(failed)?;
    let mut rows = 0;
    for batch in batches {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        writer.write(&batch).map_err(failed)?;
        progress(rows, writer.bytes_written() as u64);
    }
    Ok((writer.into_inner().map_err(failed)?, rows))
}

fn write_ipc(
    batches: TableBatches,
    out: FileOut,
    path: &Path,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(FileOut, u64), ImportError> {
    let failed = |e: ArrowError| write_error(path, e.to_string());
    let mut writer = arrow_ipc::writer::FileWriter::try_new(out, &batches.schema()).map_err(failed)?;
    let mut rows = 0;
    for batch in batches {
        let batch = batch?;
        rows += batch.num_rows() as u64;
        writer.write(&batch).map_err(failed)?;
        progress(rows, writer.get_ref().written);
    }
    writer.finish().map_err(failed)?;
    Ok((writer.into_inner().map_err(failed)?, rows))
}

fn write_error(path: &Path, reason: String) -> ImportError {
    ImportError::Io { path: path.to_path_buf(), op: "write", source: std::io::Error::other(reason) }
}

/// An output file written front to back through the filesystem boundary,
/// in 1 MiB writes.
struct FileOut {
    path: PathBuf,
    file: Box<dyn VfsFile>,
    buf: Vec<u8>,
    /// Bytes handed to the file.
    flushed: u64,
    /// Bytes written in all (`flushed` plus the buffer).
    written: u64,
}

const FILE_OUT_BUFFER: usize = 1 << 20;

impl FileOut {
    /// An empty file at `path` (a stale one from a killed export removed).
    fn create(vfs: Arc<dyn Vfs>, path: &Path) -> Result<FileOut, ImportError> {
        let io = |op| move |source| ImportError::Io { path: path.to_path_buf(), op, source };
        match vfs.remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io("remove the stale")(e)),
            _ => {}
        }
        let file = vfs.open(path, OpenMode::Create).map_err(io("create"))?;
        let buf = Vec::with_capacity(FILE_OUT_BUFFER);
        Ok(FileOut { path: path.to_path_buf(), file, buf, flushed: 0, written: 0 })
    }

    /// Flushes and syncs; the file's length.
    fn finish(mut self) -> Result<u64, ImportError> {
        let path = self.path.clone();
        let io = |op| {
            let path = path.clone();
            move |source| ImportError::Io { path, op, source }
        };
        self.flush().map_err(io("write"))?;
        self.file.sync(SyncKind::All).map_err(io("sync"))?;
        Ok(self.written)
    }
}

impl Write for FileOut {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.buf.len() + data.len() > FILE_OUT_BUFFER {
            self.flush()?;
        }
        if data.len() >= FILE_OUT_BUFFER {
            write_all_at(&*self.file, data, self.flushed)?;
            self.flushed += data.len() as u64;
        } else {
            self.buf.extend_from_slice(data);
        }
        self.written += data.len() as u64;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        write_all_at(&*self.file, &self.buf, self.flushed)?;
        self.flushed += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }
}

fn write_all_at(file: &dyn VfsFile, mut data: &[u8], mut offset: u64) -> std::io::Result<()> {
    while !data.is_empty() {
        let n = file.write_at(data, offset)?;
        if n == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::WriteZero, "the file took no bytes"));
        }
        data = &data[n..];
        offset += n as u64;
    }
    Ok(())
}
