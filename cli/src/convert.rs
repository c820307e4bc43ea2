//! `convert`: a `.npy` file to a dataset through the library's
//! [`write_dataset_npy`] (mapped and streamed, so larger than memory is
//! fine). On a terminal a second thread watches the store grow, read-only,
//! to draw the progress bar; the writer is not slowed by it.

use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use clap::ValueEnum;
use indicatif::ProgressBar;
use loaderx::dataset::{DatasetError, WriteMode, WriteOptions, read_npy_header, write_dataset_npy};
use loaderx::{Codec, ReadMode};

use crate::CliResult;
use crate::out::{CliError, Json, MIB, bar_style, human, per_second, phase_style, print, progress_bar, table};
use crate::records::{Records, Totals};
use crate::stats::{read_schema, schema_json};

/// How often the progress bar looks at the store's length.
const POLL: Duration = Duration::from_millis(100);
/// Bytes per append call: the progress bar moves once per call, and each
/// call's sync is small next to 16 MiB of encoding.
const CALL_BYTES: usize = 16 << 20;

/// `--codec`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CodecArg {
    /// zstd level 3, each record its own frame.
    Zstd,
    /// stored as is (reads at memory speed; its CRC-32C in sums.zr).
    Raw,
    /// zstd with a dictionary trained on an evenly spaced sample of the file.
    #[value(name = "zstd_dict")]
    ZstdDict,
}

impl CodecArg {
    fn codec(self) -> Codec {
        match self {
            CodecArg::Zstd => Codec::Zstd,
            CodecArg::Raw => Codec::Raw,
            CodecArg::ZstdDict => Codec::ZstdDict,
        }
    }
}

/// `--mode`: what to do with an output that already holds records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// add the records after the existing ones (the default).
    Append,
    /// replace the dataset: written beside it, then swapped in by renames.
    Overwrite,
    /// refuse an output that holds records.
    Error,
}

impl ModeArg {
    fn mode(self) -> WriteMode {
        match self {
            ModeArg::Append => WriteMode::Append,
            ModeArg::Overwrite => WriteMode::Overwrite,
            ModeArg::Error => WriteMode::Error,
        }
    }
}

/// What `convert` writes: the codec of a new dataset, the dictionary's
/// size cap, and the records per shard.
pub struct Target {
    pub codec: CodecArg,
    pub dict_size: Option<usize>,
    pub shard_records: Option<u64>,
    /// `None`: append, with a note on standard error if the output holds records.
    pub mode: Option<ModeArg>,
}

pub fn run(input: &Path, output: &Path, target: Target, json: bool) -> CliResult<()> {
    let Target { codec, dict_size, shard_records, mode } = target;
    let write_mode = mode.map_or(WriteMode::Append, ModeArg::mode);
    let opts = WriteOptions {
        dict_size,
        shard_records,
        chunk_bytes: CALL_BYTES,
        mode: write_mode,
        ..WriteOptions::codec(codec.codec())
    };
    let records_before = match write_mode {
        WriteMode::Overwrite => 0,
        _ => Records::open(output, ReadMode::Auto).map_or(0, |s| s.len()),
    };
    if records_before > 0 && read_schema(output)?.is_none() {
        // Records of unknown layout: a schema written over them would lie.
        return Err(CliError::new(format!(
            "{}: holds {records_before} records but no schema.json; refusing to make it a dataset",
            output.display()
        ))
        .into());
    }
    let started = Instant::now();
    // An overwrite writes beside the output: there is no store to watch.
    let bar = match write_mode {
        WriteMode::Overwrite => None,
        _ => progress_bar(npy_records(input).unwrap_or(0), "convert", false),
    };
    let written = match bar {
        None => write_dataset_npy(output, input, &opts)?,
        Some(bar) => write_watched(input, output, &opts, records_before, &bar)?,
    };
    let elapsed = started.elapsed();
    // Said once the write succeeded: a failure's message is the one line.
    if mode.is_none() && records_before > 0 {
        eprintln!(
            "note: {} held {records_before} records; appended to them (pass --mode append to say so, \
             --mode overwrite to replace them)",
            output.display()
        );
    }

    let schema =
        read_schema(output)?.ok_or_else(|| CliError::new(format!("{}: no schema.json written", output.display())))?;
    let bytes = written * schema.row_bytes()? as u64;
    let stats = Totals::of(&Records::open(output, ReadMode::Auto)?)?;
    let ratio = (stats.live_bytes > 0).then(|| stats.logical_bytes as f64 / stats.live_bytes as f64);
    let mib_s = per_second(bytes as f64 / MIB, elapsed);
    let records_s = per_second(written as f64, elapsed);
    let text = if json {
        let mut text = Json::object()
            .field("input", input.to_string_lossy().as_ref())
            .field("output", output.to_string_lossy().as_ref())
            .field("records_written", written)
            .field("records", stats.records)
            .field("bytes_written", bytes)
            .field("seconds", elapsed.as_secs_f64())
            .field("mib_per_s", mib_s)
            .field("records_per_s", records_s)
            .field("live_bytes", stats.live_bytes)
            .field("compression_ratio", ratio)
            .field("dict_bytes", stats.dict_bytes)
            .raw("schema", &schema_json(&schema))
            .finish();
        text.push('\n');
        text
    } else {
        let appended =
            if records_before > 0 { format!(" (appended; {} in all)", stats.records) } else { String::new() };
        let ratio = ratio.map_or("n/a".to_string(), |r| format!("{r:.3}x"));
        table(&[
            ("output", output.display().to_string()),
            ("schema", format!("{}, codec {}", schema.describe(), schema.codec.name())),
            ("records", format!("{written}{appended}")),
            ("bytes", human(bytes)),
            ("stored", format!("{} (ratio {ratio})", human(stats.live_bytes))),
            ("time", format!("{:.3} s", elapsed.as_secs_f64())),
            ("throughput", format!("{mib_s:.1} MiB/s, {records_s:.0} records/s")),
        ])
    };
    print(&text)?;
    Ok(())
}

/// The record count in a `.npy` header, for the progress bar only (the
/// library reads the file for real).
fn npy_records(input: &Path) -> Option<u64> {
    // Regular files only: opening a FIFO would wait for a writer (the
    // library refuses anything else with an error naming the file).
    if !std::fs::metadata(input).ok()?.is_file() {
        return None;
    }
    read_npy_header(input).ok().map(|header| header.count)
}

/// Runs the conversion on a second thread and moves the bar as the store's
/// published length grows.
fn write_watched(
    input: &Path,
    output: &Path,
    opts: &WriteOptions,
    records_before: u64,
    bar: &ProgressBar,
) -> Result<u64, DatasetError> {
    thread::scope(|scope| {
        let writer = scope.spawn(|| write_dataset_npy(output, input, opts));
        let mut reader: Option<Records> = Records::open(output, ReadMode::Auto).ok();
        // A new zstd_dict dataset is created once its dictionary is trained:
        // until then the bar says so instead of showing a rate of 0.
        if reader.is_none() && opts.codec == Codec::ZstdDict {
            bar.set_style(phase_style("convert"));
            bar.set_message("training the zstd_dict dictionary on a sample of the file");
        }
        while !writer.is_finished() {
            thread::sleep(POLL);
            if reader.is_none() {
                reader = Records::open(output, ReadMode::Auto).ok();
                if reader.is_some() {
                    bar.set_style(bar_style("convert", false));
                }
            }
            if let Some(len) = reader.as_ref().and_then(|r| r.refresh().ok()) {
                bar.set_position(len.saturating_sub(records_before));
            }
        }
        bar.finish_and_clear();
        writer.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}
