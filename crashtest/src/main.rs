//! `loaderx-crashtest`: runs in the guest (`guest KEY=VALUE...`), or dumps a
//! log image on the host (`dump LOG`). `crashtest/run.sh` drives both.

use loaderx_crashtest::guest::{Settings, run_all};
use loaderx_crashtest::log::{flag, read_log};
use loaderx_crashtest::replay::{between_points, prefix_points};
use loaderx_crashtest::workload::{Kind, ops};
use std::io::{Seek, SeekFrom};
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: loaderx-crashtest guest [fs=ext4] [kind=append] [seed=1] [ops=10] [between=2] [stall=300]
       loaderx-crashtest ops [kind=append] [seed=1] [ops=10]   (lists a workload's operations)
       loaderx-crashtest dump LOG";

fn settings(args: &[String]) -> Result<Settings, String> {
    let mut s = Settings {
        fs: "ext4".into(),
        kind: Kind::Append,
        seed: 1,
        ops: 10,
        between: 2,
        stall: loaderx_crashtest::watchdog::STALL,
        devices: ["/dev/vda", "/dev/vdb", "/dev/vdc", "/dev/vdd"].map(PathBuf::from),
    };
    for arg in args {
        let (key, value) = arg.split_once('=').ok_or_else(|| format!("not KEY=VALUE: {arg}"))?;
        let number = || value.parse::<u64>().map_err(|e| format!("{key}: {e}"));
        match key {
            "fs" if ["ext4", "xfs", "btrfs"].contains(&value) => s.fs = value.into(),
            "kind" => s.kind = Kind::from_name(value).ok_or_else(|| format!("no workload {value}"))?,
            "seed" => s.seed = number()?,
            "ops" => s.ops = number()? as usize,
            "between" => s.between = number()? as usize,
            "stall" => s.stall = std::time::Duration::from_secs(number()?),
            _ => return Err(format!("unknown setting {arg}")),
        }
    }
    Ok(s)
}

fn dump(path: &str) -> Result<(), String> {
    let mut f = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let len = f.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
    let log = read_log(&mut f, len).map_err(|e| e.to_string())?;
    let count = |bit: u64| log.entries.iter().filter(|e| e.flags & bit != 0).count();
    println!(
        "entries {} sector_bytes {} flush {} fua {} discard {} mark {} metadata {}",
        log.entries.len(),
        log.header.sector_bytes,
        count(flag::FLUSH),
        count(flag::FUA),
        count(flag::DISCARD),
        count(flag::MARK),
        count(flag::METADATA)
    );
    println!(
        "prefix points {} between points (2 per gap) {}",
        prefix_points(&log).len(),
        between_points(&log, 2, 1).len()
    );
    Ok(())
}

fn list_ops(s: &Settings) -> bool {
    for (k, op) in ops(s.kind, s.seed, s.ops).iter().enumerate() {
        println!("op {}: {}", k + 1, op.describe());
    }
    true
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let done = match args.first().map(String::as_str) {
        Some("guest") => settings(&args[1..]).and_then(|s| run_all(&s)).map(|t| t.violations == 0),
        Some("ops") => settings(&args[1..]).map(|s| list_ops(&s)),
        Some("dump") if args.len() == 2 => dump(&args[1]).map(|()| true),
        _ => Err(USAGE.into()),
    };
    match done {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            println!("crashtest: ERROR {e}");
            ExitCode::from(2)
        }
    }
}
