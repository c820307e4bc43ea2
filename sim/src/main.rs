//! `cargo run --release -p loaderx-sim -- --seeds N` runs N seeds of the
//! random crash workload; `--seed S` replays one and prints its trace;
//! `--exhaustive` crashes short workloads at every I/O operation;
//! `--lying-disk` makes syncs persist nothing (the checker must then fail).

use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use loaderx_sim::workload::{Settings, Tally, Violation, run_seed};

struct Args {
    seeds: u64,
    start: u64,
    replay: Option<u64>,
    exhaustive: bool,
    lying: bool,
    ops: usize,
    threads: usize,
}

fn parse() -> Result<Args, String> {
    let mut args = Args { seeds: 0, start: 0, replay: None, exhaustive: false, lying: false, ops: 40, threads: 2 };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
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
            "-h" | "--help" => {
                return Err("usage: loaderx-sim [--seeds N [--start S]] [--seed S] [--exhaustive] [--lying-disk] \
                            [--ops N] [--threads N]"
                    .into());
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if args.seeds == 0 && args.replay.is_none() && !args.exhaustive {
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

fn report_violation(seed: u64, v: &Violation, args: &Args) {
    eprintln!("VIOLATION at seed {seed}: {}", v.what);
    eprintln!("last operations of the trace:");
    for line in v.trace.iter().rev().take(40).collect::<Vec<_>>().into_iter().rev() {
        eprintln!("  {line}");
    }
    eprintln!("replay: {}", replay_command(seed, args));
}

fn guarded(seed: u64, settings: &Settings) -> Result<(Tally, u64), Violation> {
    match std::panic::catch_unwind(|| run_seed(seed, settings)) {
        Ok(result) => result,
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(Violation { what: format!("panic: {what}"), trace: Vec::new() })
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
        match guarded(seed, &settings) {
            Ok((tally, hash)) => {
                println!("seed {seed}: ok, {tally:?}, trace hash {hash:016x}");
                return ExitCode::SUCCESS;
            }
            Err(v) => {
                for line in &v.trace {
                    println!("{line}");
                }
                report_violation(seed, &v, &args);
                return ExitCode::FAILURE;
            }
        }
    }

    let mut failed = false;
    if args.exhaustive {
        println!("exhaustive crash points:");
        let start = Instant::now();
        match loaderx_sim::exhaustive::run() {
            Ok(e) => println!(
                "exhaustive: {} crash points, {} states explored, 0 violations ({:.1} s)",
                e.crash_points,
                e.states,
                start.elapsed().as_secs_f64()
            ),
            Err((where_, v)) => {
                eprintln!("VIOLATION in exhaustive workload {where_}: {}", v.what);
                for line in v.trace.iter().rev().take(40).collect::<Vec<_>>().into_iter().rev() {
                    eprintln!("  {line}");
                }
                failed = true;
            }
        }
    }

    if args.seeds > 0 {
        let start = Instant::now();
        let next = AtomicU64::new(args.start);
        let end = args.start + args.seeds;
        let total = Mutex::new(Tally::default());
        let violations = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..args.threads {
                scope.spawn(|| {
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed >= end {
                            break;
                        }
                        match guarded(seed, &settings) {
                            Ok((tally, _)) => total.lock().unwrap().add(&tally),
                            Err(v) => violations.lock().unwrap().push((seed, v)),
                        }
                    }
                });
            }
        });
        let total = total.into_inner().unwrap();
        let mut violations = violations.into_inner().unwrap();
        violations.sort_by_key(|(seed, _)| *seed);
        if let Some((seed, v)) = violations.first() {
            report_violation(*seed, v, &args);
            for (seed, v) in violations.iter().skip(1).take(30) {
                eprintln!("also seed {seed}: {}", v.what);
            }
            failed = true;
        }
        println!(
            "seeds {}..{end}: {} violations; {} store ops, {} I/O ops, {} crashes, {} faults, {} states checked ({:.1} s)",
            args.start,
            violations.len(),
            total.store_ops,
            total.io_ops,
            total.crashes,
            total.faults_hit,
            total.states_checked,
            start.elapsed().as_secs_f64()
        );
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
