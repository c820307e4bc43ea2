//! `verify`: the store's full integrity check ([`Zrecord::verify`]) plus the
//! dataset's: schema.json parses, and every record's length fits it.

use std::path::Path;

use loaderx::dataset::{Layout, Schema, ShardTable, shard_dir};
use loaderx::io::real::RealFs;
use loaderx::{Corruption, Error, VerifyReport, Zrecord};

use crate::out::{Json, json_array, print, progress_bar};
use crate::stats::{schema_json, store_schema};
use crate::{CliResult, Done};

/// Most problems listed; the rest are counted.
const LISTED_MAX: usize = VerifyReport::PROBLEMS_KEPT;

/// One problem, as listed.
struct Problem {
    /// The record it concerns, if one.
    index: Option<u64>,
    /// A short name scripts can match on.
    kind: &'static str,
    /// What is wrong, without the store's path.
    message: String,
}

/// Everything found: the listed problems and the count of all of them.
#[derive(Default)]
struct Findings {
    records: u64,
    /// Records no checksum covers (`loaderx checksum` covers them).
    unchecked: u64,
    listed: Vec<Problem>,
    total: u64,
    schema: Option<Schema>,
    /// For a sharded dataset: the shard checked now (its problems are
    /// listed with global indices, their messages naming the shard).
    shard: Option<(usize, u64)>,
    /// A sharded dataset's shard count.
    shards: Option<usize>,
}

impl Findings {
    fn note(&mut self, mut problem: Problem) {
        self.total += 1;
        if let Some((k, start)) = self.shard {
            problem.index = problem.index.map(|i| i + start);
            problem.message = format!("shard {k}: {}", problem.message);
        }
        if self.listed.len() < LISTED_MAX {
            self.listed.push(problem);
        }
    }
}

pub fn run(path: &Path, json: bool) -> CliResult<Done> {
    let mut findings = Findings::default();
    if crate::records::is_sharded(path) {
        check_sharded(std::sync::Arc::new(RealFs), path, &mut findings)?;
        let text = if json { to_json(path, &findings) } else { to_text(path, &findings) };
        print(&text)?;
        return Ok(if findings.total == 0 { Done::Ok } else { Done::Problems });
    }
    match crate::out::open_read_only(path, loaderx::ReadMode::Auto) {
        // A published sharded dataset: its root store is shard 0 only.
        Ok((_, vfs, at)) if crate::records::is_sharded_in(&*vfs, &at) => check_sharded(vfs, &at, &mut findings)?,
        Ok((store, _, _)) => check_store(&store, &mut findings)?,
        // A store that cannot open because its bytes are inconsistent is a
        // finding, not a failure to check.
        Err(e) if opening_found_damage(&e) => findings.note(problem(&e)),
        Err(e) => return Err(e.into()),
    }
    let text = if json { to_json(path, &findings) } else { to_text(path, &findings) };
    print(&text)?;
    Ok(if findings.total == 0 { Done::Ok } else { Done::Problems })
}

fn opening_found_damage(e: &Error) -> bool {
    matches!(
        e,
        Error::Corrupt { .. } | Error::MetaTruncated { .. } | Error::MetaMissing { .. } | Error::NotAStore { .. }
    )
}

fn check_store(store: &Zrecord, findings: &mut Findings) -> CliResult<()> {
    let bar = progress_bar(u64::from(store.len()), "verify", false);
    let report = store.verify_with_progress(|checked, _| {
        if let Some(bar) = &bar {
            bar.set_position(u64::from(checked));
        }
    });
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let report = report?;
    findings.records += u64::from(report.records);
    findings.unchecked += u64::from(report.unchecked);
    for e in &report.problems {
        findings.note(problem(e));
    }
    // Those the library counted but did not keep.
    findings.total += report.problems_total - report.problems.len() as u64;
    match store_schema(store) {
        Ok(None) => {}
        Ok(Some(schema)) => {
            check_lengths(store, &schema, findings);
            findings.schema = Some(schema);
        }
        Err(e) => findings.note(Problem { index: None, kind: "schema", message: e.to_string() }),
    }
    Ok(())
}

/// A sharded dataset: the shard table parses, and each shard it names is
/// there, holds the shard table's schema and count, and passes the store's
/// and the schema's checks.
fn check_sharded(vfs: std::sync::Arc<dyn loaderx::io::Vfs>, path: &Path, findings: &mut Findings) -> CliResult<()> {
    let shard_table = match ShardTable::read(&*vfs, path) {
        Ok(m) => m.expect("a sharded dataset has a manifest"),
        Err(e) => {
            findings.note(Problem { index: None, kind: "manifest", message: e.to_string() });
            return Ok(());
        }
    };
    let mut start = 0u64;
    for k in 0..shard_table.shards() {
        let dir = shard_dir(path, k);
        findings.shard = Some((k, start));
        let options = loaderx::Options { read_only: true, ..loaderx::Options::default() };
        let store = match Zrecord::open_in(vfs.clone(), &dir, options) {
            Ok(store) => store,
            Err(e) if opening_found_damage(&e) => {
                findings.note(problem(&e));
                continue;
            }
            Err(Error::NoDirectory { .. } | Error::NoStore { .. }) => {
                let message = format!("{} is missing", dir.display());
                findings.note(Problem { index: None, kind: "shard_missing", message });
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        check_store(&store, findings)?;
        if let Ok(Some(schema)) = store_schema(&store)
            && schema != shard_table.schema
        {
            let message = format!("holds {}, the manifest says {}", schema.describe(), shard_table.schema.describe());
            findings.note(Problem { index: None, kind: "shard_schema", message });
        }
        let len = u64::from(store.len());
        let pending = shard_table.pending.filter(|p| p.shard == k).map(|p| p.records);
        if let Some(&recorded) = shard_table.sealed.get(k)
            && len != recorded
            && Some(len) != pending
        {
            let message = format!("holds {len} records, the manifest records {recorded}");
            findings.note(Problem { index: None, kind: "shard_length", message });
        }
        start += len;
    }
    findings.shard = None;
    findings.shards = Some(shard_table.shards());
    findings.schema = Some(shard_table.schema);
    Ok(())
}

/// Every record's length against the schema: a fixed-shape record is
/// exactly one item, a ragged one a whole number of rows. Records whose
/// entry is broken were reported by the store's check and are skipped.
fn check_lengths(store: &Zrecord, schema: &Schema, findings: &mut Findings) {
    let Ok(unit) = schema.row_bytes() else { return };
    let unit = unit as u64;
    let mut one = [0u32];
    for index in 0..u64::from(store.len()) {
        if store.lengths(&[index], &mut one).is_err() {
            continue;
        }
        let len = u64::from(one[0]);
        let message = match &schema.layout {
            Layout::Fixed { .. } if len != unit => {
                format!("{len} bytes, but a record of {} is {unit} bytes (schema.json)", schema.describe())
            }
            Layout::Ragged { .. } if unit > 0 && len % unit != 0 => {
                format!("{len} bytes, not a whole number of {unit}-byte rows of {} (schema.json)", schema.describe())
            }
            _ => continue,
        };
        findings.note(Problem { index: Some(index), kind: "schema_length", message });
    }
}

/// The listed form of a store error: index, kind, and the message without
/// the store's path where the error has a record.
fn problem(e: &Error) -> Problem {
    match e {
        Error::Corrupt { index, what, .. } => {
            Problem { index: *index, kind: corruption_kind(what), message: what.to_string() }
        }
        Error::NoDictionary { index, .. } => Problem {
            index: *index,
            kind: "no_dictionary",
            message: "needs the dictionary, and dict.zr is missing".to_string(),
        },
        Error::LengthMismatch { index, .. } => Problem { index: Some(*index), kind: "length", message: e.to_string() },
        Error::MetaTruncated { .. } => Problem { index: None, kind: "meta_truncated", message: e.to_string() },
        Error::MetaMissing { .. } => Problem { index: None, kind: "meta_missing", message: e.to_string() },
        Error::NotAStore { .. } => Problem { index: None, kind: "not_a_store", message: e.to_string() },
        other => Problem { index: None, kind: "other", message: other.to_string() },
    }
}

fn corruption_kind(what: &Corruption) -> &'static str {
    match what {
        Corruption::UnwrittenEntry => "unwritten_entry",
        Corruption::UnknownCodec(_) => "unknown_codec",
        Corruption::ChunkPastLast { .. } => "chunk_past_last",
        Corruption::ChunkMissing { .. } => "chunk_missing",
        Corruption::PastChunkEnd { .. } => "past_chunk_end",
        Corruption::LogicTooLarge(_) => "logic_too_large",
        Corruption::RawLengthMismatch { .. } => "raw_length_mismatch",
        Corruption::Decode(_) => "decode",
        Corruption::DecodedLength { .. } => "decoded_length",
        Corruption::Header(_) => "header",
        Corruption::Intent(_) => "intent",
        Corruption::Overlap { .. } => "overlap",
        Corruption::Dictionary(_) => "dictionary",
        Corruption::Checksum { .. } => "checksum",
        _ => "corrupt",
    }
}

fn to_text(path: &Path, f: &Findings) -> String {
    let mut text = String::new();
    for p in &f.listed {
        match p.index {
            Some(index) => text.push_str(&format!("record {index}: {}\n", p.message)),
            None => text.push_str(&format!("{}\n", p.message)),
        }
    }
    let unlisted = f.total - f.listed.len() as u64;
    if unlisted > 0 {
        text.push_str(&format!("... and {unlisted} more problems (the first {} are listed)\n", f.listed.len()));
    }
    let schema = f.schema.as_ref().map_or(String::new(), |s| format!(", schema {}", s.describe()));
    let schema = match f.shards {
        Some(n) => format!("{schema}, {n} shards"),
        None => schema,
    };
    let schema = match f.unchecked {
        0 => schema,
        n => format!("{schema}; {n} without a checksum (`loaderx checksum` covers them)"),
    };
    if f.total == 0 {
        text.push_str(&format!("{}: ok: {} records checked{schema}\n", path.display(), f.records));
    } else {
        let s = if f.total == 1 { "" } else { "s" };
        text.push_str(&format!("{}: {} problem{s} in {} records{schema}\n", path.display(), f.total, f.records));
    }
    text
}

fn to_json(path: &Path, f: &Findings) -> String {
    let problems = json_array(f.listed.iter().map(|p| {
        Json::object().field("index", p.index).field("kind", p.kind).field("message", p.message.as_str()).finish()
    }));
    let schema = f.schema.as_ref().map_or("null".to_string(), schema_json);
    let mut text = Json::object()
        .field("store", path.to_string_lossy().as_ref())
        .field("ok", f.total == 0)
        .field("records", f.records)
        .field("problems_total", f.total)
        .field("unchecked", f.unchecked)
        .raw("problems", &problems)
        .raw("schema", &schema)
        .finish();
    text.push('\n');
    text
}
