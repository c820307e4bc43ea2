//! `schema` and `dataset`: the dataset layer's `schema.json` and `.npy`
//! header decoders, and the datasets over a store they describe.
//!
//! `schema` (decoders only): an arbitrary or structured `schema.json` (every
//! key present or not, of the right type or not, dtype strings NumPy has and
//! has not, dimensions up to `u64::MAX`) parsed, printed and parsed again,
//! and the same as a sharded dataset's `shards.json` and inside one (counts
//! and names right or wrong);
//! or a `.npy` file's header read (`npy.rs`). `dataset`: such a
//! `schema.json` over a store whose records fit the schema or not, opened
//! as a [`Dataset`] and as a [`RaggedDataset`]: a typed error or a valid
//! dataset whose every record reads back exactly as stored, in the schema's
//! shape.

use std::path::Path;

use loaderx::Codec;
use loaderx::dataset::{DType, Dataset, DatasetError, Layout, RaggedDataset, Schema, ShardTable, pad_bytes};

use crate::input::In;
use crate::store::{Disk, FileModel};

/// The `schema` target.
pub fn schema(data: &[u8]) {
    let mut u = In::new(data);
    if u.bool() {
        crate::npy::header(&mut u);
    } else {
        let text = schema_text(&mut u);
        check_schema(&text);
        check_manifest(&text);
        check_manifest(&manifest_text(&mut u, &text));
    }
}

/// A `shards.json` around `schema` (a schema's text, valid or not): shard
/// counts and names right or wrong, a pending mark or not.
fn manifest_text(u: &mut In, schema: &[u8]) -> Vec<u8> {
    let shards: Vec<String> = (0..u.below(4))
        .map(|k| {
            let dir = if u.below(8) == 0 {
                "\"../x\"".to_string()
            } else if k == 0 {
                "\".\"".into()
            } else {
                format!("\"shard-{k:06}\"")
            };
            if u.bool() { format!("{{\"dir\":{dir},\"records\":{}}}", dim(u)) } else { format!("{{\"dir\":{dir}}}") }
        })
        .collect();
    let pending = if u.below(4) == 0 {
        format!(",\"pending\":{{\"shard\":{},\"records\":{}}}", dim(u), dim(u))
    } else {
        String::new()
    };
    let mut text = b"{\"format\":\"loaderx-sharded\",\"version\":1,\"schema\":".to_vec();
    text.extend_from_slice(schema);
    text.extend_from_slice(format!(",\"shards\":[{}]{pending}}}", shards.join(",")).as_bytes());
    text
}

/// A manifest that parses has 1 to `SHARDS_MAX` shards, every count within a
/// store's capacity and their sum within u64, a pending mark on a sealed
/// shard, and prints as text that parses back to itself.
fn check_manifest(text: &[u8]) {
    let Ok(text) = std::str::from_utf8(text) else { return };
    let Ok(m) = ShardTable::parse(text, Path::new("shards.json")) else { return };
    assert!((1..=loaderx::dataset::SHARDS_MAX).contains(&m.shards()));
    assert!(m.sealed.iter().all(|&n| n <= u64::from(loaderx::format::RECORDS_MAX)));
    assert!(loaderx::dataset::ShardIndex::new(&m.sealed).is_ok());
    assert!(m.pending.is_none_or(|p| p.shard < m.sealed.len()));
    let again = ShardTable::parse(&m.to_json(), Path::new("shards.json")).expect("to_json parses");
    assert_eq!(again, m, "shards.json does not round-trip");
}

/// The `dataset` target.
pub fn dataset(data: &[u8]) {
    crate::in_pool(|| over_store(&mut In::new(data)));
}

pub(crate) const DTYPES: [&str; 24] = [
    "<f4", "<f8", "|u1", "|i1", "<i2", "<i4", "<i8", "<u2", "<u4", "<u8", "|b1", "<f2", ">f4", ">i8", "=f4", "f4",
    "<c8", "<c16", "|S4", "<U3", "|V8", "O", "<M8[ns]", "<f0",
];

/// A dimension: small, zero, large, or not a non-negative integer at all.
fn dim(u: &mut In) -> String {
    match u.below(12) {
        0 => "0".into(),
        1 => "1048576".into(),
        2 => u64::MAX.to_string(),
        3 => "18446744073709551616".into(),
        4 => "-1".into(),
        5 => "1.5".into(),
        6 => "\"3\"".into(),
        7 => u.u64().to_string(),
        _ => (1 + u.below(8)).to_string(),
    }
}

/// A JSON string literal of arbitrary text.
fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `schema.json`'s text: arbitrary bytes, or a JSON object whose keys are
/// each right, wrong or missing.
fn schema_text(u: &mut In) -> Vec<u8> {
    if u.below(6) == 0 {
        return u.bytes(512);
    }
    let mut keys: Vec<String> = Vec::new();
    let mut key = |u: &mut In, name: &str, right: &str, wrong: &[&str]| match u.below(10) {
        0 => {}
        1 => keys.push(format!("{}: {}", json_str(name), wrong[u.below(wrong.len() as u64) as usize])),
        _ => keys.push(format!("{}: {right}", json_str(name))),
    };
    key(u, "format", "\"loaderx-zrecord\"", &["\"loaderx\"", "1", "null"]);
    key(u, "version", "1", &["2", "\"1\"", "1.0", "-1", "18446744073709551616"]);
    let ragged = u.bool();
    if ragged || u.below(4) == 0 {
        key(u, "ragged", if ragged { "true" } else { "false" }, &["1", "\"true\"", "null"]);
    }
    let dtype = if u.below(8) == 0 {
        json_str(&String::from_utf8_lossy(&u.bytes(8)))
    } else {
        json_str(DTYPES[u.below(DTYPES.len() as u64) as usize])
    };
    key(u, "dtype", &dtype, &["4", "[\"<f4\"]"]);
    let dims: Vec<String> = (0..u.below(5)).map(|_| dim(u)).collect();
    let shape = format!("[{}]", dims.join(", "));
    let shape_key = if ragged == (u.below(8) != 0) { "item_shape" } else { "shape" };
    key(u, shape_key, &shape, &["3", "null", "{}"]);
    let codec = ["\"raw\"", "\"zstd\"", "\"zstd_dict\""][u.below(3) as usize];
    key(u, "codec", codec, &["\"lz4\"", "0"]);
    if u.below(8) == 0 {
        keys.push("\"extra\": {\"nested\": [1, 2]}".into());
    }
    let mut text = format!("{{\n  {}\n}}\n", keys.join(",\n  ")).into_bytes();
    if u.below(16) == 0 && !text.is_empty() {
        let at = u.below(text.len() as u64) as usize;
        text[at] = u.u8();
    }
    text
}

/// A parsed schema prints back to itself; its dtype too.
fn check_schema(text: &[u8]) {
    let Ok(text) = std::str::from_utf8(text) else { return };
    let Ok(schema) = Schema::parse(text, Path::new("schema.json")) else { return };
    let unit = schema.row_bytes().expect("a parsed schema has a valid unit size");
    assert!(unit <= loaderx::format::RECORD_BYTES_MAX as usize);
    let again = Schema::parse(&schema.to_json(), Path::new("schema.json")).expect("to_json parses");
    assert_eq!(again, schema, "schema.json does not round-trip");
    assert_eq!(DType::parse(&schema.dtype.to_string()).ok(), Some(schema.dtype), "dtype does not round-trip");
    let _ = schema.describe();
}

fn over_store(u: &mut In) {
    let text = schema_text(u);
    check_schema(&text);
    let parsed = std::str::from_utf8(&text).ok().and_then(|t| Schema::parse(t, Path::new("schema.json")).ok());
    let unit = parsed.as_ref().and_then(|s| s.row_bytes().ok()).unwrap_or(4);

    // The store: records that fit the schema, mostly.
    let disk = Disk::new();
    disk.mkdir(&Disk::dir());
    let n = u.below(7) as usize;
    let records: Vec<Vec<u8>> = (0..n)
        .map(|_| {
            let len = match (u.below(6), parsed.as_ref().map(Schema::is_ragged)) {
                (0, _) => u.upto(64),
                (1, _) => unit + 1,
                (_, Some(true)) => unit * u.upto(3),
                _ => unit,
            };
            u.content(len.min(1 << 20))
        })
        .collect();
    {
        let store = disk.open(false).expect("a new store opens");
        if !records.is_empty() {
            let codec = [Codec::Raw, Codec::Zstd][u.below(2) as usize];
            let mut offsets = Vec::new();
            let mut at = 0;
            for r in &records {
                offsets.push(at);
                at += r.len() as u64;
            }
            let lens: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
            store.append_var(&records.concat(), &offsets, &lens, codec).expect("the append works");
        }
    }
    if u.below(16) != 0 {
        disk.put("schema.json", &FileModel::whole(text));
    }

    let dir = Disk::dir();
    if verbose() {
        eprintln!("schema {:?}, {} records", parsed.as_ref().map(Schema::describe), records.len());
    }
    match Dataset::open_in(disk.vfs.clone(), &dir) {
        Ok(ds) => check_fixed(&ds, parsed.as_ref(), &records),
        Err(e) => check_refusal(&e, parsed.as_ref(), false),
    }
    match RaggedDataset::open_in(disk.vfs.clone(), &dir) {
        Ok(ds) => check_ragged(u, &ds, parsed.as_ref(), &records),
        Err(e) => check_refusal(&e, parsed.as_ref(), true),
    }
    disk.assert_no_fault();
}

/// A refusal of a schema that parsed must be for the other kind.
fn check_refusal(e: &DatasetError, parsed: Option<&Schema>, ragged: bool) {
    if let Some(schema) = parsed {
        if let DatasetError::NoSchema { .. } = e {
            return; // schema.json was not written
        }
        assert!(
            matches!(e, DatasetError::WrongKind { .. }) && schema.is_ragged() != ragged,
            "a valid schema {} refused as {}: {e}",
            schema.describe(),
            if ragged { "ragged" } else { "fixed" }
        );
    }
}

fn check_fixed(ds: &Dataset, parsed: Option<&Schema>, records: &[Vec<u8>]) {
    let schema = parsed.expect("the dataset opened, so its schema parses");
    assert_eq!(ds.schema(), schema);
    let Layout::Fixed { shape } = &schema.layout else { panic!("a ragged schema opened as fixed") };
    assert_eq!(ds.shape(), &shape[..]);
    assert_eq!(ds.len(), records.len() as u64);
    let rb = ds.row_bytes();
    for (i, r) in records.iter().enumerate() {
        match ds.get(i as u64) {
            Ok(t) => {
                assert_eq!(r.len(), rb, "record {i} of {} bytes read as a {rb}-byte record", r.len());
                assert_eq!(t.as_bytes(), &r[..], "record {i}");
                assert_eq!(t.shape(), ds.shape());
            }
            Err(_) => assert_ne!(r.len(), rb, "record {i} fits the schema but does not read"),
        }
    }
    let fitting: Vec<u64> = (0..records.len() as u64).filter(|&i| records[i as usize].len() == rb).collect();
    let batch = ds.gather(&fitting).expect("records that fit gather");
    assert_eq!(batch.shape(), &ds.batch_shape(fitting.len())[..]);
    let want: Vec<u8> = fitting.iter().flat_map(|&i| records[i as usize].iter().copied()).collect();
    assert_eq!(batch.as_bytes(), &want[..]);
    let mut wrong = vec![0u8; fitting.len() * rb + 1];
    assert!(ds.gather_bytes(&fitting, &mut wrong).is_err(), "gather_bytes into a buffer of the wrong size");
    assert!(ds.get(records.len() as u64).is_err());
}

fn check_ragged(u: &mut In, ds: &RaggedDataset, parsed: Option<&Schema>, records: &[Vec<u8>]) {
    let schema = parsed.expect("the dataset opened, so its schema parses");
    assert_eq!(ds.schema(), schema);
    assert!(schema.is_ragged());
    assert_eq!(ds.len(), records.len() as u64);
    let row = ds.row_bytes();
    assert!(row > 0);
    let fitting: Vec<u64> =
        (0..records.len() as u64).filter(|&i| records[i as usize].len().is_multiple_of(row)).collect();
    for i in 0..records.len() as u64 {
        let counts = ds.row_counts(&[i]);
        assert_eq!(counts.is_ok(), fitting.contains(&i), "record {i}: {counts:?}");
    }
    let batch = ds.gather(&fitting).expect("whole rows gather");
    assert_eq!(batch.len(), fitting.len());
    assert_eq!(batch.row_splits.len(), fitting.len() + 1);
    let values = batch.values.as_bytes();
    for (k, &i) in fitting.iter().enumerate() {
        let (start, end) = (batch.row_splits[k] as usize * row, batch.row_splits[k + 1] as usize * row);
        assert_eq!(&values[start..end], &records[i as usize][..], "record {i}");
    }
    assert_eq!(values.len(), batch.row_splits[fitting.len()] as usize * row);
    let pad_element = u.fill(ds.dtype().itemsize());
    let max_len = if u.bool() { None } else { Some(u.upto(4)) };
    let fused = ds.gather_padded_bytes(&fitting, max_len, &pad_element);
    let separate = pad_bytes(&batch.values, &batch.row_splits, max_len, &pad_element);
    match (&fused, &separate) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "gather_padded differs from gather + pad"),
        (Err(_), Err(_)) => {}
        _ => panic!("gather_padded {:?} but pad {:?}", fused.as_ref().err(), separate.as_ref().err()),
    }
    // Arbitrary row_splits are checked, not trusted.
    let splits: Vec<u64> = (0..u.below(5)).map(|_| u.below(8)).collect();
    let _ = pad_bytes(&batch.values, &splits, None, &pad_element);
    if !records.is_empty() && fitting.len() < records.len() {
        assert!(ds.gather(&(0..records.len() as u64).collect::<Vec<_>>()).is_err(), "a partial row gathered");
    }
}

pub(crate) fn verbose() -> bool {
    std::env::var_os("LOADERX_FUZZ_VERBOSE").is_some()
}
