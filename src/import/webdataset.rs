//! [`WebDatasetSource`]: WebDataset tar shards, one row per sample.
//!
//! A sample is the members of one key, webdataset's rule: a member's key is
//! its path up to the first dot of its base name, and the rest is its
//! extension (lowercased), which names its column. Members with no
//! extension, and directories, are passed over as webdataset does. The
//! columns are given (a schema whose fields are extensions, typed `Int64`,
//! `Utf8` or `Binary`) or decided from the first
//! [`WebDatasetOptions::infer_samples`] samples, sorted by name, typed by the
//! extension's last part: [`INT_EXTENSIONS`] parse as an integer,
//! [`TEXT_EXTENSIONS`] are UTF-8, anything else (images, audio) stays
//! encoded as binary. A sample without a column's member has a null there.
//!
//! The tar is read by its headers (ustar, GNU long names, pax paths), with
//! positional reads: [`Source::skip`] walks headers without reading a
//! member's bytes. A key whose members are not adjacent, two members of one
//! key with one extension, a torn member (the tar cut short), a member that
//! is not a regular file or a directory, a bad header checksum: each is
//! [`ImportError::BadInput`] naming the tar and the member.

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use crate::io::{FileKind, Vfs};

use super::error::{ImportError, Position};
use super::input::{self, Fingerprint, InputFile, SOURCE_INFER_BYTES_MAX, check_batch_rows};
use super::source::Source;

/// Extensions (their last dot-separated part) whose member is an integer.
pub const INT_EXTENSIONS: [&str; 9] = ["cls", "cls2", "class", "label", "idx", "index", "inx", "id", "count"];

/// Extensions (their last part) whose member is UTF-8 text.
pub const TEXT_EXTENSIONS: [&str; 13] =
    ["txt", "text", "transcript", "caption", "json", "jsn", "html", "xml", "csv", "tsv", "yaml", "yml", "md"];

/// The largest member read, in bytes (a header's size never sizes an
/// allocation beyond it; a batch's binary offsets stay 32-bit).
pub const WDS_MEMBER_BYTES_MAX: u64 = 1 << 30;

/// The bytes of member data a batch holds at most, unless one sample alone is larger.
pub const WDS_BATCH_BYTES_MAX: usize = 64 << 20;

/// The longest GNU long name or pax header, in bytes.
const TAR_META_BYTES_MAX: u64 = 1 << 20;

/// The most shards a brace pattern expands to.
const BRACE_EXPANSION_MAX: usize = 1_000_000;

/// The name of the key column ([`WebDatasetOptions::key_column`]).
pub const KEY_COLUMN: &str = "__key__";

/// How a [`WebDatasetSource`] reads.
#[derive(Clone, Debug)]
pub struct WebDatasetOptions {
    /// The columns (extensions) and their types; `None` decides them from
    /// the first samples.
    pub schema: Option<SchemaRef>,
    /// Samples the columns are decided from (fewer if they pass
    /// `SOURCE_INFER_BYTES_MAX`).
    pub infer_samples: usize,
    /// Rows in a batch at most.
    pub batch_rows: usize,
    /// A first column [`KEY_COLUMN`] with each sample's key.
    pub key_column: bool,
}

impl Default for WebDatasetOptions {
    fn default() -> Self {
        WebDatasetOptions { schema: None, infer_samples: 64, batch_rows: 256, key_column: false }
    }
}

/// A tar member: its name and where its bytes are.
#[derive(Clone, Debug)]
struct Member {
    name: String,
    offset: u64,
    size: u64,
}

/// One sample: its shard, key, and members (extension, member, bytes if read).
#[derive(Debug)]
struct Sample {
    shard: usize,
    key: String,
    members: Vec<(String, Member, Vec<u8>)>,
}

/// One tar read header by header.
#[derive(Debug)]
struct TarReader {
    file: InputFile,
    path: PathBuf,
    len: u64,
    /// The offset of the next header.
    pos: u64,
    ended: bool,
}

/// WebDataset tar shards read in order (see the module's documentation).
#[derive(Debug)]
pub struct WebDatasetSource {
    shards: Vec<InputFile>,
    schema: SchemaRef,
    /// Each column's extension and type, after the key column if any.
    columns: Vec<(String, DataType)>,
    options: WebDatasetOptions,
    fingerprint: String,
    shard: usize,
    reader: Option<TarReader>,
    pending: Option<Member>,
    seen: HashSet<String>,
    buffered: VecDeque<Sample>,
    done_bytes: u64,
}

/// Expands webdataset's brace patterns: `shard-{000..009}.tar` (a range,
/// zero-padded to the width of its bounds when either has a leading zero)
/// and `{a,b}` (a list), any number of them, in order.
pub fn expand_braces(pattern: &str) -> Result<Vec<String>, ImportError> {
    let Some(open) = pattern.find('{') else { return Ok(vec![pattern.to_string()]) };
    let close = pattern[open..]
        .find('}')
        .map(|k| open + k)
        .ok_or_else(|| ImportError::InvalidArgument(format!("{pattern:?}: a '{{' without its '}}'")))?;
    let (head, body, tail) = (&pattern[..open], &pattern[open + 1..close], &pattern[close + 1..]);
    let choices: Vec<String> = match body.split_once("..") {
        Some((a, b)) if !a.is_empty() && a.bytes().chain(b.bytes()).all(|c| c.is_ascii_digit()) => {
            let bad = |_| ImportError::InvalidArgument(format!("{pattern:?}: a range bound too large"));
            let (lo, hi) = (a.parse::<u64>().map_err(bad)?, b.parse::<u64>().map_err(bad)?);
            if hi < lo || hi - lo >= BRACE_EXPANSION_MAX as u64 {
                return Err(ImportError::InvalidArgument(format!(
                    "{pattern:?}: the range {a}..{b} is empty or longer than {BRACE_EXPANSION_MAX}"
                )));
            }
            let padded = (a.len() > 1 && a.starts_with('0')) || (b.len() > 1 && b.starts_with('0'));
            let width = if padded { a.len().max(b.len()) } else { 0 };
            (lo..=hi).map(|n| format!("{n:0width$}")).collect()
        }
        _ => body.split(',').map(str::to_string).collect(),
    };
    let rest = expand_braces(tail)?;
    if choices.len().saturating_mul(rest.len()) > BRACE_EXPANSION_MAX {
        return Err(ImportError::InvalidArgument(format!("{pattern:?}: more than {BRACE_EXPANSION_MAX} names")));
    }
    Ok(choices.iter().flat_map(|c| rest.iter().map(move |r| format!("{head}{c}{r}"))).collect())
}

/// A member's key and extension, webdataset's rule; `None` for a member
/// without an extension.
fn key_and_extension(name: &str) -> Option<(&str, String)> {
    let base_at = name.rfind('/').map_or(0, |k| k + 1);
    let dot = name[base_at..].find('.').map(|k| base_at + k)?;
    (dot > base_at).then(|| (&name[..dot], name[dot + 1..].to_lowercase()))
}

/// The column type of an extension: by its last dot-separated part.
fn extension_type(ext: &str) -> DataType {
    let last = ext.rsplit('.').next().unwrap_or(ext);
    if INT_EXTENSIONS.contains(&last) {
        DataType::Int64
    } else if TEXT_EXTENSIONS.contains(&last) {
        DataType::Utf8
    } else {
        DataType::Binary
    }
}

fn bad(path: &Path, at: Position, reason: impl Into<String>) -> ImportError {
    ImportError::BadInput { path: path.to_path_buf(), at, reason: reason.into() }
}

impl TarReader {
    fn open(shard: &InputFile) -> Result<TarReader, ImportError> {
        Ok(TarReader { file: shard.clone(), path: shard.path.clone(), len: shard.len, pos: 0, ended: false })
    }

    /// Refuses a member whose `len` bytes at `offset` run past the tar's end.
    fn within(&self, offset: u64, len: u64, member: &str) -> Result<(), ImportError> {
        if offset.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(bad(
                &self.path,
                Position::Member(member.to_string()),
                format!(
                    "torn: its {len} bytes at byte {offset} run past the end of the tar ({} bytes); the tar was cut short",
                    self.len
                ),
            ));
        }
        Ok(())
    }

    fn read(&self, offset: u64, len: u64, member: &str) -> Result<Vec<u8>, ImportError> {
        self.within(offset, len, member)?;
        self.file.read_at(offset, len)
    }

    /// The size of the member whose header, at byte `at`, is `block`, once
    /// its checksum holds.
    fn checked_size(&self, header: &tar::Header, block: &[u8], at: u64) -> Result<u64, ImportError> {
        let header_bad = |reason: String| bad(&self.path, Position::Byte(at), reason);
        let stored = header.cksum().map_err(|e| header_bad(format!("a header's checksum field: {e}")))?;
        let sum: u32 =
            block.iter().enumerate().map(|(k, &b)| if (148..156).contains(&k) { 32 } else { u32::from(b) }).sum();
        if stored != sum {
            return Err(header_bad(format!(
                "a header whose checksum is {stored}, its bytes sum to {sum}: not a tar, or a corrupt one"
            )));
        }
        let size = header.entry_size().map_err(|e| header_bad(format!("a header's size field: {e}")))?;
        Ok(size)
    }

    /// The next regular file's member, or `None` at the end of the tar.
    fn next_member(&mut self) -> Result<Option<Member>, ImportError> {
        let mut long_name: Option<String> = None;
        loop {
            if self.ended || self.pos >= self.len {
                self.ended = true;
                return Ok(None);
            }
            let at = self.pos;
            if at + 512 > self.len {
                return Err(bad(&self.path, Position::Byte(at), "a torn header: the tar was cut short"));
            }
            let block = self.read(at, 512, "(a header)")?;
            if block.iter().all(|&b| b == 0) {
                self.ended = true;
                return Ok(None);
            }
            let header = tar::Header::from_byte_slice(&block);
            let size = self.checked_size(header, &block, at)?;
            let name = long_name.take().unwrap_or_else(|| String::from_utf8_lossy(&header.path_bytes()).into_owned());
            let data = at + 512;
            self.within(data, size, &name)?;
            self.pos = data + size.div_ceil(512) * 512;
            let kind = header.entry_type();
            let member_bad = |reason: String| bad(&self.path, Position::Member(name.clone()), reason);
            if kind.is_file() || kind.is_contiguous() {
                if size > WDS_MEMBER_BYTES_MAX {
                    return Err(member_bad(format!(
                        "{size} bytes, more than the {WDS_MEMBER_BYTES_MAX} a member may hold"
                    )));
                }
                return Ok(Some(Member { name, offset: data, size }));
            } else if kind.is_dir() || kind.is_pax_global_extensions() {
                continue;
            } else if kind.is_gnu_longname() || kind.is_pax_local_extensions() {
                if size > TAR_META_BYTES_MAX {
                    return Err(member_bad(format!("a long name or pax header of {size} bytes")));
                }
                let bytes = self.read(data, size, &name)?;
                long_name = if kind.is_gnu_longname() { Some(gnu_name(&bytes)) } else { pax_path(&bytes) };
            } else {
                return Err(member_bad(format!(
                    "not a regular file (tar type {:?}): a WebDataset sample holds regular files only",
                    kind.as_byte() as char
                )));
            }
        }
    }
}

fn gnu_name(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// The `path` of a pax header's records (`<len> <key>=<value>\n`).
fn pax_path(mut bytes: &[u8]) -> Option<String> {
    let mut path = None;
    while let Some(space) = bytes.iter().position(|&b| b == b' ') {
        let len: usize = std::str::from_utf8(&bytes[..space]).ok()?.parse().ok()?;
        if len <= space + 1 || len > bytes.len() {
            return path;
        }
        let record = &bytes[space + 1..len - 1];
        if let Some(value) = record.strip_prefix(b"path=") {
            path = Some(String::from_utf8_lossy(value).into_owned());
        }
        bytes = &bytes[len..];
    }
    path
}

/// The tars `inputs` name: each brace-expanded; a directory gives its
/// `.tar` files, sorted; the order otherwise as given.
fn shard_files(vfs: &dyn Vfs, inputs: &[String]) -> Result<Vec<InputFile>, ImportError> {
    let mut shards = Vec::new();
    for input in inputs {
        for name in expand_braces(input)? {
            let path = PathBuf::from(&name);
            match input::kind(vfs, &path)? {
                Some(FileKind::Dir) => {
                    for entry in input::list_sorted(vfs, &path)? {
                        if entry.ends_with(".tar") && input::kind(vfs, &path.join(&entry))? == Some(FileKind::File) {
                            shards.push(InputFile::open(vfs, &path.join(&entry))?);
                        }
                    }
                }
                Some(_) => shards.push(InputFile::open(vfs, &path)?),
                None => {
                    return Err(ImportError::InvalidArgument(format!(
                        "{name}: no such tar shard; give tar files, directories of them or a brace pattern"
                    )));
                }
            }
        }
    }
    if shards.is_empty() {
        return Err(ImportError::InvalidArgument("no tar shards in the input".into()));
    }
    Ok(shards)
}

/// The columns a schema gives, checked: every field `Int64`, `Utf8` or `Binary`.
fn given_columns(schema: &Schema) -> Result<Vec<(String, DataType)>, ImportError> {
    let mut columns = Vec::new();
    for field in schema.fields() {
        let t = field.data_type();
        if !matches!(t, DataType::Int64 | DataType::Utf8 | DataType::Binary) {
            return Err(ImportError::ColumnType {
                column: field.name().clone(),
                reason: format!("{t}: a WebDataset column is Int64, Utf8 or Binary"),
            });
        }
        columns.push((field.name().to_lowercase(), t.clone()));
    }
    Ok(columns)
}

impl WebDatasetSource {
    /// Reads the tar shards `inputs` name (paths, directories of `.tar`
    /// files, or brace patterns such as `shard-{000..009}.tar`), in order.
    pub fn open(inputs: &[String], options: WebDatasetOptions) -> Result<WebDatasetSource, ImportError> {
        WebDatasetSource::open_in(Arc::new(crate::io::real::RealFs), inputs, options)
    }

    /// [`WebDatasetSource::open`] on any filesystem implementation.
    pub fn open_in(
        vfs: Arc<dyn Vfs>,
        inputs: &[String],
        options: WebDatasetOptions,
    ) -> Result<WebDatasetSource, ImportError> {
        check_batch_rows(options.batch_rows)?;
        let shards = shard_files(&*vfs, inputs)?;
        let mut source = WebDatasetSource {
            shards,
            schema: Arc::new(Schema::empty()),
            columns: Vec::new(),
            options,
            fingerprint: String::new(),
            shard: 0,
            reader: None,
            pending: None,
            seen: HashSet::new(),
            buffered: VecDeque::new(),
            done_bytes: 0,
        };
        source.columns = match &source.options.schema {
            Some(schema) => given_columns(schema)?,
            None => source.decide_columns()?,
        };
        if source.columns.is_empty() && !source.options.key_column {
            return Err(ImportError::InvalidArgument(
                "no columns: the tars hold no samples, or the schema given names none".into(),
            ));
        }
        let key = source.options.key_column.then(|| Field::new(KEY_COLUMN, DataType::Utf8, false));
        let fields: Vec<Field> =
            key.into_iter().chain(source.columns.iter().map(|(ext, t)| Field::new(ext, t.clone(), true))).collect();
        source.schema = Arc::new(Schema::new(fields));
        let mut print = Fingerprint::new("webdataset");
        for shard in &source.shards {
            print.file(shard)?;
        }
        print.text(&format!("{:?}", source.schema));
        source.fingerprint = print.finish();
        Ok(source)
    }

    /// The shards read, in order.
    pub fn shards(&self) -> Vec<PathBuf> {
        self.shards.iter().map(|f| f.path.clone()).collect()
    }

    /// Reads the first samples ahead and decides the columns from them.
    fn decide_columns(&mut self) -> Result<Vec<(String, DataType)>, ImportError> {
        let (mut exts, mut bytes) = (std::collections::BTreeSet::new(), 0);
        while self.buffered.len() < self.options.infer_samples.max(1) && bytes <= SOURCE_INFER_BYTES_MAX {
            let Some(sample) = self.read_sample(true)? else { break };
            exts.extend(sample.members.iter().map(|(ext, ..)| ext.clone()));
            bytes += sample.members.iter().map(|(_, _, b)| b.len()).sum::<usize>();
            self.buffered.push_back(sample);
        }
        Ok(exts
            .into_iter()
            .map(|ext| {
                let t = extension_type(&ext);
                (ext, t)
            })
            .collect())
    }

    /// The next sample of the tars, its members' bytes read if `read`.
    fn read_sample(&mut self, read: bool) -> Result<Option<Sample>, ImportError> {
        loop {
            if self.reader.is_none() {
                let Some(shard) = self.shards.get(self.shard) else { return Ok(None) };
                self.reader = Some(TarReader::open(shard)?);
                self.seen.clear();
            }
            let reader = self.reader.as_mut().expect("opened above");
            let first = match self.pending.take() {
                Some(m) => Some(m),
                None => next_keyed(reader)?,
            };
            let Some(first) = first else {
                self.done_bytes += self.shards[self.shard].len;
                self.reader = None;
                self.shard += 1;
                continue;
            };
            let (key, ext) = key_and_extension(&first.name).map(|(k, e)| (k.to_string(), e)).expect("keyed");
            if !self.seen.insert(key.clone()) {
                return Err(bad(
                    &reader.path,
                    Position::Member(first.name),
                    format!("the key {key:?} again, after other keys: a sample's members must be adjacent in the tar"),
                ));
            }
            let mut members = vec![(ext, first)];
            while let Some(m) = next_keyed(reader)? {
                let (k, e) = key_and_extension(&m.name).expect("keyed");
                if k != key {
                    self.pending = Some(m);
                    break;
                }
                if members.iter().any(|(have, _)| *have == e) {
                    return Err(bad(
                        &reader.path,
                        Position::Member(m.name.clone()),
                        format!("a second {e:?} member of the key {key:?}"),
                    ));
                }
                members.push((e, m));
            }
            let members = members
                .into_iter()
                .map(|(e, m)| {
                    let bytes = if read { reader.read(m.offset, m.size, &m.name)? } else { Vec::new() };
                    Ok((e, m, bytes))
                })
                .collect::<Result<_, ImportError>>()?;
            return Ok(Some(Sample { shard: self.shard, key, members }));
        }
    }

    /// The next sample, buffered ones first.
    fn next_sample(&mut self) -> Result<Option<Sample>, ImportError> {
        match self.buffered.pop_front() {
            Some(sample) => Ok(Some(sample)),
            None => self.read_sample(true),
        }
    }
}

/// The next member that has an extension (webdataset passes over the others).
fn next_keyed(reader: &mut TarReader) -> Result<Option<Member>, ImportError> {
    while let Some(m) = reader.next_member()? {
        if key_and_extension(&m.name).is_some() {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// A batch's columns as they fill.
enum ColumnBuilder {
    Int(Int64Builder),
    Text(StringBuilder),
    Bytes(BinaryBuilder),
}

impl ColumnBuilder {
    fn new(t: &DataType) -> ColumnBuilder {
        match t {
            DataType::Int64 => ColumnBuilder::Int(Int64Builder::new()),
            DataType::Utf8 => ColumnBuilder::Text(StringBuilder::new()),
            _ => ColumnBuilder::Bytes(BinaryBuilder::new()),
        }
    }

    fn null(&mut self) {
        match self {
            ColumnBuilder::Int(b) => b.append_null(),
            ColumnBuilder::Text(b) => b.append_null(),
            ColumnBuilder::Bytes(b) => b.append_null(),
        }
    }

    /// Appends a member's bytes, parsed as the column's type; an error
    /// says what is wrong with them.
    fn append(&mut self, bytes: &[u8]) -> Result<(), String> {
        match self {
            ColumnBuilder::Int(b) => {
                let text = std::str::from_utf8(bytes).map_err(|_| "an integer column's member is not UTF-8 text")?;
                let n =
                    text.trim().parse::<i64>().map_err(|e| format!("{:?} is not an integer: {e}", truncated(text)))?;
                b.append_value(n);
            }
            ColumnBuilder::Text(b) => {
                let text =
                    std::str::from_utf8(bytes).map_err(|e| format!("a text column's member is not UTF-8: {e}"))?;
                b.append_value(text);
            }
            ColumnBuilder::Bytes(b) => b.append_value(bytes),
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            ColumnBuilder::Int(b) => Arc::new(b.finish()),
            ColumnBuilder::Text(b) => Arc::new(b.finish()),
            ColumnBuilder::Bytes(b) => Arc::new(b.finish()),
        }
    }
}

fn truncated(text: &str) -> &str {
    let end = text.char_indices().nth(40).map_or(text.len(), |(k, _)| k);
    &text[..end]
}

impl Source for WebDatasetSource {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn fingerprint(&self) -> String {
        self.fingerprint.clone()
    }

    fn bytes_hint(&self) -> Option<u64> {
        Some(self.shards.iter().map(|f| f.len).sum())
    }

    fn bytes_read(&self) -> u64 {
        self.done_bytes + self.reader.as_ref().map_or(0, |r| r.pos.min(r.len))
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ImportError> {
        let mut key = self.options.key_column.then(StringBuilder::new);
        let mut builders: Vec<ColumnBuilder> = self.columns.iter().map(|(_, t)| ColumnBuilder::new(t)).collect();
        let (mut rows, mut bytes) = (0, 0);
        while rows < self.options.batch_rows && bytes < WDS_BATCH_BYTES_MAX {
            let Some(sample) = self.next_sample()? else { break };
            if rows > 0 && bytes + sample.members.iter().map(|(_, _, b)| b.len()).sum::<usize>() > WDS_BATCH_BYTES_MAX {
                self.buffered.push_front(sample);
                break;
            }
            self.append_sample(&sample, key.as_mut(), &mut builders)?;
            bytes += sample.members.iter().map(|(_, _, b)| b.len()).sum::<usize>();
            rows += 1;
        }
        if rows == 0 {
            return Ok(None);
        }
        let arrays: Vec<ArrayRef> = key
            .map(|mut k| Arc::new(k.finish()) as ArrayRef)
            .into_iter()
            .chain(builders.iter_mut().map(ColumnBuilder::finish))
            .collect();
        let batch = RecordBatch::try_new(self.schema.clone(), arrays).expect("columns built to the schema");
        Ok(Some(batch))
    }

    /// Walks the headers of `rows` samples without reading their members.
    fn skip(&mut self, rows: u64) -> Result<(), ImportError> {
        for done in 0..rows {
            let sample = match self.buffered.pop_front() {
                Some(sample) => Some(sample),
                None => self.read_sample(false)?,
            };
            if sample.is_none() {
                return Err(ImportError::InvalidArgument(format!(
                    "the tar shards ended {} samples before the rows the table already holds from them: \
                     they changed since the import began",
                    rows - done
                )));
            }
        }
        Ok(())
    }
}

impl WebDatasetSource {
    /// Appends one sample's row: each column's member, or a null.
    fn append_sample(
        &self,
        sample: &Sample,
        key: Option<&mut StringBuilder>,
        builders: &mut [ColumnBuilder],
    ) -> Result<(), ImportError> {
        let path = &self.shards[sample.shard].path;
        if let Some((ext, member, _)) = sample.members.iter().find(|(e, ..)| !self.columns.iter().any(|(c, _)| c == e))
        {
            let names: Vec<&str> = self.columns.iter().map(|(c, _)| c.as_str()).collect();
            return Err(bad(
                path,
                Position::Member(member.name.clone()),
                format!(
                    "the extension {ext:?} is not a column ({names:?}, decided from the first {} samples): give the columns, or more samples to decide them from",
                    self.options.infer_samples
                ),
            ));
        }
        if let Some(key) = key {
            key.append_value(&sample.key);
        }
        for ((ext, _), builder) in self.columns.iter().zip(builders.iter_mut()) {
            match sample.members.iter().find(|(e, ..)| e == ext) {
                Some((_, member, bytes)) => {
                    builder.append(bytes).map_err(|reason| bad(path, Position::Member(member.name.clone()), reason))?
                }
                None => builder.null(),
            }
        }
        Ok(())
    }
}
