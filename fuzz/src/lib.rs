//! Fuzz targets for loaderx, as plain functions of a byte string.
//!
//! Each target is one `pub fn(&[u8])` here; `fuzz_targets/*.rs` are thin
//! libFuzzer wrappers around them (`cargo +nightly fuzz run TARGET`), and the
//! stable test `tests/replay.rs` runs every file of `corpus/TARGET/` through
//! the same functions, so the targets cannot rot and every past finding stays
//! a regression test. A target panics exactly when it finds a bug: a panic of
//! the code under test, or a broken invariant the target checks itself. See
//! `docs/fuzzing.md`.
//!
//! | target | input | invariant |
//! |---|---|---|
//! | [`open()`] | a store directory: `meta.zr` (header, a few table entries, any length, an intent), chunk files, `dict.zr`, `schema.json` | open (read-only and writable) and every read is `Ok` with exactly the recorded bytes or a typed error; `verify` agrees |
//! | [`ops()`] | a sequence of store operations, crashes and sync failures | the crash simulator's model checks (`loaderx_sim::workload::Harness`) |
//! | [`codec()`] | one stored record: codec tag, lengths, bytes, dictionary | `get` is an error or exactly `logic_length` bytes, equal to an independent decode |
//! | [`sampler()`] | sampler arguments | no panic, indices in range, cyclic bijection, seek equals iteration, shards partition the batch |
//! | [`schema()`] | a `schema.json`; a `.npy` file's header | a parsed schema prints back to itself; a header is a typed error or exactly what it says, within the file |
//! | [`dataset()`] | a `schema.json` over a store | a typed error or a valid dataset whose records read back exactly |
//! | [`convert()`] | a `.npy` file, converted with each codec | a typed error or a dataset whose records are the file's data |
//!
//! Everything runs on a one-thread rayon pool, so a run is deterministic and
//! an input replays exactly.

mod codec;
mod frames;
mod input;
mod npy;
mod open;
mod ops;
mod sampler;
mod schema;
mod store;

use std::path::Path;
use std::sync::OnceLock;

pub use codec::codec;
pub use npy::convert;
pub use open::open;
pub use ops::ops;
pub use sampler::sampler;
pub use schema::{dataset, schema};

/// A fuzz target: panics on a finding.
pub type Target = fn(&[u8]);

/// The targets by name, as `fuzz_targets/` and `corpus/` name them.
pub const TARGETS: [(&str, Target); 7] = [
    ("open", open),
    ("ops", ops),
    ("codec", codec),
    ("sampler", sampler),
    ("schema", schema),
    ("dataset", dataset),
    ("convert", convert),
];

thread_local! {
    static POOL: rayon::ThreadPool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .use_current_thread()
        .build()
        .expect("a one-thread pool");
}

/// Runs `f` in the calling thread's one-thread rayon pool (determinism: the
/// store's parallel paths run in a fixed order). A pool per calling thread,
/// so that the replay test's threads never wait on each other's inputs; its
/// one worker is the calling thread itself, so an input runs where it is
/// called, with no hand-over to another thread and back.
fn in_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    POOL.with(|pool| pool.install(f))
}

/// True when `LOADERX_FUZZ_SKIP_KNOWN` is set: the targets then step around
/// the inputs that trip a finding in the code under test that is reported
/// but not fixed yet, so that a campaign explores past it (the replay test
/// never sets it: the reproducers stay in `corpus/` and must keep failing
/// until the fix, see `tests/replay.rs`). No place steps around one now:
/// each went with its fix, and F9 (open) is a debug assertion in `open`
/// that a campaign meets rarely.
pub fn skip_known() -> bool {
    static SKIP: OnceLock<bool> = OnceLock::new();
    *SKIP.get_or_init(|| std::env::var_os("LOADERX_FUZZ_SKIP_KNOWN").is_some())
}

/// Runs `target` on every file named on the command line (a directory: every
/// file in it), printing each name first: the stable replay tool the
/// `fuzz_targets` binaries become without `cargo fuzz`.
pub fn replay_main(target: Target) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        eprintln!("usage: TARGET FILE_OR_DIR... (runs each input through the target; a panic is a finding)");
        std::process::exit(2);
    }
    let mut count = 0;
    for arg in args {
        for file in inputs(Path::new(&arg)) {
            println!("{}", file.display());
            let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            target(&data);
            count += 1;
        }
    }
    println!("{count} inputs, no finding");
}

/// The files of `path` (itself if it is a file), sorted; dot files skipped.
pub fn inputs(path: &Path) -> Vec<std::path::PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let Ok(dir) = std::fs::read_dir(path) else { return Vec::new() };
    let mut files: Vec<_> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
        .collect();
    files.sort();
    files
}
