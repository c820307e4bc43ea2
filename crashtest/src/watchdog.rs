//! The guest's watchdog: a run that stops making progress says where it
//! stopped and powers the guest off, instead of holding its slot until
//! `run.sh` kills QEMU with nothing in the serial log.
//!
//! The run names each step ([`step`]): an operation of the workload, or
//! a state's replay, mount, check and unmount. When one step lasts
//! longer than its limit (`stall=SECONDS`, [`STALL`] by default) and no
//! disk I/O completed for as long (`/proc/diskstats`: a guest starved by
//! the host's load still completes I/O, slowly; a task stuck in the
//! kernel on a request that never completes does not), the watchdog
//! prints `crashtest: STALLED` with the step, the stacks of the
//! run's threads and the kernel's list of blocked tasks (SysRq `w`), then
//! powers off (SysRq `o`). A task stuck in the kernel cannot be killed,
//! and the guest's init would wait for it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one step may last by default. The slowest steps take
/// seconds under TCG (a replay of a few MiB, a table's check); CI's
/// guests run at the lowest priority beside the builds, which the guest's
/// clock does not see as time stopped: a step stalls only if the disks
/// were quiet as long.
pub const STALL: Duration = Duration::from_secs(300);

/// The step in progress and when it began.
static STEP: Mutex<Option<(Instant, String)>> = Mutex::new(None);

/// Names the step that begins now.
pub fn step(what: impl Into<String>) {
    *STEP.lock().unwrap_or_else(|e| e.into_inner()) = Some((Instant::now(), what.into()));
}

/// Starts the watchdog's thread, which runs until the process exits and
/// ends it when a step lasts longer than `limit`.
pub fn start(limit: Duration) {
    std::thread::spawn(move || {
        let (mut io, mut io_since) = (disk_ios(), Instant::now());
        loop {
            std::thread::sleep(Duration::from_secs(5));
            let now = disk_ios();
            if now != io {
                (io, io_since) = (now, Instant::now());
            }
            let quiet = io_since.elapsed();
            let stalled = STEP.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|(began, what)| {
                let lasted = began.elapsed();
                (lasted > limit && quiet > limit).then(|| (lasted, what.clone()))
            });
            if let Some((lasted, what)) = stalled {
                report_and_power_off(lasted, quiet, &what);
            }
        }
    });
}

/// Reads and writes completed by every block device so far (`None` when
/// `/proc/diskstats` does not read: then only the step's time counts).
fn disk_ios() -> Option<u64> {
    std::fs::read_to_string("/proc/diskstats").ok().map(|text| completed_ios(&text))
}

/// The sum of the "reads completed" and "writes completed" fields (the
/// 4th and 8th) of each line of `/proc/diskstats`.
fn completed_ios(diskstats: &str) -> u64 {
    let field = |fields: &[&str], i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    diskstats
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .map(|fields| field(&fields, 3).wrapping_add(field(&fields, 7)))
        .fold(0, u64::wrapping_add)
}

fn report_and_power_off(lasted: Duration, quiet: Duration, what: &str) -> ! {
    println!(
        "crashtest: STALLED for {} s in {what}, no disk I/O completed for {} s",
        lasted.as_secs(),
        quiet.as_secs()
    );
    for task in std::fs::read_dir("/proc/self/task").into_iter().flatten().flatten() {
        let path = task.path();
        let read = |name: &str| std::fs::read_to_string(path.join(name)).unwrap_or_default();
        let stack = read("stack");
        println!("crashtest: thread {} ({}):", task.file_name().to_string_lossy(), read("comm").trim());
        for line in stack.lines() {
            println!("crashtest:   {line}");
        }
    }
    // The task dumps print at the default level, which `quiet` hides;
    // the level goes back before the run's own mounts fill the console.
    let _ = std::fs::write("/proc/sys/kernel/printk", "7");
    let _ = std::fs::write("/proc/sysrq-trigger", "w");
    let _ = std::fs::write("/proc/sys/kernel/printk", "4");
    println!("crashtest: EXIT stalled");
    let _ = std::fs::write("/proc/sysrq-trigger", "o");
    std::thread::sleep(Duration::from_secs(30));
    std::process::exit(3)
}

#[cfg(test)]
mod tests {
    use super::completed_ios;

    #[test]
    fn completed_ios_add_reads_and_writes_of_every_device() {
        let text = "\
 253       0 vda 120 3 2048 40 7 0 56 9 0 60 49 0 0 0 0 0 0
 253      16 vdb 5 0 40 1 1000 0 8000 300 2 400 301 0 0 0 0 0 0
 252       0 dm-0 1 0 8 0 0 0 0 0 0 0 0
";
        assert_eq!(completed_ios(text), 120 + 7 + 5 + 1000 + 1);
        assert_eq!(completed_ios(""), 0);
        assert_eq!(completed_ios("8 0 sda x"), 0, "a field that does not parse counts nothing");
    }
}
