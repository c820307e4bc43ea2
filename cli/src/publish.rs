//! `push` and `pull`: publish a store to object storage, fetch one back
//! (`docs/remote.md`). The library does both (`loaderx::publish`);
//! this prints what they did.

use std::path::Path;

use loaderx::io::remote::{Location, RemoteOptions, is_url};
use loaderx::publish::{PushReport, pull, push, remove_unlisted_objects};

use crate::CliResult;
use crate::out::{CliError, Json, human, json_array, print, table};

fn location(url: &str) -> CliResult<Location> {
    if !is_url(url) {
        return Err(CliError::new(format!("{url}: not an s3://bucket/prefix URL")).into());
    }
    Location::s3(url, RemoteOptions::from_env()).map_err(|e| CliError::with_source(format!("{url}: bad URL"), e).into())
}

pub fn run_push(store: &Path, url: &str, json: bool) -> CliResult<()> {
    let to = location(url)?;
    let report = push(store, &to)?;
    print(&if json { push_json(store, url, &report) } else { push_table(store, url, &report) })?;
    Ok(())
}

fn push_table(store: &Path, url: &str, r: &PushReport) -> String {
    let count = match r.rows {
        Some(rows) => ("rows", format!("{rows} (a table; {} records in its columns)", r.records)),
        None => ("records", r.records.to_string()),
    };
    table(&[
        ("store", store.display().to_string()),
        ("published at", url.to_string()),
        count,
        ("uploaded", format!("{} objects, {}", r.uploaded.len(), human(r.bytes))),
        ("unchanged", format!("{} objects (already published)", r.unchanged.len())),
        ("removed", format!("{} objects of the previous manifest", r.removed.len())),
    ])
}

fn push_json(store: &Path, url: &str, r: &PushReport) -> String {
    let names = |v: &[String]| json_array(v.iter().map(|n| serde_json::Value::from(n.as_str()).to_string()));
    let mut text = Json::object()
        .field("store", store.to_string_lossy().as_ref())
        .field("url", url)
        .field("records", r.records)
        .raw("rows", &r.rows.map_or("null".into(), |n| n.to_string()))
        .raw("uploaded", &names(&r.uploaded))
        .raw("unchanged", &names(&r.unchanged))
        .raw("removed", &names(&r.removed))
        .field("bytes_uploaded", r.bytes)
        .finish();
    text.push('\n');
    text
}

pub fn run_pull(url: &str, dir: &Path, json: bool) -> CliResult<()> {
    let from = location(url)?;
    let r = pull(&from, dir)?;
    let text = if json {
        let mut text = Json::object()
            .field("url", url)
            .field("dir", dir.to_string_lossy().as_ref())
            .field("records", r.records)
            .raw("rows", &r.rows.map_or("null".into(), |n| n.to_string()))
            .field("shards", r.shards as u64)
            .field("objects", r.objects as u64)
            .field("bytes", r.bytes)
            .finish();
        text.push('\n');
        text
    } else {
        table(&[
            ("pulled", url.to_string()),
            ("into", dir.display().to_string()),
            match r.rows {
                Some(rows) => ("rows", format!("{rows} (a table; {} records in {} stores)", r.records, r.shards)),
                None if r.shards > 1 => ("records", format!("{} in {} shards", r.records, r.shards)),
                None => ("records", r.records.to_string()),
            },
            ("objects", format!("{}, {} (CRC-32 checked)", r.objects, human(r.bytes))),
        ])
    };
    print(&text)?;
    Ok(())
}

/// `gc` by URL: the objects under `url` no published manifest lists,
/// written more than `keep_newer_than` seconds ago, removed; their URLs.
pub fn remove_unlisted(url: &str, keep_newer_than: f64) -> CliResult<Vec<String>> {
    let keep = std::time::Duration::try_from_secs_f64(keep_newer_than)
        .map_err(|e| CliError::new(format!("--keep-newer-than {keep_newer_than}: {e}")))?;
    let at = location(url)?;
    let report = remove_unlisted_objects(&at, keep)?;
    Ok(report.removed.iter().map(|name| format!("{}/{name}", at.url())).collect())
}
