//! Replays the committed corpus (`fuzz/corpus/TARGET/*`) through the same
//! target functions libFuzzer runs, on the stable toolchain: the targets
//! cannot rot, and every past finding stays a regression test. A file that
//! panics fails the test with its path and the command that replays it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

/// How an unfixed finding fails.
#[allow(dead_code, reason = "constructed only while a finding is open")]
enum Fails {
    /// A panic whose message holds this.
    Panic(&'static str),
    /// As `Panic`, but only with overflow checks and debug assertions on
    /// (not under `--release`, where the arithmetic wraps unseen and the
    /// store's O(n) invariant checks are off, and the input must pass).
    OverflowPanic(&'static str),
    /// Runs for longer than `HANG_SECONDS` (then left running on a
    /// detached thread until the test process exits).
    Hang,
}

const HANG_SECONDS: u64 = 2;

/// Reproducers in the corpus of findings in the code under test that are
/// reported but not fixed yet (`docs/fuzzing.md`, "Findings"). Each must
/// still fail as described, which keeps this test green until the fix; a
/// fix makes `open_findings_still_reproduce` fail, and then its line goes,
/// and the file is an ordinary regression input from then on.
/// F1 to F11 are fixed (docs/fuzzing.md; F10 was the harness's and has no input here).
const OPEN_FINDINGS: &[(&str, &str, Fails)] = &[];

fn corpus(target: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target)
}

fn run(target: &str) -> loaderx_fuzz::Target {
    loaderx_fuzz::TARGETS.iter().find(|(name, _)| *name == target).expect("a target").1
}

fn message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

fn replay(target: &str) {
    let files = loaderx_fuzz::inputs(&corpus(target));
    assert!(!files.is_empty(), "no seed corpus in {}", corpus(target).display());
    for file in files {
        let name = file.file_name().expect("a file name").to_string_lossy();
        if OPEN_FINDINGS.iter().any(|(t, f, _)| *t == target && *f == name) {
            continue;
        }
        let data = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if let Err(panic) = catch_unwind(|| run(target)(&data)) {
            panic!(
                "{} fails: {}\nreplay: cargo run --release -p loaderx-fuzz --bin {target} -- {}",
                file.display(),
                message(&*panic),
                file.display()
            );
        }
    }
}

#[test]
fn open_corpus() {
    replay("open");
}

#[test]
fn ops_corpus() {
    replay("ops");
}

#[test]
fn codec_corpus() {
    replay("codec");
}

#[test]
fn sampler_corpus() {
    replay("sampler");
}

#[test]
fn schema_corpus() {
    replay("schema");
}

#[test]
fn dataset_corpus() {
    replay("dataset");
}

#[test]
fn convert_corpus() {
    replay("convert");
}

/// The unfixed findings still fail as reported (their panics are printed:
/// expected). One that passes was fixed: delete its line in `OPEN_FINDINGS`.
#[test]
fn open_findings_still_reproduce() {
    for (target, file, fails) in OPEN_FINDINGS {
        let path = corpus(target).join(file);
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let fixed = || {
            panic!(
                "{} no longer fails: the finding is fixed. Delete its line in OPEN_FINDINGS \
                 (tests/replay.rs) and mark it fixed in docs/fuzzing.md; the file stays as a regression input.",
                path.display()
            )
        };
        let says = match fails {
            Fails::Hang => {
                let target = run(target);
                let (done, finished) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    let _ = catch_unwind(AssertUnwindSafe(|| target(&data)));
                    let _ = done.send(());
                });
                if finished.recv_timeout(std::time::Duration::from_secs(HANG_SECONDS)).is_ok() {
                    fixed();
                }
                continue;
            }
            Fails::OverflowPanic(_) if !cfg!(debug_assertions) => {
                let outcome = catch_unwind(AssertUnwindSafe(|| run(target)(&data)));
                assert!(outcome.is_ok(), "{} fails in a build without overflow checks", path.display());
                continue;
            }
            Fails::Panic(says) | Fails::OverflowPanic(says) => says,
        };
        match catch_unwind(AssertUnwindSafe(|| run(target)(&data))) {
            Ok(()) => fixed(),
            Err(panic) => {
                let got = message(&*panic);
                assert!(got.contains(says), "{} fails differently now: {got}", path.display());
            }
        }
    }
}

/// Every target has a test above, a corpus directory and a libFuzzer entry.
#[test]
fn every_target_is_replayed() {
    let source = include_str!("replay.rs");
    for (name, _) in loaderx_fuzz::TARGETS {
        assert!(source.contains(&format!("replay(\"{name}\")")), "{name} is not replayed");
        assert!(corpus(name).is_dir(), "no corpus/{name}");
        let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz_targets").join(format!("{name}.rs"));
        assert!(bin.exists(), "no fuzz_targets/{name}.rs");
    }
}
