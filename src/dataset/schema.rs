//! `schema.json`: the one loaderx-level file of a dataset, byte for byte as
//! the reference package writes it (`json.dumps(schema, indent=2) + "\n"`,
//! keys in the order `format`, `version`, [`ragged`,] `dtype`,
//! `shape` | `item_shape`, `codec`), and parsed strictly.

use std::path::Path;

use serde_json::Value;

use super::dtype::DType;
use super::error::DatasetError;
pub use crate::format::SCHEMA_FILE;
use crate::format::{Codec, RECORD_BYTES_MAX, SCHEMA_BYTES_MAX, SCHEMA_TMP_FILE};
use crate::io::{OpenMode, SyncKind, Vfs, read_file, write_all_at};

/// The value of the `format` key.
pub const SCHEMA_FORMAT: &str = "loaderx-zrecord";
/// The value of the `version` key this crate reads and writes.
pub const SCHEMA_VERSION: u64 = 1;

/// The shape of a dataset's records.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Every record has this shape (`"shape"`); `[]` is a scalar.
    Fixed {
        /// The per-record shape.
        shape: Vec<usize>,
    },
    /// A record is any number of rows of this shape (`"ragged": true`,
    /// `"item_shape"`); `[]` is a row of one element.
    Ragged {
        /// The per-row shape.
        item_shape: Vec<usize>,
    },
}

/// A dataset's schema: element type, record layout, codec of its appends.
///
/// ```
/// use loaderx::Codec;
/// use loaderx::dataset::{DType, Schema};
/// let s = Schema::fixed(DType::parse("<f4")?, vec![64], Codec::Zstd)?;
/// assert_eq!(
///     s.to_json(),
///     "{\n  \"format\": \"loaderx-zrecord\",\n  \"version\": 1,\n  \"dtype\": \"<f4\",\n  \
///      \"shape\": [\n    64\n  ],\n  \"codec\": \"zstd\"\n}\n"
/// );
/// assert_eq!(Schema::parse(&s.to_json(), "schema.json".as_ref())?, s);
/// # Ok::<(), loaderx::dataset::DatasetError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schema {
    /// The element type.
    pub dtype: DType,
    /// Fixed shape or ragged rows.
    pub layout: Layout,
    /// The codec records are appended with.
    pub codec: Codec,
}

impl Schema {
    /// A fixed-shape schema; errors if a record would exceed the store's
    /// record limit.
    pub fn fixed(dtype: DType, shape: Vec<usize>, codec: Codec) -> Result<Schema, DatasetError> {
        let schema = Schema { dtype, layout: Layout::Fixed { shape }, codec };
        schema.row_bytes()?;
        Ok(schema)
    }

    /// A ragged schema; errors if a row would be 0 bytes (rows could not be
    /// counted) or over the record limit.
    pub fn ragged(dtype: DType, item_shape: Vec<usize>, codec: Codec) -> Result<Schema, DatasetError> {
        let schema = Schema { dtype, layout: Layout::Ragged { item_shape }, codec };
        schema.row_bytes()?;
        Ok(schema)
    }

    /// True for a ragged dataset.
    pub fn is_ragged(&self) -> bool {
        matches!(self.layout, Layout::Ragged { .. })
    }

    /// The per-record shape (fixed) or per-row shape (ragged).
    pub fn shape(&self) -> &[usize] {
        match &self.layout {
            Layout::Fixed { shape } => shape,
            Layout::Ragged { item_shape } => item_shape,
        }
    }

    /// Bytes of one row (a fixed record is one row; a ragged record any
    /// number of them), checked: at most the record limit, and a ragged row
    /// is not empty.
    pub fn row_bytes(&self) -> Result<usize, DatasetError> {
        let bytes = self
            .shape()
            .iter()
            .try_fold(self.dtype.itemsize(), |acc, &d| acc.checked_mul(d))
            .or(self.shape().contains(&0).then_some(0))
            .filter(|&b| b <= RECORD_BYTES_MAX as usize)
            .ok_or_else(|| DatasetError::RecordTooLarge {
                path: None,
                bytes: self.shape().iter().fold(self.dtype.itemsize() as u64, |a, &d| a.saturating_mul(d as u64)),
            })?;
        if bytes == 0 && self.is_ragged() {
            return Err(DatasetError::ShapeMismatch(format!(
                "ragged rows of {}{:?} are 0 bytes: rows could not be counted",
                self.dtype,
                self.shape()
            )));
        }
        Ok(bytes)
    }

    /// `dtype(shape)` in the reference's notation, for messages: `<f4(64,)`.
    pub fn describe(&self) -> String {
        let dims: Vec<String> = self.shape().iter().map(usize::to_string).collect();
        let tuple = match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        };
        if self.is_ragged() { format!("ragged {}{tuple}", self.dtype) } else { format!("{}{tuple}", self.dtype) }
    }

    /// The schema's text, exactly as the reference writes it.
    pub fn to_json(&self) -> String {
        let list = |dims: &[usize]| {
            if dims.is_empty() {
                "[]".to_string()
            } else {
                let items: Vec<String> = dims.iter().map(|d| format!("    {d}")).collect();
                format!("[\n{}\n  ]", items.join(",\n"))
            }
        };
        let (ragged, key) = match &self.layout {
            Layout::Fixed { .. } => ("", "shape"),
            Layout::Ragged { .. } => ("  \"ragged\": true,\n", "item_shape"),
        };
        format!(
            "{{\n  \"format\": \"{SCHEMA_FORMAT}\",\n  \"version\": {SCHEMA_VERSION},\n{ragged}  \"dtype\": \"{}\",\n  \
             \"{key}\": {},\n  \"codec\": \"{}\"\n}}\n",
            self.dtype,
            list(self.shape()),
            self.codec.name()
        )
    }

    /// Parses a schema's text; `path` is for messages. Unknown keys are
    /// ignored (as the reference does); every known one is checked.
    pub fn parse(text: &str, path: &Path) -> Result<Schema, DatasetError> {
        let bad = |reason: String| DatasetError::Schema { path: path.to_path_buf(), reason };
        let value: Value = serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
        let map = value.as_object().ok_or_else(|| bad("not a JSON object".into()))?;
        let field = |key: &str| map.get(key).ok_or_else(|| bad(format!("missing key {key:?}")));
        let format = field("format")?;
        if format.as_str() != Some(SCHEMA_FORMAT) {
            return Err(DatasetError::UnknownFormat { path: path.to_path_buf(), found: format.to_string() });
        }
        let version = field("version")?;
        if version.as_u64() != Some(SCHEMA_VERSION) {
            return Err(DatasetError::UnsupportedVersion { path: path.to_path_buf(), found: version.to_string() });
        }
        let ragged = match map.get("ragged") {
            None => false,
            Some(Value::Bool(b)) => *b,
            Some(other) => return Err(bad(format!("\"ragged\" must be true or false, not {other}"))),
        };
        let dtype_text = field("dtype")?.as_str().ok_or_else(|| bad("\"dtype\" must be a string".into()))?;
        let dtype = DType::parse(dtype_text)?;
        let codec_text = field("codec")?.as_str().ok_or_else(|| bad("\"codec\" must be a string".into()))?;
        let codec = parse_codec(codec_text)?;
        let key = if ragged { "item_shape" } else { "shape" };
        let dims = field(key)?
            .as_array()
            .ok_or_else(|| bad(format!("{key:?} must be a list")))?
            .iter()
            .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
            .collect::<Option<Vec<usize>>>()
            .ok_or_else(|| bad(format!("{key:?} must be a list of non-negative integers")))?;
        if ragged { Schema::ragged(dtype, dims, codec) } else { Schema::fixed(dtype, dims, codec) }
    }

    /// Reads `dir/schema.json`: [`DatasetError::NoSchema`] if it is missing.
    pub fn read(vfs: &dyn Vfs, dir: &Path) -> Result<Schema, DatasetError> {
        let path = dir.join(SCHEMA_FILE);
        let path = &path;
        let io = |op| move |source| DatasetError::Io { path: path.clone(), op, source };
        if vfs.kind(path).map_err(io("stat schema.json"))?.is_none() {
            return Err(DatasetError::NoSchema { path: dir.to_path_buf() });
        }
        let bytes = read_file(vfs, path, SCHEMA_BYTES_MAX).map_err(io("read schema.json"))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| DatasetError::Schema { path: path.to_path_buf(), reason: "not UTF-8".into() })?;
        Schema::parse(&text, path)
    }

    /// Writes `dir/schema.json` whole: a temporary file, synced, renamed over
    /// the name, the directory synced.
    pub fn write(&self, vfs: &dyn Vfs, dir: &Path) -> Result<(), DatasetError> {
        let tmp = dir.join(SCHEMA_TMP_FILE);
        let io = |op| move |source| DatasetError::Io { path: dir.join(SCHEMA_FILE), op, source };
        let file = vfs.open(&tmp, OpenMode::Create).map_err(io("create schema.json.tmp"))?;
        file.set_len(0).map_err(io("truncate schema.json.tmp"))?;
        write_all_at(&*file, self.to_json().as_bytes(), 0).map_err(io("write schema.json.tmp"))?;
        file.sync(SyncKind::All).map_err(io("sync schema.json.tmp"))?;
        drop(file);
        vfs.rename(&tmp, &dir.join(SCHEMA_FILE)).map_err(io("rename schema.json.tmp"))?;
        vfs.sync_dir(dir).map_err(io("sync dataset directory"))
    }
}

/// A codec by its schema name ([`Codec::from_name`]).
pub fn parse_codec(name: &str) -> Result<Codec, DatasetError> {
    Codec::from_name(name).ok_or_else(|| DatasetError::UnknownCodec { found: name.to_string() })
}
