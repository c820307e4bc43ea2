//! `checksum`: covers a store with checksums ([`Zrecord::cover`]): writes
//! `sums.zr` for a store written before checksums, and sums the records
//! another writer (the reference package) appended or moved. For a sharded
//! dataset, every shard in turn.

use std::path::Path;

use loaderx::CoverReport;
use loaderx::dataset::{ShardTable, shard_dir};
use loaderx::io::real::RealFs;

use crate::CliResult;
use crate::out::{Json, json_array, print, table};

pub fn run(path: &Path, json: bool) -> CliResult<()> {
    let dirs = match ShardTable::read(&RealFs, path)? {
        Some(shards) => (0..shards.shards()).map(|k| shard_dir(path, k)).collect(),
        None => vec![path.to_path_buf()],
    };
    let mut reports = Vec::with_capacity(dirs.len());
    for dir in &dirs {
        let mut store = crate::out::open_to_mutate(dir, false)?;
        reports.push(store.cover()?);
    }
    let text = if json { to_json(path, &dirs, &reports) } else { to_text(&dirs, &reports) };
    print(&text)?;
    Ok(())
}

fn to_text(dirs: &[std::path::PathBuf], reports: &[CoverReport]) -> String {
    let mut text = String::new();
    for (dir, r) in dirs.iter().zip(reports) {
        let created = if r.created { " (sums.zr created)" } else { "" };
        let mut rows = vec![
            ("store", format!("{}{created}", dir.display())),
            ("records", r.records.to_string()),
            ("summed", summed(r)),
        ];
        if r.failed > 0 {
            rows.push(("failed", format!("{} records do not decode: `loaderx verify` names them", r.failed)));
        }
        text.push_str(&table(&rows));
    }
    text
}

/// How many records were summed, and what covered the others.
fn summed(r: &CoverReport) -> String {
    match r.records.saturating_sub(r.summed).saturating_sub(r.failed) {
        0 => r.summed.to_string(),
        covered => format!("{} (the other {covered} were covered already)", r.summed),
    }
}

fn to_json(path: &Path, dirs: &[std::path::PathBuf], reports: &[CoverReport]) -> String {
    let stores = json_array(dirs.iter().zip(reports).map(|(dir, r)| {
        Json::object()
            .field("store", dir.to_string_lossy().as_ref())
            .field("records", r.records)
            .field("summed", r.summed)
            .field("failed", r.failed)
            .field("created", r.created)
            .finish()
    }));
    let mut text = Json::object().field("path", path.to_string_lossy().as_ref()).raw("stores", &stores).finish();
    text.push('\n');
    text
}
