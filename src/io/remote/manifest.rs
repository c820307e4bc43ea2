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
//! `kind` is `"store"`: one store under the prefix. Other kinds (a sharded
//! dataset, a manifest over several stores) are refused by name, so that a
//! reader of this version never takes one for a store.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::format::{META_FILE, StoreFile};

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
}

/// A published store's manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The store's length when published.
    pub records: u32,
    /// Object name (`meta.zr`, `0.zr`, `dict.zr`, `schema.json`; `shards.json`
    /// beside a sharded dataset's shard 0) to what it is.
    pub objects: BTreeMap<String, ObjectInfo>,
}

impl Manifest {
    /// The JSON text.
    pub fn encode(&self) -> String {
        let objects: serde_json::Map<String, Value> = self
            .objects
            .iter()
            .map(|(name, o)| (name.clone(), json!({"size": o.size, "crc32": o.crc32, "etag": o.etag})))
            .collect();
        let value =
            json!({"format": FORMAT, "version": VERSION, "kind": "store", "records": self.records, "objects": objects});
        serde_json::to_string_pretty(&value).expect("a JSON value encodes")
    }

    /// Parses and checks a manifest's text: every name one a store has,
    /// every size within its limit, `meta.zr` present.
    pub fn decode(text: &[u8]) -> Result<Manifest, String> {
        let value: Value = serde_json::from_slice(text).map_err(|e| format!("not JSON: {e}"))?;
        if value.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return Err(format!("not a {FORMAT} manifest (\"format\" is missing or another)"));
        }
        match value.get("version").and_then(Value::as_u64) {
            Some(VERSION) => {}
            other => return Err(format!("manifest version {other:?}, this build reads {VERSION}")),
        }
        match value.get("kind").and_then(Value::as_str) {
            Some("store") => {}
            Some(kind) => return Err(format!("a manifest of kind {kind:?}, not a single store (\"store\")")),
            None => return Err("\"kind\" is missing".into()),
        }
        let records = value.get("records").and_then(Value::as_u64).and_then(|r| u32::try_from(r).ok());
        let records = records.ok_or("\"records\" is missing or not a record count")?;
        let listed = value.get("objects").and_then(Value::as_object).ok_or("\"objects\" is missing")?;
        let mut objects = BTreeMap::new();
        for (name, o) in listed {
            let file = StoreFile::of(name).ok_or_else(|| format!("object {name:?} is not a store file"))?;
            let limit = file.bytes_max();
            let field = |key: &str| o.get(key).and_then(Value::as_u64);
            let size = field("size").ok_or_else(|| format!("{name}: \"size\" is missing"))?;
            if size > limit {
                return Err(format!("{name}: {size} bytes, more than the {limit} a store file has"));
            }
            let crc32 = field("crc32").and_then(|c| u32::try_from(c).ok());
            let crc32 = crc32.ok_or_else(|| format!("{name}: \"crc32\" is missing"))?;
            let etag = match o.get("etag") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) if s.len() <= 1024 => Some(s.clone()),
                Some(_) => return Err(format!("{name}: \"etag\" is not a string")),
            };
            objects.insert(name.clone(), ObjectInfo { size, crc32, etag });
        }
        if !objects.contains_key(META_FILE) {
            return Err(format!("{META_FILE} is not listed"));
        }
        Ok(Manifest { records, objects })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        let mut objects = BTreeMap::new();
        objects.insert("meta.zr".into(), ObjectInfo { size: 48, crc32: 7, etag: Some("\"e1\"".into()) });
        objects.insert("0.zr".into(), ObjectInfo { size: 100, crc32: 9, etag: None });
        Manifest { records: 2, objects }
    }

    #[test]
    fn encodes_and_decodes_back() {
        let m = sample();
        assert_eq!(Manifest::decode(m.encode().as_bytes()).unwrap(), m);
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
            ("\"kind\": \"store\"", "\"kind\": \"sharded\"", "not a single store"),
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
