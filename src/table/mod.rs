//! Tables: several columns of one row count, each column a dataset of its
//! own (`docs/format.md`, "Tables"). A table is a directory of one dataset
//! per column (`col-0000/`, `col-0001/`, ...; a fixed or ragged column is
//! a dataset the reference opens on its own, a bytes or text column a
//! ragged dataset of `|u1` items), its commit file `table.json` (the
//! committed row count and the columns: name, directory, kind) and
//! `table.lock` (the writer's flock).
//!
//! The commit point is the row count in `table.json` (`commit.rs`): a
//! writer appends to every column, then replaces the commit file
//! (`writer.rs`); a reader opens the columns and sees exactly the
//! committed rows of each ([`Table`]); a writer's open trims every column
//! back to them (`docs/crash-safety.md`, "Table commit").
//!
//! A column is a dataset like any other, sharded past
//! [`WriteOptions::shard_records`](crate::dataset::WriteOptions) rows (or a
//! store's capacity): a table holds up to
//! [`TABLE_ROWS_MAX`](crate::format::TABLE_ROWS_MAX) rows, and the reader's
//! limit and the writer's trim work across a column's shards.

mod adopt;
mod commit;
mod error;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(feature = "remote")]
pub(crate) use adopt::columns_differ;
pub use adopt::{adopt_tables, adopt_tables_in, remove_staging, remove_unlisted_shards, remove_unlisted_shards_in};
pub use commit::{ColumnType, Commit, TABLE_FORMAT, TABLE_VERSION};
pub use error::TableError;
pub use writer::{ColumnSpec, TableWriter, Values};

use crate::dataset::{Dataset, DatasetOf, RaggedDataset};
use crate::format::column_dir_name;
use crate::io::Vfs;

/// A column of an open table: its dataset, limited to the committed rows.
#[derive(Clone, Debug)]
pub enum TableColumn {
    /// A fixed column.
    Fixed(Arc<Dataset>),
    /// A ragged, bytes or text column.
    Ragged(Arc<RaggedDataset>),
}

impl TableColumn {
    /// Rows the reader sees (the committed ones).
    pub fn len(&self) -> u64 {
        match self {
            TableColumn::Fixed(d) => d.len(),
            TableColumn::Ragged(d) => d.len(),
        }
    }

    /// True if the column has no committed row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A table open for reading: the rows committed when it was opened, no
/// more (open it again to see later commits).
#[derive(Debug)]
pub struct Table {
    root: PathBuf,
    rows: u64,
    mark: Option<String>,
    columns: Vec<(String, ColumnType, TableColumn)>,
}

impl Table {
    /// Opens the table at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Table, TableError> {
        Table::open_in(Arc::new(crate::io::real::RealFs), path.as_ref())
    }

    /// Opens the table published at `url` (`s3://bucket/prefix`, by
    /// [`push`](crate::publish::push); `docs/remote.md`): its manifest and
    /// `table.json` read, each column opened by its own manifest.
    #[cfg(feature = "remote")]
    pub fn open_url(url: &str) -> Result<Table, TableError> {
        use crate::io::remote::{RemoteFs, RemoteOptions};
        let fs = RemoteFs::connect_table(url, RemoteOptions::from_env()).map_err(|source| TableError::Io {
            path: url.into(),
            op: "read manifest.json",
            source,
        })?;
        let root = PathBuf::from(fs.root());
        Table::open_in(Arc::new(fs), &root)
    }

    /// [`Table::open`] on any filesystem implementation: the commit file
    /// read, then every column opened, checked against its kind and
    /// limited to the committed rows; a column holding fewer is
    /// [`TableError::ColumnShort`] (corruption).
    pub fn open_in(vfs: Arc<dyn Vfs>, root: &Path) -> Result<Table, TableError> {
        let commit = Commit::read(&*vfs, root)?;
        let mut columns = Vec::with_capacity(commit.columns.len());
        for (k, (name, kind)) in commit.columns.into_iter().enumerate() {
            let dir = root.join(column_dir_name(k));
            writer::column_schema(&*vfs, &dir, kind)?;
            let short =
                |holds| TableError::ColumnShort { path: dir.clone(), column: name.clone(), holds, rows: commit.rows };
            let column = if kind == ColumnType::Fixed {
                TableColumn::Fixed(Arc::new(limited(Dataset::open_in(vfs.clone(), &dir)?, commit.rows).map_err(short)?))
            } else {
                let dataset = RaggedDataset::open_in(vfs.clone(), &dir)?;
                TableColumn::Ragged(Arc::new(limited(dataset, commit.rows).map_err(short)?))
            };
            columns.push((name, kind, column));
        }
        Ok(Table { root: root.to_path_buf(), rows: commit.rows, mark: commit.mark, columns })
    }

    /// The table's directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// Rows committed (every column's length).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// The mark the commit recorded, if any (an import's progress,
    /// [`TableWriter::commit_marked`]).
    pub fn mark(&self) -> Option<&str> {
        self.mark.as_deref()
    }

    /// The columns in order: name, kind, dataset. Hand a dataset to the
    /// `DataLoader` as a stream (`LoaderBuilder::stream(name, dataset)`).
    pub fn columns(&self) -> impl Iterator<Item = (&str, ColumnType, &TableColumn)> {
        self.columns.iter().map(|(name, kind, column)| (name.as_str(), *kind, column))
    }

    /// The column named `name`.
    pub fn column(&self, name: &str) -> Option<&TableColumn> {
        self.columns.iter().find(|(n, _, _)| n == name).map(|(_, _, c)| c)
    }

    /// The values of rows `indices` of bytes or text column `name`, each
    /// a byte string; a text column's checked to be UTF-8.
    pub fn values(&self, name: &str, indices: &[u64]) -> Result<Vec<Vec<u8>>, TableError> {
        let Some((_, kind, TableColumn::Ragged(d))) = self.columns.iter().find(|(n, _, _)| n == name) else {
            return Err(TableError::InvalidArgument(format!(
                "no bytes or text column {name:?} in {}",
                self.root.display()
            )));
        };
        if !matches!(kind, ColumnType::Bytes | ColumnType::Utf8) {
            return Err(TableError::InvalidArgument(format!("column {name:?} is {}, not bytes or text", kind.name())));
        }
        let batch = d.gather(indices)?;
        let mut out = Vec::with_capacity(indices.len());
        for (k, &row) in indices.iter().enumerate() {
            let value = batch.record(k).expect("a record per index").to_vec();
            if *kind == ColumnType::Utf8 && std::str::from_utf8(&value).is_err() {
                return Err(TableError::NotUtf8 { column: name.to_string(), row });
            }
            out.push(value);
        }
        Ok(out)
    }

    /// The values of rows `indices` of text column `name`.
    pub fn strings(&self, name: &str, indices: &[u64]) -> Result<Vec<String>, TableError> {
        if !self.columns.iter().any(|(n, kind, _)| n == name && *kind == ColumnType::Utf8) {
            return Err(TableError::InvalidArgument(format!("no text column {name:?} in {}", self.root.display())));
        }
        let values = self.values(name, indices)?;
        Ok(values.into_iter().map(|v| String::from_utf8(v).expect("checked by values")).collect())
    }
}

/// `dataset` limited to `rows`; `Err(holds)` if it holds fewer.
fn limited<K: crate::dataset::ColumnKind>(mut dataset: DatasetOf<K>, rows: u64) -> Result<DatasetOf<K>, u64> {
    let holds = dataset.len();
    if holds < rows {
        return Err(holds);
    }
    dataset.limit(rows).map_err(|_| holds)?;
    Ok(dataset)
}
