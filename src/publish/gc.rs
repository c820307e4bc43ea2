//! Reclaiming what failed writes left under a published location: the
//! objects that no manifest of what is published there lists.
//!
//! Three kinds of object outlive the write that made them (object storage
//! has no rename and no lock, `docs/crash-safety.md`, "Adopting published
//! tables"): a failed or killed Ray write's staged tables under
//! `.staging/`; the objects a failed adoption copied into shard or column
//! prefixes that no shard table came to list; and the versions of
//! `table.json` and `shards.json` that a killed driver did not remove
//! after its commit replaced them.
//!
//! Only objects of those names are candidates: those under `.staging/`,
//! under a column's `col-NNNN/` or a shard's `shard-NNNNNN/`, and the
//! versioned commit files beside the manifest. Any other object under the
//! prefix is not this format's and stays. A candidate is removed when the
//! published manifests (the location's, its columns', their shards') do
//! not list it and it was written before `keep_newer_than` ago: a write
//! under way (its staging, its copies before its commit) is younger.
//!
//! Where nothing is published, nothing tells this format's objects from
//! others' of the same names, except the mark `.staging/first-commit` that
//! a first adoption puts before its copies and removes after its commit
//! (`publish/adopt.rs`, R0b). Without it, only staged objects are
//! candidates. With it, and older than the bound, every name above is: a
//! failed first write's copies. The mark itself goes last, once nothing
//! younger than the bound (a write under way) was kept.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

use super::adopt::FIRST_COMMIT_FILE;
use super::objects::remove;
use crate::dataset::ShardTable;
use crate::error::{Error, Result};
use crate::format::{
    MANIFEST_FILE, SHARDS_FILE, STAGING_DIR, TABLE_FILE, column_dir_name, column_of_dir_name, shard_dir_name,
    shard_of_dir_name,
};
use crate::io::remote::{BUCKET_LIST_MAX, Location, Manifest, Published, RemoteFs, is_version_of, read_manifest};
use crate::table::Commit;

/// What [`remove_unlisted_objects`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GcReport {
    /// The objects removed, by name under the location's prefix.
    pub removed: Vec<String>,
    /// Unlisted objects kept because they are younger than the bound.
    pub kept_recent: usize,
    /// True when the listing stopped at [`BUCKET_LIST_MAX`] objects: a
    /// next call removes more.
    pub truncated: bool,
}

/// Removes the objects under `at` that no published manifest lists and
/// that are older than `keep_newer_than` (see the module's comment).
/// Where nothing is published, only staged objects are, unless a failed
/// first write left its mark (see the module's comment). A write under way for longer than
/// `keep_newer_than` may lose its objects: object storage gives no lock
/// to tell a running write's objects from a dead one's.
pub fn remove_unlisted_objects(at: &Location, keep_newer_than: Duration) -> Result<GcReport> {
    let cutoff = SystemTime::now().checked_sub(keep_newer_than).unwrap_or(UNIX_EPOCH);
    let Some(manifest) = read_manifest(at).map_err(remote(at, "read manifest.json"))? else {
        return remove_unpublished(at, cutoff);
    };
    let mut live = BTreeSet::from([MANIFEST_FILE.to_string()]);
    match manifest.published {
        Published::Table { .. } => {
            let fs = RemoteFs::with_manifest(at.clone(), manifest.clone());
            let commit =
                Commit::read(&fs, Path::new(fs.root())).map_err(|e| invalid(at, format!("table.json: {e}")))?;
            listed(&manifest, "", &mut live);
            for k in 0..commit.columns.len() {
                let name = column_dir_name(k);
                dataset_objects(&at.child(&name), &format!("{name}/"), &mut live)?;
            }
        }
        Published::Store { .. } => dataset_objects(at, "", &mut live)?,
    }
    remove_candidates(at, &live, cutoff, is_candidate)
}

/// The names under `.staging/`.
const STAGING_PREFIX: &str = ".staging/";

/// Where nothing is published at `at`: the staged objects, or, if a first
/// write's mark is older than `cutoff`, every candidate, the mark last.
fn remove_unpublished(at: &Location, cutoff: SystemTime) -> Result<GcReport> {
    let mark_name = format!("{STAGING_PREFIX}{FIRST_COMMIT_FILE}");
    let mark = at.child(STAGING_DIR).key(FIRST_COMMIT_FILE);
    let marked = at
        .fetcher()
        .run(async |store| match store.head(&mark).await {
            Ok(meta) => Ok(Some(meta.last_modified)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        })
        .map_err(remote(at, "read .staging/first-commit"))?;
    let keep = BTreeSet::from([mark_name.clone()]);
    let old = marked.is_some_and(|t| SystemTime::from(t) <= cutoff);
    if !old {
        let mut report = remove_candidates(at, &keep, cutoff, |name| name.starts_with(STAGING_PREFIX))?;
        report.kept_recent += usize::from(marked.is_some());
        return Ok(report);
    }
    let mut report = remove_candidates(at, &keep, cutoff, is_candidate)?;
    if report.kept_recent == 0 && !report.truncated {
        remove(&at.child(STAGING_DIR), FIRST_COMMIT_FILE).map_err(remote(at, "remove .staging/first-commit"))?;
        report.removed.push(mark_name);
    }
    Ok(report)
}

/// Adds the objects `manifest` (read at the prefix `under`) lists, each by
/// the key that holds it.
fn listed(manifest: &Manifest, under: &str, live: &mut BTreeSet<String>) {
    for (name, info) in &manifest.objects {
        live.insert(format!("{under}{}", info.key.as_deref().unwrap_or(name)));
    }
}

/// Adds the objects of the store or sharded dataset published at `at`
/// (`under` its prefix under the location's): each shard's manifest and
/// what it lists, for the shards its shard table holds. A column whose
/// manifest is missing lists nothing.
fn dataset_objects(at: &Location, under: &str, live: &mut BTreeSet<String>) -> Result<()> {
    let Some(manifest) = read_manifest(at).map_err(remote(at, "read manifest.json"))? else {
        return Ok(());
    };
    live.insert(format!("{under}{MANIFEST_FILE}"));
    listed(&manifest, under, live);
    if !manifest.objects.contains_key(SHARDS_FILE) {
        return Ok(());
    }
    let fs = RemoteFs::with_manifest(at.clone(), manifest);
    let shards = ShardTable::read(&fs, Path::new(fs.root())).map_err(|e| invalid(at, e.to_string()))?;
    for k in 1..shards.map_or(1, |t| t.shards()) {
        let name = shard_dir_name(k);
        if let Some(shard) = read_manifest(&at.child(&name)).map_err(remote(at, "read manifest.json"))? {
            live.insert(format!("{under}{name}/{MANIFEST_FILE}"));
            listed(&shard, &format!("{under}{name}/"), live);
        }
    }
    Ok(())
}

/// Whether `name` (under the location's prefix) is an object this format
/// writes and a gc may remove: staged, in a column's or shard's prefix, or
/// a version of a commit file.
fn is_candidate(name: &str) -> bool {
    let (first, rest) = name.split_once('/').unwrap_or((name, ""));
    match rest {
        "" => is_version_of(first, TABLE_FILE) || is_version_of(first, SHARDS_FILE),
        _ => first == STAGING_DIR || column_of_dir_name(first).is_some() || shard_of_dir_name(first).is_some(),
    }
}

/// Lists the objects under `at` (at most [`BUCKET_LIST_MAX`]) and removes
/// the `candidate`s not in `live` last modified before `cutoff`.
fn remove_candidates(
    at: &Location,
    live: &BTreeSet<String>,
    cutoff: SystemTime,
    candidate: fn(&str) -> bool,
) -> Result<GcReport> {
    let prefix = at.prefix().clone();
    let cutoff_ms = cutoff.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    at.fetcher()
        .run(async |store| {
            let listed: Vec<object_store::ObjectMeta> =
                store.list(Some(&prefix)).take(BUCKET_LIST_MAX).try_collect().await?;
            let mut report = GcReport { truncated: listed.len() == BUCKET_LIST_MAX, ..GcReport::default() };
            for object in &listed {
                let Some(name) = object
                    .location
                    .prefix_match(&prefix)
                    .map(|parts| parts.map(|p| p.as_ref().to_string()).collect::<Vec<_>>().join("/"))
                else {
                    continue;
                };
                if live.contains(&name) || !candidate(&name) {
                    continue;
                }
                if object.last_modified.timestamp_millis() > cutoff_ms {
                    report.kept_recent += 1;
                    continue;
                }
                store.delete(&object.location).await?;
                report.removed.push(name);
            }
            Ok(report)
        })
        .map_err(remote(at, "remove unlisted objects"))
}

fn remote<'a>(at: &'a Location, op: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io { path: at.url().into(), op, source }
}

fn invalid(at: &Location, why: String) -> Error {
    Error::InvalidArgument(format!("{}: {why}", at.url()))
}

#[cfg(test)]
mod tests {
    use super::is_candidate;

    #[test]
    fn only_this_formats_names_are_candidates() {
        for name in [".staging/w/t/manifest.json", "col-0001/shard-000003/0.zr", "shard-000002/meta.zr"] {
            assert!(is_candidate(name), "{name}");
        }
        assert!(is_candidate("table.json.0a1b") && is_candidate("shards.json.ff"));
        for name in ["manifest.json", "table.json", "README.md", "notes/x", "col-x/0.zr", "table.json.XYZ"] {
            assert!(!is_candidate(name), "{name}");
        }
    }
}
