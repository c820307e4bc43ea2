//! The table layer's error type.

use std::fmt;
use std::io;
use std::path::PathBuf;

use crate::dataset::DatasetError;

/// Everything that can go wrong opening, reading or writing a table.
#[derive(Debug)]
#[non_exhaustive]
pub enum TableError {
    /// A column's dataset failed.
    Dataset(DatasetError),
    /// A table file (`table.json`, `table.lock`) could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The underlying error.
        source: io::Error,
    },
    /// The directory has no `table.json`: it is not a table.
    NotATable {
        /// The directory.
        path: PathBuf,
    },
    /// A table is already there (`create` on an existing table).
    Exists {
        /// The table's directory.
        path: PathBuf,
    },
    /// `table.json` is not a table's commit file.
    Commit {
        /// The commit file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A column holds fewer rows than the table committed: corruption.
    ColumnShort {
        /// The column's directory.
        path: PathBuf,
        /// The column's name.
        column: String,
        /// Rows it holds.
        holds: u64,
        /// Rows the table committed.
        rows: u64,
    },
    /// A column's dataset is not of the kind `table.json` records.
    ColumnKind {
        /// The column's directory.
        path: PathBuf,
        /// What it holds and what was expected.
        reason: String,
    },
    /// Another writer holds the table's writer lock.
    Locked {
        /// The table's directory.
        path: PathBuf,
    },
    /// A UTF-8 column's value is not UTF-8.
    NotUtf8 {
        /// The column's name.
        column: String,
        /// The row (in the batch when writing, in the table when reading).
        row: u64,
    },
    /// An append failed part way: the columns' tails differ, so this
    /// writer refuses to go on.
    Broken {
        /// The table's directory.
        path: PathBuf,
    },
    /// An argument is unusable (a batch of other row counts, a column
    /// name, a kind of values a column does not take).
    InvalidArgument(String),
}

impl From<DatasetError> for TableError {
    fn from(e: DatasetError) -> TableError {
        TableError::Dataset(e)
    }
}

impl From<crate::Error> for TableError {
    fn from(e: crate::Error) -> TableError {
        TableError::Dataset(DatasetError::Store(e))
    }
}

impl fmt::Display for TableError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TableError::Dataset(e) => write!(f, "{e}"),
            TableError::Io { path, op, source } => write!(f, "{}: {op} failed: {source}", path.display()),
            TableError::NotATable { path } => {
                write!(f, "{}: no table.json, so not a table; create one with TableWriter::create", path.display())
            }
            TableError::Exists { path } => {
                write!(f, "{}: a table is already there; open it with TableWriter::open to append", path.display())
            }
            TableError::Commit { path, reason } => {
                write!(f, "{}: not a valid table commit file: {reason}; restore it from a copy", path.display())
            }
            TableError::ColumnShort { path, column, holds, rows } => write!(
                f,
                "{}: column {column:?} holds {holds} rows but the table committed {rows}: the table is corrupt; \
                 restore it from a copy",
                path.display()
            ),
            TableError::ColumnKind { path, reason } => write!(f, "{}: {reason}", path.display()),
            TableError::Locked { path } => {
                write!(f, "{}: another writer has the table open; close it first", path.display())
            }
            TableError::NotUtf8 { column, row } => write!(f, "column {column:?}, row {row}: not valid UTF-8"),
            TableError::Broken { path } => write!(
                f,
                "{}: an append failed part way, so this writer stops; open the table again (which drops the \
                 rows not committed) and retry",
                path.display()
            ),
            TableError::InvalidArgument(s) => write!(f, "{s}"),
        }
    }
}

impl std::error::Error for TableError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TableError::Dataset(e) => Some(e),
            TableError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
