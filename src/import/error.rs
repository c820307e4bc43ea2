//! [`ImportError`]: what an import or export refuses, naming the file and
//! the position in it.

use std::fmt;
use std::path::PathBuf;

use crate::table::TableError;

/// Where in a source file an error is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Position {
    /// The file as a whole (its footer, its schema).
    File,
    /// Row `n` of the file, from 0.
    Row(u64),
    /// Line `n` of the file, from 1 (JSONL).
    Line(u64),
    /// Byte offset `n` of the file.
    Byte(u64),
    /// A named member of an archive (a tar's member).
    Member(String),
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::File => Ok(()),
            Position::Row(n) => write!(f, ", row {n}"),
            Position::Line(n) => write!(f, ", line {n}"),
            Position::Byte(n) => write!(f, ", byte {n}"),
            Position::Member(name) => write!(f, ", member {name:?}"),
        }
    }
}

/// An import or export that failed; nothing it did not commit is visible.
#[derive(Debug)]
#[non_exhaustive]
pub enum ImportError {
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The error.
        source: std::io::Error,
    },
    /// A source file is malformed at `at`: truncated, torn, not parseable.
    BadInput {
        /// The file.
        path: PathBuf,
        /// Where in it.
        at: Position,
        /// What is wrong.
        reason: String,
    },
    /// A column's values cannot become a table column (its type, or a type
    /// that changed from one file to the next).
    ColumnType {
        /// The column.
        column: String,
        /// What is wrong.
        reason: String,
    },
    /// A null in a column that takes none (no fill value given).
    Null {
        /// The column.
        column: String,
        /// The row, from the first row of the input.
        row: u64,
    },
    /// The table refused.
    Table(TableError),
    /// A caller's argument is wrong.
    InvalidArgument(String),
}

impl From<TableError> for ImportError {
    fn from(e: TableError) -> ImportError {
        ImportError::Table(e)
    }
}

impl fmt::Display for ImportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImportError::Io { path, op, source } => write!(f, "{op} {}: {source}", path.display()),
            ImportError::BadInput { path, at, reason } => write!(f, "{}{at}: {reason}", path.display()),
            ImportError::ColumnType { column, reason } => write!(f, "column {column:?}: {reason}"),
            ImportError::Null { column, row } => write!(
                f,
                "column {column:?}, row {row}: a null; give a value to fill nulls with (--fill-null {column}=VALUE, fill_null={{...}})"
            ),
            ImportError::Table(e) => write!(f, "{e}"),
            ImportError::InvalidArgument(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ImportError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ImportError::Io { source, .. } => Some(source),
            ImportError::Table(e) => Some(e),
            _ => None,
        }
    }
}
