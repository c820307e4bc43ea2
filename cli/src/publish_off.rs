//! `push` and `pull` in a build without the `remote` feature: each is an
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
