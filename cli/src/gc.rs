//! `gc`: removes the staged tables of a table's parallel writes no longer
//! running (`loaderx::table::remove_staging`; docs/ray.md), and the
//! shard directories a crashed commit left unlisted in its columns
//! (`remove_unlisted_shards`, when no writer holds the table); by URL,
//! the objects no published manifest lists (`publish.rs`).

use std::path::Path;

use crate::CliResult;
use crate::out::{Json, is_remote, json_array, print};

/// Runs `gc` on the table at `table` (or, by URL, on what is published
/// there, keeping objects younger than `keep_newer_than` seconds): prints
/// each removed directory or object, or one JSON object `{"removed": [...]}`.
pub fn run(table: &Path, keep_newer_than: f64, json: bool) -> CliResult<()> {
    let paths = match table.to_str().filter(|_| is_remote(table)) {
        Some(url) => crate::publish::remove_unlisted(url, keep_newer_than)?,
        None => local(table)?,
    };
    report(&paths, json)
}

/// The staging and unlisted shards removed from the table at `table`.
fn local(table: &Path) -> CliResult<Vec<String>> {
    let mut removed = loaderx::table::remove_staging(table)?;
    // What a crashed commit left in the columns, if no writer holds the table.
    if table.join(loaderx::format::TABLE_FILE).exists() {
        let opts = loaderx::dataset::WriteOptions::default();
        removed.extend(loaderx::table::remove_unlisted_shards(table, &opts)?.unwrap_or_default());
    }
    Ok(removed.iter().map(|p| p.display().to_string()).collect())
}

fn report(paths: &[String], json: bool) -> CliResult<()> {
    if json {
        let removed = json_array(paths.iter().map(|p| serde_json::Value::from(p.as_str()).to_string()));
        print(&format!("{}\n", Json::object().raw("removed", &removed).finish()))?;
    } else if paths.is_empty() {
        print("nothing to remove\n")?;
    } else {
        print(&paths.iter().map(|p| format!("removed {p}\n")).collect::<String>())?;
    }
    Ok(())
}
