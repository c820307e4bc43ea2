//! `ops`: the crash simulator with coverage guidance. The input is a seed
//! (the simulated filesystem's random choices: writeback, torn pages, which
//! faults fire) and a sequence of operations, each with an optional crash
//! point inside it, a choice of what the crash keeps, and optional sync
//! failures while it runs. `loaderx_sim::workload::Harness` runs them on
//! the real store over `SimFs` and checks every recovered state against its
//! model (`docs/simulation.md`); a violation is a panic.

use loaderx::CompactOptions;
use loaderx::io::Vfs;
use loaderx_sim::fs::{Faults, Persist};
use loaderx_sim::workload::{Harness, Op, Settings, Violation, store_path};

use crate::input::In;

/// Operations per input, at most.
const OPS_MAX: u64 = 32;

/// The `ops` target.
pub fn ops(data: &[u8]) {
    crate::in_pool(|| {
        if let Err(v) = run(data) {
            let tail: Vec<&String> = v.trace.iter().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect();
            panic!(
                "simulation violation: {}\n{}",
                v.what,
                tail.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n")
            );
        }
    });
}

fn run(data: &[u8]) -> Result<(), Violation> {
    let mut u = In::new(data);
    let seed = u.u64();
    let background = match u.below(4) {
        0 => Settings::default().faults,
        1 => Faults { writeback: 0.2, ..Faults::default() },
        _ => Faults::default(),
    };
    let settings = Settings {
        ops: 0,
        crash: [0.0, 0.25, 0.5][u.below(3) as usize],
        crash_in_recovery: [0.0, 0.2, 0.5][u.below(3) as usize],
        faults: background,
    };
    let mut h = Harness::new(seed, settings)?;
    if u.below(4) == 0 {
        h.near_rollover()?;
    }
    let n = u.below(OPS_MAX + 1);
    for _ in 0..n {
        if u.is_empty() {
            break;
        }
        let op = next_op(&mut u, &h);
        let crash_at = (u.below(4) == 0).then(|| h.fs.ops() + 1 + u.below(64));
        h.set_persist(persist(&mut u));
        let faults = match u.below(10) {
            0 => Some(Faults { eio_sync: 1.0, ..Faults::default() }),
            1 => Some(Faults { eio_sync: 0.3, ..Faults::default() }),
            2 => Some(Faults { short_io: 0.5, enospc: 0.2, writeback: 0.3, ..Faults::default() }),
            3 => Some(Faults { open_fail: 0.2, eio_sync: 0.1, ..Faults::default() }),
            _ => None,
        };
        h.step_with_faults(op, crash_at, faults)?;
    }
    h.set_persist(persist(&mut u));
    h.final_check()
}

/// What a crash keeps: the input's choice, or a random choice per crash.
fn persist(u: &mut In) -> Option<Persist> {
    match u.below(4) {
        0 => Some(Persist::Nothing),
        1 => Some(Persist::Everything),
        2 => Some(Persist::Random),
        _ => None,
    }
}

fn next_op(u: &mut In, h: &Harness) -> Op {
    let has_dict = h.fs.kind(&store_path().join("dict.zr")).ok().flatten().is_some();
    let len = h.model.len() as u64;
    match u.below(16) {
        0..=5 => {
            let n = 1 + u.below(12) as usize;
            let fixed = u.bool();
            // Records past zstd's 128 KiB block are rare: their bytes are
            // most of an input's time (every check decodes every record).
            let size = |u: &mut In| match u.below(16) {
                0 => 0,
                1 if u.below(4) == 0 => u.upto(300_000),
                1 => u.upto(20_000),
                _ => u.upto(1500),
            };
            let fixed_len = size(u);
            let records = (0..n)
                .map(|_| {
                    let len = if fixed { fixed_len } else { size(u) };
                    u.content(len)
                })
                .collect();
            Op::Append { codec: u.below(3) as u8, records, fixed }
        }
        6 if !has_dict => Op::TrainDict,
        6 | 10 => Op::Compact,
        11 => Op::CompactWith(match u.below(3) {
            0 => CompactOptions { repack: true, ..CompactOptions::default() },
            _ => CompactOptions { max_bytes: Some(u.upto(1 << 16) as u64), repack: false },
        }),
        7..=9 => Op::Delete((0..1 + u.below(8)).map(|_| pick(u, len)).collect()),
        12 | 13 => Op::Gather((0..u.below(17)).map(|_| pick(u, len)).collect()),
        14 => Op::Reopen,
        _ => Op::Crash,
    }
}

/// An index (the harness takes it modulo the store's length): often one of
/// the last records, which a swap-with-last delete treats specially.
fn pick(u: &mut In, len: u64) -> u64 {
    if u.below(4) == 0 { len.saturating_sub(1 + u.below(3)) } else { u64::from(u.u16()) }
}
