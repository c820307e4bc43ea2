//! `loaderx`: inspect, check, repack, convert and measure Zrecord stores
//! from the shell.
//!
//! One module per subcommand; `out` holds what they share (byte counts for
//! people, JSON for scripts, the progress bar). The library does the work:
//! this crate parses arguments and prints.
//!
//! `stats`, `verify`, `cat` and `bench` open the store read-only: they take
//! no lock, run no recovery and never write to it; each also takes the URL
//! of a published store (`s3://bucket/prefix`) where a directory goes.
//! `push` publishes a store to object storage, `pull` fetches one back. `compact` and `delete`
//! open it for writing (the store's advisory lock keeps a second writer
//! out); `convert` writes a new dataset or appends to one.
//!
//! Each accepts a sharded dataset (a directory with `shards.json`) where it
//! accepts a store: `stats`, `verify`, `cat`, `convert` and `bench` work on
//! the whole dataset (global indices), `delete` and `compact` shard by
//! shard (`--shard K` for one), with a line per shard.

mod bench;
mod cat;
mod checksum;
mod compact;
mod convert;
mod delete;
mod export;
mod gc;
mod import;
mod out;
#[cfg(feature = "remote")]
mod publish;
#[cfg(not(feature = "remote"))]
#[path = "publish_off.rs"]
mod publish;
mod records;
mod stats;
mod text;
mod verify;

use std::error::Error as StdError;
use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::cat::RangeArg;
use crate::convert::CodecArg;

const EXIT_CODES: &str = "\
Exit status:
  0  success (for verify: no problem found)
  1  the command failed (store missing or unreadable, index out of range,
     corrupt record, output not writable, another writer has the store
     open, a delete or compaction while the store is open for reading
     elsewhere); one line `loaderx: <error>: <cause>` on stderr
  2  invalid command line (usage error, reported by the argument parser)
  3  verify found problems (each listed on stdout)";

#[derive(Parser, Debug)]
#[command(
    name = "loaderx",
    version,
    about = "Inspect, check, compact, convert and benchmark loaderx Zrecord stores",
    after_help = EXIT_CODES
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Show a store's size, codec mix, compression ratio, dictionary and schema.
    #[command(after_help = EXIT_CODES)]
    Stats {
        /// The store directory (or a sharded dataset's: shards.json), or a
        /// published store's s3:// URL.
        store: PathBuf,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Check the whole store (fsck) and its schema; list every problem.
    ///
    /// Every table entry validated and inside its chunk file, no two records
    /// sharing bytes, every record decoded to its length (zstd checksums
    /// included), the dictionary present where a record needs it;
    /// schema.json, if there is one, parses and every record's length fits
    /// it (one item of a fixed shape, or whole rows). Reads everything,
    /// writes nothing. Each problem is listed with its record index; the
    /// first 1000 are listed, the rest counted. A progress bar is drawn on
    /// stderr when it is a terminal.
    #[command(after_help = EXIT_CODES)]
    Verify {
        /// The store directory (or a sharded dataset's: shards.json), or a
        /// published store's s3:// URL.
        store: PathBuf,
        /// Print one JSON object instead of a list.
        #[arg(long)]
        json: bool,
    },
    /// Cover every record with a checksum (sums.zr).
    ///
    /// Writes sums.zr for a store written before checksums, and sums the
    /// records another writer (the reference package) appended or moved,
    /// which `verify` counts as without a checksum. A compressed record
    /// must decode to be summed; a raw one is taken as it is. Safe to
    /// interrupt (run it again); readers may read meanwhile. For a sharded
    /// dataset, every shard.
    #[command(after_help = EXIT_CODES)]
    Checksum {
        /// The store directory (or a sharded dataset's: shards.json).
        store: PathBuf,
        /// Print one JSON object instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// Reclaim the space deleted records left behind, in place.
    ///
    /// Safe to interrupt: Ctrl-C, a kill or a power loss at any point leaves
    /// every record reading back its exact bytes, and running `compact`
    /// again finishes the job (docs/crash-safety.md, "Compaction"). While
    /// the store is open for reading elsewhere (a read-only open of this
    /// crate holds the readers' lock), it is refused at once, or with
    /// --wait runs once every reader has closed; readers that open meanwhile
    /// wait or are refused in turn. A progress bar is drawn on stderr when
    /// it is a terminal.
    #[command(after_help = EXIT_CODES)]
    Compact {
        /// The store directory (or a sharded dataset's: shards.json).
        store: PathBuf,
        /// Move at most this many bytes in this run (K, M, G, T suffixes:
        /// powers of 1024); run again to go on. The fill only.
        #[arg(long, value_name = "BYTES", value_parser = compact::parse_bytes, conflicts_with = "repack")]
        max_bytes: Option<u64>,
        /// Print the plan (bytes to move, space freed, files removed) and
        /// change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Repack every record in physical order, as the reference does:
        /// reclaims every byte, but rewrites everything behind the first
        /// hole (the default fill moves records from the end into the holes).
        #[arg(long)]
        repack: bool,
        /// Wait for readers elsewhere to close instead of failing.
        #[arg(long)]
        wait: bool,
        /// For a sharded dataset: compact shard K only (default: every
        /// shard in turn, a line per shard).
        #[arg(long, value_name = "K")]
        shard: Option<usize>,
        /// Print one JSON object instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// Write a .npy file as a dataset (a store and its schema.json).
    ///
    /// One record per slice along the first axis, dtype and shape from the
    /// file's header. The file is mapped and streamed: it may be larger than
    /// memory. An existing dataset of the same dtype and shape is appended
    /// to (it keeps its own codec); a plain store that holds records is
    /// refused. A progress bar is drawn on stderr when it is a terminal; the
    /// throughput is printed at the end.
    #[command(after_help = EXIT_CODES)]
    Convert {
        /// The .npy file (C order, a plain dtype).
        input: PathBuf,
        /// The dataset directory to write.
        output: PathBuf,
        /// Codec of a new dataset.
        #[arg(long, value_enum, default_value_t = CodecArg::Zstd)]
        codec: CodecArg,
        /// Cap on the dictionary size in bytes (zstd_dict only; default:
        /// adapted to the sample).
        #[arg(long, value_name = "N")]
        dict_size: Option<usize>,
        /// Start a new shard every N records (default: when a store is
        /// full, at 2^24 records). A dataset that fits one shard stays one
        /// store; past it, the output is a sharded dataset (shards.json).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        shard_records: Option<u64>,
        /// What to do with an output that holds records: append (the
        /// default, with a note on standard error), overwrite (replace it,
        /// crash-safely: written beside, swapped in by renames), error
        /// (refuse).
        #[arg(long, value_enum)]
        mode: Option<convert::ModeArg>,
        /// Print one JSON object instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// Remove what failed parallel writes to a table staged.
    ///
    /// A Ray write (Python `loaderx_rs.ray`, docs/ray.md) stages each
    /// task's table in TABLE/.staging/<write>/ until its commit; a write
    /// whose driver died leaves it there. This removes every staged write
    /// whose lock (<write>.lock, held by a running write's driver) is free,
    /// and leaves a running one alone. The table's rows are not touched.
    ///
    /// For an s3:// URL (a build with the `remote` feature): removes the
    /// objects no published manifest lists (failed writes' staging and
    /// copies, replaced commit files) written more than --keep-newer-than
    /// seconds ago; object storage has no lock to tell a running write.
    #[command(after_help = EXIT_CODES)]
    Gc {
        /// The table directory, or the URL of a published table or dataset.
        table: PathBuf,
        /// For a URL: keep unlisted objects younger than this many seconds
        /// (a write under way).
        #[arg(long, default_value_t = 3600.0)]
        keep_newer_than: f64,
        /// Print one JSON object, {"removed": [paths or URLs]}.
        #[arg(long)]
        json: bool,
    },
    /// Write a table's committed rows to a Parquet or Arrow IPC file.
    ///
    /// The format follows the output's extension: .parquet (or .pq), .arrow
    /// (or .feather, .ipc). The file is written as DEST.tmp and renamed
    /// into place when complete: a killed export leaves no partial file
    /// under the name (a stale DEST.tmp is replaced by the next export).
    /// Fixed columns become Arrow primitives (a shaped one a fixed-shape
    /// tensor), ragged ones large lists, bytes large binary, text large
    /// strings (docs/import.md).
    #[command(after_help = EXIT_CODES)]
    Export {
        /// The table directory (table.json).
        table: PathBuf,
        /// The file to write: DEST.parquet or DEST.arrow.
        dest: PathBuf,
        /// The columns to export, in this order (comma-separated; default: all).
        #[arg(long, value_name = "A,B,...", value_delimiter = ',')]
        columns: Option<Vec<String>>,
        /// Rows per batch (a Parquet row group holds whole batches); a batch
        /// also stops at 64 MiB of values.
        #[arg(long, value_name = "N", default_value_t = 65_536, value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
        batch_rows: u64,
        /// Parquet page codec: none, snappy, zstd, zstd:LEVEL, lz4, gzip
        /// (default zstd, level 1).
        #[arg(long, value_name = "CODEC")]
        compression: Option<String>,
        /// Print one JSON object instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// Import Parquet, Arrow IPC, JSON Lines, WebDataset tars or an image
    /// folder into a table (docs/import.md).
    ///
    /// SOURCE is a file, a directory of them, a glob (`dir/*.parquet`), a
    /// Hugging Face `save_to_disk` directory, a tar brace pattern
    /// (`shard-{000..009}.tar`) or, with `--format imagefolder`, a folder of
    /// class folders (its class names go to DEST/classes.json); several are
    /// read in order.
    /// DEST is a table directory: created from the source's columns, or
    /// appended to if it exists (its columns must match). The table commits
    /// as it goes; an import stopped at any point (an error, Ctrl-C, a kill)
    /// and run again resumes after its committed rows, and a rerun of a
    /// finished one does nothing.
    #[command(after_help = EXIT_CODES)]
    Import {
        /// The inputs, then the table directory.
        #[arg(value_name = "SOURCE... DEST", num_args = 2.., required = true)]
        paths: Vec<PathBuf>,
        /// The inputs' format (default: from the first one's extension).
        #[arg(long, value_enum)]
        format: Option<import::FormatArg>,
        /// The columns to import, in this order (a struct's fields are
        /// `a.b`); default: all.
        #[arg(long, value_name = "A,B", value_delimiter = ',')]
        columns: Option<Vec<String>>,
        /// A column's name in the table (repeatable).
        #[arg(long, value_name = "SOURCE=NAME")]
        rename: Vec<String>,
        /// Every column's codec (`zstd`, `raw`, `zstd_dict`), or a column's
        /// with COLUMN=CODEC (repeatable): e.g. `--codec text=zstd_dict`.
        /// Without it: zstd for text, raw for numbers and bytes.
        #[arg(long, value_name = "[COLUMN=]CODEC")]
        codec: Vec<String>,
        /// The value that fills a column's nulls (repeatable); without one,
        /// a null is an error naming the column and row.
        #[arg(long, value_name = "COLUMN=VALUE")]
        fill_null: Vec<String>,
        /// Rows per batch read from the source (default: 8192; 256 for tars
        /// and image folders).
        #[arg(long, value_name = "N",
              value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        batch_rows: Option<usize>,
        /// Commit at least every N rows (default: 1048576, or every 256 MiB).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
        commit_rows: Option<u64>,
        /// JSON Lines: the lines the column types are inferred from (default 1000).
        #[arg(long, value_name = "N",
              value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
        infer_rows: Option<usize>,
        /// Image folder: a `path` column with each image's path under the folder.
        #[arg(long)]
        path_column: bool,
        /// Print one JSON object instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// Write records' decoded bytes, raw or as a .npy array.
    ///
    /// Raw: the records back to back, in the order given. All records if no
    /// INDEX and no --range.
    #[command(after_help = EXIT_CODES)]
    Cat {
        /// The store directory (or a sharded dataset's: shards.json), or a
        /// published store's s3:// URL.
        store: PathBuf,
        /// Record indices, written in the order given (repeats allowed).
        #[arg(value_name = "INDEX", conflicts_with = "range")]
        indices: Vec<u64>,
        /// A half-open range of indices `A..B`: from A up to B, B excluded
        /// (`0..4` is records 0, 1, 2 and 3; `A..` runs to the end, `..B`
        /// starts at 0).
        #[arg(long, value_name = "A..B", value_parser = cat::parse_range)]
        range: Option<RangeArg>,
        /// Write to FILE instead of standard output (removed again if the
        /// command fails). A name ending in `.npy` implies --npy.
        #[arg(long, short, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Write a NumPy .npy array with the dtype and shape of the store's
        /// schema.json: shape (records, *shape) for a fixed-shape dataset;
        /// for a ragged one, a single record as (rows, *item_shape).
        #[arg(long, conflicts_with = "text")]
        npy: bool,
        /// Print each record as a line of text, `INDEX<TAB>VALUE`: a
        /// dataset's values by its schema's dtype, nested as its shape (a
        /// ragged record as its rows); a plain store's bytes escaped
        /// (`\n`, `\xNN`, printable ASCII as it is); a table's text column
        /// (STORE its `col-K` directory) as its strings, control
        /// characters escaped.
        #[arg(long)]
        text: bool,
        /// Write the bytes to standard output even when it is a terminal
        /// (refused otherwise: records are binary).
        #[arg(long)]
        to_terminal: bool,
    },
    /// Delete records by swap-with-last.
    ///
    /// WARNING: indices are not stable. The last record moves into each
    /// hole (holes taken from the highest index down), so after a delete the
    /// records that were last have new, lower indices. The store's length
    /// drops by the number of distinct indices; the space is reclaimed by
    /// `compact`. Atomic: after a crash the store is as before or as after.
    /// Refused while the store is open for reading elsewhere (the readers'
    /// lock), or with --wait run once every reader has closed.
    #[command(after_help = EXIT_CODES)]
    Delete {
        /// The store directory (or a sharded dataset's: shards.json).
        store: PathBuf,
        /// Record indices to delete (any order, repeats allowed).
        #[arg(value_name = "INDEX", required_unless_present = "from_file")]
        indices: Vec<u64>,
        /// Also delete the indices in FILE (whitespace-separated, `#` starts
        /// a comment; `-` reads standard input).
        #[arg(long, value_name = "FILE")]
        from_file: Option<PathBuf>,
        /// Wait for readers elsewhere to close instead of failing (the
        /// delete is refused while the store is open for reading).
        #[arg(long)]
        wait: bool,
        /// For a sharded dataset: the indices are shard K's own (default:
        /// the dataset's global indices, each deleted in its shard, a line
        /// per shard).
        #[arg(long, value_name = "K")]
        shard: Option<usize>,
        /// Print one JSON object instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// Measure random-batch gather and DataLoader throughput on this store.
    ///
    /// Gather: IID batches of random indices, each decoded with one call
    /// (MiB/s, records/s). Loader, for a dataset (schema.json): a DataLoader
    /// over it, batches taken as fast as they come (batches/s). Each
    /// workload runs --batches batches (after one warm-up batch), or stops
    /// early when --seconds has passed.
    #[command(after_help = EXIT_CODES)]
    Bench {
        /// The store directory (or a sharded dataset's: shards.json), or a
        /// published store's s3:// URL.
        store: PathBuf,
        /// Records per batch.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
        batch_size: u32,
        /// Batches per workload.
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u64).range(1..))]
        batches: u64,
        /// Stop a workload after this many seconds even if --batches are not done.
        #[arg(long, value_name = "SECS", value_parser = bench::parse_seconds)]
        seconds: Option<f64>,
        /// Loader worker threads (default: the number of cores).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        workers: Option<u32>,
        /// Seed of the random indices.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Evict the store's chunk files from the page cache before each
        /// workload, and draw no record twice (cyclic batches).
        #[arg(long)]
        cold: bool,
        /// How reads reach records: auto (by residency), mapped, batched
        /// (many reads in flight), direct (batched, past the page cache).
        #[arg(long, value_enum, default_value_t = bench::ReadModeArg::Auto)]
        read_mode: bench::ReadModeArg,
        /// Write a trace of the loader's stages (Chrome Trace Event Format,
        /// for Perfetto or chrome://tracing) to this file.
        #[arg(long, value_name = "PATH")]
        trace: Option<PathBuf>,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Publish a store to S3-compatible object storage.
    ///
    /// Uploads the chunk files (in parts when large), the used part of
    /// meta.zr, dict.zr and schema.json, and last manifest.json with each
    /// object's size and CRC-32: a reader never sees a half-published store.
    /// Objects already published with the same size and CRC-32 are not
    /// uploaded again. Credentials and endpoint from AWS_ENDPOINT_URL,
    /// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ALLOW_HTTP.
    #[command(after_help = EXIT_CODES)]
    Push {
        /// The store directory.
        store: PathBuf,
        /// Where to: s3://bucket/prefix.
        url: String,
        /// Print one JSON object instead of a summary.
        #[arg(long)]
        json: bool,
    },
    /// Fetch a published store into a local directory.
    ///
    /// Every object's CRC-32 is checked; meta.zr appears last, so a pull cut
    /// short leaves no store (pull again). The directory must hold no store.
    #[command(after_help = EXIT_CODES)]
    Pull {
        /// The published store: s3://bucket/prefix.
        url: String,
        /// The directory to write (created if missing).
        dir: PathBuf,
        /// Print one JSON object instead of a summary.
        #[arg(long)]
        json: bool,
    },
}

type CliResult<T> = std::result::Result<T, Box<dyn StdError>>;

/// How a command that ran to the end came out.
enum Done {
    Ok,
    /// `verify` found problems.
    Problems,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Stats { store, json } => stats::run(&store, json).map(|()| Done::Ok),
        Command::Verify { store, json } => verify::run(&store, json),
        Command::Checksum { store, json } => checksum::run(&store, json).map(|()| Done::Ok),
        Command::Compact { store, max_bytes, dry_run, repack, wait, shard, json } => {
            let options = loaderx::CompactOptions { max_bytes, repack };
            if dry_run {
                compact::plan(&store, options, shard, json)
            } else {
                compact::run(&store, options, shard, wait, json)
            }
            .map(|()| Done::Ok)
        }
        Command::Convert { input, output, codec, dict_size, shard_records, mode, json } => {
            if dict_size.is_some() && codec != CodecArg::ZstdDict {
                use clap::CommandFactory;
                let message = "--dict-size applies to --codec zstd_dict only";
                // `convert`'s usage, not the top level's.
                let mut cli = Cli::command();
                cli.build();
                let convert = cli.find_subcommand_mut("convert").expect("convert is a subcommand");
                convert.error(clap::error::ErrorKind::ArgumentConflict, message).exit();
            }
            convert::run(&input, &output, convert::Target { codec, dict_size, shard_records, mode }, json)
                .map(|()| Done::Ok)
        }
        Command::Gc { table, keep_newer_than, json } => gc::run(&table, keep_newer_than, json).map(|()| Done::Ok),
        Command::Export { table, dest, columns, batch_rows, compression, json } => {
            let target = export::Target { columns, batch_rows: batch_rows as usize, compression };
            export::run(&table, &dest, target, json).map(|()| Done::Ok)
        }
        Command::Import {
            paths,
            format,
            columns,
            rename,
            codec,
            fill_null,
            batch_rows,
            commit_rows,
            infer_rows,
            path_column,
            json,
        } => {
            let request = import::Request {
                format,
                columns,
                rename,
                codec,
                fill_null,
                batch_rows,
                commit_rows,
                infer_rows,
                path_column,
                json,
            };
            import::run(&paths, request).map(|()| Done::Ok)
        }
        Command::Cat { store, indices, range, out, npy, text, to_terminal } => {
            let to_terminal = to_terminal || !std::io::IsTerminal::is_terminal(&std::io::stdout());
            let form = if text { cat::Form::Text } else { cat::Form::Bytes { npy } };
            cat::run(&store, &indices, range, out.as_deref(), form, to_terminal).map(|()| Done::Ok)
        }
        Command::Delete { store, indices, from_file, wait, shard, json } => {
            let how = delete::How { shard, wait };
            delete::run(&store, indices, from_file.as_deref(), how, json).map(|()| Done::Ok)
        }
        Command::Bench { store, batch_size, batches, seconds, workers, seed, cold, read_mode, trace, json } => {
            let batch_size = batch_size as usize;
            let opts = bench::Options { batch_size, batches, seconds, workers, seed, cold, read_mode, trace };
            bench::run(&store, &opts, json).map(|()| Done::Ok)
        }
        Command::Push { store, url, json } => publish::run_push(&store, &url, json).map(|()| Done::Ok),
        Command::Pull { url, dir, json } => publish::run_pull(&url, &dir, json).map(|()| Done::Ok),
    };
    match outcome {
        Ok(Done::Ok) => ExitCode::SUCCESS,
        Ok(Done::Problems) => ExitCode::from(3),
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
    // One line, whatever a message holds.
    line.replace('\n', " ")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_line_joins_new_causes_only() {
        let inner = io::Error::other("disk on fire");
        let outer = loaderx::Error::Io { path: "s".into(), op: "read chunk", source: inner };
        assert_eq!(error_line(&outer), "s: read chunk failed: disk on fire");
        let wrapped = out::CliError::with_source("cannot open x", io::Error::other("denied\nreally"));
        assert_eq!(error_line(&wrapped), "cannot open x: denied really");
    }

    #[test]
    fn the_parser_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
