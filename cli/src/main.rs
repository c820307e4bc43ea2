//! `loaderx`: inspect and dump Zrecord stores from the shell.
//!
//! Every subcommand opens the store read-only: it takes no lock, runs no
//! recovery and never writes to the store.

use std::error::Error as StdError;
use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use loaderx::{Stats, Zrecord};

const EXIT_CODES: &str = "\
Exit status:
  0  success
  1  the command failed (store missing or unreadable, index out of range,
     corrupt record, output not writable); one line `loaderx: <error>` on stderr
  2  invalid command line (usage error, reported by the argument parser)";

#[derive(Parser, Debug)]
#[command(name = "loaderx", version, about = "Inspect and dump loaderx Zrecord stores", after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show a store's size, codec mix, compression ratio and dictionary.
    #[command(after_help = EXIT_CODES)]
    Stats {
        /// The store directory.
        store: PathBuf,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Write records' decoded bytes back to back (all records if no INDEX and no --range).
    #[command(after_help = EXIT_CODES)]
    Cat {
        /// The store directory.
        store: PathBuf,
        /// Record indices, written in the order given (repeats allowed).
        #[arg(value_name = "INDEX", conflicts_with = "range")]
        indices: Vec<u64>,
        /// A half-open range of indices `A..B` (`A..` runs to the end, `..B` starts at 0).
        #[arg(long, value_name = "A..B", value_parser = parse_range)]
        range: Option<RangeArg>,
        /// Write to FILE instead of standard output (removed again if the command fails).
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

/// `A..B` as given on the command line; an open end is `None`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RangeArg {
    start: u64,
    end: Option<u64>,
}

fn parse_range(s: &str) -> Result<RangeArg, String> {
    let (a, b) = s.split_once("..").ok_or_else(|| format!("`{s}` is not a range A..B"))?;
    let num = |t: &str, default: Option<u64>| -> Result<Option<u64>, String> {
        if t.is_empty() {
            return Ok(default);
        }
        t.parse::<u64>().map(Some).map_err(|_| format!("`{t}` in `{s}` is not a record index"))
    };
    let start = num(a, Some(0))?.expect("default");
    let end = num(b, None)?;
    if let Some(end) = end
        && end < start
    {
        return Err(format!("range `{s}` ends before it starts"));
    }
    Ok(RangeArg { start, end })
}

/// An error the CLI itself detects.
#[derive(Debug)]
struct CliError(String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl StdError for CliError {}

type CliResult<T> = std::result::Result<T, Box<dyn StdError>>;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Stats { store, json } => stats(&store, json),
        Command::Cat { store, indices, range, out } => cat(&store, &indices, range, out.as_deref()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&*e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("loaderx: {}", error_line(&*e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its source chain on one line, skipping a source whose text
/// the message already contains.
fn error_line(e: &(dyn StdError + 'static)) -> String {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = s.source();
    }
    line
}

/// A write to a closed pipe (`loaderx cat ... | head`): not an error.
fn is_broken_pipe(e: &(dyn StdError + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(io) = err.downcast_ref::<io::Error>()
            && io.kind() == io::ErrorKind::BrokenPipe
        {
            return true;
        }
        cur = err.source();
    }
    false
}

// ---------------------------------------------------------------- stats

fn stats(path: &Path, json: bool) -> CliResult<()> {
    let store = Zrecord::open_read_only(path)?;
    let s = store.stats()?;
    let text = if json { stats_json(path, &s) } else { stats_table(path, &s) };
    let mut stdout = io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(())
}

/// logical / live, `None` when nothing is stored.
fn ratio(s: &Stats) -> Option<f64> {
    (s.live_bytes > 0).then(|| s.logical_bytes as f64 / s.live_bytes as f64)
}

fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{bytes} ({v:.1} {})", UNITS[unit])
}

fn stats_table(path: &Path, s: &Stats) -> String {
    let [raw, zstd, dict] = s.codec_records;
    let ratio = ratio(s).map_or("n/a (nothing stored)".to_string(), |r| format!("{r:.3}x (logical / live)"));
    let dictionary = s.dict_bytes.map_or("none".to_string(), human);
    let rows = [
        ("store", path.display().to_string()),
        ("records", s.records.to_string()),
        ("logical bytes", human(s.logical_bytes)),
        ("live bytes", human(s.live_bytes)),
        ("chunk bytes", human(s.chunk_bytes)),
        ("reclaimable", human(s.reclaimable)),
        ("chunks", s.chunks.to_string()),
        ("codecs", format!("raw {raw}, zstd {zstd}, zstd_dict {dict}")),
        ("ratio", ratio),
        ("dictionary", dictionary),
    ];
    rows.iter().map(|(k, v)| format!("{k:<14} {v}\n")).collect()
}

fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn stats_json(path: &Path, s: &Stats) -> String {
    let [raw, zstd, dict] = s.codec_records;
    let ratio = ratio(s).map_or("null".to_string(), |r| format!("{r}"));
    let dict_bytes = s.dict_bytes.map_or("null".to_string(), |b| b.to_string());
    format!(
        concat!(
            "{{\"store\":{},\"records\":{},\"live_bytes\":{},\"logical_bytes\":{},\"chunk_bytes\":{},",
            "\"reclaimable\":{},\"chunks\":{},\"codec_records\":{{\"raw\":{},\"zstd\":{},\"zstd_dict\":{}}},",
            "\"compression_ratio\":{},\"dict_bytes\":{}}}\n"
        ),
        json_string(&path.to_string_lossy()),
        s.records,
        s.live_bytes,
        s.logical_bytes,
        s.chunk_bytes,
        s.reclaimable,
        s.chunks,
        raw,
        zstd,
        dict,
        ratio,
        dict_bytes,
    )
}

// ---------------------------------------------------------------- cat

/// Indices looked up per `lengths` call.
const WINDOW: usize = 4096;
/// Most decoded bytes gathered per `gather_var` call.
const BATCH_BYTES: u64 = 32 << 20;

fn cat(path: &Path, indices: &[u64], range: Option<RangeArg>, out: Option<&Path>) -> CliResult<()> {
    let store = Zrecord::open_read_only(path)?;
    let len = u64::from(store.len());
    let selection: Box<dyn Iterator<Item = u64>> = match range {
        Some(RangeArg { start, end }) => {
            let end = end.unwrap_or(len);
            if end > len || start > len {
                // The library's own message for the first index past the end.
                let mut one = [0u32];
                store.lengths(&[len.max(start.min(end))], &mut one)?;
            }
            Box::new(start..end)
        }
        None if indices.is_empty() => Box::new(0..len),
        None => {
            // Every index is checked before a byte is written.
            if let Some(&bad) = indices.iter().find(|&&i| i >= len) {
                let mut one = [0u32];
                store.lengths(&[bad], &mut one)?;
            }
            Box::new(indices.iter().copied())
        }
    };
    match out {
        None => {
            let mut w = BufWriter::with_capacity(1 << 20, io::stdout().lock());
            write_records(&store, selection, &mut w)?;
            w.flush()?;
            Ok(())
        }
        Some(file) => {
            let f = File::create(file).map_err(|e| CliError(format!("{}: cannot create: {e}", file.display())))?;
            let mut w = BufWriter::with_capacity(1 << 20, f);
            let written = write_records(&store, selection, &mut w)
                .and_then(|()| w.flush().map_err(Into::into))
                .and_then(|()| w.get_ref().sync_all().map_err(Into::into));
            if let Err(e) = written {
                drop(w);
                let _ = std::fs::remove_file(file);
                let e: Box<dyn StdError> = match e.downcast::<io::Error>() {
                    Ok(io) => Box::new(CliError(format!("{}: write failed: {io}", file.display()))),
                    Err(other) => other,
                };
                return Err(e);
            }
            Ok(())
        }
    }
}

/// Gathers the selected records in bounded batches and writes them in order.
fn write_records(store: &Zrecord, mut selection: impl Iterator<Item = u64>, w: &mut impl Write) -> CliResult<()> {
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
            w.write_all(&buf)?;
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
    fn json_escapes() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\n\"");
    }
}
