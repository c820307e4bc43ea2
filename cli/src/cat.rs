//! `cat`: records' decoded bytes, back to back, or as one `.npy` array with
//! the dataset's dtype and shape, or as lines of text (`text.rs`). Every index is checked before a byte is
//! written; a failed `--out` file is removed.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use loaderx::dataset::{Layout, Schema};

use crate::CliResult;
use crate::out::CliError;
use crate::records::Records;
use crate::text::TextFormat;

/// Indices looked up per `lengths` call.
const WINDOW: usize = 4096;
/// Most decoded bytes gathered per `gather_var` call.
const BATCH_BYTES: u64 = 32 << 20;

/// `A..B` as given on the command line; an open end is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RangeArg {
    start: u64,
    end: Option<u64>,
}

pub fn parse_range(s: &str) -> Result<RangeArg, String> {
    let (a, b) = s.split_once("..").ok_or_else(|| format!("`{s}` is not a range A..B"))?;
    let num = |t: &str| -> Result<Option<u64>, String> {
        if t.is_empty() {
            return Ok(None);
        }
        t.parse::<u64>().map(Some).map_err(|_| format!("`{t}` in `{s}` is not a record index"))
    };
    let start = num(a)?.unwrap_or(0);
    let end = num(b)?;
    if let Some(end) = end
        && end < start
    {
        return Err(format!("range `{s}` ends before it starts"));
    }
    Ok(RangeArg { start, end })
}

/// The records to write, in order.
enum Selection<'a> {
    Range(u64, u64),
    List(&'a [u64]),
}

impl Selection<'_> {
    fn count(&self) -> u64 {
        match self {
            Selection::Range(a, b) => b - a,
            Selection::List(l) => l.len() as u64,
        }
    }

    fn iter(&self) -> Box<dyn Iterator<Item = u64> + '_> {
        match self {
            Selection::Range(a, b) => Box::new(*a..*b),
            Selection::List(l) => Box::new(l.iter().copied()),
        }
    }
}

/// The store's (or dataset's) own error for the first index at or past its length.
fn out_of_range(store: &Records, index: u64) -> Box<dyn std::error::Error> {
    store.out_of_range(index)
}

/// How `cat` writes the records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The decoded bytes, back to back (`.npy` with a header).
    Bytes { npy: bool },
    /// `INDEX<TAB>VALUE` lines (`--text`).
    Text,
}

/// Writes the records; `to_terminal` is false when standard output is a
/// terminal and `--to-terminal` was not given: then, without `--out`,
/// no binary output is written (text is).
pub fn run(
    path: &Path,
    indices: &[u64],
    range: Option<RangeArg>,
    out: Option<&Path>,
    form: Form,
    to_terminal: bool,
) -> CliResult<()> {
    let text = form == Form::Text;
    if out.is_none() && !to_terminal && !text {
        return Err(CliError::new(
            "refusing to write binary records to a terminal: give --out FILE, pipe the output, or pass --to-terminal",
        )
        .into());
    }
    let store = Records::open(path, loaderx::ReadMode::Auto)?;
    let len = store.len();
    let selection = match range {
        Some(RangeArg { start, end }) => {
            let end = end.unwrap_or(len.max(start));
            if end > len {
                return Err(out_of_range(&store, len.max(start)));
            }
            Selection::Range(start, end)
        }
        None if indices.is_empty() => Selection::Range(0, len),
        None => {
            if let Some(&bad) = indices.iter().find(|&&i| i >= len) {
                return Err(out_of_range(&store, bad));
            }
            Selection::List(indices)
        }
    };
    let npy_named = out.is_some_and(|f| f.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy")));
    let npy = matches!(form, Form::Bytes { npy: true }) || (npy_named && !text);
    let header = if npy { Some(npy_header_for(&store, &selection)?) } else { None };
    let format = match text {
        true => Some(TextFormat::new(store.schema()?.as_ref(), crate::text::table_column_kind(path))?),
        false => None,
    };
    let write = |w: &mut dyn Write| -> CliResult<()> {
        if let Some(header) = &header {
            w.write_all(header)?;
        }
        write_records(&store, selection.iter(), w, &|index, bytes, w| match &format {
            Some(format) => Ok(w.write_all(format.line(index, bytes)?.as_bytes())?),
            None => Ok(w.write_all(bytes)?),
        })
    };
    match out {
        None => {
            let mut w = BufWriter::with_capacity(1 << 20, io::stdout().lock());
            write(&mut w)?;
            w.flush()?;
            Ok(())
        }
        Some(file) => {
            let f = File::create(file)
                .map_err(|e| CliError::with_source(format!("{}: cannot create", file.display()), e))?;
            let mut w = BufWriter::with_capacity(1 << 20, f);
            let written = write(&mut w)
                .and_then(|()| w.flush().map_err(Into::into))
                .and_then(|()| w.get_ref().sync_all().map_err(Into::into));
            if let Err(e) = written {
                drop(w);
                let _ = std::fs::remove_file(file);
                return Err(match e.downcast::<io::Error>() {
                    Ok(io) => Box::new(CliError::with_source(format!("{}: write failed", file.display()), *io)),
                    Err(other) => other,
                });
            }
            Ok(())
        }
    }
}

/// The `.npy` header for the selection, from the dataset's schema: shape
/// `(records, *shape)` for a fixed-shape dataset, `(rows, *item_shape)` for
/// one ragged record. Record lengths are checked here, before any output.
fn npy_header_for(store: &Records, selection: &Selection<'_>) -> CliResult<Vec<u8>> {
    let path = store.path();
    let schema: Schema = store.schema()?.ok_or_else(|| {
        CliError::new(format!(
            "{}: no schema.json, so no dtype or shape for --npy (write raw bytes instead)",
            path.display()
        ))
    })?;
    let unit = schema.row_bytes()? as u64;
    let mut shape: Vec<u64> = Vec::new();
    match &schema.layout {
        Layout::Fixed { shape: record } => {
            check_lengths(
                store,
                selection,
                |len| len == unit,
                &format!("{unit}-byte records of {}", schema.describe()),
            )?;
            shape.push(selection.count());
            shape.extend(record.iter().map(|&d| d as u64));
        }
        Layout::Ragged { item_shape } => {
            let &Selection::List(&[index]) = selection else {
                return Err(CliError::new(format!(
                    "{}: a ragged dataset's records differ in rows; --npy writes one record at a time (give one INDEX)",
                    path.display()
                ))
                .into());
            };
            let mut one = [0u32];
            store.lengths(&[index], &mut one)?;
            let len = u64::from(one[0]);
            if len % unit != 0 {
                return Err(CliError::new(format!(
                    "{}: record {index} is {len} bytes, not whole {unit}-byte rows of {}; cannot write it as .npy",
                    path.display(),
                    schema.describe()
                ))
                .into());
            }
            shape.push(len / unit);
            shape.extend(item_shape.iter().map(|&d| d as u64));
        }
    }
    Ok(npy_header(&schema.dtype.to_string(), &shape))
}

/// Checks every selected record's length with `fits`; the error names the
/// first that does not, as not `what`.
fn check_lengths(store: &Records, selection: &Selection<'_>, fits: impl Fn(u64) -> bool, what: &str) -> CliResult<()> {
    let mut window: Vec<u64> = Vec::with_capacity(WINDOW);
    let mut lens = vec![0u32; WINDOW];
    let mut all = selection.iter();
    loop {
        window.clear();
        window.extend(all.by_ref().take(WINDOW));
        if window.is_empty() {
            return Ok(());
        }
        store.lengths(&window, &mut lens[..window.len()])?;
        if let Some((&index, &len)) = window.iter().zip(&lens).find(|&(_, &len)| !fits(u64::from(len))) {
            return Err(CliError::new(format!(
                "{}: record {index} is {len} bytes, not {what}; cannot write it as .npy",
                store.path().display()
            ))
            .into());
        }
    }
}

/// A `.npy` version 1.0 header (2.0 if it would not fit): magic, version,
/// length, the dict padded with spaces so the data starts at a multiple of
/// 64 bytes, a newline.
pub fn npy_header(descr: &str, shape: &[u64]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let tuple = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple}, }}");
    let v1 = 6 + 2 + 2;
    let pad = |prefix: usize, dict: &mut String| {
        while !(prefix + dict.len() + 1).is_multiple_of(64) {
            dict.push(' ');
        }
        dict.push('\n');
    };
    let mut out = b"\x93NUMPY".to_vec();
    let mut padded = dict.clone();
    pad(v1, &mut padded);
    if let Ok(n) = u16::try_from(padded.len()) {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&n.to_le_bytes());
    } else {
        pad(6 + 2 + 4, &mut dict);
        padded = dict;
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(padded.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(padded.as_bytes());
    out
}

/// How one record (its index and decoded bytes) is written.
type Emit<'a> = dyn Fn(u64, &[u8], &mut dyn Write) -> CliResult<()> + 'a;

/// Gathers the selected records in bounded batches and writes them in order, each by `emit`.
fn write_records(
    store: &Records,
    mut selection: impl Iterator<Item = u64>,
    w: &mut dyn Write,
    emit: &Emit<'_>,
) -> CliResult<()> {
    let mut window: Vec<u64> = Vec::with_capacity(WINDOW);
    let mut lens: Vec<u32> = Vec::with_capacity(WINDOW);
    let mut buf: Vec<u8> = Vec::new();
    loop {
        window.clear();
        window.extend(selection.by_ref().take(WINDOW));
        if window.is_empty() {
            return Ok(());
        }
        lens.clear();
        lens.resize(window.len(), 0);
        store.lengths(&window, &mut lens)?;
        let mut start = 0;
        while start < window.len() {
            // At least one record per batch; a record is at most 1 MiB.
            let mut end = start;
            let mut bytes = 0u64;
            while end < window.len() && (end == start || bytes + u64::from(lens[end]) <= BATCH_BYTES) {
                bytes += u64::from(lens[end]);
                end += 1;
            }
            let mut offsets = Vec::with_capacity(end - start);
            let mut at = 0u64;
            for &l in &lens[start..end] {
                offsets.push(at);
                at += u64::from(l);
            }
            buf.clear();
            buf.resize(bytes as usize, 0);
            store.gather_var(&window[start..end], &mut buf, &offsets, &lens[start..end])?;
            for (k, &index) in window[start..end].iter().enumerate() {
                let at = offsets[k] as usize;
                emit(index, &buf[at..at + lens[start + k] as usize], w)?;
            }
            start = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(parse_range("2..5"), Ok(RangeArg { start: 2, end: Some(5) }));
        assert_eq!(parse_range("..5"), Ok(RangeArg { start: 0, end: Some(5) }));
        assert_eq!(parse_range("3.."), Ok(RangeArg { start: 3, end: None }));
        assert_eq!(parse_range("4..4"), Ok(RangeArg { start: 4, end: Some(4) }));
        assert!(parse_range("5..2").is_err());
        assert!(parse_range("5").is_err());
        assert!(parse_range("a..2").is_err());
    }

    #[test]
    fn npy_headers_align_the_data() {
        let h = npy_header("<f4", &[3, 2]);
        assert_eq!(h.len() % 64, 0);
        assert_eq!(&h[..8], b"\x93NUMPY\x01\x00");
        assert_eq!(usize::from(u16::from_le_bytes([h[8], h[9]])), h.len() - 10);
        let text = std::str::from_utf8(&h[10..]).unwrap();
        assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"), "{text}");
        assert!(text.ends_with('\n'));
        let scalar = npy_header("|u1", &[7]);
        assert!(std::str::from_utf8(&scalar[10..]).unwrap().contains("'shape': (7,)"));
    }
}
