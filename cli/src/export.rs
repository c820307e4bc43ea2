//! `export`: a table's committed rows to a Parquet or Arrow IPC file
//! through the library's [`export_file`]: written as `DEST.tmp` and
//! renamed into place when complete, so a killed export leaves no partial
//! file under the name. The bar moves after each batch.

use std::path::Path;
use std::time::Instant;

use loaderx::import::{ExportFormat, ExportOptions, ParquetCodec, export_file};
use loaderx::table::Table;

use crate::CliResult;
use crate::out::{CliError, Json, MIB, human, per_second, print, progress_bar, table};

/// What `export` writes.
pub struct Target {
    /// The columns, in order (`None`: all).
    pub columns: Option<Vec<String>>,
    pub batch_rows: usize,
    /// The Parquet codec (`None`: the default, zstd level 1).
    pub compression: Option<String>,
}

pub fn run(table_dir: &Path, dest: &Path, target: Target, json: bool) -> CliResult<()> {
    let format = match (ExportFormat::of_path(dest)?, target.compression.as_deref()) {
        (ExportFormat::Parquet(_), Some(codec)) => ExportFormat::Parquet(ParquetCodec::parse(codec)?),
        (ExportFormat::Ipc, Some(_)) => {
            return Err(CliError::new("--compression applies to a .parquet output only").into());
        }
        (format, None) => format,
    };
    let source = Table::open(table_dir)?;
    let opts = ExportOptions { columns: target.columns, batch_rows: target.batch_rows, ..ExportOptions::default() };
    let started = Instant::now();
    let bar = progress_bar(source.rows(), "export", false);
    let summary = export_file(&source, dest, format, &opts, &mut |rows, _| {
        if let Some(bar) = &bar {
            bar.set_position(rows);
        }
    })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let elapsed = started.elapsed();
    let columns = opts.columns.map_or(source.columns().count(), |c| c.len());
    let rows_s = per_second(summary.rows as f64, elapsed);
    let mib_s = per_second(summary.bytes as f64 / MIB, elapsed);
    let format_name = match format {
        ExportFormat::Parquet(codec) => format!("parquet ({})", codec_name(codec)),
        ExportFormat::Ipc => "arrow ipc".to_string(),
    };
    let text = if json {
        let mut text = Json::object()
            .field("table", table_dir.to_string_lossy().as_ref())
            .field("output", dest.to_string_lossy().as_ref())
            .field("format", format_name)
            .field("rows", summary.rows)
            .field("columns", columns as u64)
            .field("bytes", summary.bytes)
            .field("seconds", elapsed.as_secs_f64())
            .field("rows_per_s", rows_s)
            .finish();
        text.push('\n');
        text
    } else {
        table(&[
            ("output", format!("{} ({format_name})", dest.display())),
            ("rows", format!("{} of {columns} columns", summary.rows)),
            ("bytes", human(summary.bytes)),
            ("time", format!("{:.3} s", elapsed.as_secs_f64())),
            ("throughput", format!("{rows_s:.0} rows/s, {mib_s:.1} MiB/s written")),
        ])
    };
    print(&text)?;
    Ok(())
}

fn codec_name(codec: ParquetCodec) -> String {
    match codec {
        ParquetCodec::None => "uncompressed".to_string(),
        ParquetCodec::Snappy => "snappy".to_string(),
        ParquetCodec::Zstd(level) => format!("zstd level {level}"),
        ParquetCodec::Lz4 => "lz4".to_string(),
        ParquetCodec::Gzip => "gzip".to_string(),
    }
}
