//! `shards.json`: the shard table of a sharded dataset (`docs/format.md`,
//! "Sharded datasets"), parsed strictly (it is input) and replaced whole:
//! written to a temporary file, synced, renamed over the name, the
//! directory synced (`docs/crash-safety.md`, "Shard rollover").
//!
//! The root directory is shard 0 (a complete store with its `schema.json`);
//! shard `k >= 1` is the store in `shard-{k:06}/` ([`shard_dir_name`]). The
//! table records the
//! schema, the number of shards and the record count of every shard but the
//! last: the last shard's count is its store's own length, so that appends
//! into it are the store's own crash-ordered appends and never touch the
//! table.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::error::DatasetError;
use super::schema::Schema;
use crate::format::{RECORDS_MAX, SHARDS_FILE_BYTES_MAX, SHARDS_TMP_FILE, shard_dir_name};
pub use crate::format::{SHARDS_FILE, SHARDS_MAX};
use crate::io::{OpenMode, SyncKind, Vfs, read_file, write_all_at};

/// The value of the shard table's `format` key.
pub const SHARDS_FORMAT: &str = "loaderx-sharded";
/// The shard table version this crate reads and writes.
pub const SHARDS_VERSION: u64 = 1;

/// A sealed shard's count being changed by a delete (`"pending"`): the
/// shard holds either its recorded count or `records`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The shard (never the last).
    pub shard: usize,
    /// Its count once the delete is done.
    pub records: u64,
}

/// A parsed, checked shard table (`shards.json`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardTable {
    /// The schema every shard holds.
    pub schema: Schema,
    /// Record counts of shards `0..sealed.len()`; the last shard, number
    /// `sealed.len()`, counts as its store's length.
    pub sealed: Vec<u64>,
    /// A delete of a sealed shard under way, if any.
    pub pending: Option<Pending>,
}

/// The directory of shard `k` of the dataset at `root`.
pub fn shard_dir(root: &Path, k: usize) -> PathBuf {
    if k == 0 { root.to_path_buf() } else { root.join(shard_dir_name(k)) }
}

impl ShardTable {
    /// A shard table of one sealed shard of `records` and a new empty last one.
    pub fn first(schema: Schema, records: u64) -> ShardTable {
        ShardTable { schema, sealed: vec![records], pending: None }
    }

    /// Number of shards (the sealed ones and the last).
    pub fn shards(&self) -> usize {
        self.sealed.len() + 1
    }

    /// The shard table's text: keys in the order `format`, `version`,
    /// `schema` (the shards' `schema.json` object), `shards`, then `pending` if any,
    /// indented by two spaces.
    pub fn to_json(&self) -> String {
        let schema = self.schema.to_json().trim_end().replace('\n', "\n  ");
        let mut shards: Vec<String> = self
            .sealed
            .iter()
            .enumerate()
            .map(|(k, n)| format!("    {{\n      \"dir\": \"{}\",\n      \"records\": {n}\n    }}", shard_dir_name(k)))
            .collect();
        shards.push(format!("    {{\n      \"dir\": \"{}\"\n    }}", shard_dir_name(self.sealed.len())));
        let pending = match self.pending {
            Some(p) => {
                format!(",\n  \"pending\": {{\n    \"shard\": {},\n    \"records\": {}\n  }}", p.shard, p.records)
            }
            None => String::new(),
        };
        format!(
            "{{\n  \"format\": \"{SHARDS_FORMAT}\",\n  \"version\": {SHARDS_VERSION},\n  \"schema\": {schema},\n  \
             \"shards\": [\n{}\n  ]{pending}\n}}\n",
            shards.join(",\n")
        )
    }

    /// Parses a shard table's text; `path` is for messages. Every count is at
    /// most a store's [`RECORDS_MAX`], every shard named where it must be,
    /// the last shard without a count.
    pub fn parse(text: &str, path: &Path) -> Result<ShardTable, DatasetError> {
        let bad = |reason: String| DatasetError::ShardTable { path: path.to_path_buf(), reason };
        let value: Value = serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
        let map = value.as_object().ok_or_else(|| bad("not a JSON object".into()))?;
        let field = |key: &str| map.get(key).ok_or_else(|| bad(format!("missing key {key:?}")));
        if field("format")?.as_str() != Some(SHARDS_FORMAT) {
            return Err(bad(format!("format is {}, not {SHARDS_FORMAT:?}", field("format")?)));
        }
        if field("version")?.as_u64() != Some(SHARDS_VERSION) {
            return Err(bad(format!("version {} is not supported (this crate reads 1)", field("version")?)));
        }
        let schema_text = serde_json::to_string(field("schema")?).expect("a parsed value");
        let schema = Schema::parse(&schema_text, path)?;
        let shards = field("shards")?.as_array().ok_or_else(|| bad("\"shards\" must be a list".into()))?;
        if shards.is_empty() || shards.len() > SHARDS_MAX {
            return Err(bad(format!("{} shards (1 to {SHARDS_MAX} expected)", shards.len())));
        }
        let last = shards.len() - 1;
        let mut sealed = Vec::with_capacity(last);
        for (k, shard) in shards.iter().enumerate() {
            let shard = shard.as_object().ok_or_else(|| bad(format!("shard {k} is not an object")))?;
            if shard.get("dir").and_then(Value::as_str) != Some(shard_dir_name(k).as_str()) {
                return Err(bad(format!("shard {k}'s \"dir\" must be {:?}", shard_dir_name(k))));
            }
            match (shard.get("records"), k == last) {
                (None, true) => {}
                (Some(_), true) => {
                    return Err(bad(format!("the last shard ({k}) has a count: it counts as its store")));
                }
                (None, false) => return Err(bad(format!("shard {k} has no \"records\""))),
                (Some(n), false) => sealed.push(count(n).ok_or_else(|| bad(format!("shard {k}'s count {n}")))?),
            }
        }
        let pending = match map.get("pending") {
            None => None,
            Some(p) => Some(parse_pending(p, last).ok_or_else(|| bad(format!("bad \"pending\": {p}")))?),
        };
        Ok(ShardTable { schema, sealed, pending })
    }

    /// Reads `root/shards.json`; `None` if there is none (a single store).
    pub fn read(vfs: &dyn Vfs, root: &Path) -> Result<Option<ShardTable>, DatasetError> {
        let path = root.join(SHARDS_FILE);
        let path = &path;
        let io = |op| move |source| DatasetError::Io { path: path.clone(), op, source };
        if vfs.kind(path).map_err(io("stat shards.json"))?.is_none() {
            return Ok(None);
        }
        let bytes = read_file(vfs, path, SHARDS_FILE_BYTES_MAX).map_err(io("read shards.json"))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| DatasetError::ShardTable { path: path.clone(), reason: "not UTF-8".into() })?;
        ShardTable::parse(&text, path).map(Some)
    }

    /// Replaces `root/shards.json` whole: a temporary file, synced
    /// (SYNC M1), renamed over the name, the directory synced (SYNC M2).
    pub fn write(&self, vfs: &dyn Vfs, root: &Path) -> Result<(), DatasetError> {
        let tmp = root.join(SHARDS_TMP_FILE);
        let io = |op| move |source| DatasetError::Io { path: root.join(SHARDS_FILE), op, source };
        let file = vfs.open(&tmp, OpenMode::Create).map_err(io("create shards.json.tmp"))?;
        file.set_len(0).map_err(io("truncate shards.json.tmp"))?;
        write_all_at(&*file, self.to_json().as_bytes(), 0).map_err(io("write shards.json.tmp"))?;
        file.sync(SyncKind::All).map_err(io("sync shards.json.tmp"))?; // SYNC M1
        drop(file);
        vfs.rename(&tmp, &root.join(SHARDS_FILE)).map_err(io("rename shards.json.tmp"))?;
        vfs.sync_dir(root).map_err(io("sync dataset directory")) // SYNC M2
    }
}

/// A shard's count: an integer within a store's capacity.
fn count(value: &Value) -> Option<u64> {
    value.as_u64().filter(|&n| n <= u64::from(RECORDS_MAX))
}

fn parse_pending(value: &Value, last: usize) -> Option<Pending> {
    let map = value.as_object()?;
    let shard = usize::try_from(map.get("shard")?.as_u64()?).ok().filter(|&k| k < last)?;
    Some(Pending { shard, records: count(map.get("records")?)? })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::DType;
    use crate::format::Codec;

    fn schema() -> Schema {
        Schema::fixed(DType::parse("<f4").unwrap(), vec![3], Codec::Zstd).unwrap()
    }

    #[test]
    fn round_trips() {
        let path = Path::new("d/shards.json");
        for m in [
            ShardTable::first(schema(), 7),
            ShardTable { schema: schema(), sealed: vec![1, 2, 3], pending: Some(Pending { shard: 1, records: 1 }) },
        ] {
            assert_eq!(ShardTable::parse(&m.to_json(), path).unwrap(), m);
        }
    }

    #[test]
    fn refuses_bad_shard_tables() {
        let good = ShardTable { schema: schema(), sealed: vec![4, 5], pending: None }.to_json();
        let cases = [
            good.replace("\"records\": 5", "\"records\": 16777217"),
            good.replace("\"records\": 5", "\"records\": -1"),
            good.replace("\"records\": 5", "\"records\": 18446744073709551616"),
            good.replace("shard-000001", "../elsewhere"),
            good.replace("\"records\": 5", "\"records\": \"5\""),
            good.replace("\"shard-000002\"", "\"shard-000002\", \"records\": 1"),
            good.replace("loaderx-sharded", "other"),
            good.replace("\"version\": 1", "\"version\": 2"),
            good.replace("\"dtype\": \"<f4\"", "\"dtype\": \"<q9\""),
            good.replace("},\n    {\n      \"dir\": \"shard-000002\"\n    }", "}"),
            good[..good.len() / 2].to_string(),
        ];
        for (k, text) in cases.iter().enumerate() {
            assert_ne!(text, &good, "case {k} changed nothing");
            assert!(ShardTable::parse(text, Path::new("m")).is_err(), "case {k} was accepted:\n{text}");
        }
    }
}
