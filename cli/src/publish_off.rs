//! `push`, `pull` and `gc` by URL in a build without the `remote` feature: each is an
//! error that says how to get a build with it (`publish.rs` is the real one).

use std::path::Path;

use crate::CliResult;
use crate::out::{CliError, WITHOUT_REMOTE};

pub fn run_push(_store: &Path, url: &str, _json: bool) -> CliResult<()> {
    Err(CliError::new(format!("{url}: {WITHOUT_REMOTE}")).into())
}

pub fn run_pull(url: &str, _dir: &Path, _json: bool) -> CliResult<()> {
    Err(CliError::new(format!("{url}: {WITHOUT_REMOTE}")).into())
}

pub fn remove_unlisted(url: &str, _keep_newer_than: f64) -> CliResult<Vec<String>> {
    Err(CliError::new(format!("{url}: {WITHOUT_REMOTE}")).into())
}
