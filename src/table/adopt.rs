//! Adopting complete tables as new shards of a table's columns, all of
//! them committed by one replacement of `table.json` (`docs/crash-safety.md`,
//! "Adopting staged tables"): the commit of a parallel write, where each
//! task wrote a table of its own (`docs/ray.md`).
//!
//! Order, under the destination's writer lock (`table.lock`), its columns
//! trimmed back to the committed rows first (K3):
//!
//! - A0: every staged table checked (its columns the destination's, each a
//!   single store of exactly its committed rows, the schema the column's);
//!   nothing is moved before all of them pass;
//! - A1: per column, the `shard-*` directories the shard table does not
//!   list (left by an adoption or a rollover that crashed) removed;
//! - A2: per column, each staged column directory renamed to the next
//!   shard's name, the column directory synced; then each staged table's
//!   directory synced once (every rename's other directory);
//! - A3: per column, once every rename is durable, the shard table
//!   replaced (SYNC M1, M2): the old last shard sealed at its count, the
//!   new shards after it;
//! - A4: `table.json` replaced with the new row count: the commit point.
//!
//! A crash before A4 leaves the committed rows as they were: the new
//! shards of a column whose shard table was replaced are records past the
//! commit, out of a reader's sight and trimmed by the next writer's open
//! (their shards stay listed, empty); those of a column not yet replaced
//! are unlisted directories, removed by the next adoption (A1).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::commit::{ColumnType, Commit};
use super::error::TableError;
use super::writer::{ColumnSpec, TableWriter, column_schema};
use crate::dataset::{DatasetError, Schema, ShardTable, WriteOptions, shard_dir};
use crate::format::{SHARDS_MAX, STAGING_DIR, TABLE_FILE, TABLE_ROWS_MAX, column_dir_name, shard_of_dir_name};
use crate::io::real::RealFs;
use crate::io::{FileKind, LockKind, OpenMode, Vfs};

/// A staged table that passed A0: its directory and committed rows.
struct Staged {
    root: PathBuf,
    rows: u64,
}

/// Adopts the complete tables `staged` (each written and committed by a
/// [`TableWriter`] of its own, of the same columns) as new shards of the
/// table at `dest`, in their order, and commits them in one replacement of
/// `dest`'s `table.json`. `dest` is created (empty, of the first staged
/// table's columns and codecs) if it holds no table. Tables of no rows are
/// skipped. The staged tables' column directories are moved, not copied:
/// what is left of each staged table is its commit and lock files.
/// Returns the rows of `dest` after the commit.
pub fn adopt_tables(dest: &Path, staged: &[PathBuf], opts: &WriteOptions) -> Result<u64, TableError> {
    adopt_tables_in(Arc::new(RealFs), dest, staged, opts)
}

/// [`adopt_tables`] on any filesystem (the simulator's, in its sweep).
pub fn adopt_tables_in(
    vfs: Arc<dyn Vfs>,
    dest: &Path,
    staged: &[PathBuf],
    opts: &WriteOptions,
) -> Result<u64, TableError> {
    let mut parts = Vec::with_capacity(staged.len());
    let mut columns: Option<Vec<(String, ColumnType)>> = None;
    for root in staged {
        let (rows, cols) = check_staged(&vfs, root, opts)?;
        same_columns(columns.get_or_insert_with(|| cols.clone()), &cols, root)?;
        if rows > 0 {
            parts.push(Staged { root: root.clone(), rows });
        }
    }
    let (Some(columns), Some(first)) = (columns, staged.first()) else { return committed_rows(&vfs, dest) };
    let writer = open_dest(&vfs, dest, first, &columns, opts)?;
    same_columns(writer.columns(), &columns, dest)?;
    let (commit, lock) = writer.into_commit();
    let added: u64 = parts.iter().map(|p| p.rows).sum();
    let rows = commit.rows.checked_add(added).filter(|&r| r <= TABLE_ROWS_MAX).ok_or_else(|| {
        TableError::InvalidArgument(format!("{} + {added} rows: a table holds at most {TABLE_ROWS_MAX}", commit.rows))
    })?;
    if parts.is_empty() {
        return Ok(commit.rows);
    }
    for k in 0..columns.len() {
        check_schemas(&vfs, dest, k, &parts)?;
    }
    let mut tables = Vec::with_capacity(columns.len());
    for k in 0..columns.len() {
        tables.push(move_column(&vfs, dest, k, commit.rows, &parts)?); // A1, A2
    }
    for part in &parts {
        // Each rename's other directory: the staged table lost its columns.
        // Once per table, and before any shard table names a moved column.
        let io = |source| TableError::Io { path: part.root.clone(), op: "sync the staged table", source };
        vfs.sync_dir(&part.root).map_err(io)?;
    }
    for (k, table) in tables.iter().enumerate() {
        table.write(&*vfs, &dest.join(column_dir_name(k)))?; // A3
    }
    let next = Commit { rows, columns: commit.columns, mark: None };
    next.write(&*vfs, dest)?; // A4
    drop(lock);
    Ok(rows)
}

/// The committed rows of the table at `dest`, 0 if there is none.
fn committed_rows(vfs: &Arc<dyn Vfs>, dest: &Path) -> Result<u64, TableError> {
    let io = |source| TableError::Io { path: dest.to_path_buf(), op: "stat table.json", source };
    match vfs.kind(&dest.join(TABLE_FILE)).map_err(io)? {
        Some(_) => Ok(Commit::read(&**vfs, dest)?.rows),
        None => Ok(0),
    }
}

/// A0 for one staged table: opened by a writer (which trims a tail a crash
/// left), every column a single store. Returns its rows and columns.
fn check_staged(
    vfs: &Arc<dyn Vfs>,
    root: &Path,
    opts: &WriteOptions,
) -> Result<(u64, Vec<(String, ColumnType)>), TableError> {
    let writer = TableWriter::open_in(vfs.clone(), root, opts)?;
    let (rows, columns) = (writer.rows(), writer.columns().to_vec());
    drop(writer);
    for k in 0..columns.len() {
        let dir = root.join(column_dir_name(k));
        if ShardTable::read(&**vfs, &dir)?.is_some() {
            let reason = "a staged column must be one store (write fewer rows per staged table)".to_string();
            return Err(TableError::Dataset(DatasetError::ShardTable { path: dir, reason }));
        }
    }
    Ok((rows, columns))
}

/// `have` must be `want`: the same names and kinds in the same order.
fn same_columns(want: &[(String, ColumnType)], have: &[(String, ColumnType)], path: &Path) -> Result<(), TableError> {
    match columns_differ(want, have) {
        None => Ok(()),
        Some(why) => Err(TableError::InvalidArgument(format!("{}: {why}", path.display()))),
    }
}

/// Why `have` cannot join tables of columns `want` (names and kinds, in
/// order), if it cannot: the adoptions' check, here and on object storage.
pub(crate) fn columns_differ(want: &[(String, ColumnType)], have: &[(String, ColumnType)]) -> Option<String> {
    let show = |c: &[(String, ColumnType)]| {
        c.iter().map(|(n, k)| format!("{n:?} ({})", k.name())).collect::<Vec<_>>().join(", ")
    };
    (want != have).then(|| format!("columns {}, not {} as the other tables of the adoption", show(have), show(want)))
}

/// The writer of `dest`: opened (trimming its uncommitted tail), or created
/// empty with the first staged table's columns (their dtypes, shapes and
/// codecs) if `dest` holds no table.
fn open_dest(
    vfs: &Arc<dyn Vfs>,
    dest: &Path,
    first: &Path,
    columns: &[(String, ColumnType)],
    opts: &WriteOptions,
) -> Result<TableWriter, TableError> {
    let io = |source| TableError::Io { path: dest.to_path_buf(), op: "stat table.json", source };
    if vfs.kind(&dest.join(TABLE_FILE)).map_err(io)?.is_some() {
        return TableWriter::open_in(vfs.clone(), dest, opts);
    }
    let mut specs = Vec::with_capacity(columns.len());
    for (k, (name, kind)) in columns.iter().enumerate() {
        let schema = column_schema(&**vfs, &first.join(column_dir_name(k)), *kind)?;
        let (dtype, shape, codec) = (schema.dtype, schema.shape().to_vec(), Some(schema.codec));
        specs.push(ColumnSpec { name: name.clone(), kind: *kind, dtype, shape, codec });
    }
    TableWriter::create_in(vfs.clone(), dest, &specs, opts)
}

/// A0: every staged table's column `k` holds the destination column's schema.
fn check_schemas(vfs: &Arc<dyn Vfs>, dest: &Path, k: usize, parts: &[Staged]) -> Result<(), TableError> {
    let want = Schema::read(&**vfs, &dest.join(column_dir_name(k)))?;
    for part in parts {
        let dir = part.root.join(column_dir_name(k));
        let have = Schema::read(&**vfs, &dir)?;
        if have != want {
            return Err(TableError::ColumnKind {
                path: dir,
                reason: format!("holds {}, the table's column {}", have.describe(), want.describe()),
            });
        }
    }
    Ok(())
}

/// A1 and A2 for column `k` of `dest`, whose committed rows are `rows`:
/// returns the column's shard table for A3, which names the moved shards.
fn move_column(
    vfs: &Arc<dyn Vfs>,
    dest: &Path,
    k: usize,
    rows: u64,
    parts: &[Staged],
) -> Result<ShardTable, TableError> {
    let dir = dest.join(column_dir_name(k));
    let (mut table, first_new) = match ShardTable::read(&**vfs, &dir)? {
        Some(t) if t.pending.is_some() => {
            let reason = "a delete of a sealed shard is under way".to_string();
            return Err(TableError::Dataset(DatasetError::ShardTable { path: dir, reason }));
        }
        Some(t) => {
            let n = t.shards();
            (t, n)
        }
        None => (ShardTable { schema: Schema::read(&**vfs, &dir)?, sealed: Vec::new(), pending: None }, 1),
    };
    let last = rows - table.sealed.iter().sum::<u64>();
    if first_new + parts.len() > SHARDS_MAX {
        let reason = format!("{} shards: a dataset holds at most {SHARDS_MAX}", first_new + parts.len());
        return Err(TableError::InvalidArgument(format!("{}: {reason}", dir.display())));
    }
    remove_unlisted(vfs, &dir, first_new)?; // A1
    let io = |path: &Path, op| {
        let path = path.to_path_buf();
        move |source| TableError::Io { path, op, source }
    };
    for (j, part) in parts.iter().enumerate() {
        let from = part.root.join(column_dir_name(k));
        let to = shard_dir(&dir, first_new + j);
        vfs.rename(&from, &to).map_err(io(&from, "rename a staged column into a shard"))?; // A2
    }
    vfs.sync_dir(&dir).map_err(io(&dir, "sync the column directory"))?;
    table.sealed.push(last);
    table.sealed.extend(parts[..parts.len() - 1].iter().map(|p| p.rows));
    Ok(table)
}

/// Removes the shard directories of column `dir` numbered `first` and up:
/// no shard table names them, so no reader sees them.
fn remove_unlisted(vfs: &Arc<dyn Vfs>, dir: &Path, first: usize) -> Result<Vec<PathBuf>, TableError> {
    let io = |op| move |source| TableError::Io { path: dir.to_path_buf(), op, source };
    let mut removed = Vec::new();
    for name in vfs.list_dir(dir).map_err(io("list the column directory"))? {
        if shard_of_dir_name(&name).is_some_and(|m| m >= first) {
            crate::io::remove_tree(&**vfs, &dir.join(&name)).map_err(io("remove an unlisted shard"))?;
            removed.push(dir.join(&name));
        }
    }
    if !removed.is_empty() {
        vfs.sync_dir(dir).map_err(io("sync the column directory"))?;
    }
    Ok(removed)
}

/// Removes the shard directories that no column's shard table lists,
/// left by an adoption that crashed between its A2 and A3 (a rollover's
/// R1 refuses one that holds records, `ShardNotEmpty`). It takes the
/// table's writer lock (a writer's open, which also trims an uncommitted
/// tail, K3), so no adoption is under way; `Ok(None)` if another writer
/// holds it. Returns the removed directories.
pub fn remove_unlisted_shards(dest: &Path, opts: &WriteOptions) -> Result<Option<Vec<PathBuf>>, TableError> {
    remove_unlisted_shards_in(Arc::new(RealFs), dest, opts)
}

/// [`remove_unlisted_shards`] on any filesystem (the simulator's).
pub fn remove_unlisted_shards_in(
    vfs: Arc<dyn Vfs>,
    dest: &Path,
    opts: &WriteOptions,
) -> Result<Option<Vec<PathBuf>>, TableError> {
    let writer = match TableWriter::open_in(vfs.clone(), dest, opts) {
        Err(TableError::Locked { .. }) => return Ok(None),
        other => other?,
    };
    let mut removed = Vec::new();
    for k in 0..writer.columns().len() {
        let dir = dest.join(column_dir_name(k));
        let listed = ShardTable::read(&*vfs, &dir)?.map_or(1, |t| t.shards());
        removed.extend(remove_unlisted(&vfs, &dir, listed)?);
    }
    drop(writer);
    Ok(Some(removed))
}

/// Removes the staged tables of the writes to `dest` no longer running:
/// each directory `dest/.staging/w/` whose lock file `w.lock` no writer
/// holds (its exclusive `flock` taken here, not waiting), and that lock
/// file. A running write's directory is left alone. Returns the removed
/// directories. `.staging` itself stays (a write starting now may be
/// creating its directory in it). Real filesystem only.
pub fn remove_staging(dest: &Path) -> Result<Vec<PathBuf>, TableError> {
    let vfs = RealFs;
    let root = dest.join(STAGING_DIR);
    let io = |path: &Path, op| {
        let path = path.to_path_buf();
        move |source| TableError::Io { path, op, source }
    };
    if vfs.kind(&root).map_err(io(&root, "stat the staging directory"))? != Some(FileKind::Dir) {
        return Ok(Vec::new());
    }
    let mut names = vfs.list_dir(&root).map_err(io(&root, "list the staging directory"))?;
    names.sort();
    let mut removed = Vec::new();
    for name in names.iter().filter(|n| !n.ends_with(".lock")) {
        let dir = root.join(name);
        if vfs.kind(&dir).map_err(io(&dir, "stat a staged write"))? != Some(FileKind::Dir) {
            continue;
        }
        let lock_path = root.join(format!("{name}.lock"));
        let lock = vfs.open(&lock_path, OpenMode::Create).map_err(io(&lock_path, "open a staged write's lock"))?;
        if !lock.lock(LockKind::Exclusive, false).map_err(io(&lock_path, "lock a staged write"))? {
            continue;
        }
        RealFs::remove_dir_all(&dir).map_err(io(&dir, "remove a staged write"))?;
        vfs.remove_file(&lock_path).map_err(io(&lock_path, "remove a staged write's lock"))?;
        removed.push(dir);
    }
    Ok(removed)
}
