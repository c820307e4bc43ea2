//! Regression scenarios: each bug the simulator found, rebuilt as a fixed
//! list of store operations plus the crash or the injected fault that
//! exposed it, placed by a semantic predicate on the I/O operation
//! ([`crate::point`]) rather than by an operation number or a seed's luck.
//!
//! A scenario runs with no random faults and no random crashes; only its
//! armed points act. The harness checks every recovery against the model as
//! in the random campaign (before-or-after for the failed operation, the
//! integrity walk, [`Harness::final_check`]), and the scenario fails if any
//! of its points was never reached: a scenario that no longer reaches its
//! situation says so instead of passing silently.

use loaderx::format::{
    HEADER_WORD1_OFFSET, META_BYTES, META_FILE, META_TMP_FILE, SUMS_COVERED_OFFSET, SUMS_FILE, SUMS_SEAL_OFFSET,
};

use crate::fs::{Faults, Persist};
use crate::point::{Action, IoKind, IoOp, Point, Step};
use crate::rng::Rng;
use crate::workload::{Harness, Op, Settings, Tally, Violation, record};

/// A past finding as a fixed run.
pub struct Scenario {
    /// A short name (test failures quote it).
    pub name: &'static str,
    /// The seeds of the random campaign that found the bug.
    pub seeds: &'static [u64],
    /// Or the input of the `ops` fuzz target that found it, in the
    /// repository (`fuzz/corpus/ops/...`).
    pub fuzz_input: Option<&'static str>,
    /// Start with the frontier a few KiB before the end of chunk 0.
    pub near_rollover: bool,
    /// What every crash of the run keeps of the unsynced state.
    pub persist: Persist,
    /// The crash or fault points, armed before the store is created.
    pub points: Vec<Point>,
    /// The store operations.
    pub ops: Vec<Op>,
}

impl Scenario {
    /// What found the bug: `seeds [..]`, or `fuzz input PATH`.
    pub fn found_by(&self) -> String {
        match self.fuzz_input {
            Some(input) => format!("fuzz input {input}"),
            None => format!("seeds {:?}", self.seeds),
        }
    }
}

/// A scenario that found a violation or missed one of its points.
#[derive(Debug)]
pub struct Failure {
    /// The scenario's name.
    pub scenario: &'static str,
    /// What went wrong.
    pub what: String,
    /// The operation trace.
    pub trace: Vec<String>,
}

/// What a passing scenario did.
#[derive(Debug)]
pub struct Report {
    /// The I/O operation number each point fired at, in `points` order.
    pub fired_at: Vec<u64>,
    /// The harness's counters.
    pub tally: Tally,
    /// The operation trace.
    pub trace: Vec<String>,
}

fn intent_write(o: &IoOp<'_>) -> bool {
    o.is(IoKind::Pwrite, META_FILE) && o.offset >= META_BYTES
}
fn meta_truncation(o: &IoOp<'_>) -> bool {
    o.is(IoKind::SetLen, META_FILE) && o.len == META_BYTES
}
fn meta_fsync(o: &IoOp<'_>) -> bool {
    o.is(IoKind::Fsync, META_FILE)
}
fn header_msync(o: &IoOp<'_>) -> bool {
    o.is(IoKind::Msync, META_FILE) && o.offset == 0
}
fn header_word0(o: &IoOp<'_>) -> bool {
    o.is(IoKind::StoreWord, META_FILE) && o.offset == 0
}
fn header_word1(o: &IoOp<'_>) -> bool {
    o.is(IoKind::StoreWord, META_FILE) && o.offset == HEADER_WORD1_OFFSET
}
fn entries_msync(o: &IoOp<'_>) -> bool {
    o.is(IoKind::Msync, META_FILE) && o.offset > 0
}
fn seal_store(o: &IoOp<'_>) -> bool {
    o.is(IoKind::StoreWord, SUMS_FILE) && o.offset == SUMS_SEAL_OFFSET
}
fn covered_store(o: &IoOp<'_>) -> bool {
    o.is(IoKind::StoreWord, SUMS_FILE) && o.offset == SUMS_COVERED_OFFSET
}

const INTENT_WRITE: &str = "a pwrite into meta.zr's intent area (past the table)";
const TRUNCATION: &str = "a set_len of meta.zr to the table's end (the intent removed)";
const META_FSYNC: &str = "the first fsync of meta.zr";

fn append(rng: &mut Rng, codec: u8, sizes: &[usize]) -> Op {
    Op::Append { codec, records: sizes.iter().map(|&n| record(rng, n)).collect(), fixed: false }
}

/// Twenty records, then a delete that moves entries into holes (so it
/// writes an intent): the start of every delete scenario.
fn twenty_then_delete(rng: &mut Rng) -> Vec<Op> {
    vec![append(rng, 1, &[40; 20]), Op::Delete(vec![3, 3, 19, 7, 0])]
}

/// Every scenario, one per finding.
pub fn all() -> Vec<Scenario> {
    vec![
        creation_eio_before_meta(),
        stale_intent_after_failed_truncation(),
        empty_records_past_the_chunk_end(),
        delete_recovery_trusts_the_cached_length(),
        empty_records_after_a_rollover_crash(),
        truncation_then_eio_keeps_the_end_zero(),
        covered_word_past_a_length_a_failed_sync_dropped(),
    ]
}

/// Seed 25. Store creation made `0.zr` before `meta.zr`; an EIO in between
/// left a directory with a chunk file and no `meta.zr`, which the next open
/// refused (`Error::MetaMissing`). Operations: create the store, append.
/// Point: EIO (dirty pages kept) at the first `fsync` of `meta.zr.tmp`,
/// inside store creation. Creation now renames `meta.zr` into place before
/// it creates `0.zr`.
fn creation_eio_before_meta() -> Scenario {
    let mut rng = Rng::new(25);
    Scenario {
        name: "creation_eio_before_meta",
        seeds: &[25],
        fuzz_input: None,
        near_rollover: false,
        persist: Persist::Everything,
        points: vec![Point::new(
            Action::Eio { drop_dirty: false },
            vec![Step::first("the first fsync of meta.zr.tmp (store creation)", |o| {
                o.is(IoKind::Fsync, META_TMP_FILE)
            })],
        )],
        ops: vec![append(&mut rng, 1, &[100, 0, 700])],
    }
}

/// Seed 155. A delete's last step (truncating the intent away) failed its
/// `fsync`; the clean reopen that followed saw no intent (the page cache had
/// the short length) and synced nothing of `meta.zr`'s length; after more
/// appends, a power loss brought the stale intent back, and recovery refused
/// it (its lengths no longer match the header). Operations: 20 records, a
/// delete with holes, (the failure and a reopen), an append, a power loss
/// keeping nothing unsynced. Point: EIO (dirty pages kept) at the first
/// `fsync` of `meta.zr` after its truncation to the table's end. A writer's
/// open now `fsync`s `meta.zr`.
fn stale_intent_after_failed_truncation() -> Scenario {
    let mut rng = Rng::new(155);
    let mut ops = twenty_then_delete(&mut rng);
    ops.extend([append(&mut rng, 0, &[50; 5]), Op::Crash]);
    Scenario {
        name: "stale_intent_after_failed_truncation",
        seeds: &[155],
        fuzz_input: None,
        near_rollover: false,
        persist: Persist::Nothing,
        points: vec![Point::new(Action::Eio { drop_dirty: false }, fsync_after_the_intent_is_truncated())],
        ops,
    }
}

/// Seed 497. An append of only empty records at a frontier past the end of
/// its chunk file (chunk 0 is empty while the frontier sits near its 4 GiB
/// end) recorded entries past the file's end; reading them read the chunk
/// mapping past its end (a SIGBUS on a real system). Operations: frontier
/// near the end of chunk 0, an append of three empty records. Point: power
/// loss at the header `msync` that commits it (the first `msync` of the
/// header after a store of header word 1), everything unsynced kept, so the
/// recovered store holds the records. Appends now extend each chunk file to
/// the end of the records placed in it, empty ones included.
fn empty_records_past_the_chunk_end() -> Scenario {
    let mut rng = Rng::new(497);
    Scenario {
        name: "empty_records_past_the_chunk_end",
        seeds: &[497],
        fuzz_input: None,
        near_rollover: true,
        persist: Persist::Everything,
        points: vec![Point::new(
            Action::Crash,
            vec![
                Step::first("a store of header word 1 (tail_offset, length)", header_word1),
                Step::first("the first msync of the header", header_msync),
            ],
        )],
        ops: vec![append(&mut rng, 0, &[0, 0, 0])],
    }
}

/// Seeds 20703, 19933, 25694, 33346. A delete whose commit (`msync` of the
/// header) failed with the dirty pages kept; the reopen's recovery saw the
/// new length in the page cache, took the delete as committed and removed
/// the intent; that truncation's `fsync` failed too and dropped the header
/// page, which came back with the old length over a table whose holes were
/// already filled (a record twice). Operations: 20 records, a delete with
/// holes. Points: EIO (pages kept) at the first `msync` of the header after
/// the intent's `fsync`; EIO (pages dropped) at the first `fsync` of
/// `meta.zr` after its truncation to the table's end. Recovery now
/// re-applies the intent and syncs the header before removing it.
fn delete_recovery_trusts_the_cached_length() -> Scenario {
    let mut rng = Rng::new(20703);
    let commit = Point::new(
        Action::Eio { drop_dirty: false },
        vec![
            Step::first(INTENT_WRITE, intent_write),
            Step::first("the intent's fsync of meta.zr", meta_fsync),
            Step::first("the first msync of the header (the delete's commit)", header_msync),
        ],
    );
    let truncation = Point::new(
        Action::Eio { drop_dirty: true },
        vec![
            Step::first(INTENT_WRITE, intent_write),
            Step::first(TRUNCATION, meta_truncation),
            Step::first(META_FSYNC, meta_fsync),
        ],
    );
    Scenario {
        name: "delete_recovery_trusts_the_cached_length",
        seeds: &[20703, 19933, 25694, 33346],
        fuzz_input: None,
        near_rollover: false,
        persist: Persist::Nothing,
        points: vec![commit, truncation],
        ops: twenty_then_delete(&mut rng),
    }
}

/// Seed 27016. A power loss between the two header stores of an append that
/// rolled over to chunk 1 left (chunk 1, the old offset near 4 GiB) as the
/// frontier, as designed; the next append placed empty records at that
/// offset, past the end of chunk 1's file, and the rest in chunk 2; only
/// the last chunk (2) was extended, so the empty records lay past the end
/// of theirs. Operations: frontier near the end of chunk 0, an append of
/// 8 KB that rolls over, then an append of two empty records and one of
/// 8000 bytes (which cannot fit in what is left of chunk 1). Point: power
/// loss at the store of header word 1 that follows a store of header word 0
/// (nothing unsynced kept). Appends now extend every chunk they place
/// records in.
fn empty_records_after_a_rollover_crash() -> Scenario {
    let mut rng = Rng::new(27016);
    Scenario {
        name: "empty_records_after_a_rollover_crash",
        seeds: &[27016],
        fuzz_input: None,
        near_rollover: true,
        persist: Persist::Nothing,
        points: vec![Point::new(
            Action::Crash,
            vec![
                Step::first("a store of header word 0 (a new last chunk)", header_word0),
                Step::first("the next store of header word 1", header_word1),
            ],
        )],
        ops: vec![append(&mut rng, 0, &[2000; 4]), append(&mut rng, 0, &[0, 0, 8000])],
    }
}

/// Seeds 18547, 23327, 29301: a bug of the simulator. A truncation followed
/// by an EIO that dropped the dirty pages restored the durable page whole,
/// bringing back bytes past the new end of the file (the removed intent),
/// which POSIX never shows. Operations: 20 records, a delete with holes,
/// (the failure and a reopen), a second delete, an append. Point: EIO
/// (pages dropped) at the first `fsync` of `meta.zr` after its truncation
/// to the table's end. Every recovery checks that no cached file image
/// holds a byte past its end; the simulator keeps those bytes zero.
fn truncation_then_eio_keeps_the_end_zero() -> Scenario {
    let mut rng = Rng::new(18547);
    let mut ops = twenty_then_delete(&mut rng);
    ops.extend([Op::Delete(vec![1, 2]), append(&mut rng, 1, &[30, 0, 90])]);
    Scenario {
        name: "truncation_then_eio_keeps_the_end_zero",
        seeds: &[18547, 23327, 29301],
        fuzz_input: None,
        near_rollover: false,
        persist: Persist::Nothing,
        points: vec![Point::new(Action::Eio { drop_dirty: true }, fsync_after_the_intent_is_truncated())],
        ops,
    }
}

/// Found by CI's bounded `ops` fuzz run (2026-12-05; docs/fuzzing.md,
/// F11). An append's commit failed (EIO at the header's `msync`, pages
/// kept): the page cache held its length, the disk the one before. The
/// reopen summed the records past the covered word up to that cached
/// length and made the covered word durable (K5), then its `settle` failed
/// on `meta.zr` (EIO, pages dropped): the length went back, the covered
/// word stayed past it, under a seal that still named the header (as the
/// move's first end). The next reopen found nothing past the word to sum;
/// an append over those indices left its slots to the lag, and a power
/// loss lost them: its records were unchecked for good. Operations: three
/// appends, a crash. Points: EIO (pages kept) at the header's `msync` of
/// the second append; EIO (pages dropped) at the reopen's first `msync` of
/// `meta.zr`'s entries after it stored the covered word. A writer's open
/// now covers the tail after `settle` (the length durable first), and
/// lowers a covered word it finds past the length.
fn covered_word_past_a_length_a_failed_sync_dropped() -> Scenario {
    let mut rng = Rng::new(0);
    let commit = vec![
        Step::nth(2, "the second append's store of the seal", seal_store),
        Step::first("its msync of the header (the commit)", header_msync),
    ];
    let mut settle = commit.clone();
    settle.extend([
        Step::first("the reopen's store of the covered word", covered_store),
        Step::first("then an msync of meta.zr's entries (settle)", entries_msync),
    ]);
    Scenario {
        name: "covered_word_past_a_length_a_failed_sync_dropped",
        seeds: &[],
        fuzz_input: Some("fuzz/corpus/ops/finding-f11-covered-word-past-a-dropped-length"),
        near_rollover: false,
        persist: Persist::Nothing,
        points: vec![
            Point::new(Action::Eio { drop_dirty: false }, commit),
            Point::new(Action::Eio { drop_dirty: true }, settle),
        ],
        ops: vec![
            append(&mut rng, 0, &[300; 5]),
            append(&mut rng, 0, &[300; 5]),
            append(&mut rng, 0, &[300; 5]),
            Op::Crash,
        ],
    }
}

/// The steps to the first `fsync` of `meta.zr` after a delete's intent
/// was written and truncated away (seeds 155 and 18547 fail there).
fn fsync_after_the_intent_is_truncated() -> Vec<Step> {
    vec![
        Step::first(INTENT_WRITE, intent_write),
        Step::first(TRUNCATION, meta_truncation),
        Step::first(META_FSYNC, meta_fsync),
    ]
}

fn quiet() -> Settings {
    Settings { ops: 0, crash: 0.0, crash_in_recovery: 0.0, faults: Faults::default() }
}

/// Runs `scenario`: the store created with its points armed, its
/// operations, the final check; then every point must have fired.
pub fn run(scenario: &Scenario) -> Result<Report, Failure> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a one-thread pool");
    let fail = |v: Violation| Failure { scenario: scenario.name, what: v.what, trace: v.trace };
    pool.install(|| {
        let mut ids = Vec::new();
        let mut h = Harness::prepared(0, quiet(), None, Some(scenario.persist), |fs| {
            ids = scenario.points.iter().map(|p| fs.arm(p.clone())).collect();
        })
        .map_err(fail)?;
        if scenario.near_rollover {
            h.near_rollover().map_err(fail)?;
        }
        for op in &scenario.ops {
            h.step_with_crash(op.clone(), None).map_err(fail)?;
        }
        h.final_check().map_err(fail)?;
        let mut fired_at = Vec::new();
        for &id in &ids {
            match h.fs.fired_at(id) {
                Some(at) => fired_at.push(at),
                None => {
                    let what = format!("point never reached: {}", h.fs.point_progress(id));
                    return Err(Failure { scenario: scenario.name, what, trace: h.fs.trace() });
                }
            }
        }
        Ok(Report { fired_at, tally: h.tally.clone(), trace: h.fs.trace() })
    })
}
