//! `table.json`: a table's commit file (`docs/format.md`, "Tables"),
//! parsed strictly (it is input) and replaced whole: written to a
//! temporary file, synced (SYNC K1), renamed over the name, the directory
//! synced (SYNC K2) (`docs/crash-safety.md`, "Table commit"). Its row
//! count is the table's commit point: a reader sees exactly that many rows
//! of every column, a writer's open trims every column back to it.
//!
//! Column `k` is the dataset in `col-{k:04}/` ([`column_dir_name`]); the
//! column's name, untrusted, is only ever a key in this file, never a path.

use std::path::Path;

use serde_json::Value;

use super::error::TableError;
use crate::format::{
    COLUMN_NAME_BYTES_MAX, COLUMNS_MAX, TABLE_FILE, TABLE_FILE_BYTES_MAX, TABLE_MARK_BYTES_MAX, TABLE_ROWS_MAX,
    TABLE_TMP_FILE, column_dir_name,
};
use crate::io::{OpenMode, SyncKind, Vfs, read_file, write_all_at};

/// The value of the commit file's `format` key.
pub const TABLE_FORMAT: &str = "loaderx-table";
/// The commit file version this crate reads and writes.
pub const TABLE_VERSION: u64 = 1;

/// What a column holds, as `table.json` records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ColumnType {
    /// A fixed-shape dataset: one record a row, of any dtype and shape.
    Fixed,
    /// A ragged dataset: one record a row, any number of item rows.
    Ragged,
    /// Bytes: a ragged dataset of `|u1` items, a row any number of bytes.
    Bytes,
    /// Text: as [`ColumnType::Bytes`], every value UTF-8 (checked when
    /// written and when read).
    Utf8,
}

impl ColumnType {
    const ALL: [ColumnType; 4] = [ColumnType::Fixed, ColumnType::Ragged, ColumnType::Bytes, ColumnType::Utf8];

    /// The kind's name in `table.json`.
    pub fn name(self) -> &'static str {
        match self {
            ColumnType::Fixed => "fixed",
            ColumnType::Ragged => "ragged",
            ColumnType::Bytes => "bytes",
            ColumnType::Utf8 => "utf8",
        }
    }

    /// The kind `name` names, exactly as [`ColumnType::name`] spells it.
    pub fn from_name(name: &str) -> Option<ColumnType> {
        ColumnType::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// A parsed, checked commit file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Commit {
    /// Rows every column holds (at least: a tail past them is not committed).
    pub rows: u64,
    /// The columns in order, column `k` in `column_dir_name(k)`.
    pub columns: Vec<(String, ColumnType)>,
    /// What the writer of this commit recorded with its rows (an import's
    /// progress: its input and the rows it took from it), at most
    /// [`TABLE_MARK_BYTES_MAX`] bytes; a commit without one clears it.
    pub mark: Option<String>,
}

/// Why `name` cannot name a column, if it cannot: empty, longer than
/// [`COLUMN_NAME_BYTES_MAX`] bytes, or holding a control character.
pub(crate) fn bad_name(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("a column name is empty".into())
    } else if name.len() > COLUMN_NAME_BYTES_MAX {
        Some(format!("a column name is {} bytes, more than {COLUMN_NAME_BYTES_MAX}", name.len()))
    } else if name.chars().any(char::is_control) {
        Some(format!("column name {name:?} holds a control character"))
    } else {
        None
    }
}

/// Why `columns` cannot be a table's, if they cannot: none, too many, a
/// bad name, a name twice.
pub(crate) fn bad_columns<'a>(names: impl ExactSizeIterator<Item = &'a str>) -> Option<String> {
    let n = names.len();
    if n == 0 || n > COLUMNS_MAX {
        return Some(format!("{n} columns (1 to {COLUMNS_MAX} expected)"));
    }
    let mut seen = std::collections::HashSet::with_capacity(n);
    for name in names {
        if let Some(reason) = bad_name(name) {
            return Some(reason);
        }
        if !seen.insert(name) {
            return Some(format!("column {name:?} is named twice"));
        }
    }
    None
}

impl Commit {
    /// The commit file's text: keys in the order `format`, `version`,
    /// `rows`, `columns` (each `name`, `dir`, `kind`), then `mark` if there
    /// is one, indented by two spaces.
    pub fn to_json(&self) -> String {
        let columns: Vec<String> = self
            .columns
            .iter()
            .enumerate()
            .map(|(k, (name, kind))| {
                let name = serde_json::to_string(name).expect("a string");
                format!(
                    "    {{\n      \"name\": {name},\n      \"dir\": \"{}\",\n      \"kind\": \"{}\"\n    }}",
                    column_dir_name(k),
                    kind.name()
                )
            })
            .collect();
        let mark = match &self.mark {
            Some(mark) => format!(",\n  \"mark\": {}", serde_json::to_string(mark).expect("a string")),
            None => String::new(),
        };
        format!(
            "{{\n  \"format\": \"{TABLE_FORMAT}\",\n  \"version\": {TABLE_VERSION},\n  \"rows\": {},\n  \
             \"columns\": [\n{}\n  ]{mark}\n}}\n",
            self.rows,
            columns.join(",\n")
        )
    }

    /// Parses a commit file's text; `path` is for messages. The row count
    /// is at most [`TABLE_ROWS_MAX`] (a column's most shards of a store's
    /// most records), every column where
    /// [`column_dir_name`] puts it, every name a column name, once.
    pub fn parse(text: &str, path: &Path) -> Result<Commit, TableError> {
        let bad = |reason: String| TableError::Commit { path: path.to_path_buf(), reason };
        let value: Value = serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
        let map = value.as_object().ok_or_else(|| bad("not a JSON object".into()))?;
        let field = |key: &str| map.get(key).ok_or_else(|| bad(format!("missing key {key:?}")));
        if field("format")?.as_str() != Some(TABLE_FORMAT) {
            return Err(bad(format!("format is {}, not {TABLE_FORMAT:?}", field("format")?)));
        }
        if field("version")?.as_u64() != Some(TABLE_VERSION) {
            return Err(bad(format!("version {} is not supported (this crate reads 1)", field("version")?)));
        }
        let rows = field("rows")?;
        let rows = rows.as_u64().filter(|&n| n <= TABLE_ROWS_MAX).ok_or_else(|| bad(format!("rows {rows}")))?;
        let list = field("columns")?.as_array().ok_or_else(|| bad("\"columns\" must be a list".into()))?;
        if list.is_empty() || list.len() > COLUMNS_MAX {
            return Err(bad(format!("{} columns (1 to {COLUMNS_MAX} expected)", list.len())));
        }
        let mut columns = Vec::with_capacity(list.len());
        for (k, column) in list.iter().enumerate() {
            let column = column.as_object().ok_or_else(|| bad(format!("column {k} is not an object")))?;
            if column.len() != 3 {
                return Err(bad(format!("column {k} has {} keys, not name, dir and kind", column.len())));
            }
            let name = column.get("name").and_then(Value::as_str).ok_or_else(|| bad(format!("column {k}'s name")))?;
            if column.get("dir").and_then(Value::as_str) != Some(column_dir_name(k).as_str()) {
                return Err(bad(format!("column {k}'s \"dir\" must be {:?}", column_dir_name(k))));
            }
            let kind = column.get("kind").and_then(Value::as_str).and_then(ColumnType::from_name);
            let kind = kind.ok_or_else(|| bad(format!("column {k}'s kind is not fixed, ragged, bytes or utf8")))?;
            columns.push((name.to_string(), kind));
        }
        if let Some(reason) = bad_columns(columns.iter().map(|(n, _)| n.as_str())) {
            return Err(bad(reason));
        }
        let mark = match map.get("mark") {
            None => None,
            Some(Value::String(m)) if m.len() <= TABLE_MARK_BYTES_MAX => Some(m.clone()),
            Some(_) => return Err(bad(format!("\"mark\" must be a string of at most {TABLE_MARK_BYTES_MAX} bytes"))),
        };
        Ok(Commit { rows, columns, mark })
    }

    /// Reads `root/table.json`.
    pub fn read(vfs: &dyn Vfs, root: &Path) -> Result<Commit, TableError> {
        let path = root.join(TABLE_FILE);
        let io = |op| move |source| TableError::Io { path: root.join(TABLE_FILE), op, source };
        if vfs.kind(&path).map_err(io("stat table.json"))?.is_none() {
            return Err(TableError::NotATable { path: root.to_path_buf() });
        }
        let bytes = read_file(vfs, &path, TABLE_FILE_BYTES_MAX).map_err(io("read table.json"))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| TableError::Commit { path: path.clone(), reason: "not UTF-8".into() })?;
        Commit::parse(&text, &path)
    }

    /// Replaces `root/table.json` whole: a temporary file, synced (SYNC
    /// K1), renamed over the name, the directory synced (SYNC K2).
    pub fn write(&self, vfs: &dyn Vfs, root: &Path) -> Result<(), TableError> {
        let tmp = root.join(TABLE_TMP_FILE);
        let io = |op| move |source| TableError::Io { path: root.join(TABLE_FILE), op, source };
        let file = vfs.open(&tmp, OpenMode::Create).map_err(io("create table.json.tmp"))?;
        file.set_len(0).map_err(io("truncate table.json.tmp"))?;
        write_all_at(&*file, self.to_json().as_bytes(), 0).map_err(io("write table.json.tmp"))?;
        file.sync(SyncKind::All).map_err(io("sync table.json.tmp"))?; // SYNC K1
        drop(file);
        vfs.rename(&tmp, &root.join(TABLE_FILE)).map_err(io("rename table.json.tmp"))?;
        vfs.sync_dir(root).map_err(io("sync table directory")) // SYNC K2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Commit {
        let columns = vec![
            ("x".to_string(), ColumnType::Fixed),
            ("../escape/\"q\"".to_string(), ColumnType::Ragged),
            ("b".to_string(), ColumnType::Bytes),
            ("text".to_string(), ColumnType::Utf8),
        ];
        Commit { rows: 5, columns, mark: Some("{\"import\": \"x\"}".into()) }
    }

    #[test]
    fn round_trips() {
        let c = good();
        assert_eq!(Commit::parse(&c.to_json(), Path::new("t")).unwrap(), c);
        let unmarked = Commit { mark: None, ..good() };
        assert!(!unmarked.to_json().contains("mark"));
        assert_eq!(Commit::parse(&unmarked.to_json(), Path::new("t")).unwrap(), unmarked);
        for kind in ColumnType::ALL {
            assert_eq!(ColumnType::from_name(kind.name()), Some(kind));
        }
        assert_eq!(ColumnType::from_name("Fixed"), None);
        let most = Commit { rows: TABLE_ROWS_MAX, ..good() };
        assert_eq!(Commit::parse(&most.to_json(), Path::new("t")).unwrap(), most);
    }

    #[test]
    fn refuses_bad_commit_files() {
        let good = good().to_json();
        let long = "n".repeat(COLUMN_NAME_BYTES_MAX + 1);
        let cases = [
            good.replace("\"rows\": 5", "\"rows\": 17592186044417"),
            good.replace("\"rows\": 5", "\"rows\": -1"),
            good.replace("\"rows\": 5", "\"rows\": \"5\""),
            good.replace("\"rows\": 5,\n", ""),
            good.replace("col-0001", "../elsewhere"),
            good.replace("col-0001", "col-0002"),
            good.replace("col-0000", "/abs"),
            good.replace("\"name\": \"x\"", "\"name\": \"\""),
            good.replace("\"name\": \"x\"", &format!("\"name\": \"{long}\"")),
            good.replace("\"name\": \"x\"", "\"name\": \"a\\u0000b\""),
            good.replace("\"name\": \"x\"", "\"name\": \"b\""),
            good.replace("\"kind\": \"bytes\"", "\"kind\": \"blob\""),
            good.replace("\"kind\": \"bytes\"", "\"kind\": \"bytes\", \"extra\": 1"),
            good.replace("loaderx-table", "loaderx-sharded"),
            good.replace("\"version\": 1", "\"version\": 2"),
            good.replace("\"columns\": [", "\"columns\": {").replace("  ]\n}", "  }\n}"),
            good[..good.len() / 2].to_string(),
            good.replace("\"mark\": \"", "\"mark\": 1, \"_\": \""),
            good.replace("{\\\"import\\\": \\\"x\\\"}", &"m".repeat(TABLE_MARK_BYTES_MAX + 1)),
            "[]".to_string(),
        ];
        for (k, text) in cases.iter().enumerate() {
            assert_ne!(text, &good, "case {k} changed nothing");
            assert!(Commit::parse(text, Path::new("t")).is_err(), "case {k} was accepted:\n{text}");
        }
        let none = Commit { rows: 0, columns: Vec::new(), mark: None }.to_json();
        assert!(Commit::parse(&none, Path::new("t")).is_err());
    }
}
