//! The random workload, the crash-and-recover loop, and the checks against
//! the model (a `Vec<Vec<u8>>` is a perfect model of a record store).

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use loaderx::io::{OpenMode, Vfs};
use loaderx::{Codec, CompactOptions, Error, Options, ReadMode, Zrecord};

use crate::fs::{Faults, Persist, SimFs};
use crate::rng::Rng;

/// Where the simulated store lives.
pub const STORE_DIR: &str = "/data/store.zr";

/// [`Options::append_segment_bytes`] in the simulation.
const SIM_SEGMENT_BYTES: usize = 2048;

/// What a seed runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Store operations per seed.
    pub ops: usize,
    /// Chance that a mutating operation has a crash armed inside it.
    pub crash: f64,
    /// Chance that a recovery has a crash armed inside it.
    pub crash_in_recovery: f64,
    /// Filesystem faults.
    pub faults: Faults,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            ops: 40,
            crash: 0.25,
            crash_in_recovery: 0.2,
            faults: Faults {
                writeback: 0.05,
                eio_sync: 0.01,
                enospc: 0.01,
                short_io: 0.05,
                open_fail: 0.005,
                eio_read: 0.01,
                lying: false,
                windows: false,
            },
        }
    }
}

/// Counters of one run.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    /// Store operations executed.
    pub store_ops: u64,
    /// I/O operations the store made.
    pub io_ops: u64,
    /// Crashes (power losses) injected.
    pub crashes: u64,
    /// Recoveries checked against the model.
    pub states_checked: u64,
    /// Non-crash errors injected and recovered from.
    pub faults_hit: u64,
    /// Batched reads (gathers of records not in memory), and those failed
    /// by an injected EIO.
    pub batched_reads: (u64, u64),
    /// Reads of chunk files opened `O_DIRECT` (`ReadMode::Direct`).
    pub direct_reads: u64,
    /// Deletes and compactions refused while a read-only store (another
    /// process's, on the same filesystem) held the readers' lock.
    pub readers_refused: u64,
}

impl Tally {
    /// Adds another run's counters.
    pub fn add(&mut self, other: &Tally) {
        self.store_ops += other.store_ops;
        self.io_ops += other.io_ops;
        self.crashes += other.crashes;
        self.states_checked += other.states_checked;
        self.faults_hit += other.faults_hit;
        self.batched_reads.0 += other.batched_reads.0;
        self.batched_reads.1 += other.batched_reads.1;
        self.direct_reads += other.direct_reads;
        self.readers_refused += other.readers_refused;
    }
}

/// A store operation.
#[derive(Clone, Debug)]
pub enum Op {
    /// `append` (fixed: all records the same size) or `append_var`.
    Append {
        /// Codec tag 0, 1, 2.
        codec: u8,
        /// The records.
        records: Vec<Vec<u8>>,
        /// One fixed-size call.
        fixed: bool,
    },
    /// `train_dict` on the given samples.
    TrainDict,
    /// `delete` of these indices.
    Delete(Vec<u64>),
    /// `compact`: the fill.
    Compact,
    /// `compact_with`: the repack, or the fill with a byte budget.
    CompactWith(CompactOptions),
    /// `gather` of these indices, checked.
    Gather(Vec<u64>),
    /// Close and open again.
    Reopen,
    /// Power loss between operations.
    Crash,
}

impl Op {
    fn mutates(&self) -> bool {
        matches!(self, Op::Append { .. } | Op::TrainDict | Op::Delete(_) | Op::Compact | Op::CompactWith(_))
    }
    fn describe(&self) -> String {
        match self {
            Op::Append { codec, records, fixed } => {
                let sizes: Vec<usize> = records.iter().map(Vec::len).collect();
                format!("append{} codec {codec} sizes {sizes:?}", if *fixed { " (fixed)" } else { "" })
            }
            other => format!("{other:?}"),
        }
    }
}

/// A broken invariant.
#[derive(Debug)]
pub struct Violation {
    /// What broke.
    pub what: String,
    /// The operation trace up to it.
    pub trace: Vec<String>,
}

/// Deterministic record bytes: compressible, varied.
pub fn record(rng: &mut Rng, len: usize) -> Vec<u8> {
    let base = rng.next_u64() as u8;
    let mut x = rng.next_u64() | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            base.wrapping_add((i / 7) as u8).wrapping_add((x % 3) as u8)
        })
        .collect()
}

/// The model of `delete`: each index (largest first, duplicates once)
/// swapped with the last record and removed.
pub fn swap_delete(model: &[Vec<u8>], indices: &[u64]) -> Vec<Vec<u8>> {
    let mut out = model.to_vec();
    let mut doomed = indices.to_vec();
    doomed.sort_unstable_by(|a, b| b.cmp(a));
    doomed.dedup();
    for d in doomed {
        out.swap_remove(d as usize);
    }
    out
}

/// One simulated run: the filesystem, the store over it, and the model.
pub struct Harness {
    /// The filesystem.
    pub fs: SimFs,
    vfs: Arc<dyn Vfs>,
    /// The run's generator (workload and crash choices).
    pub rng: Rng,
    store: Option<Zrecord>,
    /// What the store must hold.
    pub model: Vec<Vec<u8>>,
    settings: Settings,
    /// Counters.
    pub tally: Tally,
    /// A wrong answer the last operation gave (checked after it returns).
    mismatch: Option<String>,
    /// Exhaustive mode: one crash point armed for the whole run, and what
    /// the crash keeps.
    global_crash: bool,
    persist: Option<Persist>,
    /// The harness wrote the header past the checksums, as another writer
    /// would: their seal is broken until a cover finishes.
    unsealed: bool,
}

type Check<T> = Result<T, Violation>;

impl Harness {
    /// A fresh filesystem for `seed`, with the store created on it.
    pub fn new(seed: u64, settings: Settings) -> Check<Harness> {
        Harness::with_crash(seed, settings, None, None)
    }

    /// As [`Harness::new`], with one crash armed at absolute I/O operation
    /// `crash_at` for the whole run (store creation included), recovered
    /// with `persist`.
    pub fn with_crash(
        seed: u64,
        settings: Settings,
        crash_at: Option<u64>,
        persist: Option<Persist>,
    ) -> Check<Harness> {
        Harness::prepared(seed, settings, crash_at, persist, |_| {})
    }

    /// As [`Harness::with_crash`], with `prepare` run on the empty
    /// filesystem before the store is created (to arm fault points, see
    /// [`SimFs::arm`]).
    pub fn prepared(
        seed: u64,
        settings: Settings,
        crash_at: Option<u64>,
        persist: Option<Persist>,
        prepare: impl FnOnce(&SimFs),
    ) -> Check<Harness> {
        let mut rng = Rng::new(seed);
        let fs = SimFs::new(rng.fork(), settings.faults.clone());
        let vfs: Arc<dyn Vfs> = Arc::new(fs.clone());
        let mut h = Harness {
            fs,
            vfs,
            rng,
            store: None,
            model: Vec::new(),
            settings,
            tally: Tally::default(),
            mismatch: None,
            unsealed: false,
            global_crash: crash_at.is_some(),
            persist,
        };
        h.fs.arm_crash(crash_at);
        prepare(&h.fs);
        h.reopen(false)?;
        Ok(h)
    }

    fn path() -> PathBuf {
        PathBuf::from(STORE_DIR)
    }

    /// The store's options: segments of a few records, so that an append
    /// spans several (each written, then its writeback started, before the
    /// next) and a crash can fall between them. One open in four reads
    /// `O_DIRECT` (aligned reads, which the simulated file checks), the
    /// others choose by residency.
    fn options(&mut self) -> Options {
        let read_mode = if self.rng.chance(0.25) { ReadMode::Direct } else { ReadMode::Auto };
        Options { append_segment_bytes: SIM_SEGMENT_BYTES, read_mode, ..Options::default() }
    }

    fn violation(&self, what: impl Into<String>) -> Violation {
        Violation { what: what.into(), trace: self.fs.trace() }
    }

    fn store(&self) -> &Zrecord {
        self.store.as_ref().expect("open")
    }

    /// Moves the store's frontier to a few KiB before the end of chunk 0, so
    /// that the next appends roll over to chunk 1 (chunk files are sparse).
    pub fn near_rollover(&mut self) -> Check<()> {
        self.store = None;
        let faults = self.fs.faults();
        self.fs.set_faults(Faults::default());
        let tail = (1u64 << 32) - 3000 - self.rng.below(2000);
        self.unsealed = true;
        let meta = self.vfs.open(&Self::path().join("meta.zr"), OpenMode::Write).and_then(|f| {
            loaderx::io::write_all_at(&*f, &(tail as u32).to_le_bytes(), 8)?;
            f.sync(loaderx::io::SyncKind::All)
        });
        self.fs.set_faults(faults);
        if let Err(e) = meta {
            if self.fs.crashed() {
                self.tally.crashes += 1;
                self.reopen(true)?;
                return self.cover();
            }
            return Err(self.violation(format!("could not move the frontier: {e}")));
        }
        self.fs.log(format!("frontier moved to {tail}"));
        self.reopen(false)?;
        self.cover()
    }

    /// Covers the store with checksums again (`loaderx checksum`), after the
    /// harness wrote its header as another writer would; rerun after a
    /// crash, as a user would, until it finishes.
    fn cover(&mut self) -> Check<()> {
        for _attempt in 0..200 {
            let faults = self.fs.faults();
            self.fs.set_faults(Faults::default());
            let covered = self.store.as_mut().expect("open").cover();
            self.fs.set_faults(faults);
            match covered {
                Ok(_) => {
                    self.unsealed = false;
                    return self.integrity();
                }
                Err(_) if self.fs.crashed() => {
                    self.tally.crashes += 1;
                    self.reopen(true)?;
                }
                Err(e) => return Err(self.violation(format!("could not cover the store: {e}"))),
            }
        }
        Err(self.violation("could not cover the store in 200 attempts"))
    }

    /// Opens the store (after a crash: reboots first), retrying through
    /// injected faults and crashes during recovery.
    fn reopen(&mut self, after_crash: bool) -> Check<()> {
        self.store = None;
        let mut crashed = after_crash;
        for _attempt in 0..200 {
            if crashed {
                let persist = self.persist.unwrap_or_else(|| match self.rng.below(6) {
                    0 => Persist::Nothing,
                    1 => Persist::Everything,
                    _ => Persist::Random,
                });
                self.fs.reboot(persist);
                if self.rng.chance(self.settings.crash_in_recovery) {
                    let at = self.fs.ops() + 1 + self.rng.below(12);
                    self.fs.arm_crash(Some(at));
                }
            }
            let opened = Zrecord::open_in(self.vfs.clone(), &Self::path(), self.options());
            if !self.global_crash {
                self.fs.arm_crash(None);
            }
            match opened {
                Ok(store) => {
                    self.store = Some(store);
                    return self.integrity();
                }
                Err(_) if self.fs.crashed() => {
                    self.tally.crashes += 1;
                    crashed = true;
                }
                Err(e) if is_injected(&e) => {
                    self.tally.faults_hit += 1;
                    crashed = false;
                }
                Err(e) => return Err(self.violation(format!("open failed: {e}"))),
            }
        }
        Err(self.violation("could not open the store in 200 attempts"))
    }

    /// The integrity walk: `verify` finds nothing, every record is covered
    /// by its checksum, and no read ever ran past the end of a file.
    fn integrity(&mut self) -> Check<()> {
        let faults = self.fs.faults();
        self.fs.set_faults(Faults::default());
        let report = self.store().verify();
        self.fs.set_faults(faults);
        let summed = self.store().filesystem().kind(&self.store().path().join(loaderx::format::SUMS_FILE));
        match report {
            // Every record this crate wrote carries its checksum, and the seal
            // holds, after any crash.
            Ok(r)
                if r.is_ok() && (r.unchecked > 0 || !(r.sealed || self.unsealed)) && matches!(summed, Ok(Some(_))) =>
            {
                let (unchecked, sealed) = (r.unchecked, r.sealed);
                return Err(
                    self.violation(format!("integrity: {unchecked} records without a checksum, sealed {sealed}"))
                );
            }
            Ok(r) if r.is_ok() => {}
            Ok(r) => {
                let problems: Vec<String> = r.problems.iter().map(ToString::to_string).collect();
                return Err(self.violation(format!("integrity: {problems:?}")));
            }
            Err(e) => return Err(self.violation(format!("verify failed: {e}"))),
        }
        if let Some(what) = self.fs.fault_past_eof() {
            return Err(self.violation(format!("the store {what}")));
        }
        if let Some(what) = self.fs.bytes_past_eof() {
            return Err(self.violation(format!("simulator: {what}")));
        }
        Ok(())
    }

    /// Everything the store holds, read with faults off.
    fn contents(&mut self) -> Check<Vec<Vec<u8>>> {
        let faults = self.fs.faults();
        self.fs.set_faults(Faults::default());
        let store = self.store();
        let read: Result<Vec<Vec<u8>>, Error> = (0..u64::from(store.len())).map(|i| store.get(i)).collect();
        self.fs.set_faults(faults);
        read.map_err(|e| self.violation(format!("read back failed: {e}")))
    }

    /// A random operation suited to the current state.
    pub fn random_op(&mut self) -> Op {
        let len = self.model.len() as u64;
        let has_dict = self.store().has_dict();
        match self.rng.below(20) {
            0..=7 => {
                let n = 1 + self.rng.below(12) as usize;
                let fixed = self.rng.chance(0.4);
                let fixed_len = self.rng.below(600) as usize;
                let records = (0..n)
                    .map(|_| {
                        let len = if fixed {
                            fixed_len
                        } else if self.rng.chance(0.1) {
                            0
                        } else {
                            self.rng.below(1500) as usize
                        };
                        record(&mut self.rng, len)
                    })
                    .collect();
                let codec = if has_dict { self.rng.below(3) } else { self.rng.below(2) } as u8;
                Op::Append { codec, records, fixed }
            }
            8 if !has_dict => Op::TrainDict,
            8..=11 if len > 0 => {
                let n = 1 + self.rng.below(len.min(8));
                let mut picks: Vec<u64> = (0..n).map(|_| self.rng.below(len)).collect();
                if self.rng.chance(0.3) {
                    picks.push(len - 1);
                }
                if self.rng.chance(0.3) {
                    picks.push(picks[0]);
                }
                Op::Delete(picks)
            }
            12 => Op::Compact,
            13 => Op::CompactWith(CompactOptions { repack: true, ..CompactOptions::default() }),
            14 => Op::CompactWith(CompactOptions { max_bytes: Some(self.rng.below(20_000)), repack: false }),
            15..=16 if len > 0 => Op::Gather((0..1 + self.rng.below(16)).map(|_| self.rng.below(len)).collect()),
            17 => Op::Reopen,
            18 => Op::Crash,
            _ => Op::Gather(Vec::new()),
        }
    }

    /// Runs `op` (with a crash armed inside it with the settings' chance)
    /// and checks the outcome.
    pub fn step(&mut self, op: Op) -> Check<()> {
        let arm = op.mutates() && self.rng.chance(self.settings.crash);
        let at = arm.then(|| self.fs.ops() + 1 + self.rng.below(40));
        self.step_with_crash(op, at)
    }

    /// Runs `op` with a crash armed at absolute I/O operation `crash_at`.
    pub fn step_with_crash(&mut self, op: Op, crash_at: Option<u64>) -> Check<()> {
        self.step_with_faults(op, crash_at, None)
    }

    /// What later crashes keep (`None`: a random choice per crash, the
    /// default). The fuzzer's `ops` target chooses it per crash.
    pub fn set_persist(&mut self, persist: Option<Persist>) {
        self.persist = persist;
    }

    /// As [`Harness::step_with_crash`], with `faults` in force while the
    /// operation itself runs (`None`: the settings' faults); the recovery
    /// that follows a failure runs with the settings' faults again. The
    /// fuzzer's `ops` target injects sync failures into one operation so.
    pub fn step_with_faults(&mut self, op: Op, crash_at: Option<u64>, faults: Option<Faults>) -> Check<()> {
        // Indices planned for a longer store (a crash may have undone an
        // append) are taken modulo the length.
        let len = self.model.len() as u64;
        let op = match op {
            Op::Delete(_) | Op::Gather(_) if len == 0 => return Ok(()),
            Op::Delete(picks) => Op::Delete(picks.iter().map(|p| p % len).collect()),
            Op::Gather(picks) => Op::Gather(picks.iter().map(|p| p % len).collect()),
            other => other,
        };
        self.tally.store_ops += 1;
        self.fs.log(format!("op {}", op.describe()));
        let before = self.model.clone();
        let after = match &op {
            Op::Append { records, .. } => [before.clone(), records.clone()].concat(),
            Op::Delete(picks) => swap_delete(&before, picks),
            _ => before.clone(),
        };
        match &op {
            Op::Reopen => {
                self.reopen(false)?;
                return self.expect_exactly(&after);
            }
            Op::Crash => {
                self.fs.crash_now();
                self.tally.crashes += 1;
                self.reopen(true)?;
                return self.expect_exactly(&after);
            }
            _ => {}
        }
        if matches!(op, Op::Delete(_) | Op::Compact) && !self.global_crash && self.rng.chance(0.2) {
            self.refused_while_read(&op)?;
        }
        if !self.global_crash {
            self.fs.arm_crash(crash_at);
        }
        let saved = faults.map(|f| {
            let saved = self.fs.faults();
            self.fs.set_faults(f);
            saved
        });
        let result = self.execute(&op);
        if let Some(saved) = saved {
            self.fs.set_faults(saved);
        }
        if !self.global_crash {
            self.fs.arm_crash(None);
        }
        if let Some(what) = self.mismatch.take() {
            return Err(self.violation(what));
        }
        match result {
            Ok(()) => {
                self.model = after;
                self.check_sample()
            }
            Err(e) => self.after_failure(&op, e, before, after),
        }
    }

    fn execute(&mut self, op: &Op) -> Result<(), Error> {
        let expect_first = self.model.len() as u64;
        let store = self.store.as_mut().expect("open");
        match op {
            Op::Append { codec, records, fixed } => {
                let mut codec = [Codec::Raw, Codec::Zstd, Codec::ZstdDict][usize::from(*codec)];
                if codec == Codec::ZstdDict && !store.has_dict() {
                    codec = Codec::Zstd; // the dictionary was lost with a crash in train_dict
                }
                let src = records.concat();
                let first = if *fixed {
                    let len = records[0].len();
                    store.append(&src, records.len(), len, codec)?
                } else {
                    let mut offsets = Vec::new();
                    let mut at = 0u64;
                    for r in records {
                        offsets.push(at);
                        at += r.len() as u64;
                    }
                    let lens: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
                    store.append_var(&src, &offsets, &lens, codec)?
                };
                if first != expect_first {
                    self.mismatch = Some(format!("append returned first index {first}, expected {expect_first}"));
                }
            }
            Op::TrainDict => {
                // What `train_dict` does: its samples are fixed, so the
                // training (zstd's pure computation, most of an input's
                // time in the `ops` fuzz target) runs once per process.
                store.install_dict(trained_dict().to_vec())?;
            }
            Op::Delete(picks) => store.delete(picks)?,
            Op::Compact => {
                store.compact()?;
            }
            Op::CompactWith(options) => {
                store.compact_with(*options, |_, _| {})?;
            }
            Op::Gather(indices) => {
                let mut lens = vec![0u32; indices.len()];
                store.lengths(indices, &mut lens)?;
                let mut offsets = Vec::new();
                let mut at = 0u64;
                for &l in &lens {
                    offsets.push(at);
                    at += u64::from(l);
                }
                let mut dst = vec![0u8; at as usize];
                store.gather_var(indices, &mut dst, &offsets, &lens)?;
                for (k, &i) in indices.iter().enumerate() {
                    let got = &dst[offsets[k] as usize..][..lens[k] as usize];
                    if got != &self.model[i as usize][..] {
                        self.mismatch = Some(format!("gather returned wrong bytes for record {i}"));
                    }
                }
            }
            Op::Reopen | Op::Crash => unreachable!("handled by the caller"),
        }
        Ok(())
    }

    /// With a read-only store open beside the writer (another process, on
    /// the same filesystem; faults off), `op`, a delete or a compaction, is
    /// refused with `ReadersOpen` and changes nothing, and the reader reads
    /// the model's records.
    fn refused_while_read(&mut self, op: &Op) -> Check<()> {
        let faults = self.fs.faults();
        self.fs.set_faults(Faults::default());
        let options = Options { read_only: true, ..self.options() };
        let checked = Zrecord::open_in(self.vfs.clone(), &Self::path(), options)
            .map_err(|e| format!("a read-only open beside the writer failed: {e}"))
            .and_then(|reader| {
                if !reader.holds_readers_lock() {
                    return Err("the read-only open holds no readers' lock".to_string());
                }
                match self.execute(op) {
                    Err(Error::ReadersOpen { .. }) => {}
                    other => return Err(format!("{} with a reader open gave {other:?}", op.describe())),
                }
                let len = self.model.len() as u64;
                let index = if len == 0 { None } else { Some(self.rng.below(len)) };
                match index.map(|i| (i, reader.get(i))) {
                    Some((i, Ok(bytes))) if bytes != self.model[i as usize] => {
                        Err(format!("the reader read wrong bytes for record {i}"))
                    }
                    Some((i, Err(e))) => Err(format!("the reader could not read record {i}: {e}")),
                    _ => Ok(()),
                }
            });
        self.fs.set_faults(faults);
        checked.map_err(|what| self.violation(what))?;
        self.tally.readers_refused += 1;
        self.fs.log("  refused while a reader was open".into());
        self.check_sample()
    }

    /// An operation failed (a crash, or an injected fault): recover and
    /// check that the store is exactly as before or exactly as after it.
    fn after_failure(&mut self, op: &Op, error: Error, before: Vec<Vec<u8>>, after: Vec<Vec<u8>>) -> Check<()> {
        let crashed = self.fs.crashed();
        self.fs.log(format!("  failed: {error}"));
        if crashed {
            self.tally.crashes += 1;
        } else {
            if !is_injected(&error) {
                return Err(self.violation(format!("{} failed without an injected fault: {error}", op.describe())));
            }
            self.tally.faults_hit += 1;
            if matches!(&error, Error::Io { op, .. } if op.starts_with("sync")) {
                // Fail-stop: nothing more is accepted until reopened.
                let store = self.store.as_mut().expect("open");
                match store.append(b"x", 1, 1, Codec::Raw) {
                    Err(Error::Poisoned { .. }) => {}
                    other => return Err(self.violation(format!("write after a failed sync gave {other:?}"))),
                }
            }
        }
        self.reopen(crashed)?;
        let observed = self.contents()?;
        if observed == after {
            self.model = after;
        } else if observed == before {
            self.model = before;
        } else {
            return Err(self.violation(format!(
                "after a failed {}: {} records, neither the {} before nor the {} after",
                op.describe(),
                observed.len(),
                before.len(),
                after.len()
            )));
        }
        self.tally.states_checked += 1;
        match op {
            Op::Compact => self.finish_compaction(false)?,
            Op::CompactWith(options) => self.finish_compaction(options.repack)?,
            _ => {}
        }
        Ok(())
    }

    /// Compacting again completes (also when it crashes again): a repack
    /// leaves no reclaimable space beyond the chunk-end slack; a fill
    /// leaves a store it would not change again.
    fn finish_compaction(&mut self, repack: bool) -> Check<()> {
        let options = CompactOptions { repack, ..CompactOptions::default() };
        let mut last = String::new();
        for _ in 0..50 {
            let arm = self.rng.chance(self.settings.crash);
            let at = arm.then(|| self.fs.ops() + 1 + self.rng.below(40));
            if !self.global_crash {
                self.fs.arm_crash(at);
            }
            let result = self.store.as_mut().expect("open").compact_with(options, |_, _| {});
            if !self.global_crash {
                self.fs.arm_crash(None);
            }
            match result {
                Ok(_) => {
                    self.check_compacted(repack)?;
                    let model = self.model.clone();
                    return self.expect_exactly(&model);
                }
                Err(e) => {
                    last = e.to_string();
                    let crashed = self.fs.crashed();
                    if crashed {
                        self.tally.crashes += 1;
                    } else {
                        self.tally.faults_hit += 1;
                    }
                    self.reopen(crashed)?;
                    let model = self.model.clone();
                    self.expect_exactly(&model)?;
                }
            }
        }
        Err(self.violation(format!("compaction did not complete in 50 attempts; the last: {last}")))
    }

    /// What a completed compaction leaves (see [`Harness::finish_compaction`]).
    fn check_compacted(&self, repack: bool) -> Check<()> {
        let stats = self.store().stats().map_err(|e| self.violation(format!("stats: {e}")))?;
        if repack && stats.reclaimable > u64::from(stats.chunks - 1) * (1 << 20) {
            return Err(self.violation(format!("the repack left {stats:?}")));
        }
        let plan =
            self.store().compact_plan(CompactOptions::default()).map_err(|e| self.violation(format!("plan: {e}")))?;
        if !repack && plan.move_bytes > 0 {
            return Err(self.violation(format!("the fill stopped short of its fixed point: {plan:?}")));
        }
        Ok(())
    }

    fn expect_exactly(&mut self, want: &[Vec<u8>]) -> Check<()> {
        let observed = self.contents()?;
        self.tally.states_checked += 1;
        if observed != want {
            let first_diff = observed.iter().zip(want).position(|(a, b)| a != b);
            return Err(self.violation(format!(
                "store holds {} records, the model {} (first difference at {first_diff:?})",
                observed.len(),
                want.len()
            )));
        }
        self.model = want.to_vec();
        Ok(())
    }

    /// A cheap check after a successful operation: length and a few records.
    fn check_sample(&mut self) -> Check<()> {
        if self.store().len() as usize != self.model.len() {
            return Err(self.violation(format!(
                "length {} but the model has {}",
                self.store().len(),
                self.model.len()
            )));
        }
        let len = self.model.len() as u64;
        for _ in 0..3.min(len) {
            let i = self.rng.below(len);
            let faults = self.fs.faults();
            self.fs.set_faults(Faults::default());
            let got = self.store().get(i);
            self.fs.set_faults(faults);
            match got {
                Ok(bytes) if bytes == self.model[i as usize] => {}
                other => return Err(self.violation(format!("record {i} reads {:?}", other.map(|b| b.len())))),
            }
        }
        Ok(())
    }

    /// Closes and reopens, then checks everything against the model.
    pub fn final_check(&mut self) -> Check<()> {
        self.fs.crash_now();
        self.tally.crashes += 1;
        self.reopen(true)?;
        let model = self.model.clone();
        self.expect_exactly(&model)?;
        self.tally.io_ops = self.fs.ops();
        self.tally.batched_reads = self.fs.batched_reads();
        self.tally.direct_reads = self.fs.direct_reads();
        Ok(())
    }
}

/// An error the simulated filesystem injected (not a store bug).
pub fn is_injected(e: &Error) -> bool {
    let text = e.to_string();
    text.contains("injected") || matches!(e, Error::Poisoned { .. })
}

/// Runs one seed of the random workload.
pub fn run_seed(seed: u64, settings: &Settings) -> Result<(Tally, u64), Violation> {
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a one-thread pool");
    pool.install(|| {
        let mut h = Harness::new(seed, settings.clone())?;
        if h.rng.chance(0.3) {
            h.near_rollover()?;
        }
        for _ in 0..settings.ops {
            let op = h.random_op();
            h.step(op)?;
        }
        h.final_check()?;
        Ok((h.tally.clone(), trace_hash(&h.fs.trace())))
    })
}

/// FNV-1a over the trace: the same seed must give the same hash.
pub fn trace_hash(trace: &[String]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for line in trace {
        for b in line.bytes().chain([b'\n']) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// The store directory as a `Path`.
pub fn store_path() -> &'static Path {
    Path::new(STORE_DIR)
}

/// The dictionary `Op::TrainDict` installs: `Zrecord::train_dict_bytes` of
/// 40 fixed samples of 300 bytes, at most 8 KiB, trained once.
pub fn trained_dict() -> &'static [u8] {
    static DICT: OnceLock<Vec<u8>> = OnceLock::new();
    DICT.get_or_init(|| {
        let mut rng = Rng::new(7);
        let samples: Vec<Vec<u8>> = (0..40).map(|_| record(&mut rng, 300)).collect();
        Zrecord::train_dict_bytes(&samples.concat(), &[300; 40], 8 << 10).expect("the fixed samples train")
    })
}
