//! `cargo run --release -p loaderx-sim -- --seeds N` runs N seeds of the
//! random crash workload; `--seed S` replays one and prints its trace;
//! `--exhaustive` crashes short workloads at every I/O operation;
//! `--sharded` runs only its sharded-dataset part, `--table` only its table part,
//! `--import` only its import part;
//! `--lying-disk` makes syncs persist nothing (the checker must then fail);
//! `--scenarios` runs the regression scenarios (`--scenario NAME` one, with
//! its trace). Every run ends with the summary line
//! `simulation: S seeds, C crashes, P exhaustive crash points, V violations`.

use std::process::ExitCode;
use std::time::Instant;

use loaderx_sim::campaign::{Summary, run_guarded, run_seeds};
use loaderx_sim::workload::{Settings, Violation};

struct Args {
    seeds: u64,
    start: u64,
    replay: Option<u64>,
    exhaustive: bool,
    lying: bool,
    ops: usize,
    threads: usize,
    scenarios: bool,
    scenario: Option<String>,
    sharded: bool,
    table: bool,
    import: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        seeds: 0,
        start: 0,
        replay: None,
        exhaustive: false,
        lying: false,
        ops: 40,
        threads: 2,
        scenarios: false,
        scenario: None,
        sharded: false,
        table: false,
        import: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        if arg == "--scenario" {
            args.scenario = Some(it.next().ok_or("--scenario needs a name")?);
            args.scenarios = true;
            continue;
        }
        let mut value = |name: &str| -> Result<u64, String> {
            it.next().and_then(|v| v.parse().ok()).ok_or(format!("{name} needs a number"))
        };
        match arg.as_str() {
            "--seeds" => args.seeds = value("--seeds")?,
            "--start" => args.start = value("--start")?,
            "--seed" => args.replay = Some(value("--seed")?),
            "--ops" => args.ops = value("--ops")? as usize,
            "--threads" => args.threads = value("--threads")?.max(1) as usize,
            "--exhaustive" => args.exhaustive = true,
            "--lying-disk" => args.lying = true,
            "--scenarios" => args.scenarios = true,
            "--sharded" => args.sharded = true,
            "--table" => args.table = true,
            "--import" => args.import = true,
            "-h" | "--help" => {
                return Err("usage: loaderx-sim [--seeds N [--start S]] [--seed S] [--exhaustive] [--lying-disk] \
                            [--ops N] [--threads N] [--scenarios] [--scenario NAME] [--sharded] [--table] [--import]"
                    .into());
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.seeds == 0
        && args.replay.is_none()
        && !args.exhaustive
        && !args.scenarios
        && !args.sharded
        && !args.table
        && !args.import
    {
        args.seeds = 100;
    }
    Ok(args)
}

fn settings(args: &Args) -> Settings {
    let mut s = Settings { ops: args.ops, ..Settings::default() };
    s.faults.lying = args.lying;
    s
}

fn replay_command(seed: u64, args: &Args) -> String {
    let lying = if args.lying { " --lying-disk" } else { "" };
    format!("cargo run --release -p loaderx-sim -- --seed {seed} --ops {}{lying}", args.ops)
}

fn print_tail(trace: &[String]) {
    for line in trace.iter().rev().take(40).collect::<Vec<_>>().into_iter().rev() {
        eprintln!("  {line}");
    }
}

fn report_violation(seed: u64, v: &Violation, args: &Args) {
    eprintln!("VIOLATION at seed {seed}: {}", v.what);
    eprintln!("last operations of the trace:");
    print_tail(&v.trace);
    eprintln!("replay: {}", replay_command(seed, args));
}

/// Replays one seed: its tally and trace hash, or its whole trace.
fn replay(seed: u64, settings: &Settings, args: &Args) -> Summary {
    let mut summary = Summary { seeds: 1, ..Summary::default() };
    match run_guarded(seed, settings) {
        Ok((tally, hash)) => {
            println!("seed {seed}: ok, {tally:?}, trace hash {hash:016x}");
            summary.crashes = tally.crashes;
        }
        Err(v) => {
            for line in &v.trace {
                println!("{line}");
            }
            report_violation(seed, &v, args);
            summary.violations = 1;
        }
    }
    summary
}

/// The exhaustive sweep: its crash points, or a violation.
fn exhaustive(summary: &mut Summary) {
    println!("exhaustive crash points:");
    let start = Instant::now();
    match loaderx_sim::exhaustive::run() {
        Ok(e) => {
            println!(
                "exhaustive: {} crash points, {} states explored, 0 violations ({:.1} s)",
                e.crash_points,
                e.states,
                start.elapsed().as_secs_f64()
            );
            summary.crash_points += e.crash_points;
        }
        Err((where_, v)) => {
            eprintln!("VIOLATION in exhaustive workload {where_}: {}", v.what);
            print_tail(&v.trace);
            summary.violations += 1;
        }
    }
}

/// Runs the regression scenarios (or the one named, printing its trace);
/// false if any failed.
fn scenarios(only: Option<&str>) -> bool {
    let all = loaderx_sim::scenarios::all();
    let chosen: Vec<_> = all.iter().filter(|s| only.is_none_or(|name| s.name == name)).collect();
    if chosen.is_empty() {
        eprintln!("no scenario named {}", only.unwrap_or_default());
        return false;
    }
    let mut ok = true;
    for scenario in chosen {
        match loaderx_sim::scenarios::run(scenario) {
            Ok(report) => {
                if only.is_some() {
                    report.trace.iter().for_each(|line| println!("{line}"));
                }
                println!("scenario {}: ok, points fired at I/O {:?}", scenario.name, report.fired_at);
            }
            Err(f) => {
                eprintln!("SCENARIO {} FAILED ({}): {}", f.scenario, scenario.found_by(), f.what);
                print_tail(&f.trace);
                ok = false;
            }
        }
    }
    ok
}

/// The sharded-dataset sweep alone (`--exhaustive` includes it).
fn sharded(summary: &mut Summary) {
    sweep(summary, "sharded", loaderx_sim::sharded::run);
}

/// The table sweep alone (`--exhaustive` includes it).
fn table(summary: &mut Summary) {
    sweep(summary, "table", loaderx_sim::table::run);
}

/// The import sweep alone (`--exhaustive` includes it).
#[cfg(feature = "import")]
fn import(summary: &mut Summary) {
    sweep(summary, "import", loaderx_sim::import::run);
}

#[cfg(not(feature = "import"))]
fn import(_: &mut Summary) {
    eprintln!("--import: this build has no import sweep (the `import` feature, on by default)");
    std::process::exit(2);
}

/// One sweep of crash points, `name`d, alone.
fn sweep(
    summary: &mut Summary,
    name: &str,
    run: fn() -> Result<loaderx_sim::exhaustive::Explored, (String, loaderx_sim::workload::Violation)>,
) {
    println!("{name} crash points:");
    match run() {
        Ok(e) => {
            println!("{name}: {} crash points, {} states explored, 0 violations", e.crash_points, e.states);
            summary.crash_points += e.crash_points;
        }
        Err((where_, v)) => {
            eprintln!("VIOLATION in {where_}: {}", v.what);
            print_tail(&v.trace);
            summary.violations += 1;
        }
    }
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let settings = settings(&args);
    if let Some(seed) = args.replay {
        let summary = replay(seed, &settings, &args);
        println!("{summary}");
        return if summary.violations == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE };
    }
    let mut summary = Summary::default();
    let mut failed = false;
    if args.exhaustive {
        exhaustive(&mut summary);
    } else if args.sharded {
        sharded(&mut summary);
    } else if args.table {
        table(&mut summary);
    } else if args.import {
        import(&mut summary);
    }

    if args.seeds > 0 {
        let start = Instant::now();
        let end = args.start + args.seeds;
        let run = run_seeds(args.start..end, &settings, args.threads);
        if let Some((seed, v)) = run.violations.first() {
            report_violation(*seed, v, &args);
            for (seed, v) in run.violations.iter().skip(1).take(30) {
                eprintln!("also seed {seed}: {}", v.what);
            }
        }
        let total = &run.tally;
        println!(
            "seeds {}..{end}: {} violations; {} store ops, {} I/O ops, {} crashes, {} faults, {} states checked, \
             {} mutations refused beside a reader ({:.1} s)",
            args.start,
            run.violations.len(),
            total.store_ops,
            total.io_ops,
            total.crashes,
            total.faults_hit,
            total.states_checked,
            total.readers_refused,
            start.elapsed().as_secs_f64()
        );
        summary.seeds += run.seeds;
        summary.crashes += total.crashes;
        summary.violations += run.violations.len() as u64;
    }
    if args.scenarios {
        failed |= !scenarios(args.scenario.as_deref());
    }
    println!("{summary}");
    failed |= summary.violations > 0;
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
