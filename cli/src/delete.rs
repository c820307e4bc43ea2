//! `delete`: the store's swap-with-last delete ([`Zrecord::delete`]), atomic
//! across a crash. Every index is checked before anything changes. Refused
//! while the store is open for reading elsewhere, unless `--wait`.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use crate::CliResult;
use loaderx::dataset::{ShardDelete, ShardedMutation};

use crate::out::{CliError, Json, human, json_array, print, table};

/// Largest `--from-file` read: 2^24 indices of up to 20 digits each, with room.
const FROM_FILE_BYTES_MAX: u64 = 1 << 30;

pub fn run(path: &Path, mut indices: Vec<u64>, from_file: Option<&Path>, how: How, json: bool) -> CliResult<()> {
    if let Some(file) = from_file {
        indices.extend(read_indices(file)?);
    }
    let How { shard, wait } = how;
    if crate::records::is_sharded(path) {
        return run_sharded(path, &indices, shard, wait, json);
    }
    if let Some(k) = shard.filter(|&k| k != 0) {
        return Err(CliError::new(format!("{}: not a sharded dataset, so no shard {k}", path.display())).into());
    }
    let mut store = crate::out::open_to_mutate(path, wait)?;
    let before = store.len();
    store.delete(&indices)?;
    let after = store.len();
    let reclaimable = store.stats()?.reclaimable;
    let deleted = before - after;
    let text = if json {
        let mut text = Json::object()
            .field("store", path.to_string_lossy().as_ref())
            .field("deleted", deleted)
            .field("records_before", before)
            .field("records", after)
            .field("reclaimable", reclaimable)
            .finish();
        text.push('\n');
        text
    } else {
        table(&[
            ("store", path.display().to_string()),
            ("deleted", format!("{deleted} records ({} indices given)", indices.len())),
            ("records", format!("{after} (was {before}; the last records moved into the holes)")),
            ("reclaimable", format!("{} (run `loaderx compact` to free it)", human(reclaimable))),
        ])
    };
    print(&text)?;
    Ok(())
}

/// Which records a delete names, and whether it waits for readers.
pub struct How {
    /// Indices local to this shard (`--shard`); global indices otherwise.
    pub shard: Option<usize>,
    pub wait: bool,
}

/// A sharded dataset: the indices mapped to their shards (all checked
/// first), each shard's part deleted in turn (each atomic), and a line per
/// shard; a failure part-way reports the shards done before it.
fn run_sharded(path: &Path, indices: &[u64], shard: Option<usize>, wait: bool, json: bool) -> CliResult<()> {
    let mut dataset = ShardedMutation::open(path, wait)?;
    let before: u64 = dataset.counts().iter().sum();
    let parts = match shard {
        Some(k) if k >= dataset.shards() => {
            return Err(CliError::new(format!("{}: shard {k} of {} shards", path.display(), dataset.shards())).into());
        }
        Some(k) => vec![(k, indices.to_vec())],
        None => dataset.split(indices)?,
    };
    let mut done: Vec<ShardDelete> = Vec::new();
    for (k, local) in parts {
        match dataset.delete_in(k, &local) {
            Ok(d) => done.push(d),
            Err(e) => {
                let finished: Vec<String> = done.iter().map(|d| format!("shard {}", d.shard)).collect();
                let finished = if finished.is_empty() { "none".to_string() } else { finished.join(", ") };
                return Err(CliError::with_source(
                    format!("{}: the delete in shard {k} failed (deleted before it: {finished})", path.display()),
                    e,
                )
                .into());
            }
        }
    }
    let deleted: u64 = done.iter().map(|d| d.before - d.after).sum();
    let text = if json {
        let shards = json_array(done.iter().map(|d| {
            Json::object()
                .field("shard", d.shard as u64)
                .field("deleted", d.before - d.after)
                .field("records_before", d.before)
                .field("records", d.after)
                .finish()
        }));
        let mut text = Json::object()
            .field("store", path.to_string_lossy().as_ref())
            .field("deleted", deleted)
            .field("records_before", before)
            .field("records", before - deleted)
            .raw("shards", &shards)
            .finish();
        text.push('\n');
        text
    } else {
        let mut rows = vec![
            ("dataset".to_string(), format!("{} ({} shards)", path.display(), dataset.shards())),
            ("deleted".to_string(), format!("{deleted} records ({} indices given)", indices.len())),
            ("records".to_string(), format!("{} (was {before})", before - deleted)),
        ];
        for d in &done {
            rows.push((
                format!("shard {}", d.shard),
                format!(
                    "{} deleted, {} -> {} (its last records moved into the holes)",
                    d.before - d.after,
                    d.before,
                    d.after
                ),
            ));
        }
        let rows: Vec<(&str, String)> = rows.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        table(&rows)
    };
    print(&text)?;
    Ok(())
}

/// The indices in `file` (`-`: standard input): whitespace-separated
/// decimal numbers, `#` to the end of a line a comment.
fn read_indices(file: &Path) -> CliResult<Vec<u64>> {
    let name = file.display();
    let mut text = String::new();
    let read = if file == Path::new("-") {
        io::stdin().lock().take(FROM_FILE_BYTES_MAX + 1).read_to_string(&mut text)
    } else {
        let f = File::open(file).map_err(|e| CliError::with_source(format!("{name}: cannot open"), e))?;
        f.take(FROM_FILE_BYTES_MAX + 1).read_to_string(&mut text)
    };
    read.map_err(|e| CliError::with_source(format!("{name}: cannot read"), e))?;
    if text.len() as u64 > FROM_FILE_BYTES_MAX {
        return Err(CliError::new(format!("{name}: longer than {FROM_FILE_BYTES_MAX} bytes")).into());
    }
    parse_indices(&text).map_err(|e| CliError::new(format!("{name}: {e}")).into())
}

fn parse_indices(text: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split_once('#').map_or(line, |(before, _)| before);
        for word in line.split_whitespace() {
            let index = word.parse::<u64>().map_err(|_| format!("line {}: `{word}` is not a record index", n + 1))?;
            out.push(index);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse_indices;

    #[test]
    fn index_files() {
        assert_eq!(parse_indices("1 2\n\n3\t4 # five\n# 6\n7"), Ok(vec![1, 2, 3, 4, 7]));
        assert_eq!(parse_indices(""), Ok(vec![]));
        assert_eq!(parse_indices("1\n2 x\n").unwrap_err(), "line 2: `x` is not a record index");
        assert!(parse_indices("-1").is_err());
        assert!(parse_indices("99999999999999999999999").is_err());
    }
}
