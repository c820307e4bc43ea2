//! The crash simulation as tests: a bounded campaign with the exhaustive
//! crash points (at least 10,000 crash points together), determinism, the seeds that once found bugs and the scenarios
//! rebuilt from them, and proof that the checker can fail (a lying disk must
//! be caught, an unreached scenario point must fail).

use loaderx_sim::campaign::{Summary, run_seeds};
use loaderx_sim::workload::{Settings, run_seed};

/// Seeds that found bugs, kept as regression tests (they cost nothing, but
/// a change of the store's I/O order moves their crashes elsewhere; each is
/// also a scenario in `loaderx_sim::scenarios`, which does not depend on it):
/// 25 (store creation interrupted by EIO left `0.zr` without `meta.zr`),
/// 155 (a failed sync while clearing a delete's intent left a stale intent
/// behind after a crash), 497 (an empty record placed at a frontier past the
/// end of its chunk file), 20703 (delete recovery trusted a header length
/// that the page cache showed after a failed msync, then dropped the intent),
/// 27016 (after a crash between the two header words of a rollover, empty
/// records landed past the end of the previous chunk file), 18547 (a bug of
/// the simulator itself: bytes past the end of a file came back after a
/// truncation and an EIO).
const REGRESSIONS: [u64; 6] = [25, 155, 497, 20703, 27016, 18547];

fn check(seeds: impl Iterator<Item = u64>, settings: &Settings) {
    for seed in seeds {
        if let Err(v) = run_seed(seed, settings) {
            let tail: Vec<&String> = v.trace.iter().rev().take(30).collect();
            panic!(
                "seed {seed}: {}\nreplay: cargo run --release -p loaderx-sim -- --seed {seed} --ops {}\n{tail:#?}",
                v.what, settings.ops
            );
        }
    }
}

/// The CI campaign: seeds `CI_SEEDS` on two threads plus the exhaustive
/// sweep, the same run as
/// `cargo run --release -p loaderx-sim -- --start 1000 --seeds 2000 --exhaustive`.
const CI_SEEDS: std::ops::Range<u64> = 1000..3000;

/// Seeded crashes plus exhaustive crash points the CI campaign must reach.
const CI_CRASHES_MIN: u64 = 10_000;

/// The bounded campaign and the exhaustive sweep find no violation and
/// together explore at least `CI_CRASHES_MIN` crash points; prints the
/// summary line (visible with `--nocapture`).
#[test]
fn ci_campaign_explores_ten_thousand_crash_points() {
    let explored = loaderx_sim::exhaustive::run().unwrap_or_else(|(w, v)| panic!("{w}: {}", v.what));
    assert_eq!(explored.states, explored.crash_points * 5);
    let run = run_seeds(CI_SEEDS, &Settings::default(), 2);
    let summary = Summary {
        seeds: run.seeds,
        crashes: run.tally.crashes,
        crash_points: explored.crash_points,
        violations: run.violations.len() as u64,
    };
    println!("{summary}");
    if let Some((seed, v)) = run.violations.first() {
        let tail: Vec<&String> = v.trace.iter().rev().take(30).collect();
        panic!(
            "{summary}\nseed {seed}: {}\nreplay: cargo run --release -p loaderx-sim -- --seed {seed}\n{tail:#?}",
            v.what
        );
    }
    assert!(explored.crash_points > 300, "{explored:?}");
    // Gathers took the batched path (the simulated mapping says at random
    // whether a record is in memory), and injected EIOs reached it.
    let (batched, failed) = run.tally.batched_reads;
    assert!(batched > 1000 && failed > 10, "{batched} batched reads, {failed} failed");
    println!("{batched} batched reads, {failed} failed by an injected EIO");
    // A quarter of the opens read O_DIRECT, whose reads the simulated file
    // refuses unless aligned: a misaligned one would fail a gather.
    assert!(run.tally.direct_reads > 1000, "{} O_DIRECT reads", run.tally.direct_reads);
    println!("{} O_DIRECT reads", run.tally.direct_reads);
    assert!(
        summary.crash_total() >= CI_CRASHES_MIN,
        "{summary}: {} crash points in all, fewer than {CI_CRASHES_MIN}; raise CI_SEEDS",
        summary.crash_total()
    );
}

#[test]
fn regression_seeds() {
    check(REGRESSIONS.into_iter(), &Settings::default());
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    for seed in [3, 77, 1234] {
        let (a, hash_a) = run_seed(seed, &Settings::default()).expect("no violation");
        let (b, hash_b) = run_seed(seed, &Settings::default()).expect("no violation");
        assert_eq!(hash_a, hash_b, "seed {seed}");
        assert_eq!((a.io_ops, a.crashes), (b.io_ops, b.crashes));
    }
    let (_, one) = run_seed(1, &Settings::default()).unwrap();
    let (_, two) = run_seed(2, &Settings::default()).unwrap();
    assert_ne!(one, two, "different seeds, different runs");
}

/// With syncs that persist nothing, acknowledged writes vanish at a crash:
/// the checker must notice within a few seeds, or it checks nothing.
#[test]
fn a_lying_disk_is_caught() {
    let mut settings = Settings::default();
    settings.faults.lying = true;
    let caught = (0..20).filter(|&seed| run_seed(seed, &settings).is_err()).count();
    assert!(caught >= 10, "the checker caught a lying disk in only {caught} of 20 seeds");
}

/// Each past finding as a fixed scenario whose crash or fault point is
/// chosen by what the I/O operation is; a scenario fails when it finds a
/// violation or when one of its points is never reached.
#[test]
fn regression_scenarios() {
    let mut failures = Vec::new();
    for scenario in loaderx_sim::scenarios::all() {
        match loaderx_sim::scenarios::run(&scenario) {
            Ok(report) => println!("scenario {}: points fired at I/O {:?}", scenario.name, report.fired_at),
            Err(f) => {
                let tail: Vec<&String> = f.trace.iter().rev().take(30).rev().collect();
                failures.push(format!("scenario {} ({}): {}\n{tail:#?}", f.scenario, scenario.found_by(), f.what));
            }
        }
    }
    assert!(failures.is_empty(), "{} scenario(s) failed:\n{}", failures.len(), failures.join("\n\n"));
}

/// A scenario whose point the run never reaches fails, naming the point:
/// that is what keeps the scenarios from passing silently once the store's
/// I/O no longer produces their situation.
#[test]
fn a_scenario_whose_point_is_never_reached_fails() {
    use loaderx_sim::point::{Action, IoKind, Point, Step};
    let mut scenario = loaderx_sim::scenarios::all().remove(0);
    scenario.points = vec![Point::new(
        Action::Eio { drop_dirty: true },
        vec![Step::first("an fsync of a file the store never has", |o| o.is(IoKind::Fsync, "no-such.zr"))],
    )];
    let failure = loaderx_sim::scenarios::run(&scenario).expect_err("an unreached point must fail the scenario");
    assert!(failure.what.contains("point never reached"), "{}", failure.what);
    assert!(failure.what.contains("a file the store never has"), "{}", failure.what);
}

#[test]
fn every_scenario_is_named_once_and_arms_a_point() {
    let all = loaderx_sim::scenarios::all();
    let mut names: Vec<&str> = all.iter().map(|s| s.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), all.len(), "duplicate scenario names");
    assert!(all.iter().all(|s| !s.points.is_empty() && !s.ops.is_empty()));
    // Each says what found it: campaign seeds, or a fuzz input that exists.
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for s in &all {
        match s.fuzz_input {
            Some(input) => assert!(repo.join(input).is_file(), "{}: no file {input}", s.name),
            None => assert!(!s.seeds.is_empty(), "{}: no seed and no fuzz input", s.name),
        }
    }
}
