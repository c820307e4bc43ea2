//! [`import`]: the engine every source goes through (`docs/import.md`,
//! "Resumption and the commit point"). One thread reads batches from the
//! source into a bounded channel (a few batches: bounded memory), the
//! caller's thread converts and appends them, and commits every
//! [`ImportOptions::commit_rows`] rows or [`ImportOptions::commit_bytes`]
//! bytes with the import's progress as the commit's mark: the input's
//! fingerprint, the table's rows before the import began (`base`), and
//! whether it finished. The mark is committed with the rows it counts, so
//! a rerun of the same input skips exactly `rows - base` input rows.

use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::Instant;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use serde_json::json;

use super::error::ImportError;
use super::mapping::{ColumnOptions, Converted, Cut, Mapping};
use super::source::Source;
use crate::dataset::WriteOptions;
use crate::format::TABLE_FILE;
use crate::io::Vfs;
use crate::table::{ColumnSpec, Table, TableColumn, TableWriter, Values};

/// Batches read ahead of the writer: the reader's memory bound.
const READ_AHEAD: usize = 4;
/// Column value bytes gathered into one append (with a commit due, fewer).
const APPEND_BYTES: u64 = 16 << 20;
/// The zstd level an import compresses at: on the token corpus of
/// `docs/benchmarks.md` ("Import"), level 1 compresses 1.6x faster than the
/// store's default level 3 for the same ratio (1.576 against 1.571).
pub const IMPORT_ZSTD_LEVEL: i32 = 1;

/// How an import maps its columns, writes them, and how often it commits.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// Column selection, names, codecs and null fills.
    pub columns: ColumnOptions,
    /// The table's write options (its chunk and commit sizes, ...; by
    /// default at zstd level [`IMPORT_ZSTD_LEVEL`]). A column's codec is
    /// [`ColumnOptions`]'s, not `write.codec`.
    pub write: WriteOptions,
    /// A commit at least every this many rows.
    pub commit_rows: u64,
    /// A commit at least every this many bytes of column values.
    pub commit_bytes: u64,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        let mut write = WriteOptions::default();
        write.store.zstd_level = IMPORT_ZSTD_LEVEL;
        ImportOptions { columns: ColumnOptions::default(), write, commit_rows: 1 << 20, commit_bytes: 256 << 20 }
    }
}

/// Where an import is, for a progress bar.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Input rows taken, counting those a resumed import skipped.
    pub rows: u64,
    /// Input rows in all, if the source knows.
    pub rows_hint: Option<u64>,
    /// Input bytes read.
    pub bytes: u64,
    /// Input bytes in all, if the source knows.
    pub bytes_hint: Option<u64>,
    /// The table's committed rows.
    pub committed: u64,
}

/// What an import did.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportSummary {
    /// Rows this run added to the table.
    pub rows: u64,
    /// Input rows a resumed import skipped (an earlier run committed them).
    pub skipped: u64,
    /// The table's rows now.
    pub table_rows: u64,
    /// Input bytes this run read.
    pub bytes: u64,
    /// Column value bytes this run appended.
    pub value_bytes: u64,
    /// The same input was imported before, to its end: nothing was done.
    pub already_done: bool,
    /// Seconds the run took.
    pub seconds: f64,
}

/// An import's progress, as the commit's mark records it.
#[derive(Clone, Debug, PartialEq)]
struct Mark {
    fingerprint: String,
    /// The table's rows before the import began.
    base: u64,
    done: bool,
}

impl Mark {
    fn to_json(&self) -> String {
        json!({"import": {"fingerprint": self.fingerprint, "base": self.base, "done": self.done}}).to_string()
    }

    /// The mark `text` records, `None` if it is no import's.
    fn parse(text: &str) -> Option<Mark> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        let import = value.get("import")?;
        Some(Mark {
            fingerprint: import.get("fingerprint")?.as_str()?.to_string(),
            base: import.get("base")?.as_u64()?,
            done: import.get("done")?.as_bool()?,
        })
    }
}

/// Imports `source` into the table at `dest`: created from the source's
/// schema, or appended to (its columns must match). A rerun of the same
/// input after a failure or a kill resumes at its last commit; after a
/// finished import, it is a no-op ([`ImportSummary::already_done`]).
/// `progress` is called after every batch; an error it returns stops the
/// import at its last commit and is returned. An error leaves the table
/// at its last commit.
pub fn import(
    source: &mut dyn Source,
    dest: &Path,
    opts: &ImportOptions,
    progress: &mut dyn FnMut(&Progress) -> Result<(), ImportError>,
) -> Result<ImportSummary, ImportError> {
    import_in(Arc::new(crate::io::real::RealFs), source, dest, opts, progress)
}

/// [`import`] into a table on any filesystem implementation (the source
/// reads through its own).
pub fn import_in(
    vfs: Arc<dyn Vfs>,
    source: &mut dyn Source,
    dest: &Path,
    opts: &ImportOptions,
    progress: &mut dyn FnMut(&Progress) -> Result<(), ImportError>,
) -> Result<ImportSummary, ImportError> {
    let started = Instant::now();
    let (mapping, writer) = open_table(vfs, &source.schema(), dest, opts)?;
    let rows = writer.rows();
    let fingerprint = source.fingerprint();
    let earlier = writer.mark().and_then(Mark::parse).filter(|m| m.fingerprint == fingerprint);
    let mark = match earlier {
        Some(m) if m.base <= rows => m,
        _ => Mark { fingerprint, base: rows, done: false },
    };
    let skipped = rows - mark.base;
    let state = Progress {
        rows: skipped,
        rows_hint: source.rows_hint(),
        bytes: 0,
        bytes_hint: source.bytes_hint(),
        committed: rows,
    };
    let already_done = mark.done;
    let mut run =
        Run { mapping, writer, mark, opts, state, pending: Pending::default(), added: (0, 0), since_commit: (0, 0) };
    if !already_done {
        let (tx, rx) = mpsc::sync_channel::<Result<(RecordBatch, u64), ImportError>>(READ_AHEAD);
        std::thread::scope(|scope| {
            scope.spawn(move || read(source, skipped, tx));
            for message in rx {
                let (batch, bytes_read) = message?;
                run.take(&batch, bytes_read)?;
                progress(&run.state)?;
            }
            run.finish()?;
            progress(&run.state)
        })?;
    }
    Ok(ImportSummary {
        rows: run.added.0,
        skipped,
        table_rows: run.writer.rows(),
        bytes: run.state.bytes,
        value_bytes: run.added.1,
        already_done,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The mapping of `schema` and the table at `dest`: created with its
/// columns, or opened and checked to have them.
fn open_table(
    vfs: Arc<dyn Vfs>,
    schema: &SchemaRef,
    dest: &Path,
    opts: &ImportOptions,
) -> Result<(Mapping, TableWriter), ImportError> {
    let mapping = Mapping::new(schema, &opts.columns)?;
    let specs = mapping.specs();
    let table_file = dest.join(TABLE_FILE);
    let exists = vfs.kind(&table_file).map_err(|source| ImportError::Io { path: table_file, op: "stat", source })?;
    let writer = if exists.is_some() {
        let writer = TableWriter::open_in(vfs.clone(), dest, &opts.write)?;
        check_columns(vfs, dest, &specs)?;
        writer
    } else {
        TableWriter::create_in(vfs, dest, &specs, &opts.write)?
    };
    Ok((mapping, writer))
}

/// The writing side of an import: batches converted as they come, gathered
/// into appends, committed with the mark.
struct Run<'a> {
    mapping: Mapping,
    writer: TableWriter,
    mark: Mark,
    opts: &'a ImportOptions,
    state: Progress,
    pending: Pending,
    /// Rows and value bytes appended by this run.
    added: (u64, u64),
    /// Rows and value bytes appended since the last commit.
    since_commit: (u64, u64),
}

impl Run<'_> {
    /// Takes a batch (the input's bytes read after it): converted (a null
    /// refused now), appended when enough are gathered, committed when due.
    fn take(&mut self, batch: &RecordBatch, bytes_read: u64) -> Result<(), ImportError> {
        let n = batch.num_rows() as u64;
        if n > 0 {
            let converted = self.mapping.convert(batch, self.state.rows)?;
            self.pending.bytes += value_bytes(&self.mapping.cut(&converted));
            self.pending.rows += n;
            self.pending.converted.push(converted);
        }
        (self.state.rows, self.state.bytes) = (self.state.rows + n, bytes_read);
        let due = self.since_commit.0 + self.pending.rows >= self.opts.commit_rows
            || self.since_commit.1 + self.pending.bytes >= self.opts.commit_bytes;
        if due || self.pending.bytes >= APPEND_BYTES {
            self.append()?;
        }
        if due {
            self.state.committed = self.writer.commit_marked(Some(self.mark.to_json()))?;
            self.since_commit = (0, 0);
        }
        Ok(())
    }

    /// Appends the batches gathered.
    fn append(&mut self) -> Result<(), ImportError> {
        let (rows, bytes) = self.pending.append(&self.mapping, &mut self.writer)?;
        self.added = (self.added.0 + rows, self.added.1 + bytes);
        self.since_commit = (self.since_commit.0 + rows, self.since_commit.1 + bytes);
        Ok(())
    }

    /// The input's end: the rest appended, committed with the mark done.
    fn finish(&mut self) -> Result<(), ImportError> {
        self.append()?;
        self.mark.done = true;
        self.state.committed = self.writer.commit_marked(Some(self.mark.to_json()))?;
        Ok(())
    }
}

/// The reader thread: skips `skip` rows, then sends every batch with the
/// bytes read so far, or the error that stopped it. A closed channel (the
/// writer stopped) ends it.
fn read(source: &mut dyn Source, skip: u64, tx: mpsc::SyncSender<Result<(RecordBatch, u64), ImportError>>) {
    if let Err(e) = source.skip(skip) {
        let _ = tx.send(Err(e));
        return;
    }
    loop {
        let message = match source.next_batch() {
            Ok(Some(batch)) => Ok((batch, source.bytes_read())),
            Ok(None) => return,
            Err(e) => Err(e),
        };
        let failed = message.is_err();
        if tx.send(message).is_err() || failed {
            return;
        }
    }
}

/// Converted batches not yet appended: appended together, as one call
/// per column, once they hold [`APPEND_BYTES`] or a commit is due (each
/// append is durable on return: its syncs are paid per call, not per batch).
#[derive(Default)]
struct Pending {
    converted: Vec<Converted>,
    rows: u64,
    bytes: u64,
}

impl Pending {
    /// Appends the batches held, emptying it; returns the rows and value bytes.
    fn append(&mut self, mapping: &Mapping, writer: &mut TableWriter) -> Result<(u64, u64), ImportError> {
        if self.converted.is_empty() {
            return Ok((0, 0));
        }
        let cuts: Vec<Vec<Cut<'_>>> = self.converted.iter().map(|c| mapping.cut(c)).collect();
        let merged: Vec<Merged<'_>> = (0..cuts[0].len()).map(|k| Merged::of(cuts.iter().map(|c| &c[k]))).collect();
        let values: Vec<Values<'_>> = merged.iter().map(Merged::values).collect();
        writer.append(&values)?;
        let done = (self.rows, self.bytes);
        drop(merged);
        drop(cuts);
        *self = Pending::default();
        Ok(done)
    }
}

/// One column's cuts of several batches, as one append's values.
enum Merged<'a> {
    Fixed(Cow<'a, [u8]>),
    Items(Vec<&'a [u8]>),
    Packed(Cow<'a, [u8]>, Cow<'a, [u32]>),
}

impl<'a> Merged<'a> {
    /// The column's cuts, in order, joined: one batch's records or packed
    /// values borrowed, several batches' copied back to back; items
    /// gathered where a batch's values are not packed (a null filled).
    fn of(cuts: impl Iterator<Item = &'a Cut<'a>>) -> Merged<'a> {
        let cuts: Vec<&'a Cut<'a>> = cuts.collect();
        match cuts[..] {
            [Cut::Fixed(bytes)] => Merged::Fixed(Cow::Borrowed(bytes)),
            [Cut::Packed(data, lens)] => Merged::Packed(Cow::Borrowed(data), Cow::Borrowed(lens)),
            [Cut::Fixed(_), ..] => Merged::Fixed(Cow::Owned(cuts.iter().flat_map(|c| fixed_of(c)).copied().collect())),
            _ if cuts.iter().all(|c| matches!(c, Cut::Packed(..))) => {
                let mut data = Vec::with_capacity(cuts.iter().map(|c| c.bytes()).sum());
                let mut lens = Vec::new();
                for cut in &cuts {
                    if let Cut::Packed(d, l) = cut {
                        data.extend_from_slice(d);
                        lens.extend_from_slice(l);
                    }
                }
                Merged::Packed(Cow::Owned(data), Cow::Owned(lens))
            }
            _ => Merged::Items(cuts.iter().flat_map(|c| c.items()).collect()),
        }
    }

    fn values(&self) -> Values<'_> {
        match self {
            Merged::Fixed(bytes) => Values::Fixed(bytes),
            Merged::Items(items) => Values::Items(items),
            Merged::Packed(data, lens) => Values::Packed { data, lens },
        }
    }
}

/// A fixed column's cut's records (none for another kind's).
fn fixed_of<'a>(cut: &'a Cut<'a>) -> &'a [u8] {
    match cut {
        Cut::Fixed(bytes) => bytes,
        _ => &[],
    }
}

/// The bytes of column values a batch's cuts hold.
fn value_bytes(cuts: &[Cut<'_>]) -> u64 {
    cuts.iter().map(Cut::bytes).sum::<usize>() as u64
}

/// The table at `dest` has the columns `specs` describes (names, kinds,
/// element types and shapes, in order): an import into it appends.
fn check_columns(vfs: Arc<dyn Vfs>, dest: &Path, specs: &[ColumnSpec]) -> Result<(), ImportError> {
    let table = Table::open_in(vfs, dest)?;
    let held: Vec<_> = table.columns().collect();
    if held.len() != specs.len() || held.iter().zip(specs).any(|((name, _, _), s)| *name != s.name) {
        let names: Vec<&str> = held.iter().map(|(n, _, _)| *n).collect();
        let given: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        return Err(ImportError::InvalidArgument(format!(
            "the table at {} has the columns {names:?}, the source gives {given:?}: import into a new table, \
             or select and rename the source's columns to match",
            dest.display()
        )));
    }
    for ((name, kind, column), spec) in held.iter().zip(specs) {
        let schema = match column {
            TableColumn::Fixed(d) => d.schema(),
            TableColumn::Ragged(d) => d.schema(),
        };
        if *kind != spec.kind || schema.dtype != spec.dtype || schema.shape() != spec.shape.as_slice() {
            return Err(ImportError::ColumnType {
                column: name.to_string(),
                reason: format!(
                    "the table at {} holds {} of {}, the source gives {} of {} {:?}",
                    dest.display(),
                    kind.name(),
                    schema.describe(),
                    spec.kind.name(),
                    spec.dtype,
                    spec.shape
                ),
            });
        }
    }
    Ok(())
}
