//! Adopting published tables as new shards of a published table's columns,
//! all of them committed by one replacement of the table's manifest
//! (`docs/crash-safety.md`, "Adopting published tables"): the commit of a
//! Ray write to `s3://`, where each task pushed a table of its own under
//! the destination's staging prefix (`docs/ray.md`). It is the object
//! storage twin of `table::adopt_tables`; object storage has no rename, so
//! a staged store's objects are copied, server-side, to their shard's
//! prefix.
//!
//! Order, one writer of the destination at a time (the caller's to see to:
//! object storage gives no lock here):
//!
//! - R0: every staged table read and checked (its columns the
//!   destination's, each column one store of exactly its committed rows,
//!   the schema the column's); nothing is written before all of them pass;
//! - R0b: where nothing is published yet, the object
//!   `.staging/first-commit` ([`FIRST_COMMIT_FILE`]) put, so that a gc can
//!   tell a failed first write's copies from objects of no write of ours
//!   (`publish/gc.rs`); it is removed after R3;
//! - R1: per column, each staged store's objects copied to the prefix of
//!   its new shard, and for shards 1 on its manifest uploaded after them;
//! - R2: per column, once every copy is done, `shards.json` uploaded (the
//!   shard that holds the committed rows' end sealed at them, the new
//!   shards after it), then the column's shard 0 manifest that lists it;
//! - R3: `table.json` with the new row count uploaded, then the table's
//!   manifest: the commit point;
//! - R4: the staged objects removed.
//!
//! A failure before R3 leaves the committed rows as they were: a column
//! whose shard table was replaced holds rows past the commit, out of a
//! reader's sight, and the next adoption seals its shards at the committed
//! rows again and writes over the shards past them.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

use super::objects::{Source, remove, remove_replaced, upload, upload_version};
use crate::dataset::{Schema, ShardTable};
use crate::error::{Error, Result};
use crate::format::{
    MANIFEST_FILE, SHARDS_FILE, SHARDS_MAX, STAGING_DIR, TABLE_FILE, TABLE_ROWS_MAX, column_dir_name, shard_dir_name,
};
use crate::io::remote::{BUCKET_LIST_MAX, Location, Manifest, ObjectInfo, Published, RemoteFs, read_manifest};
use crate::table::{ColumnType, Commit, columns_differ};

/// `first-commit`: the object under `.staging/` that an adoption where
/// nothing is published puts before its first copy (R0b) and removes after
/// its commit. While it is there and nothing is published, the objects of
/// this format's names under the location are a first write's (`publish/gc.rs`).
pub const FIRST_COMMIT_FILE: &str = "first-commit";

/// A staged table that passed R0: where it is, its rows, and each
/// column's store (its manifest read once).
struct Staged {
    at: Location,
    rows: u64,
    stores: Vec<RemoteFs>,
}

/// The destination as R0 found it: its commit (none for a new table) and
/// each column's shard table, its shard 0's manifest, and the published
/// length of its last shard.
struct Dest {
    manifest: Option<Manifest>,
    commit: Option<Commit>,
    columns: Vec<DestColumn>,
}

struct DestColumn {
    shards: ShardTable,
    shard0: Manifest,
    last_records: u64,
}

/// The store published at `at`, its manifest read (an error if none is,
/// or a table).
fn open_store(at: &Location) -> Result<RemoteFs> {
    RemoteFs::open(at.clone()).map_err(remote(at, "read manifest.json"))
}

/// Adopts the tables published at `staged` (paths under `dest`, such as
/// `.staging/WRITE/TASK`, so that their objects are copied server-side;
/// each pushed by a task, all of the same columns) as new shards of the
/// table published at `dest`, in their order, and commits them in one
/// replacement of `dest`'s manifest; `dest` becomes a table of the first
/// staged table's columns if nothing is published there. Tables of no rows
/// are skipped. The adopted tables' staged objects are removed after the
/// commit. Returns the rows of `dest` after it.
pub fn adopt_published(dest: &Location, staged: &[&str]) -> Result<u64> {
    let mut parts = Vec::with_capacity(staged.len());
    let mut columns: Option<Vec<(String, ColumnType)>> = None;
    for name in staged {
        let at = under(dest, name)?;
        let (part, cols) = read_staged(&at)?;
        same_columns(columns.get_or_insert_with(|| cols.clone()), &cols, &at)?;
        if part.rows > 0 {
            parts.push(part);
        }
    }
    let Some(columns) = columns else { return Ok(published_rows(dest)?.unwrap_or(0)) };
    let found = read_dest(dest, &columns)?;
    let rows = found.commit.as_ref().map_or(0, |c| c.rows);
    let added: u64 = parts.iter().map(|p| p.rows).sum();
    let total = rows.checked_add(added).filter(|&r| r <= TABLE_ROWS_MAX).ok_or_else(|| {
        Error::InvalidArgument(format!("{rows} + {added} rows: a table holds at most {TABLE_ROWS_MAX}"))
    })?;
    if parts.is_empty() {
        return Ok(rows);
    }
    check_schemas(&found, &parts, columns.len())?;
    let first = found.manifest.is_none();
    if first {
        mark_first_commit(dest)?; // R0b
    }
    let mut tables = Vec::with_capacity(columns.len());
    for k in 0..columns.len() {
        tables.push(copy_column(dest, k, found.columns.get(k), rows, &parts)?); // R1
    }
    for (k, (table, shard0)) in tables.into_iter().enumerate() {
        publish_shard_table(&dest.child(&column_dir_name(k)), table, shard0)?; // R2
    }
    let commit = Commit { rows: total, columns, mark: None };
    publish_commit(dest, &commit, found.manifest.as_ref())?; // R3
    if first {
        remove_first_commit_mark(dest)?;
    }
    for part in &parts {
        remove_published(&part.at)?; // R4
    }
    Ok(total)
}

fn remote<'a>(at: &'a Location, op: &'static str) -> impl FnOnce(io::Error) -> Error + 'a {
    move |source| Error::Io { path: at.url().into(), op, source }
}

fn invalid(at: &Location, why: String) -> Error {
    Error::InvalidArgument(format!("{}: {why}", at.url()))
}

/// The committed rows of the table published at `at`, `None` if nothing is.
fn published_rows(at: &Location) -> Result<Option<u64>> {
    match read_manifest(at).map_err(remote(at, "read manifest.json"))? {
        None => Ok(None),
        Some(Manifest { published: Published::Table { rows }, .. }) => Ok(Some(rows)),
        Some(_) => Err(invalid(at, "a store is published there, not a table".into())),
    }
}

/// The commit of the table published at `at` (`root`, on `fs`).
fn read_commit(fs: &RemoteFs, at: &Location) -> Result<Commit> {
    Commit::read(fs, Path::new(fs.root())).map_err(|e| invalid(at, format!("table.json: {e}")))
}

/// R0 for one staged table: its commit, every column one store of exactly
/// its committed rows.
fn read_staged(at: &Location) -> Result<(Staged, Vec<(String, ColumnType)>)> {
    let fs = RemoteFs::open_table(at.clone()).map_err(remote(at, "read manifest.json"))?;
    let commit = read_commit(&fs, at)?;
    let mut stores = Vec::with_capacity(commit.columns.len());
    for k in 0..commit.columns.len() {
        let column = at.child(&column_dir_name(k));
        let store = open_store(&column)?;
        if store.manifest().objects.contains_key(SHARDS_FILE) {
            return Err(invalid(&column, "a staged column must be one store (write fewer rows per task)".into()));
        }
        let records = u64::from(store.manifest().records().unwrap_or(0));
        if records != commit.rows {
            let why = format!("{records} records, the staged table's {} rows", commit.rows);
            return Err(invalid(&column, why));
        }
        stores.push(store);
    }
    Ok((Staged { at: at.clone(), rows: commit.rows, stores }, commit.columns))
}

/// `have` must be `want`: the same names and kinds in the same order.
fn same_columns(want: &[(String, ColumnType)], have: &[(String, ColumnType)], at: &Location) -> Result<()> {
    columns_differ(want, have).map_or(Ok(()), |why| Err(invalid(at, why)))
}

/// R0 for the destination: its commit and columns, or a new table's.
fn read_dest(dest: &Location, columns: &[(String, ColumnType)]) -> Result<Dest> {
    let manifest = match read_manifest(dest).map_err(remote(dest, "read manifest.json"))? {
        None => return Ok(Dest { manifest: None, commit: None, columns: Vec::new() }),
        Some(m) if m.records().is_some() => {
            return Err(invalid(dest, "a store is published there, not a table".into()));
        }
        Some(m) => m,
    };
    let fs = RemoteFs::with_manifest(dest.clone(), manifest.clone());
    let commit = read_commit(&fs, dest)?;
    same_columns(&commit.columns, columns, dest)?;
    let mut out = Vec::with_capacity(columns.len());
    for k in 0..columns.len() {
        let at = dest.child(&column_dir_name(k));
        let column = open_store(&at)?;
        let dir = Path::new(column.root());
        let shards = match ShardTable::read(&column, dir).map_err(|e| invalid(&at, e.to_string()))? {
            Some(t) if t.pending.is_some() => {
                return Err(invalid(&at, "a delete of a sealed shard is under way".into()));
            }
            Some(t) => t,
            None => ShardTable {
                schema: Schema::read(&column, dir).map_err(|e| invalid(&at, e.to_string()))?,
                sealed: Vec::new(),
                pending: None,
            },
        };
        let shard0 = column.manifest().clone();
        let last_records = match shards.sealed.len() {
            0 => shard0.records(),
            last => open_store(&at.child(&shard_dir_name(last)))?.manifest().records(),
        };
        out.push(DestColumn { shards, shard0, last_records: u64::from(last_records.unwrap_or(0)) });
    }
    Ok(Dest { manifest: Some(manifest), commit: Some(commit), columns: out })
}

/// The schema of column `k` of staged table `part`.
fn staged_schema(part: &Staged, k: usize) -> Result<Schema> {
    let store = &part.stores[k];
    Schema::read(store, Path::new(store.root())).map_err(|e| invalid(&part.at, e.to_string()))
}

/// R0: every staged column holds its destination column's schema (the
/// first staged table's, for a new table).
fn check_schemas(found: &Dest, parts: &[Staged], columns: usize) -> Result<()> {
    for k in 0..columns {
        let want = match found.columns.get(k) {
            Some(column) => column.shards.schema.clone(),
            None => staged_schema(&parts[0], k)?,
        };
        for part in parts {
            let have = staged_schema(part, k)?;
            if have != want {
                let why = format!("column {k} holds {}, the table's {}", have.describe(), want.describe());
                return Err(invalid(&part.at, why));
            }
        }
    }
    Ok(())
}

/// The location of `name` (a relative path, `/`-separated) under `dest`.
fn under(dest: &Location, name: &str) -> Result<Location> {
    let parts: Vec<&str> = name.split('/').collect();
    if parts.iter().any(|p| p.is_empty() || *p == "." || *p == "..") {
        return Err(invalid(dest, format!("{name:?} is not a path under the destination")));
    }
    Ok(parts.iter().fold(dest.clone(), |at, part| at.child(part)))
}

/// The shard table of a column whose committed rows are `rows`, sealed at
/// them: the shards wholly below them as they were, the shard holding
/// their end sealed there (the last shard must hold that many:
/// `last_records`), every shard past it dropped. Returns it and the number
/// of the first new shard.
fn seal_at(sealed: &[u64], last_records: u64, rows: u64) -> Option<(Vec<u64>, usize)> {
    let mut below = 0u64;
    for (i, &n) in sealed.iter().enumerate() {
        if below + n >= rows {
            let mut out = sealed[..i].to_vec();
            out.push(rows - below);
            return Some((out, i + 1));
        }
        below += n;
    }
    let tail = rows - below;
    (last_records >= tail).then(|| {
        let mut out = sealed.to_vec();
        out.push(tail);
        (out, sealed.len() + 1)
    })
}

/// R1 for column `k` of `dest` (`column`: as published; `None` for a new
/// table) of committed rows `rows`: every staged store copied to its new
/// shard, the manifests of shards 1 on uploaded. Returns the column's
/// shard table and shard 0's manifest, for R2.
fn copy_column(
    dest: &Location,
    k: usize,
    column: Option<&DestColumn>,
    rows: u64,
    parts: &[Staged],
) -> Result<(ShardTable, Manifest)> {
    let at = dest.child(&column_dir_name(k));
    let (mut table, first_new, mut shard0) = match column {
        Some(c) => {
            let (sealed, first_new) = seal_at(&c.shards.sealed, c.last_records, rows).ok_or_else(|| {
                invalid(&at, format!("its last shard holds {} records, fewer than the committed rows", c.last_records))
            })?;
            (ShardTable { schema: c.shards.schema.clone(), sealed, pending: None }, first_new, Some(c.shard0.clone()))
        }
        None => (ShardTable { schema: staged_schema(&parts[0], k)?, sealed: Vec::new(), pending: None }, 0, None),
    };
    if first_new + parts.len() > SHARDS_MAX {
        return Err(invalid(&at, format!("{} shards: a dataset holds at most {SHARDS_MAX}", first_new + parts.len())));
    }
    let shard_at = |shard: usize| if shard == 0 { at.clone() } else { at.child(&shard_dir_name(shard)) };
    let stores: Vec<_> = parts
        .iter()
        .enumerate()
        .map(|(j, part)| (part.at.child(&column_dir_name(k)), part.stores[k].manifest(), shard_at(first_new + j)))
        .collect();
    for (j, objects) in copy_stores(&stores)?.into_iter().enumerate() {
        let records = parts[j].stores[k].manifest().records().unwrap_or(0);
        let manifest = Manifest { published: Published::Store { records }, objects };
        match first_new + j {
            0 => shard0 = Some(manifest),
            shard => upload_manifest(&shard_at(shard), &manifest)?,
        }
    }
    table.sealed.extend(parts[..parts.len() - 1].iter().map(|p| p.rows));
    Ok((table, shard0.expect("a new table's shard 0 is its first staged store")))
}

/// Copies the objects of each store (`manifest` lists them at `from`) to
/// its `to`, server-side, up to the client's in-flight bound at a time;
/// returns each store's objects as listed at its `to` (their new entity
/// tags).
fn copy_stores(stores: &[(Location, &Manifest, Location)]) -> Result<Vec<BTreeMap<String, ObjectInfo>>> {
    let Some((_, _, first)) = stores.first() else { return Ok(Vec::new()) };
    let mut jobs = Vec::new();
    for (k, (from, manifest, to)) in stores.iter().enumerate() {
        for (name, info) in &manifest.objects {
            jobs.push((k, name.clone(), info.clone(), from.object(name, info).key, to.key(name)));
        }
    }
    let in_flight = first.fetcher().options().max_in_flight.max(1);
    let done = first
        .fetcher()
        .run(async |store| {
            let copies = futures::stream::iter(jobs.into_iter().map(|(k, name, info, src, dst)| {
                let store = store.clone();
                async move {
                    store.copy(&src, &dst).await?;
                    let meta = store.head(&dst).await?;
                    if meta.size != info.size {
                        let why = format!("{dst}: {} bytes after a copy of {}", meta.size, info.size);
                        return Err(io::Error::new(io::ErrorKind::InvalidData, why));
                    }
                    Ok((k, name, ObjectInfo::new(info.size, info.crc32, meta.e_tag)))
                }
            }));
            copies.buffer_unordered(in_flight).try_collect::<Vec<_>>().await
        })
        .map_err(remote(first, "copy a staged object"))?;
    let mut out = vec![BTreeMap::new(); stores.len()];
    for (k, name, info) in done {
        out[k].insert(name, info);
    }
    Ok(out)
}

fn upload_manifest(at: &Location, manifest: &Manifest) -> Result<()> {
    let text = manifest.encode().into_bytes();
    upload(at, MANIFEST_FILE, &Source::Memory(text)).map_err(remote(at, "upload manifest.json"))?;
    Ok(())
}

/// Uploads `text` as a new version of `name` at `at` (never over the one
/// the manifest in place lists); returns it as a manifest lists it.
fn upload_text(at: &Location, name: &str, text: String) -> Result<ObjectInfo> {
    upload_version(at, name, text.into_bytes()).map_err(remote(at, "upload"))
}

/// R2 for the column at `at`: its shard table (if it has more than one
/// shard), then shard 0's manifest listing it; then the version of the
/// shard table it replaced removed.
fn publish_shard_table(at: &Location, table: ShardTable, shard0: Manifest) -> Result<()> {
    let mut next = shard0.clone();
    next.objects.remove(SHARDS_FILE);
    if !table.sealed.is_empty() {
        next.objects.insert(SHARDS_FILE.into(), upload_text(at, SHARDS_FILE, table.to_json())?);
    }
    upload_manifest(at, &next)?;
    remove_replaced(at, Some(&shard0), &next, SHARDS_FILE).map_err(remote(at, "remove"))
}

/// R3: `table.json`, then the table's manifest; then the version of
/// `table.json` it replaced removed.
fn publish_commit(dest: &Location, commit: &Commit, old: Option<&Manifest>) -> Result<()> {
    let info = upload_text(dest, TABLE_FILE, commit.to_json())?;
    let objects = BTreeMap::from([(TABLE_FILE.to_string(), info)]);
    let next = Manifest { published: Published::Table { rows: commit.rows }, objects };
    upload_manifest(dest, &next)?;
    remove_replaced(dest, old, &next, TABLE_FILE).map_err(remote(dest, "remove"))
}

/// R0b: puts `.staging/first-commit` at `dest`.
fn mark_first_commit(dest: &Location) -> Result<()> {
    let staging = dest.child(STAGING_DIR);
    let text = b"a first write's adoption: its copies are reclaimed by a gc if it fails\n".to_vec();
    upload(&staging, FIRST_COMMIT_FILE, &Source::Memory(text)).map_err(remote(dest, "upload .staging/first-commit"))?;
    Ok(())
}

/// After a first commit: removes `.staging/first-commit` (a gc removes it
/// too, if this fails, as an unlisted staged object).
fn remove_first_commit_mark(dest: &Location) -> Result<()> {
    remove(&dest.child(STAGING_DIR), FIRST_COMMIT_FILE).map_err(remote(dest, "remove .staging/first-commit"))
}

/// Removes every object under `at` (at most [`BUCKET_LIST_MAX`] of them a
/// call): a staged table after its adoption, or a failed write's staging.
/// Returns how many were removed.
pub fn remove_published(at: &Location) -> Result<usize> {
    let prefix = at.prefix().clone();
    at.fetcher()
        .run(async |store| {
            let listed: Vec<object_store::ObjectMeta> =
                store.list(Some(&prefix)).take(BUCKET_LIST_MAX).try_collect().await?;
            for object in &listed {
                store.delete(&object.location).await?;
            }
            Ok(listed.len())
        })
        .map_err(remote(at, "remove staged objects"))
}
