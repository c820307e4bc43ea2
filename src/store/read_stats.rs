//! [`ReadStats`]: what a store's gathers read, by where the bytes came
//! from. A gather takes one path for the whole batch (`batch.rs` picks it):
//! through the chunk mappings, from memory (the page cache), or by
//! positional reads, from the device (or, for a remote store, the
//! network). Each gather adds its bytes and its time, decoding included,
//! to its path's counters: relaxed atomic adds, two clock reads a gather.

// std's atomics, not the `crate::sync` facade: no decision of the store
// reads these counters, so the loom models have nothing to check in them,
// and modelled atomics would only multiply the interleavings they explore.
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::ReadMode;

/// A snapshot of a store's read counters ([`Zrecord::read_stats`](super::Zrecord::read_stats)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Bytes gathered through the mappings (records' decoded bytes).
    pub memory_bytes: u64,
    /// Time in those gathers, decoding included.
    pub memory_time: Duration,
    /// Gathers that took the mapped path.
    pub memory_gathers: u64,
    /// Bytes gathered by positional reads (batched or direct), from the
    /// device or the network.
    pub device_bytes: u64,
    /// Time in those gathers, decoding included.
    pub device_time: Duration,
    /// Gathers that took the batched or direct path.
    pub device_gathers: u64,
}

impl ReadStats {
    /// The sum of two snapshots (of two stores).
    pub fn plus(&self, other: &ReadStats) -> ReadStats {
        ReadStats {
            memory_bytes: self.memory_bytes + other.memory_bytes,
            memory_time: self.memory_time + other.memory_time,
            memory_gathers: self.memory_gathers + other.memory_gathers,
            device_bytes: self.device_bytes + other.device_bytes,
            device_time: self.device_time + other.device_time,
            device_gathers: self.device_gathers + other.device_gathers,
        }
    }

    /// What was read since `earlier` (a snapshot of the same stores).
    pub fn since(&self, earlier: &ReadStats) -> ReadStats {
        ReadStats {
            memory_bytes: self.memory_bytes.saturating_sub(earlier.memory_bytes),
            memory_time: self.memory_time.saturating_sub(earlier.memory_time),
            memory_gathers: self.memory_gathers.saturating_sub(earlier.memory_gathers),
            device_bytes: self.device_bytes.saturating_sub(earlier.device_bytes),
            device_time: self.device_time.saturating_sub(earlier.device_time),
            device_gathers: self.device_gathers.saturating_sub(earlier.device_gathers),
        }
    }
}

/// The live counters behind [`ReadStats`].
#[derive(Debug, Default)]
pub(crate) struct ReadCounters {
    /// Per path (0: memory, 1: device): bytes, nanoseconds, gathers.
    paths: [[AtomicU64; 3]; 2],
}

impl ReadCounters {
    /// A gather of `bytes` on `mode`'s path took `elapsed`.
    pub(crate) fn note(&self, mode: ReadMode, bytes: usize, elapsed: Duration) {
        let path = &self.paths[usize::from(mode != ReadMode::Mapped)];
        path[0].fetch_add(bytes as u64, Relaxed);
        path[1].fetch_add(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX), Relaxed);
        path[2].fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> ReadStats {
        let [memory, device] = &self.paths;
        ReadStats {
            memory_bytes: memory[0].load(Relaxed),
            memory_time: Duration::from_nanos(memory[1].load(Relaxed)),
            memory_gathers: memory[2].load(Relaxed),
            device_bytes: device[0].load(Relaxed),
            device_time: Duration::from_nanos(device[1].load(Relaxed)),
            device_gathers: device[2].load(Relaxed),
        }
    }
}
