//! Import and export (cargo feature `arrow`, [docs/import.md]): a source
//! of rows (Parquet, Arrow IPC, JSONL, WebDataset tars, image folders, or
//! any Arrow stream) into a table (`crate::table`), and a table back out.
//!
//! Every source is a [`Source`]: Arrow record batches of one schema, in an
//! order fixed by its input, so that a resumed import skips exactly the
//! rows the table already committed. The column mapping (Arrow types to
//! the table's column kinds and back), the commit cadence and resumption
//! are the importer's, written once for every source.
//!
//! [docs/import.md]: https://github.com/loaderx/loaderx/blob/main/docs/import.md

mod arrow_types;
mod error;
mod export;
mod imagefolder;
mod importer;
mod input;
mod ipc;
mod jsonl;
mod mapping;
mod open;
mod parquet;
mod parquet_decode;
mod source;
mod webdataset;

pub use arrow_types::TENSOR_EXTENSION;
pub use error::{ImportError, Position};
pub use export::{ExportFormat, ExportOptions, ExportSummary, ParquetCodec, TableBatches, export_file};
pub use imagefolder::{IMAGE_EXTENSIONS, ImageFolderOptions, ImageFolderSource, write_classes};
pub use importer::{IMPORT_ZSTD_LEVEL, ImportOptions, ImportSummary, Progress, import, import_in};
pub use input::{SOURCE_BATCH_ROWS_MAX, SOURCE_INFER_BYTES_MAX};
pub use ipc::IpcSource;
pub use jsonl::{JSONL_BATCH_BYTES_MAX, JSONL_LINE_BYTES_MAX, JsonlOptions, JsonlSource};
pub use mapping::{ColumnOptions, Converted, Cut, Mapping, kind_codec};
pub use open::{FORMAT_NAMES, Format, Opened, SourceOptions, detect_format, open_source, open_source_in};
pub use parquet::{BATCH_ROWS_DEFAULT, DECODE_THREADS_MAX, ParquetSource};
pub use source::Source;
pub use webdataset::{KEY_COLUMN, WebDatasetOptions, WebDatasetSource, expand_braces};
