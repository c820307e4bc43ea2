//! [`TableWriter`]: appends rows to every column of a table, then commits
//! them (`docs/crash-safety.md`, "Table commit"): K0, each column's
//! appends, crash-ordered and durable by its store; K1-K2, the commit file
//! replaced with the new row count. A writer's open trims every column
//! back to the committed count (K3), so the tail a crash left is dropped.
//!
//! One writer at a time: the writer holds the exclusive `flock` of the
//! table's own `table.lock`, taken before any column is touched (a
//! column's own writer lock, held by its [`DatasetAppender`] while the
//! writer lives, comes and goes with the column, and a sharded column's
//! moves to each new shard).
//!
//! Each column is a dataset kept open for appending ([`DatasetAppender`]),
//! sharded as [`WriteOptions::shard_records`] says (or at a store's
//! capacity): a table holds up to [`TABLE_ROWS_MAX`] rows.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::commit::{ColumnType, Commit, bad_columns};
use super::error::TableError;
use crate::Codec;
use crate::dataset::{DType, DatasetAppender, Schema, WriteOptions, packed_items};
use crate::format::{
    RECORD_BYTES_MAX, TABLE_FILE, TABLE_LOCK_FILE, TABLE_MARK_BYTES_MAX, TABLE_ROWS_MAX, column_dir_name,
};
use crate::io::{LockKind, OpenMode, Vfs, VfsFile};

/// A column of a table to create: its name, kind, dtype and shape (of a
/// record for [`ColumnType::Fixed`], of an item row for the others).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnSpec {
    /// The name (any UTF-8 without control characters, 1 to 255 bytes).
    pub name: String,
    /// What it holds.
    pub kind: ColumnType,
    /// The element type (`|u1` for bytes and text).
    pub dtype: DType,
    /// The record's shape (fixed) or an item row's shape (the others).
    pub shape: Vec<usize>,
    /// The column's codec, if not the writer's (`WriteOptions::codec`):
    /// for example `zstd_dict` for a text column beside raw images.
    pub codec: Option<Codec>,
}

impl ColumnSpec {
    /// A fixed-shape column: each row one record of `shape` elements.
    pub fn fixed(name: impl Into<String>, dtype: DType, shape: &[usize]) -> ColumnSpec {
        ColumnSpec { name: name.into(), kind: ColumnType::Fixed, dtype, shape: shape.to_vec(), codec: None }
    }

    /// A ragged column: each row any number of item rows of `item_shape`.
    pub fn ragged(name: impl Into<String>, dtype: DType, item_shape: &[usize]) -> ColumnSpec {
        ColumnSpec { name: name.into(), kind: ColumnType::Ragged, dtype, shape: item_shape.to_vec(), codec: None }
    }

    /// A bytes column.
    pub fn bytes(name: impl Into<String>) -> ColumnSpec {
        ColumnSpec { name: name.into(), kind: ColumnType::Bytes, dtype: u1(), shape: Vec::new(), codec: None }
    }

    /// This column with its own `codec`.
    pub fn with_codec(self, codec: Codec) -> ColumnSpec {
        ColumnSpec { codec: Some(codec), ..self }
    }

    /// A UTF-8 text column.
    pub fn utf8(name: impl Into<String>) -> ColumnSpec {
        ColumnSpec { name: name.into(), kind: ColumnType::Utf8, dtype: u1(), shape: Vec::new(), codec: None }
    }
}

/// `|u1`, the element of bytes and text columns.
fn u1() -> DType {
    DType::parse("|u1").expect("a dtype")
}

/// One column's values of a batch.
#[derive(Clone, Copy, Debug)]
pub enum Values<'a> {
    /// A fixed column's records back to back.
    Fixed(&'a [u8]),
    /// One value per row (a ragged row's item bytes, bytes, text).
    Items(&'a [&'a [u8]]),
    /// One value per row, packed back to back. An Arrow list or binary
    /// array's values are laid out so: appended from where they are, with
    /// no copy to pack them.
    Packed {
        /// The rows' bytes, back to back.
        data: &'a [u8],
        /// Row `k` is the `lens[k]` bytes after the rows before it; they
        /// sum to `data.len()`.
        lens: &'a [u32],
    },
}

/// The writer of a table: created, or opened for append (trimming what a
/// crash left uncommitted).
pub struct TableWriter {
    vfs: Arc<dyn Vfs>,
    root: PathBuf,
    commit: Commit,
    /// Column `k`'s dataset, open for appending.
    columns: Vec<DatasetAppender>,
    /// Rows appended to every column since the last commit.
    pending: u64,
    /// An append failed part way.
    broken: bool,
    /// Holds `table.lock`'s exclusive flock while the writer lives.
    _lock: Box<dyn VfsFile>,
}

impl TableWriter {
    /// A writer of the committed `commit`, holding `lock`, nothing pending.
    fn new(
        vfs: Arc<dyn Vfs>,
        root: &Path,
        commit: Commit,
        columns: Vec<DatasetAppender>,
        lock: Box<dyn VfsFile>,
    ) -> TableWriter {
        TableWriter { vfs, root: root.to_path_buf(), commit, columns, pending: 0, broken: false, _lock: lock }
    }

    /// Creates a table of `columns` at `path` (an empty directory or none).
    pub fn create(
        path: impl AsRef<Path>,
        columns: &[ColumnSpec],
        opts: &WriteOptions,
    ) -> Result<TableWriter, TableError> {
        TableWriter::create_in(Arc::new(crate::io::real::RealFs), path.as_ref(), columns, opts)
    }

    /// [`TableWriter::create`] on any filesystem implementation: the
    /// columns, empty, then the commit file of 0 rows (the table exists
    /// from then on; a crash before leaves no table, and a create again
    /// reuses the empty columns).
    pub fn create_in(
        vfs: Arc<dyn Vfs>,
        root: &Path,
        columns: &[ColumnSpec],
        opts: &WriteOptions,
    ) -> Result<TableWriter, TableError> {
        if let Some(reason) = bad_columns(columns.iter().map(|c| c.name.as_str())) {
            return Err(TableError::InvalidArgument(reason));
        }
        let io = |op| move |source| TableError::Io { path: root.to_path_buf(), op, source };
        vfs.create_dir_all(root).map_err(io("create the table directory"))?;
        if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
            vfs.sync_dir(parent).map_err(io("sync the parent directory"))?;
        }
        let lock = lock(&*vfs, root)?;
        if vfs.kind(&root.join(TABLE_FILE)).map_err(io("stat table.json"))?.is_some() {
            return Err(TableError::Exists { path: root.to_path_buf() });
        }
        let mut appenders = Vec::with_capacity(columns.len());
        for (k, spec) in columns.iter().enumerate() {
            let dir = root.join(column_dir_name(k));
            if matches!(spec.kind, ColumnType::Bytes | ColumnType::Utf8)
                && (spec.dtype != u1() || !spec.shape.is_empty())
            {
                return Err(TableError::InvalidArgument(format!("column {:?}: bytes and text are |u1[]", spec.name)));
            }
            // A column keeps the codec it is created with (its schema names it).
            let opts = &WriteOptions { codec: spec.codec.unwrap_or(opts.codec), ..opts.clone() };
            let mut column = appender(vfs.clone(), &dir, spec.kind, spec.dtype, &spec.shape, opts)?;
            column.finish()?;
            appenders.push(column);
        }
        let columns = columns.iter().map(|c| (c.name.clone(), c.kind)).collect();
        let commit = Commit { rows: 0, columns, mark: None };
        commit.write(&*vfs, root)?;
        Ok(TableWriter::new(vfs, root, commit, appenders, lock))
    }

    /// Opens the table at `path` to append to it.
    pub fn open(path: impl AsRef<Path>, opts: &WriteOptions) -> Result<TableWriter, TableError> {
        TableWriter::open_in(Arc::new(crate::io::real::RealFs), path.as_ref(), opts)
    }

    /// [`TableWriter::open`] on any filesystem implementation: the writer
    /// lock taken, the commit file read under it, every column checked
    /// and trimmed back to the committed rows (K3).
    pub fn open_in(vfs: Arc<dyn Vfs>, root: &Path, opts: &WriteOptions) -> Result<TableWriter, TableError> {
        // Read first so that a directory that is no table gets no `table.lock`;
        // read again under the lock, which another writer's commit may precede.
        Commit::read(&*vfs, root)?;
        let lock = lock(&*vfs, root)?;
        let commit = Commit::read(&*vfs, root)?;
        let mut appenders = Vec::with_capacity(commit.columns.len());
        for (k, (name, kind)) in commit.columns.iter().enumerate() {
            let dir = root.join(column_dir_name(k));
            let schema = column_schema(&*vfs, &dir, *kind)?;
            let opts = &WriteOptions { codec: schema.codec, ..opts.clone() };
            let mut column = appender(vfs.clone(), &dir, *kind, schema.dtype, schema.shape(), opts)?;
            let holds = column.len();
            if holds < commit.rows {
                return Err(TableError::ColumnShort { path: dir, column: name.clone(), holds, rows: commit.rows });
            }
            // K3: the uncommitted tail, the last records, across shards.
            column.truncate(commit.rows)?;
            appenders.push(column);
        }
        Ok(TableWriter::new(vfs, root, commit, appenders, lock))
    }

    /// The last commit and the writer lock, the columns closed (their
    /// appenders and their stores' writer locks dropped): for an adoption
    /// of staged tables (`adopt.rs`), which moves shards under the lock.
    pub(super) fn into_commit(self) -> (Commit, Box<dyn VfsFile>) {
        (self.commit, self._lock)
    }

    /// Rows committed.
    pub fn rows(&self) -> u64 {
        self.commit.rows
    }

    /// The mark the last commit recorded ([`TableWriter::commit_marked`]).
    pub fn mark(&self) -> Option<&str> {
        self.commit.mark.as_deref()
    }

    /// Rows appended and not yet committed.
    pub fn pending(&self) -> u64 {
        self.pending
    }

    /// The columns, in order.
    pub fn columns(&self) -> &[(String, ColumnType)] {
        &self.commit.columns
    }

    /// Appends a batch: `values[k]` the new rows of column `k`, every
    /// column the same number of rows. They are durable when this returns,
    /// and a reader sees them after [`TableWriter::commit`]. Returns the
    /// rows appended.
    pub fn append(&mut self, values: &[Values<'_>]) -> Result<u64, TableError> {
        if self.broken {
            return Err(TableError::Broken { path: self.root.clone() });
        }
        let n = self.batch_rows(values)?;
        let total = self.commit.rows + self.pending + n;
        if total > TABLE_ROWS_MAX {
            return Err(TableError::InvalidArgument(format!(
                "{total} rows: a table holds at most {TABLE_ROWS_MAX} rows"
            )));
        }
        self.broken = true;
        for (column, v) in self.columns.iter_mut().zip(values) {
            match v {
                Values::Fixed(data) => column.append_fixed(data)?,
                Values::Items(items) => column.append_items(items)?,
                Values::Packed { data, lens } => column.append_packed(data, lens)?,
            };
        }
        self.broken = false;
        self.pending += n;
        Ok(n)
    }

    /// The rows of a batch: one value set per column, each of the kind its
    /// column takes, all of one row count, text UTF-8.
    fn batch_rows(&self, values: &[Values<'_>]) -> Result<u64, TableError> {
        if values.len() != self.commit.columns.len() {
            let have = self.commit.columns.len();
            return Err(TableError::InvalidArgument(format!(
                "a batch of {} columns for a table of {have}",
                values.len()
            )));
        }
        let mut rows = None;
        for (((name, kind), column), v) in self.commit.columns.iter().zip(&self.columns).zip(values) {
            let schema = column.schema();
            let n = match (kind, v) {
                (ColumnType::Fixed, Values::Fixed(data)) => {
                    let row = schema.row_bytes()?;
                    if !data.len().is_multiple_of(row) {
                        let len = data.len();
                        return Err(TableError::InvalidArgument(format!(
                            "column {name:?}: {len} bytes are not whole {row}-byte rows"
                        )));
                    }
                    data.len() / row
                }
                (ColumnType::Fixed, _) | (_, Values::Fixed(_)) => {
                    return Err(TableError::InvalidArgument(format!(
                        "column {name:?} is {}: other values given",
                        kind.name()
                    )));
                }
                (_, Values::Items(items)) => check_items(name, *kind, items.iter().copied(), schema.row_bytes()?)?,
                (_, Values::Packed { data, lens }) => {
                    let items = packed_items(data, lens)
                        .map_err(|e| TableError::InvalidArgument(format!("column {name:?}: {e}")))?;
                    check_items(name, *kind, items, schema.row_bytes()?)?
                }
            } as u64;
            if rows.is_some_and(|r| r != n) {
                return Err(TableError::InvalidArgument(format!(
                    "column {name:?} has {n} rows in this batch, the columns before it {}: every column takes the same rows",
                    rows.unwrap_or(0)
                )));
            }
            rows = Some(n);
        }
        Ok(rows.unwrap_or(0))
    }

    /// Commits the rows appended (K1-K2): a reader opening the table from
    /// now on sees them. Returns the rows committed in all. The commit
    /// clears a mark an earlier one recorded.
    pub fn commit(&mut self) -> Result<u64, TableError> {
        self.commit_marked(None)
    }

    /// [`TableWriter::commit`], recording `mark` with the rows in the same
    /// replacement of the commit file: what an import took from its input
    /// is committed with the rows it gave, never apart from them. A commit
    /// of no new rows writes the file only if the mark changes.
    pub fn commit_marked(&mut self, mark: Option<String>) -> Result<u64, TableError> {
        if self.broken {
            return Err(TableError::Broken { path: self.root.clone() });
        }
        if mark.as_ref().is_some_and(|m| m.len() > TABLE_MARK_BYTES_MAX) {
            return Err(TableError::InvalidArgument(format!(
                "a commit's mark is at most {TABLE_MARK_BYTES_MAX} bytes"
            )));
        }
        if self.pending > 0 || mark != self.commit.mark {
            // K0b: the rows' checksums, which their appends left to sync
            // later, durable with them (the rows are, since each append).
            for column in &self.columns {
                column.sync_checksums()?;
            }
            let rows = self.commit.rows + self.pending;
            let next = Commit { rows, columns: self.commit.columns.clone(), mark };
            next.write(&*self.vfs, &self.root)?;
            (self.commit, self.pending) = (next, 0);
        }
        Ok(self.commit.rows)
    }
}

/// Each of a ragged column's values whole rows of `row` bytes and at most
/// a record's [`RECORD_BYTES_MAX`], and a text column's UTF-8, checked
/// before any column is written; their count.
fn check_items<'a>(
    name: &str,
    kind: ColumnType,
    items: impl Iterator<Item = &'a [u8]>,
    row: usize,
) -> Result<usize, TableError> {
    let mut n = 0;
    for (k, item) in items.enumerate() {
        if kind == ColumnType::Utf8 && std::str::from_utf8(item).is_err() {
            return Err(TableError::NotUtf8 { column: name.to_string(), row: k as u64 });
        }
        if item.len() > RECORD_BYTES_MAX as usize || !item.len().is_multiple_of(row) {
            return Err(TableError::InvalidArgument(format!(
                "column {name:?}, row {k} of the batch: {} bytes, not whole {row}-byte rows of at most {RECORD_BYTES_MAX} bytes",
                item.len()
            )));
        }
        n += 1;
    }
    Ok(n)
}

/// Column `dir`'s dataset of `kind`, opened to append.
fn appender(
    vfs: Arc<dyn Vfs>,
    dir: &Path,
    kind: ColumnType,
    dtype: DType,
    shape: &[usize],
    opts: &WriteOptions,
) -> Result<DatasetAppender, TableError> {
    Ok(match kind {
        ColumnType::Fixed => DatasetAppender::fixed_in(vfs, dir, dtype, shape, opts)?,
        _ => DatasetAppender::ragged_in(vfs, dir, dtype, shape, opts)?,
    })
}

/// `root/table.lock`, opened and locked exclusively, not waiting.
fn lock(vfs: &dyn Vfs, root: &Path) -> Result<Box<dyn VfsFile>, TableError> {
    let path = root.join(TABLE_LOCK_FILE);
    let path = &path;
    let io = |op| move |source| TableError::Io { path: path.clone(), op, source };
    let file = vfs.open(path, OpenMode::Create).map_err(io("open table.lock"))?;
    if !file.lock(LockKind::Exclusive, false).map_err(io("lock table.lock"))? {
        return Err(TableError::Locked { path: root.to_path_buf() });
    }
    Ok(file)
}

/// Column `dir`'s schema (a sharded column's, from its first shard, the
/// root), checked against the kind `table.json` records for it.
pub(crate) fn column_schema(vfs: &dyn Vfs, dir: &Path, kind: ColumnType) -> Result<Schema, TableError> {
    let schema = Schema::read(vfs, dir)?;
    let fits = match kind {
        ColumnType::Fixed => !schema.is_ragged(),
        ColumnType::Ragged => schema.is_ragged(),
        ColumnType::Bytes | ColumnType::Utf8 => schema.is_ragged() && schema.dtype == u1() && schema.shape().is_empty(),
    };
    if !fits {
        let reason = format!("the column holds {}, not a {} column", schema.describe(), kind.name());
        return Err(TableError::ColumnKind { path: dir.to_path_buf(), reason });
    }
    Ok(schema)
}
