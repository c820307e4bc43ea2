//! `gc`: removes the staged tables of a table's parallel writes no longer
//! running (`loaderx::table::remove_staging`; docs/ray.md), and the
//! shard directories a crashed commit left unlisted in its columns
//! (`remove_unlisted_shards`, when no writer holds the table).

use std::path::Path;

use crate::CliResult;
use crate::out::{Json, json_array, print};

/// Runs `gc` on the table at `table`: prints each removed directory, or
/// one JSON object `{"removed": [...]}`.
pub fn run(table: &Path, json: bool) -> CliResult<()> {
    let mut removed = loaderx::table::remove_staging(table)?;
    // What a crashed commit left in the columns, if no writer holds the table.
    if table.join(loaderx::format::TABLE_FILE).exists() {
        let opts = loaderx::dataset::WriteOptions::default();
        removed.extend(loaderx::table::remove_unlisted_shards(table, &opts)?.unwrap_or_default());
    }
    let paths: Vec<String> = removed.iter().map(|p| p.display().to_string()).collect();
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
