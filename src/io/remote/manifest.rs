//! `manifest.json`, the last object a push writes: what a published store
//! is made of. Each object's name, size, CRC-32 and entity tag; a reader
//! trusts no object the manifest does not name, and reads each only as
//! long as the manifest says it is.
//!
//! ```json
//! {"format": "loaderx-remote", "version": 1, "kind": "store", "records": 3,
//!  "objects": {"meta.zr": {"size": 64, "crc32": 123, "etag": "\"9a0...\""}, "0.zr": {...}}}
//! ```
//!
//! `kind` is what is published under the prefix:
//!
//! - `"store"`: one store (a sharded dataset's shard 0, with `shards.json`
//!   among its objects), its `records` the store's length;
//! - `"table"`: a table, its one object `table.json` and its `rows` the
//!   committed rows; each column is a dataset published under `col-NNNN/`
//!   with a manifest of its own.
//!
//! Any other kind is refused by name, so that a reader of this version
//! never takes one for what it knows.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::format::{META_FILE, StoreFile, TABLE_FILE, TABLE_FILE_BYTES_MAX, TABLE_ROWS_MAX};

/// The `format` field.
const FORMAT: &str = "loaderx-remote";
/// The `version` this build writes and reads.
const VERSION: u64 = 1;

/// One published object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// Size in bytes.
    pub size: u64,
    /// CRC-32 (IEEE) of its bytes: checked by a pull, compared by a re-push.
    pub crc32: u32,
    /// The entity tag the server gave it, if any.
    pub etag: Option<String>,
    /// The object's own name under the prefix when it is not the file's
    /// (`table.json.VERSION`, `shards.json.VERSION`: a commit file written
    /// beside the one a reader of the previous manifest reads, never over
    /// it); `None`: the file's name.
    pub key: Option<String>,
}

impl ObjectInfo {
    /// An object stored under the file's own name.
    pub fn new(size: u64, crc32: u32, etag: Option<String>) -> ObjectInfo {
        ObjectInfo { size, crc32, etag, key: None }
    }
}

/// Whether `key` may hold the bytes of file `name`: `name` itself, or
/// `name.` and 1 to 32 lowercase hexadecimal digits.
pub(crate) fn is_version_of(key: &str, name: &str) -> bool {
    key.strip_prefix(name).and_then(|v| v.strip_prefix('.')).is_some_and(|v| {
        (1..=32).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// What a manifest publishes, and how much of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Published {
    /// One store, of this length when published.
    Store {
        /// The store's length.
        records: u32,
    },
    /// A table, of these committed rows; its columns under `col-NNNN/`.
    Table {
        /// The committed rows of `table.json`.
        rows: u64,
    },
}

/// A published store's or table's manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// What is published, and its length.
    pub published: Published,
    /// Object name (a store's `meta.zr`, `0.zr`, `dict.zr`, `schema.json`,
    /// `shards.json` beside a sharded dataset's shard 0; a table's
    /// `table.json`) to what it is.
    pub objects: BTreeMap<String, ObjectInfo>,
}

impl Manifest {
    /// The JSON text.
    pub fn encode(&self) -> String {
        let objects: serde_json::Map<String, Value> = self
            .objects
            .iter()
            .map(|(name, o)| {
                let mut v = json!({"size": o.size, "crc32": o.crc32, "etag": o.etag});
                if let Some(key) = &o.key {
                    v["key"] = json!(key);
                }
                (name.clone(), v)
            })
            .collect();
        let value = match self.published {
            Published::Store { records } => {
                json!({"format": FORMAT, "version": VERSION, "kind": "store", "records": records, "objects": objects})
            }
            Published::Table { rows } => {
                json!({"format": FORMAT, "version": VERSION, "kind": "table", "rows": rows, "objects": objects})
            }
        };
        serde_json::to_string_pretty(&value).expect("a JSON value encodes")
    }

    /// The store's length, `None` for a table.
    pub fn records(&self) -> Option<u32> {
        match self.published {
            Published::Store { records } => Some(records),
            Published::Table { .. } => None,
        }
    }

    /// Parses and checks a manifest's text: every name one its kind has,
    /// every size within its limit, a store's `meta.zr` and a table's
    /// `table.json` present.
    pub fn decode(text: &[u8]) -> Result<Manifest, String> {
        let value: Value = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
        if value.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return Err(format!("not a {FORMAT} manifest (\"format\" is missing or another)"));
        }
        match value.get("version").and_then(Value::as_u64) {
            Some(VERSION) => {}
            other => return Err(format!("manifest version {other:?}, this build reads {VERSION}")),
        }
        let published = match value.get("kind").and_then(Value::as_str) {
            Some("store") => {
                let records = value.get("records").and_then(Value::as_u64).and_then(|r| u32::try_from(r).ok());
                Published::Store { records: records.ok_or("\"records\" is missing or not a record count")? }
            }
            Some("table") => {
                let rows = value.get("rows").and_then(Value::as_u64).filter(|&r| r <= TABLE_ROWS_MAX);
                Published::Table { rows: rows.ok_or("\"rows\" is missing or not a table's row count")? }
            }
            Some(kind) => return Err(format!("a manifest of kind {kind:?}, not a store or a table")),
            None => return Err("\"kind\" is missing".into()),
        };
        let listed = value.get("objects").and_then(Value::as_object).ok_or("\"objects\" is missing")?;
        let mut objects = BTreeMap::new();
        for (name, o) in listed {
            let limit = object_bytes_max(published, name)?;
            let field = |key: &str| o.get(key).and_then(Value::as_u64);
            let size = field("size").ok_or_else(|| format!("{name}: \"size\" is missing"))?;
            if size > limit {
                return Err(format!("{name}: {size} bytes, more than the {limit} it may have"));
            }
            let crc32 = field("crc32").and_then(|c| u32::try_from(c).ok());
            let crc32 = crc32.ok_or_else(|| format!("{name}: \"crc32\" is missing"))?;
            let etag = match o.get("etag") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if s.len() <= 1024 => Some(s.clone()),
                Some(_) => return Err(format!("{name}: \"etag\" is not a string")),
            };
            let key = match o.get("key") {
                None | Some(Value::Null) => None,
                Some(Value::String(k)) if is_version_of(k, name) => Some(k.clone()),
                Some(_) => return Err(format!("{name}: \"key\" is not {name} or a version of it")),
            };
            objects.insert(name.clone(), ObjectInfo { size, crc32, etag, key });
        }
        let required = match published {
            Published::Store { .. } => META_FILE,
            Published::Table { .. } => TABLE_FILE,
        };
        if !objects.contains_key(required) {
            return Err(format!("{required} is not listed"));
        }
        Ok(Manifest { published, objects })
    }
}

/// The largest object `name` may be in a manifest of `published`; an
/// error for a name that kind does not hold.
fn object_bytes_max(published: Published, name: &str) -> Result<u64, String> {
    match published {
        Published::Store { .. } => {
            StoreFile::of(name).map(StoreFile::bytes_max).ok_or_else(|| format!("object {name:?} is not a store file"))
        }
        Published::Table { .. } if name == TABLE_FILE => Ok(TABLE_FILE_BYTES_MAX),
        Published::Table { .. } => Err(format!("object {name:?} is not a table's ({TABLE_FILE} only)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        let mut objects = BTreeMap::new();
        objects.insert("meta.zr".into(), ObjectInfo::new(48, 7, Some("\"e1\"".into())));
        objects.insert("0.zr".into(), ObjectInfo::new(100, 9, None));
        Manifest { published: Published::Store { records: 2 }, objects }
    }

    fn table_sample() -> Manifest {
        let mut objects = BTreeMap::new();
        objects.insert(
            TABLE_FILE.into(),
            ObjectInfo { size: 300, crc32: 5, etag: None, key: Some("table.json.00ff".into()) },
        );
        Manifest { published: Published::Table { rows: 1 << 40 }, objects }
    }

    #[test]
    fn encodes_and_decodes_back() {
        let m = sample();
        assert_eq!(Manifest::decode(m.encode().as_bytes()).unwrap(), m);
        let t = table_sample();
        assert_eq!(Manifest::decode(t.encode().as_bytes()).unwrap(), t);
    }

    #[test]
    fn refuses_what_a_table_does_not_hold() {
        let text = table_sample().encode();
        for (from, to, says) in [
            ("\"table.json\"", "\"meta.zr\"", "not a table's"),
            ("\"size\": 300", "\"size\": 4194305", "more than"),
            ("\"rows\": 1099511627776", "\"rows\": 18446744073709551615", "rows"),
            ("\"rows\"", "\"records\"", "rows"),
            ("\"table.json.00ff\"", "\"table.json.00FF\"", "a version of it"),
            ("\"table.json.00ff\"", "\"../table.json\"", "a version of it"),
            ("\"table.json.00ff\"", "\"table.json.\"", "a version of it"),
            ("\"kind\": \"table\"", "\"kind\": \"store\"", "records"),
        ] {
            assert!(text.contains(from), "{from}");
            let err = Manifest::decode(text.replacen(from, to, 1).as_bytes()).unwrap_err();
            assert!(err.contains(says), "{to}: {err}");
        }
    }

    #[test]
    fn refuses_what_a_store_does_not_hold() {
        let text = sample().encode();
        for (from, to, says) in [
            ("\"0.zr\"", "\"../0.zr\"", "not a store file"),
            ("\"0.zr\"", "\"00.zr\"", "not a store file"),
            ("\"0.zr\"", "\"65536.zr\"", "not a store file"),
            ("\"size\": 100", "\"size\": 4294967297", "more than"),
            ("\"meta.zr\"", "\"dict.zr\"", "meta.zr is not listed"),
            ("\"kind\": \"store\"", "\"kind\": \"sharded\"", "not a store or a table"),
            ("\"version\": 1", "\"version\": 2", "version"),
            ("\"records\": 2", "\"records\": -1", "records"),
        ] {
            assert!(text.contains(from), "{from}");
            let err = Manifest::decode(text.replacen(from, to, 1).as_bytes()).unwrap_err();
            assert!(err.contains(says), "{to}: {err}");
        }
        assert!(Manifest::decode(b"[1, 2").unwrap_err().contains("not JSON"));
    }
}
