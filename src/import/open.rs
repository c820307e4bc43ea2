//! [`open_source`]: files named by path, in a [`Format`] given or told by
//! their names, as the [`Source`] that reads them. The one place the CLI's
//! `import` and Python's `write_table` of files turn paths into a source.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::error::ImportError;
use super::imagefolder::{ImageFolderOptions, ImageFolderSource};
use super::ipc::IpcSource;
use super::jsonl::{JsonlOptions, JsonlSource};
use super::parquet::{BATCH_ROWS_DEFAULT, ParquetSource};
use super::source::Source;
use super::webdataset::{WebDatasetOptions, WebDatasetSource};
use crate::io::{FileKind, Vfs};

/// A file format a source reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Parquet files (`.parquet`, `.pq`).
    Parquet,
    /// Arrow IPC files or streams (`.arrow`, `.arrows`, `.ipc`, `.feather`),
    /// and Hugging Face `save_to_disk` directories.
    Arrow,
    /// JSON Lines files (`.jsonl`, `.ndjson`), or directories of them.
    Jsonl,
    /// WebDataset tar shards (`.tar`), directories of them, or brace
    /// patterns (`shard-{000..009}.tar`).
    WebDataset,
    /// A folder of class folders of images (`root/<class>/<image>`): only
    /// when named, never told by a name.
    ImageFolder,
}

/// The formats' names, as [`Format::parse`] takes them.
pub const FORMAT_NAMES: &str = "parquet, arrow, jsonl, webdataset or imagefolder";

impl Format {
    /// Every format.
    pub const ALL: [Format; 5] =
        [Format::Parquet, Format::Arrow, Format::Jsonl, Format::WebDataset, Format::ImageFolder];

    /// The format's name: `parquet`, `arrow`, `jsonl`, `webdataset`, `imagefolder`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Parquet => "parquet",
            Format::Arrow => "arrow",
            Format::Jsonl => "jsonl",
            Format::WebDataset => "webdataset",
            Format::ImageFolder => "imagefolder",
        }
    }

    /// The format named `name`.
    pub fn parse(name: &str) -> Result<Format, ImportError> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| ImportError::InvalidArgument(format!("the format must be {FORMAT_NAMES}, not {name:?}")))
    }

    /// The format a file's extension names, if any.
    fn by_extension(path: &Path) -> Option<Format> {
        match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
            Some("parquet" | "pq") => Some(Format::Parquet),
            Some("arrow" | "arrows" | "ipc" | "feather") => Some(Format::Arrow),
            Some("jsonl" | "ndjson") => Some(Format::Jsonl),
            Some("tar") => Some(Format::WebDataset),
            _ => None,
        }
    }

    /// The format `input`'s name tells, `None` if it tells none: its
    /// extension; a directory with a `state.json` (Hugging Face
    /// `save_to_disk`) is Arrow; another directory, the first of its files
    /// (by name) with a known extension.
    pub fn detect_in(vfs: &dyn Vfs, input: &Path) -> Option<Format> {
        if let Some(format) = Format::by_extension(input) {
            return Some(format);
        }
        if vfs.kind(&input.join("state.json")).ok().flatten() == Some(FileKind::File) {
            return Some(Format::Arrow);
        }
        if vfs.kind(input).ok().flatten() != Some(FileKind::Dir) {
            return None;
        }
        let mut names = vfs.list_dir(input).ok()?;
        names.sort();
        names.iter().find_map(|n| Format::by_extension(Path::new(n)))
    }
}

/// The format the first of `inputs` tells ([`Format::detect_in`]), on the
/// filesystem [`open_source`] would read them on; `None` if it tells none.
pub fn detect_format(inputs: &[PathBuf]) -> Result<Option<Format>, ImportError> {
    let Some(first) = inputs.first() else { return Ok(None) };
    Ok(Format::detect_in(&*input_vfs(inputs)?, first))
}

/// How a source reads its files; `None` takes the format's default.
#[derive(Clone, Debug, Default)]
pub struct SourceOptions {
    /// Rows per batch read.
    pub batch_rows: Option<usize>,
    /// JSON Lines: the lines the column types are inferred from.
    pub infer_rows: Option<usize>,
    /// Image folders: a `path` column with each image's path in the folder.
    pub path_column: bool,
}

/// A source opened by [`open_source`].
pub struct Opened {
    /// The source.
    pub source: Box<dyn Source>,
    /// An image folder's class names as JSON (`write_classes` puts them
    /// beside the table once the import has committed); `None` otherwise.
    pub classes: Option<String>,
}

/// The source reading `inputs` in `format`, else in the format the first
/// input's name tells: local paths on the real filesystem, `s3://bucket/key`
/// URLs (all of one bucket) through the bucket backend (cargo feature
/// `remote`; the client configured from the `AWS_*` environment and the
/// `LOADERX_REMOTE_*` options).
pub fn open_source(format: Option<Format>, inputs: &[PathBuf], opts: &SourceOptions) -> Result<Opened, ImportError> {
    open_source_in(input_vfs(inputs)?, format, inputs, opts)
}

/// Whether `path` is an object storage URL.
fn is_url(path: &Path) -> bool {
    path.to_str().is_some_and(|p| p.starts_with("s3://") || p.starts_with("s3a://"))
}

/// The filesystem `inputs` are on: the real one, or their bucket's.
fn input_vfs(inputs: &[PathBuf]) -> Result<Arc<dyn Vfs>, ImportError> {
    let urls: Vec<&PathBuf> = inputs.iter().filter(|p| is_url(p)).collect();
    let Some(first) = urls.first() else {
        return Ok(Arc::new(crate::io::real::RealFs));
    };
    if urls.len() != inputs.len() {
        return Err(ImportError::InvalidArgument(
            "the inputs of one import are all local paths or all s3:// URLs, not both".to_string(),
        ));
    }
    bucket_vfs(first, &urls)
}

#[cfg(feature = "remote")]
fn bucket_vfs(first: &Path, urls: &[&PathBuf]) -> Result<Arc<dyn Vfs>, ImportError> {
    use crate::io::remote::{BucketFs, RemoteOptions};
    let bucket = |p: &Path| {
        let text = p.to_str().unwrap_or_default();
        let rest = text.strip_prefix("s3://").or_else(|| text.strip_prefix("s3a://")).unwrap_or(text);
        rest.split('/').next().unwrap_or_default().to_string()
    };
    if let Some(other) = urls.iter().find(|u| bucket(u) != bucket(first)) {
        return Err(ImportError::InvalidArgument(format!(
            "{} and {}: the inputs of one import are in one bucket",
            first.display(),
            other.display()
        )));
    }
    let url = first.to_string_lossy();
    let io = |source| ImportError::Io { path: first.to_path_buf(), op: "connect to", source };
    Ok(Arc::new(BucketFs::connect(&url, RemoteOptions::from_env()).map_err(io)?))
}

#[cfg(not(feature = "remote"))]
fn bucket_vfs(first: &Path, _: &[&PathBuf]) -> Result<Arc<dyn Vfs>, ImportError> {
    Err(ImportError::InvalidArgument(format!(
        "{}: s3:// inputs need loaderx built with its `remote` feature (the CLI: \
         cargo install --path cli --features remote; the Python wheel has it)",
        first.display()
    )))
}

/// [`open_source`] on `vfs`.
pub fn open_source_in(
    vfs: Arc<dyn Vfs>,
    format: Option<Format>,
    inputs: &[PathBuf],
    opts: &SourceOptions,
) -> Result<Opened, ImportError> {
    let Some(first) = inputs.first() else {
        return Err(ImportError::InvalidArgument("no input to import: name at least one file".to_string()));
    };
    let format = match format.or_else(|| Format::detect_in(&*vfs, first)) {
        Some(f) => f,
        None => {
            return Err(ImportError::InvalidArgument(format!(
                "{}: cannot tell its format from its name; give the format: {FORMAT_NAMES}",
                first.display()
            )));
        }
    };
    let only = |given: bool, option: &str, wanted: Format| {
        if given && format != wanted {
            let (wanted, format) = (wanted.name(), format.name());
            return Err(ImportError::InvalidArgument(format!("{option} is for {wanted}; this import is {format}")));
        }
        Ok(())
    };
    only(opts.infer_rows.is_some(), "infer_rows", Format::Jsonl)?;
    only(opts.path_column, "path_column", Format::ImageFolder)?;
    let source: Box<dyn Source> = match format {
        Format::Parquet => {
            Box::new(ParquetSource::open_in(vfs, inputs, opts.batch_rows.unwrap_or(BATCH_ROWS_DEFAULT))?)
        }
        Format::Arrow => Box::new(IpcSource::open_in(vfs, inputs)?),
        Format::Jsonl => {
            let mut options = JsonlOptions::default();
            options.infer_rows = opts.infer_rows.unwrap_or(options.infer_rows);
            options.batch_rows = opts.batch_rows.unwrap_or(options.batch_rows);
            Box::new(JsonlSource::open_in(vfs, inputs, options)?)
        }
        Format::WebDataset => {
            let mut options = WebDatasetOptions::default();
            options.batch_rows = opts.batch_rows.unwrap_or(options.batch_rows);
            let patterns: Vec<String> = inputs.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            Box::new(WebDatasetSource::open_in(vfs, &patterns, options)?)
        }
        Format::ImageFolder => return open_image_folder(vfs, inputs, opts),
    };
    Ok(Opened { source, classes: None })
}

/// An image folder: one directory of class folders.
fn open_image_folder(vfs: Arc<dyn Vfs>, inputs: &[PathBuf], opts: &SourceOptions) -> Result<Opened, ImportError> {
    let [root] = inputs else {
        return Err(ImportError::InvalidArgument(format!(
            "an image folder is one directory (root/<class>/<image>), not {} paths",
            inputs.len()
        )));
    };
    let mut options = ImageFolderOptions { path_column: opts.path_column, ..Default::default() };
    options.batch_rows = opts.batch_rows.unwrap_or(options.batch_rows);
    let source = ImageFolderSource::open_in(vfs, root, options)?;
    let classes = Some(source.classes_json());
    Ok(Opened { source: Box::new(source), classes })
}
