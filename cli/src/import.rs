//! `import`: Parquet, Arrow IPC, JSON Lines, WebDataset tars or an image
//! folder into a table through the library's [`import`] (`docs/import.md`):
//! the format from the inputs' extension or `--format`, the column and
//! source options parsed here, a progress bar on a terminal (bytes of
//! input, rows, rate, time left) and a one-line summary. A rerun of an
//! interrupted import resumes it. An image folder's class names go beside
//! the table as `classes.json` once the import has committed.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::ValueEnum;
use indicatif::{HumanCount, ProgressBar, ProgressStyle};
use loaderx::Codec;
use loaderx::import::{
    FORMAT_NAMES, Format, ImportOptions, ImportSummary, Opened, Progress, SourceOptions, detect_format, import,
    open_source,
};

use crate::CliResult;
use crate::out::{CliError, Json, MIB, human, per_second, print};

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// Parquet files (`.parquet`, `.pq`).
    Parquet,
    /// Arrow IPC files or streams (`.arrow`, `.arrows`, `.ipc`, `.feather`),
    /// and Hugging Face `save_to_disk` directories.
    Arrow,
    /// JSON Lines files (`.jsonl`, `.ndjson`), or directories of them.
    Jsonl,
    /// WebDataset tar shards (`.tar`), directories of them, or brace
    /// patterns (`shard-{000..009}.tar`).
    Webdataset,
    /// A folder of class folders of images (`root/<class>/<image>`): by
    /// `--format imagefolder` only.
    Imagefolder,
}

/// What `import` was asked, beyond its paths.
pub struct Request {
    pub format: Option<FormatArg>,
    pub columns: Option<Vec<String>>,
    pub rename: Vec<String>,
    pub codec: Vec<String>,
    pub fill_null: Vec<String>,
    pub batch_rows: Option<usize>,
    pub commit_rows: Option<u64>,
    pub infer_rows: Option<usize>,
    pub path_column: bool,
    pub json: bool,
}

pub fn run(paths: &[PathBuf], req: Request) -> CliResult<()> {
    let (dest, inputs) = paths.split_last().ok_or_else(|| CliError::new("give SOURCE... DEST"))?;
    let first = inputs.first().ok_or_else(|| CliError::new("give SOURCE... DEST"))?;
    let format = match req.format {
        Some(f) => f.format(),
        None => detect_format(inputs)?.ok_or_else(|| {
            let first = first.display();
            CliError::new(format!("{first}: cannot tell its format from its name; pass --format {FORMAT_NAMES}"))
        })?,
    };
    only(format, req.infer_rows.is_some(), "--infer-rows", Format::Jsonl)?;
    only(format, req.path_column, "--path-column", Format::ImageFolder)?;
    let opts = options(&req)?;
    let given = SourceOptions { batch_rows: req.batch_rows, infer_rows: req.infer_rows, path_column: req.path_column };
    let Opened { mut source, classes } = open_source(Some(format), inputs, &given)?;
    let bar = progress_bar(source.bytes_hint());
    let mut on_progress = |p: &Progress| {
        if let Some(bar) = &bar {
            bar.set_position(p.bytes);
            let total = p.rows_hint.map_or(String::new(), |t| format!("/{}", HumanCount(t)));
            bar.set_message(format!("{}{total} rows", HumanCount(p.rows)));
        }
        Ok(())
    };
    let summary = import(&mut *source, dest, &opts, &mut on_progress);
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let summary = summary?;
    if let Some(classes) = classes {
        loaderx::import::write_classes(dest, &classes)?;
    }
    report(dest, &summary, req.json)
}

impl FormatArg {
    /// The library's format.
    fn format(self) -> Format {
        match self {
            FormatArg::Parquet => Format::Parquet,
            FormatArg::Arrow => Format::Arrow,
            FormatArg::Jsonl => Format::Jsonl,
            FormatArg::Webdataset => Format::WebDataset,
            FormatArg::Imagefolder => Format::ImageFolder,
        }
    }
}

/// `flag`, given, is for `wanted` only: refused, naming the flags, for another `format`.
fn only(format: Format, given: bool, flag: &str, wanted: Format) -> Result<(), CliError> {
    if given && format != wanted {
        let (wanted, format) = (wanted.name(), format.name());
        return Err(CliError::new(format!("{flag} is for --format {wanted}; this import is {format}")));
    }
    Ok(())
}

/// The import options `req` gives: columns, names, codecs, fills.
fn options(req: &Request) -> Result<ImportOptions, CliError> {
    let mut opts = ImportOptions::default();
    opts.columns.select = req.columns.clone();
    opts.columns.rename = pairs(&req.rename, "--rename", "SOURCE=NAME")?;
    opts.columns.fill_null = pairs(&req.fill_null, "--fill-null", "COLUMN=VALUE")?;
    for given in &req.codec {
        match given.split_once('=') {
            Some((column, name)) => opts.columns.codecs.push((column.to_string(), codec(name)?)),
            None => opts.columns.codec = Some(codec(given)?),
        }
    }
    if let Some(rows) = req.commit_rows {
        opts.commit_rows = rows;
    }
    Ok(opts)
}

/// `A=B` arguments as pairs.
fn pairs(given: &[String], flag: &str, form: &str) -> Result<Vec<(String, String)>, CliError> {
    given
        .iter()
        .map(|g| match g.split_once('=') {
            Some((a, b)) if !a.is_empty() => Ok((a.to_string(), b.to_string())),
            _ => Err(CliError::new(format!("{flag} {g:?}: expected {form}"))),
        })
        .collect()
}

/// A codec by its name.
fn codec(name: &str) -> Result<Codec, CliError> {
    Codec::from_name(name)
        .ok_or_else(|| CliError::new(format!("unknown codec {name:?}: the codecs are raw, zstd and zstd_dict")))
}

/// The bar over the input's bytes, with the rows as its message; none off a terminal.
fn progress_bar(bytes: Option<u64>) -> Option<ProgressBar> {
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return None;
    }
    let template = "import [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}) {msg} eta {eta}";
    let style = ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar());
    let bar = ProgressBar::new(bytes.unwrap_or(0)).with_style(style);
    bar.enable_steady_tick(Duration::from_millis(200));
    Some(bar)
}

/// The one-line summary, or a JSON object.
fn report(dest: &Path, s: &ImportSummary, json: bool) -> CliResult<()> {
    let elapsed = Duration::from_secs_f64(s.seconds);
    let mib_s = per_second(s.bytes as f64 / MIB, elapsed);
    let rows_s = per_second(s.rows as f64, elapsed);
    let text = if json {
        Json::object()
            .field("table", dest.to_string_lossy().as_ref())
            .field("rows", s.rows)
            .field("skipped", s.skipped)
            .field("table_rows", s.table_rows)
            .field("bytes", s.bytes)
            .field("value_bytes", s.value_bytes)
            .field("seconds", s.seconds)
            .field("mib_per_s", mib_s)
            .field("rows_per_s", rows_s)
            .field("already_done", s.already_done)
            .finish()
    } else if s.already_done {
        format!(
            "{}: this input was imported already ({} rows in the table); nothing to do",
            dest.display(),
            s.table_rows
        )
    } else {
        let resumed = if s.skipped > 0 { format!(", resumed after {} rows", s.skipped) } else { String::new() };
        format!(
            "imported {} rows ({} read) into {} in {:.2} s, {mib_s:.1} MiB/s, {rows_s:.0} rows/s; {} rows in the table{resumed}",
            s.rows,
            human(s.bytes),
            dest.display(),
            s.seconds,
            s.table_rows
        )
    };
    print(&(text + "\n"))?;
    Ok(())
}
