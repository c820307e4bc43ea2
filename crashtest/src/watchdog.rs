//! The guest's watchdog: a run that stops making progress says where it
//! stopped and powers the guest off, instead of holding its slot until
//! `run.sh` kills QEMU with nothing in the serial log.
//!
//! The run names each step ([`step`]): an operation of the workload, or
//! a state's replay, mount, check and unmount. When one step lasts
//! longer than its limit (`stall=SECONDS`, [`STALL`] by default), the
//! watchdog prints `crashtest: STALLED` with the step, the stacks of the
//! run's threads and the kernel's list of blocked tasks (SysRq `w`), then
//! powers off (SysRq `o`). A task stuck in the kernel cannot be killed,
//! and the guest's init would wait for it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long one step may last by default. The slowest steps take
/// seconds under TCG (a replay of a few MiB, a table's check); CI's
/// guests run at the lowest priority beside the builds, which the guest's
/// clock does not see as time stopped.
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
        loop {
            std::thread::sleep(Duration::from_secs(5));
            let stalled = STEP.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|(began, what)| {
                let lasted = began.elapsed();
                (lasted > limit).then(|| (lasted, what.clone()))
            });
            if let Some((lasted, what)) = stalled {
                report_and_power_off(lasted, &what);
            }
        }
    });
}

fn report_and_power_off(lasted: Duration, what: &str) -> ! {
    println!("crashtest: STALLED for {} s in {what}", lasted.as_secs());
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
