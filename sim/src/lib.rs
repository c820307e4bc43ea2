//! loaderx-sim: a deterministic crash simulator for the loaderx store.
//!
//! [`fs::SimFs`] implements the store's I/O boundary in memory with power
//! loss as the Linux page cache produces it; [`workload`] drives the real
//! store code over it with random operations, crashes and faults, and checks
//! every recovered state against a model; [`exhaustive`] crashes short
//! workloads at every I/O operation; [`point`] arms crashes and faults at
//! operations chosen by what they are, and [`scenarios`] uses them to rebuild
//! each past finding as a fixed run; [`sharded`] crashes sharded-dataset
//! writes and their shard rollovers at every I/O operation, [`table`] a
//! table's creates, appends and commits; [`campaign`] runs seeds on several
//! threads and prints the summary line. See `docs/simulation.md`.

pub mod adopt;
pub mod campaign;
pub mod exhaustive;
pub mod fs;
#[cfg(feature = "import")]
pub mod import;
pub mod point;
pub mod rng;
pub mod scenarios;
pub mod sharded;
pub mod table;
mod trace;
pub mod workload;
