//! `stats`: a store's size, codec mix, compression ratio, dictionary,
//! schema, and the engine reads of records not in memory run on. Reads the
//! table, not the records.

use std::path::Path;

use loaderx::Zrecord;
use loaderx::dataset::{DatasetError, Layout, Schema};
use loaderx::io::real::RealFs;

use crate::CliResult;
use crate::out::{Json, human, print, table};
use crate::records::{Records, Totals};

pub fn run(path: &Path, json: bool) -> CliResult<()> {
    let store = Records::open(path, loaderx::ReadMode::Auto)?;
    let stats = Totals::of(&store)?;
    let schema = store.schema();
    let engine = store.read_engine().name();
    let text = if json { to_json(path, &stats, &schema, engine) } else { to_table(path, &stats, &schema, engine) };
    print(&text)?;
    Ok(())
}

/// The schema beside an open store (on its filesystem: a remote store's
/// too), as [`read_schema`].
pub fn store_schema(store: &Zrecord) -> Result<Option<Schema>, DatasetError> {
    match Schema::read(store.filesystem(), store.path()) {
        Ok(schema) => Ok(Some(schema)),
        Err(DatasetError::NoSchema { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The dataset schema: `Ok(None)` for a plain store (no schema.json), `Err`
/// with the reason when schema.json is there but unusable.
pub fn read_schema(path: &Path) -> Result<Option<Schema>, DatasetError> {
    match Schema::read(&RealFs, path) {
        Ok(schema) => Ok(Some(schema)),
        Err(DatasetError::NoSchema { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The raw records that the schema's codec tried to compress and stored raw
/// because the frame was no smaller (the store keeps such a record raw):
/// all raw records when the schema's codec compresses, none when it is
/// raw, unknown (`None`) for a plain store, whose appends name their codec
/// one by one.
fn raw_not_shrunk(s: &Totals, schema: &Result<Option<Schema>, DatasetError>) -> Option<u64> {
    match schema {
        Ok(Some(schema)) if schema.codec != loaderx::Codec::Raw => Some(s.codec_records[0]),
        Ok(Some(_)) => Some(0),
        _ => None,
    }
}

/// The codecs line: the count per codec, and why records are raw when the
/// schema's codec compresses.
fn codecs_line(s: &Totals, schema: &Result<Option<Schema>, DatasetError>) -> String {
    let [raw, zstd, dict] = s.codec_records;
    let mut line = format!("raw {raw}, zstd {zstd}, zstd_dict {dict}");
    if let Some(n) = raw_not_shrunk(s, schema).filter(|&n| n > 0) {
        line.push_str(&format!(" (raw {n}: stored raw because compression did not pay)"));
    }
    line
}

/// logical / live, `None` when nothing is stored.
fn ratio(s: &Totals) -> Option<f64> {
    (s.live_bytes > 0).then(|| s.logical_bytes as f64 / s.live_bytes as f64)
}

fn to_table(path: &Path, s: &Totals, schema: &Result<Option<Schema>, DatasetError>, engine: &str) -> String {
    let codecs = codecs_line(s, schema);
    let ratio = ratio(s).map_or("n/a (nothing stored)".to_string(), |r| format!("{r:.3}x (logical / live)"));
    let dictionary = s.dict_bytes.map_or("none".to_string(), |b| format!("present, {}", human(b)));
    let schema_line = match schema {
        Ok(None) => "none (a plain store, no schema.json)".to_string(),
        Ok(Some(schema)) => format!("{}, codec {}", schema.describe(), schema.codec.name()),
        Err(e) => format!("unreadable: {e}"),
    };
    table(&[
        ("store", path.display().to_string()),
        ("records", records_line(s)),
        ("logical bytes", human(s.logical_bytes)),
        ("live bytes", human(s.live_bytes)),
        ("chunk bytes", human(s.chunk_file_bytes)),
        ("reclaimable", human(s.reclaimable)),
        ("chunks", s.chunks.to_string()),
        ("codecs", codecs),
        ("ratio", ratio),
        ("dictionary", dictionary),
        ("schema", schema_line),
        ("read engine", format!("{engine} (reads of records not in memory)")),
    ])
}

/// `N`, or `N in K shards (a, b, ...)` (the first and last few counts).
fn records_line(s: &Totals) -> String {
    let k = s.shard_records.len();
    if k <= 1 {
        return s.records.to_string();
    }
    let counts: Vec<String> = if k <= 8 {
        s.shard_records.iter().map(u64::to_string).collect()
    } else {
        let head = s.shard_records[..3].iter().map(u64::to_string);
        let tail = s.shard_records[k - 2..].iter().map(u64::to_string);
        head.chain(["...".to_string()]).chain(tail).collect()
    };
    format!("{} in {k} shards ({})", s.records, counts.join(", "))
}

/// The schema as a JSON object, keys as in schema.json.
pub fn schema_json(schema: &Schema) -> String {
    let (key, dims) = match &schema.layout {
        Layout::Fixed { shape } => ("shape", shape),
        Layout::Ragged { item_shape } => ("item_shape", item_shape),
    };
    let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
    Json::object()
        .field("dtype", schema.dtype.to_string())
        .field("ragged", schema.is_ragged())
        .field(key, dims)
        .field("codec", schema.codec.name())
        .finish()
}

fn to_json(path: &Path, s: &Totals, schema: &Result<Option<Schema>, DatasetError>, engine: &str) -> String {
    let [raw, zstd, dict] = s.codec_records;
    let codecs = Json::object().field("raw", raw).field("zstd", zstd).field("zstd_dict", dict).finish();
    let (schema_text, schema_error) = match schema {
        Ok(None) => ("null".to_string(), None),
        Ok(Some(schema)) => (schema_json(schema), None),
        Err(e) => ("null".to_string(), Some(e.to_string())),
    };
    let mut text = Json::object()
        .field("store", path.to_string_lossy().as_ref())
        .field("records", s.records)
        .field("shards", s.shard_records.len() as u64)
        .raw("shard_records", &crate::out::json_array(s.shard_records.iter().map(u64::to_string)))
        .field("live_bytes", s.live_bytes)
        .field("logical_bytes", s.logical_bytes)
        .field("chunk_bytes", s.chunk_file_bytes)
        .field("reclaimable", s.reclaimable)
        .field("chunks", s.chunks)
        .raw("codec_records", &codecs)
        .field("raw_compression_did_not_pay", raw_not_shrunk(s, schema))
        .field("compression_ratio", ratio(s))
        .field("dictionary", s.dict_bytes.is_some())
        .field("dict_bytes", s.dict_bytes)
        .raw("schema", &schema_text)
        .field("schema_error", schema_error)
        .field("read_engine", engine)
        .finish();
    text.push('\n');
    text
}
