//! The run inside the guest: record a workload through dm-log-writes, then
//! replay the log to every crash state and check each.
//!
//! Devices (virtio disks, made by `crashtest/run.sh`): `data` holds a fresh
//! filesystem, `replay` the same image, `log` receives the log, and `cow`
//! holds a transient dm-snapshot's changes, so that mounting a crash state
//! (journal recovery) and the check's writes never touch `replay`, which
//! moves forward from one prefix to the next.

use crate::check::check_state;
use crate::log::{Log, read_log};
use crate::replay::{Point, PointKind, Replayer, between_points, kept_writes, prefix_points};
use crate::watchdog::{self, step};
use crate::workload::{Kind, Op, execute, models, ops};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The log-writes target's name.
const LOG_TARGET: &str = "ctlog";
/// The snapshot target's name.
const SNAP_TARGET: &str = "ctsnap";
/// Where the workload's filesystem is mounted.
const DATA_MOUNT: &str = "/mnt/data";
/// Where a crash state is mounted.
const CHECK_MOUNT: &str = "/mnt/check";
/// The store's directory in the filesystem.
const STORE_DIR: &str = "store";

/// One run's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `ext4`, `xfs` or `btrfs`: the filesystem type to mount.
    pub fs: String,
    /// The workload.
    pub kind: Kind,
    /// The workload's and the sampled states' seed.
    pub seed: u64,
    /// Operations after the creation.
    pub ops: usize,
    /// Sampled states per gap between flush points.
    pub between: usize,
    /// How long one step may last before the watchdog ends the run.
    pub stall: std::time::Duration,
    /// The data, log, replay and snapshot devices.
    pub devices: [PathBuf; 4],
}

/// What a run found.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Log entries.
    pub entries: usize,
    /// States replayed to a flush or FUA write.
    pub flush: usize,
    /// States replayed to a mark.
    pub mark: usize,
    /// Sampled states between flushes.
    pub between: usize,
    /// States whose check failed (the mount's failures included).
    pub violations: usize,
}

fn run(cmd: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd).args(args).output().map_err(|e| format!("{cmd}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!("{cmd} {args:?}: {} {}", out.status, String::from_utf8_lossy(&out.stderr).trim()))
}

fn sectors(device: &Path) -> Result<u64, String> {
    let mut f = File::open(device).map_err(|e| format!("{}: {e}", device.display()))?;
    let bytes = f.seek(SeekFrom::End(0)).map_err(|e| format!("{}: {e}", device.display()))?;
    Ok(bytes / 512)
}

/// What the block layer says of device-mapper target `name`'s write cache
/// (`write back`: the filesystem above sends flushes and FUA writes).
fn dm_write_cache(name: &str) -> String {
    let found = std::fs::read_dir("/sys/block")
        .into_iter()
        .flatten()
        .flatten()
        .find(|d| std::fs::read_to_string(d.path().join("dm/name")).is_ok_and(|n| n.trim() == name));
    found
        .and_then(|d| std::fs::read_to_string(d.path().join("queue/write_cache")).ok())
        .map_or_else(|| "unknown".into(), |w| w.trim().to_string())
}

/// Runs the workload on the data device through a log-writes target,
/// writing the mark `op-K` after operation K returns.
pub fn record(settings: &Settings, ops: &[Op]) -> Result<(), String> {
    let [data, log, ..] = &settings.devices;
    let table = format!("0 {} log-writes {} {}", sectors(data)?, data.display(), log.display());
    run("dmsetup", &["create", LOG_TARGET, "--table", &table])?;
    println!("crashtest: write cache of the log-writes target: {}", dm_write_cache(LOG_TARGET));
    let device = format!("/dev/mapper/{LOG_TARGET}");
    std::fs::create_dir_all(DATA_MOUNT).map_err(|e| e.to_string())?;
    run("mount", &["-t", &settings.fs, &device, DATA_MOUNT])?;
    let dir = Path::new(DATA_MOUNT).join(STORE_DIR);
    let mut handle = None;
    for (k, op) in ops.iter().enumerate() {
        step(format!("op {} ({})", k + 1, op.describe()));
        execute(&mut handle, &dir, op).map_err(|e| format!("op {} ({}): {e}", k + 1, op.describe()))?;
        run("dmsetup", &["message", LOG_TARGET, "0", "mark", &format!("op-{}", k + 1)])?;
    }
    drop(handle);
    step("the recording's unmount");
    run("umount", &[DATA_MOUNT])?;
    run("dmsetup", &["remove", LOG_TARGET])
}

/// Replays the log to every flush point, every mark and `between` sampled
/// states per gap, checking each; prints each violation.
pub fn replay_and_check(settings: &Settings, ops: &[Op]) -> Result<Tally, String> {
    let [_, log_dev, replay_dev, _] = &settings.devices;
    let mut log_file = File::open(log_dev).map_err(|e| e.to_string())?;
    let log_bytes = log_file.seek(SeekFrom::End(0)).map_err(|e| e.to_string())?;
    let log = read_log(&mut log_file, log_bytes).map_err(|e| e.to_string())?;
    let mut points = prefix_points(&log);
    points.extend(between_points(&log, settings.between, settings.seed));
    points.sort_by_key(|p| (p.prefix, p.end));
    let target = OpenOptions::new().read(true).write(true).open(replay_dev).map_err(|e| e.to_string())?;
    let target_bytes = sectors(replay_dev)? * 512;
    let mut replayer = Replayer::new(log_file, target, log.header.sector_bytes, target_bytes);
    let models = models(ops);
    let mut tally = Tally { entries: log.entries.len(), ..Tally::default() };
    for point in &points {
        step(format!("the replay to {}", point.label()));
        replayer.advance(&log.entries, point.prefix).map_err(|e| format!("replay: {e}"))?;
        replayer.target().sync_all().map_err(|e| format!("sync replay device: {e}"))?;
        if let Err(what) = check_point(settings, &log, &mut replayer, point, ops, &models) {
            tally.violations += 1;
            report(settings, point, ops, &what);
        }
        match point.kind {
            PointKind::Flush => tally.flush += 1,
            PointKind::Mark => tally.mark += 1,
            PointKind::Between { .. } => tally.between += 1,
        }
    }
    Ok(tally)
}

fn report(settings: &Settings, point: &Point, ops: &[Op], what: &str) {
    let in_flight = match (point.in_flight, ops.get(point.acked)) {
        (true, Some(op)) => format!("op {} ({})", point.acked + 1, op.describe()),
        _ => "none".into(),
    };
    println!(
        "crashtest: VIOLATION fs={} kind={} seed={} point={} acked={} in_flight={in_flight}: {what}",
        settings.fs,
        settings.kind.name(),
        settings.seed,
        point.label(),
        point.acked
    );
}

/// Builds the crash state over a snapshot of the replay device, mounts it
/// and checks the store; the snapshot is dropped whatever happens.
fn check_point(
    settings: &Settings,
    log: &Log,
    replayer: &mut Replayer<File, File>,
    point: &Point,
    ops: &[Op],
    models: &[Vec<Vec<u8>>],
) -> Result<(), String> {
    let [_, _, replay_dev, cow_dev] = &settings.devices;
    let table = format!("0 {} snapshot {} {} N 8", sectors(replay_dev)?, replay_dev.display(), cow_dev.display());
    run("dmsetup", &["create", SNAP_TARGET, "--table", &table]).map_err(|e| format!("harness: {e}"))?;
    let device = format!("/dev/mapper/{SNAP_TARGET}");
    let checked = build_and_check(settings, log, replayer, point, ops, models, &device);
    let removed = run("dmsetup", &["remove", SNAP_TARGET]);
    checked.and(removed.map_err(|e| format!("harness: {e}")))
}

fn build_and_check(
    settings: &Settings,
    log: &Log,
    replayer: &mut Replayer<File, File>,
    point: &Point,
    ops: &[Op],
    models: &[Vec<Vec<u8>>],
    device: &str,
) -> Result<(), String> {
    let kept = kept_writes(log, point);
    if !kept.is_empty() {
        let mut snap = OpenOptions::new().write(true).open(device).map_err(|e| format!("harness: {e}"))?;
        replayer.apply_to(&kept, &mut snap).map_err(|e| format!("harness: subset: {e}"))?;
        snap.sync_all().map_err(|e| format!("harness: {e}"))?;
    }
    std::fs::create_dir_all(CHECK_MOUNT).map_err(|e| e.to_string())?;
    step(format!("the mount of {}", point.label()));
    run("mount", &["-t", &settings.fs, device, CHECK_MOUNT]).map_err(|e| format!("mount failed: {e}"))?;
    step(format!("the check of {}", point.label()));
    let checked = check_state(&Path::new(CHECK_MOUNT).join(STORE_DIR), ops, models, point);
    step(format!("the unmount of {}", point.label()));
    let unmounted = run("umount", &[CHECK_MOUNT]).map_err(|e| format!("harness: {e}"));
    checked.and(unmounted)
}

/// The whole run: generate, record, replay and check, print the summary.
pub fn run_all(settings: &Settings) -> Result<Tally, String> {
    let started = Instant::now();
    watchdog::start(settings.stall);
    let ops = ops(settings.kind, settings.seed, settings.ops);
    record(settings, &ops)?;
    let recorded = started.elapsed().as_secs_f64();
    let tally = replay_and_check(settings, &ops)?;
    println!(
        "crashtest: SUMMARY fs={} kind={} seed={} ops={} mutant={} entries={} flush={} mark={} between={} states={} violations={} record_s={recorded:.1} total_s={:.1}",
        settings.fs,
        settings.kind.name(),
        settings.seed,
        settings.ops,
        u8::from(cfg!(feature = "mutant")),
        tally.entries,
        tally.flush,
        tally.mark,
        tally.between,
        tally.flush + tally.mark + tally.between,
        tally.violations,
        started.elapsed().as_secs_f64()
    );
    Ok(tally)
}
