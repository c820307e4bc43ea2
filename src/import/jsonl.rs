//! [`JsonlSource`]: JSON Lines files, one JSON object per line, a row each.
//!
//! The column types are given (a schema) or inferred from the first
//! [`JsonlOptions::infer_rows`] lines (arrow-json's inference: integers
//! `Int64`, other numbers `Float64`, `Boolean`, strings `Utf8`, arrays of
//! numbers `List<Int64>` or `List<Float64>`, objects structs; the columns
//! in the keys' sorted order). Every line must parse as JSON (serde_json
//! judges: arrow-json's decoder passes over some malformed text). A key absent
//! from a line is a null; a key absent from the schema is refused unless
//! [`JsonlOptions::ignore_unknown_keys`]. Blank lines are not rows. Lines
//! are read in batches of bounded rows and bytes; a line that does not
//! parse, or holds a value of the wrong type, is [`ImportError::BadInput`]
//! naming the file and the line (from 1).

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_json::reader::{Decoder, ReaderBuilder, infer_json_schema};
use arrow_schema::{ArrowError, DataType, SchemaRef};

use crate::io::{FileKind, Vfs};

use super::error::{ImportError, Position};
use super::input::{self, FileReader, Fingerprint, InputFile, SOURCE_INFER_BYTES_MAX, check_batch_rows};
use super::source::Source;

/// The longest line read, in bytes: a longer one is refused (a file with
/// no newlines never sizes an allocation).
pub const JSONL_LINE_BYTES_MAX: usize = 256 << 20;

/// The bytes of JSON text a batch holds at most (it ends at the line that
/// crosses this, or at [`JsonlOptions::batch_rows`] rows).
pub const JSONL_BATCH_BYTES_MAX: usize = 32 << 20;

/// How a [`JsonlSource`] reads.
#[derive(Clone, Debug)]
pub struct JsonlOptions {
    /// The columns and their types; `None` infers them.
    pub schema: Option<SchemaRef>,
    /// Lines (from the first file on) that inference reads (fewer if they
    /// pass `SOURCE_INFER_BYTES_MAX`).
    pub infer_rows: usize,
    /// Rows in a batch at most.
    pub batch_rows: usize,
    /// Drop keys the schema does not name instead of refusing the line.
    pub ignore_unknown_keys: bool,
}

impl Default for JsonlOptions {
    fn default() -> Self {
        JsonlOptions { schema: None, infer_rows: 1000, batch_rows: 8192, ignore_unknown_keys: false }
    }
}

/// The lines of one batch: where each row came from and its text, kept to
/// name the line that a conversion refuses.
#[derive(Default)]
struct BatchLines {
    text: Vec<u8>,
    ends: Vec<usize>,
    at: Vec<(usize, u64)>,
}

/// JSON Lines files read in order (see the module's documentation).
pub struct JsonlSource {
    files: Vec<InputFile>,
    schema: SchemaRef,
    options: JsonlOptions,
    fingerprint: String,
    decoder: Decoder,
    /// The file being read (an index into `files`), its reader, its lines so far.
    file: usize,
    reader: Option<BufReader<FileReader>>,
    line: u64,
    /// Bytes of the files read to their end.
    done_bytes: u64,
    line_buf: Vec<u8>,
}

impl std::fmt::Debug for JsonlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlSource").field("files", &self.files.len()).field("file", &self.file).finish()
    }
}

impl JsonlSource {
    /// Reads the files `paths` name: a file, or a directory for its
    /// `.jsonl`, `.ndjson` and `.json` files; all of them in sorted order.
    pub fn open(paths: &[PathBuf], options: JsonlOptions) -> Result<JsonlSource, ImportError> {
        JsonlSource::open_in(Arc::new(crate::io::real::RealFs), paths, options)
    }

    /// [`JsonlSource::open`] on any filesystem implementation.
    pub fn open_in(vfs: Arc<dyn Vfs>, paths: &[PathBuf], options: JsonlOptions) -> Result<JsonlSource, ImportError> {
        check_batch_rows(options.batch_rows)?;
        let files = jsonl_files(&*vfs, paths)?;
        let schema = match &options.schema {
            Some(schema) => schema.clone(),
            None => infer(&files, options.infer_rows)?,
        };
        let mut print = Fingerprint::new("jsonl");
        for file in &files {
            print.file(file)?;
        }
        print.text(&format!("{schema:?}"));
        print.text(if options.ignore_unknown_keys { "ignore_unknown_keys" } else { "strict" });
        let decoder = decoder(&schema, &options)?;
        Ok(JsonlSource {
            files,
            schema,
            options,
            fingerprint: print.finish(),
            decoder,
            file: 0,
            reader: None,
            line: 0,
            done_bytes: 0,
            line_buf: Vec::new(),
        })
    }

    /// The files read, in order.
    pub fn files(&self) -> Vec<PathBuf> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }

    /// Reads the next line that is not blank into `line_buf`: its file (an
    /// index) and line number, or `None` at the end of the last file.
    fn next_line(&mut self) -> Result<Option<(usize, u64)>, ImportError> {
        loop {
            if self.file == self.files.len() {
                return Ok(None);
            }
            if self.reader.is_none() {
                self.reader = Some(BufReader::with_capacity(1 << 20, self.files[self.file].reader(0)));
                self.line = 0;
            }
            let path = &self.files[self.file].path;
            let reader = self.reader.as_mut().expect("opened above");
            self.line_buf.clear();
            let limit = JSONL_LINE_BYTES_MAX as u64 + 1;
            let n = reader
                .by_ref()
                .take(limit)
                .read_until(b'\n', &mut self.line_buf)
                .map_err(|source| ImportError::Io { path: path.clone(), op: "read", source })?;
            if n == 0 {
                self.done_bytes += self.files[self.file].len;
                self.reader = None;
                self.file += 1;
                continue;
            }
            self.line += 1;
            if self.line_buf.len() > JSONL_LINE_BYTES_MAX {
                return Err(bad(path, self.line, format!("a line longer than {JSONL_LINE_BYTES_MAX} bytes")));
            }
            if !self.line_buf.iter().all(u8::is_ascii_whitespace) {
                return Ok(Some((self.file, self.line)));
            }
        }
    }

    /// Decodes `line_buf`, which must hold one JSON object.
    fn decode_line(&mut self, file: usize, line: u64) -> Result<(), ImportError> {
        let before = self.decoder.len();
        let path = &self.files[file].path;
        // arrow-json's tape passes over some malformed text (`{"n": 1,,}`)
        // and parses strings into numbers (`"12"`): serde_json is the judge
        // of what parses, and `check_row` of the types.
        let value =
            serde_json::from_slice::<serde_json::Value>(&self.line_buf).map_err(|e| bad(path, line, e.to_string()))?;
        check_row(&value, &self.schema).map_err(|reason| bad(path, line, reason))?;
        let used = self.decoder.decode(&self.line_buf).map_err(|e| bad(path, line, e.to_string()))?;
        if used != self.line_buf.len() || self.decoder.len() != before + 1 || self.decoder.has_partial_record() {
            self.decoder = decoder(&self.schema, &self.options)?;
            return Err(bad(path, line, "not one JSON value on the line: JSON Lines holds one object a line".into()));
        }
        Ok(())
    }

    /// The line of `lines` that a conversion refused with `error`: decoded
    /// alone, the first that fails.
    fn locate(&self, lines: &BatchLines, error: ArrowError) -> ImportError {
        let mut start = 0;
        for (k, &end) in lines.ends.iter().enumerate() {
            let (file, line) = lines.at[k];
            let alone = || -> Result<(), String> {
                let mut d = decoder(&self.schema, &self.options).map_err(|e| e.to_string())?;
                d.decode(&lines.text[start..end]).map_err(|e| e.to_string())?;
                d.flush().map_err(|e| e.to_string())?;
                Ok(())
            };
            if let Err(reason) = alone() {
                return bad(&self.files[file].path, line, reason);
            }
            start = end;
        }
        let (file, line) = lines.at.first().copied().unwrap_or((0, 0));
        bad(&self.files[file].path, line, format!("in the batch from this line on: {error}"))
    }
}

/// Refuses a line whose value has a key of the wrong JSON type for its
/// column: a string in a number column, a fraction in an integer column, a
/// number in a text column, a scalar in a list column. Types this check
/// does not know (dates, decimals, ...) are arrow-json's to parse.
fn check_row(value: &serde_json::Value, schema: &SchemaRef) -> Result<(), String> {
    let serde_json::Value::Object(map) = value else {
        return Err("not a JSON object: JSON Lines holds one object a line".into());
    };
    for field in schema.fields() {
        if let Some(v) = map.get(field.name()) {
            check_value(v, field.data_type()).map_err(|e| format!("column {:?}: {e}", field.name()))?;
        }
    }
    Ok(())
}

fn check_value(value: &serde_json::Value, t: &DataType) -> Result<(), String> {
    use serde_json::Value;
    let fits = match (value, t) {
        (Value::Null, _) => true,
        (Value::Number(n), t) if t.is_integer() => n.is_i64() || n.is_u64(),
        (Value::Number(_), t) if t.is_floating() => true,
        (Value::Bool(_), DataType::Boolean) => true,
        (Value::String(_), DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => true,
        (Value::Array(items), DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)) => {
            return items.iter().try_for_each(|item| check_value(item, f.data_type()));
        }
        (Value::Object(map), DataType::Struct(fields)) => {
            return fields.iter().try_for_each(|f| {
                map.get(f.name())
                    .map_or(Ok(()), |v| check_value(v, f.data_type()).map_err(|e| format!("{}: {e}", f.name())))
            });
        }
        (Value::Object(_), DataType::Map(..)) => true,
        (_, t) if t.is_integer() || t.is_floating() || t.is_nested() => false,
        (_, DataType::Boolean | DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) => false,
        _ => true,
    };
    if fits { Ok(()) } else { Err(format!("{} where the column's type is {t}", json_kind(value))) }
}

fn json_kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "a null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(n) if n.is_f64() => "a fraction",
        serde_json::Value::Number(_) => "an integer",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

fn bad(path: &Path, line: u64, reason: String) -> ImportError {
    ImportError::BadInput { path: path.to_path_buf(), at: Position::Line(line), reason }
}

fn decoder(schema: &SchemaRef, options: &JsonlOptions) -> Result<Decoder, ImportError> {
    ReaderBuilder::new(schema.clone())
        .with_batch_size(options.batch_rows.saturating_add(1))
        .with_strict_mode(!options.ignore_unknown_keys)
        .build_decoder()
        .map_err(|e| ImportError::InvalidArgument(format!("the JSON Lines schema: {e}")))
}

/// The files `paths` name, sorted, each once.
fn jsonl_files(vfs: &dyn Vfs, paths: &[PathBuf]) -> Result<Vec<InputFile>, ImportError> {
    let mut found = Vec::new();
    for path in paths {
        match input::kind(vfs, path)? {
            Some(FileKind::Dir) => {
                for name in input::list_sorted(vfs, path)? {
                    let ext = Path::new(&name).extension().and_then(|e| e.to_str()).unwrap_or("");
                    let file = path.join(&name);
                    if ["jsonl", "ndjson", "json"].contains(&ext) && input::kind(vfs, &file)? == Some(FileKind::File) {
                        found.push(file);
                    }
                }
            }
            Some(_) => found.push(path.clone()),
            None => {
                return Err(ImportError::InvalidArgument(format!(
                    "{}: no such file or directory; give JSON Lines files or directories of them",
                    path.display()
                )));
            }
        }
    }
    found.sort();
    found.dedup();
    if found.is_empty() {
        return Err(ImportError::InvalidArgument("no JSON Lines files (.jsonl, .ndjson, .json) in the input".into()));
    }
    found.iter().map(|p| InputFile::open(vfs, p)).collect()
}

/// The schema of the first `rows` lines that are not blank: each checked to
/// be a JSON object (a line that is not is named), then arrow-json's
/// inference over them, which keeps the keys in the order they first appear.
fn infer(files: &[InputFile], rows: usize) -> Result<SchemaRef, ImportError> {
    let (mut sample, mut lines) = (Vec::new(), 0);
    'files: for file in files {
        let mut reader = BufReader::new(file.reader(0));
        let mut buf = Vec::new();
        let mut line = 0;
        loop {
            if lines == rows.max(1) || sample.len() > SOURCE_INFER_BYTES_MAX {
                break 'files;
            }
            buf.clear();
            let n = (&mut reader)
                .take(JSONL_LINE_BYTES_MAX as u64 + 1)
                .read_until(b'\n', &mut buf)
                .map_err(|source| ImportError::Io { path: file.path.clone(), op: "read", source })?;
            if n == 0 {
                break;
            }
            line += 1;
            if buf.len() > JSONL_LINE_BYTES_MAX {
                return Err(bad(&file.path, line, format!("a line longer than {JSONL_LINE_BYTES_MAX} bytes")));
            }
            if buf.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let value: serde_json::Value =
                serde_json::from_slice(&buf).map_err(|e| bad(&file.path, line, e.to_string()))?;
            if !value.is_object() {
                return Err(bad(&file.path, line, "not a JSON object: JSON Lines holds one object a line".into()));
            }
            sample.extend_from_slice(buf.trim_ascii_end());
            sample.push(b'\n');
            lines += 1;
        }
    }
    let (schema, _) = infer_json_schema(std::io::Cursor::new(sample), None).map_err(|e| ImportError::ColumnType {
        column: "(inferred)".into(),
        reason: format!("inferring the types of the first {rows} lines: {e}; give a schema"),
    })?;
    Ok(Arc::new(schema))
}

impl Source for JsonlSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn bytes_hint(&self) -> Option<u64> {
        Some(self.files.iter().map(|f| f.len).sum())
    }

    fn bytes_read(&self) -> u64 {
        self.done_bytes + self.reader.as_ref().map_or(0, |r| r.get_ref().offset() - r.buffer().len() as u64)
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ImportError> {
        let mut lines = BatchLines::default();
        while lines.at.len() < self.options.batch_rows && lines.text.len() < JSONL_BATCH_BYTES_MAX {
            let Some((file, line)) = self.next_line()? else { break };
            self.decode_line(file, line)?;
            lines.text.extend_from_slice(&self.line_buf);
            lines.ends.push(lines.text.len());
            lines.at.push((file, line));
        }
        if lines.at.is_empty() {
            return Ok(None);
        }
        match self.decoder.flush() {
            Ok(batch) => Ok(batch),
            Err(e) => {
                self.decoder = decoder(&self.schema, &self.options)?;
                Err(self.locate(&lines, e))
            }
        }
    }

    /// Reads and drops `rows` lines that are not blank, parsing none.
    fn skip(&mut self, rows: u64) -> Result<(), ImportError> {
        for done in 0..rows {
            if self.next_line()?.is_none() {
                return Err(ImportError::InvalidArgument(format!(
                    "the JSON Lines input ended {} rows before the rows the table already holds from it: \
                     it changed since the import began",
                    rows - done
                )));
            }
        }
        Ok(())
    }
}
