//! [`IpcSource`]: Arrow IPC files, in the file format (`ARROW1` magic) or
//! the stream format, told apart by their first bytes; a Hugging Face
//! `datasets` directory from `save_to_disk`, whose `state.json` lists its
//! `.arrow` files (stream format) in order; and a bare `.arrow` file from
//! the `datasets` cache. Read a batch at a time, in the order given.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_ipc::reader::{FileReader, StreamReader};
use arrow_schema::{ArrowError, SchemaRef};

use super::error::{ImportError, Position};
use super::input::{FileReader as InputReader, Fingerprint, InputFile, input_files, same_schema};
use super::source::Source;
use crate::io::{FileKind, Vfs, read_file};

/// The Arrow IPC file format's leading magic.
const FILE_MAGIC: &[u8; 6] = b"ARROW1";
/// The file of a `save_to_disk` directory that lists its data files.
const HF_STATE: &str = "state.json";
/// The largest `state.json` read (it lists one file name per shard).
const HF_STATE_BYTES_MAX: u64 = 16 << 20;

/// An open IPC file of either format.
enum Reader {
    File(FileReader<BufReader<InputReader>>),
    Stream(StreamReader<BufReader<InputReader>>),
}

impl Reader {
    fn schema(&self) -> SchemaRef {
        match self {
            Reader::File(r) => r.schema(),
            Reader::Stream(r) => r.schema(),
        }
    }

    fn next(&mut self) -> Option<Result<RecordBatch, ArrowError>> {
        match self {
            Reader::File(r) => r.next(),
            Reader::Stream(r) => r.next(),
        }
    }
}

/// The file being read: its index, reader and the file's row it is at.
struct Reading {
    file: usize,
    reader: Reader,
    row: u64,
}

/// Arrow IPC files as a [`Source`].
pub struct IpcSource {
    files: Vec<InputFile>,
    schema: SchemaRef,
    fingerprint: String,
    reading: Option<Reading>,
    /// The next file to open.
    next: usize,
    /// Rows still to skip (a resumed import's).
    to_skip: u64,
    /// Bytes of the files read to their end.
    bytes_done: u64,
}

impl IpcSource {
    /// The IPC files `inputs` name: files, globs, `save_to_disk`
    /// directories (their `state.json`'s data files), or directories of
    /// `.arrow` files. The first file's schema is every file's.
    pub fn open(inputs: &[PathBuf]) -> Result<IpcSource, ImportError> {
        IpcSource::open_in(Arc::new(crate::io::real::RealFs), inputs)
    }

    /// [`IpcSource::open`] on any filesystem implementation.
    pub fn open_in(vfs: Arc<dyn Vfs>, inputs: &[PathBuf]) -> Result<IpcSource, ImportError> {
        let mut paths = Vec::new();
        for input in inputs {
            match hf_data_files(&*vfs, input)? {
                Some(files) => paths.extend(files),
                None => paths.extend(input_files(&*vfs, std::slice::from_ref(input), "arrow")?),
            }
        }
        let mut files = Vec::with_capacity(paths.len());
        let mut print = Fingerprint::new("ipc");
        for path in paths {
            let input = InputFile::open(&*vfs, &path)?;
            print.file(&input)?;
            files.push(input);
        }
        let fingerprint = print.finish();
        let first = open_reader(&files[0])?;
        let schema = first.schema();
        Ok(IpcSource {
            files,
            schema,
            fingerprint,
            reading: Some(Reading { file: 0, reader: first, row: 0 }),
            next: 1,
            to_skip: 0,
            bytes_done: 0,
        })
    }

    /// The next batch of the open files, in order, `None` at the end.
    fn next_raw(&mut self) -> Result<Option<RecordBatch>, ImportError> {
        loop {
            if self.reading.is_none() {
                let Some(file) = self.files.get(self.next) else {
                    return Ok(None);
                };
                let reader = open_reader(file)?;
                same_schema(&self.schema, &reader.schema(), &self.files[0].path, &file.path)?;
                self.reading = Some(Reading { file: self.next, reader, row: 0 });
                self.next += 1;
            }
            let reading = self.reading.as_mut().expect("a file is open");
            let (path, size) = (&self.files[reading.file].path, self.files[reading.file].len);
            match reading.reader.next() {
                Some(Ok(batch)) => {
                    reading.row += batch.num_rows() as u64;
                    return Ok(Some(batch));
                }
                Some(Err(e)) => {
                    let reason = format!("not a readable Arrow IPC file: {e}");
                    return Err(ImportError::BadInput { path: path.clone(), at: Position::Row(reading.row), reason });
                }
                None => {
                    self.bytes_done += size;
                    self.reading = None;
                }
            }
        }
    }
}

impl Source for IpcSource {
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
        let within = self.reading.as_ref().map_or(0, |r| self.files[r.file].bytes_read().min(self.files[r.file].len));
        self.bytes_done + within
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ImportError> {
        while let Some(batch) = self.next_raw()? {
            let n = batch.num_rows() as u64;
            if self.to_skip >= n {
                self.to_skip -= n;
                continue;
            }
            let cut = std::mem::take(&mut self.to_skip) as usize;
            return Ok(Some(batch.slice(cut, batch.num_rows() - cut)));
        }
        if self.to_skip > 0 {
            return Err(ImportError::InvalidArgument(format!(
                "the input ended {} rows before the rows the table already holds from it: it changed since the \
                 import began",
                self.to_skip
            )));
        }
        Ok(None)
    }

    fn skip(&mut self, rows: u64) -> Result<(), ImportError> {
        self.to_skip += rows;
        Ok(())
    }
}

/// `file` opened as an IPC file of the format its first bytes say.
fn open_reader(file: &InputFile) -> Result<Reader, ImportError> {
    let path = &file.path;
    let mut magic = [0u8; 6];
    let mut head = file.reader(0);
    let is_file = match head.read_exact(&mut magic) {
        Ok(()) => &magic == FILE_MAGIC,
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => false,
        Err(source) => return Err(ImportError::Io { path: path.clone(), op: "read", source }),
    };
    let input = BufReader::new(file.reader(0));
    let bad = |e: ArrowError| ImportError::BadInput {
        path: path.clone(),
        at: Position::File,
        reason: format!("not a readable Arrow IPC file: {e}"),
    };
    Ok(if is_file {
        Reader::File(FileReader::try_new(input, None).map_err(bad)?)
    } else {
        Reader::Stream(StreamReader::try_new(input, None).map_err(bad)?)
    })
}

/// The data files a `save_to_disk` directory's `state.json` lists, in
/// order; `None` if `dir` is no such directory.
fn hf_data_files(vfs: &dyn Vfs, dir: &Path) -> Result<Option<Vec<PathBuf>>, ImportError> {
    let state = dir.join(HF_STATE);
    if vfs.kind(&state).ok().flatten() != Some(FileKind::File) {
        return Ok(None);
    }
    let io = |source| ImportError::Io { path: state.clone(), op: "read", source };
    let bytes = read_file(vfs, &state, HF_STATE_BYTES_MAX).map_err(io)?;
    let text = String::from_utf8(bytes).map_err(|_| ImportError::BadInput {
        path: state.clone(),
        at: Position::File,
        reason: "not UTF-8".to_string(),
    })?;
    let bad =
        |reason: &str| ImportError::BadInput { path: state.clone(), at: Position::File, reason: reason.to_string() };
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(&format!("not JSON: {e}")))?;
    let files = json.get("_data_files").and_then(|f| f.as_array()).ok_or_else(|| bad("no _data_files list"))?;
    let mut out = Vec::with_capacity(files.len());
    for entry in files {
        let name =
            entry.get("filename").and_then(|n| n.as_str()).ok_or_else(|| bad("a data file without a filename"))?;
        if name.contains('/') || name.contains('\\') || name == ".." {
            return Err(bad(&format!("a data file outside the directory: {name:?}")));
        }
        out.push(dir.join(name));
    }
    if out.is_empty() {
        return Err(bad("no data file listed"));
    }
    Ok(Some(out))
}
