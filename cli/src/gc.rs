//! `gc`: removes the staged tables of a table's parallel writes no longer
//! running (`loaderx::table::remove_staging`; docs/ray.md).

use std::path::Path;

use crate::CliResult;
use crate::out::{Json, json_array, print};

/// Runs `gc` on the table at `table`: prints each removed directory, or
/// one JSON object `{"removed": [...]}`.
pub fn run(table: &Path, json: bool) -> CliResult<()> {
    let removed = loaderx::table::remove_staging(table)?;
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
