//! The workloads: store operations generated from a seed, their model, and
//! their execution through the store's public API on a real directory.
//!
//! Operation 1 creates the store; the operations after it are drawn by the
//! kind of workload. The model after `k` acknowledged operations is a
//! `Vec<Vec<u8>>` ([`models`]), the simulator's (`loaderx_sim::workload`):
//! its record bytes, its dictionary and its delete (swap with the last).

use crate::table::{Row, append_batches, table_columns, table_ops, table_options};
use loaderx::dataset::{DType, DatasetAppender, DatasetError, WriteOptions};
use loaderx::io::real::RealFs;
use loaderx::table::TableWriter;
use loaderx::{Codec, CompactOptions, Options, Zrecord};
use loaderx_sim::rng::Rng;
use loaderx_sim::workload::{record, swap_delete, trained_dict};
use std::path::Path;
use std::sync::Arc;

/// Bytes of one append segment in these workloads: small, so that an
/// append writes several segments (and starts their writeback) before its
/// data sync, as the simulator's do.
pub const SEGMENT_BYTES: usize = 64 << 10;
/// The largest record a workload appends.
pub const RECORD_BYTES_MAX: u64 = 96 << 10;
/// Bytes of a row of a `Rollover` workload's dataset (one `u8` column).
pub const ROW_BYTES: usize = 3000;
/// Records per shard of a `Rollover` workload's dataset.
pub const SHARD_RECORDS: u64 = 8;

/// What a workload exercises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Appends: raw, zstd and zstd_dict; fixed and variable lengths;
    /// the dictionary's installation.
    Append,
    /// Appends, then deletes of random batches between appends.
    Delete,
    /// Appends and deletes, then compactions: the fill, the fill with a
    /// byte budget, and the repack.
    Compact,
    /// Appends of fixed rows to a sharded dataset
    /// ([`DatasetAppender`]) of [`SHARD_RECORDS`] records per shard: most
    /// appends roll a shard over, some several.
    Rollover,
    /// Commits of rows to a four-column sharded table, some appended and
    /// abandoned ([`crate::table`]).
    Table,
}

impl Kind {
    /// Every kind, in the order CI runs them.
    pub const ALL: [Kind; 5] = [Kind::Append, Kind::Delete, Kind::Compact, Kind::Rollover, Kind::Table];

    /// The kind's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Append => "append",
            Kind::Delete => "delete",
            Kind::Compact => "compact",
            Kind::Rollover => "rollover",
            Kind::Table => "table",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }
}

/// One store operation.
#[derive(Clone, Debug, PartialEq)]
pub enum Op {
    /// `Zrecord::open_with` of a directory that does not exist yet.
    Create,
    /// `append` (fixed) or `append_var` of these records.
    Append {
        /// The codec asked for.
        codec: Codec,
        /// One record length for all (`append`) or each its own.
        fixed: bool,
        /// The records.
        records: Vec<Vec<u8>>,
    },
    /// `install_dict` of the simulator's dictionary.
    InstallDict,
    /// `delete` of these indices.
    Delete(Vec<u64>),
    /// `compact_with` these options.
    Compact(CompactOptions),
    /// `DatasetAppender::fixed_in` and `finish` of a new sharded dataset.
    CreateDataset,
    /// `DatasetAppender::append_fixed` of these rows.
    AppendRows(Vec<Vec<u8>>),
    /// `TableWriter::create` of the table ([`crate::table::table_columns`]).
    CreateTable,
    /// `TableWriter::append` of each batch, then `commit_marked(mark)`; with
    /// no mark, the writer dropped uncommitted and opened again (K3).
    AppendTable {
        /// The batches, each one `append`.
        batches: Vec<Vec<Row>>,
        /// The commit's mark; `None`: abandoned.
        mark: Option<String>,
    },
}

impl Op {
    /// A short description for reports.
    pub fn describe(&self) -> String {
        match self {
            Op::Create => "create".into(),
            Op::Append { codec, fixed, records } => {
                let bytes: usize = records.iter().map(Vec::len).sum();
                let shape = if *fixed { "fixed" } else { "var" };
                format!("append {} {shape}, {} records, {bytes} bytes", codec.name(), records.len())
            }
            Op::InstallDict => "install_dict".into(),
            Op::Delete(picks) => format!("delete {picks:?}"),
            Op::Compact(CompactOptions { repack: true, .. }) => "compact (repack)".into(),
            Op::Compact(CompactOptions { max_bytes: Some(b), .. }) => format!("compact (fill, at most {b} bytes)"),
            Op::Compact(_) => "compact (fill)".into(),
            Op::CreateDataset => "create a sharded dataset".into(),
            Op::AppendRows(rows) => format!("append {} rows", rows.len()),
            Op::CreateTable => "create a table".into(),
            Op::AppendTable { batches, mark } => {
                let sizes: Vec<usize> = batches.iter().map(Vec::len).collect();
                match mark {
                    Some(m) => format!("append batches of {sizes:?} rows, commit {m:?}"),
                    None => format!("append batches of {sizes:?} rows, abandon"),
                }
            }
        }
    }
}

/// The store's options in a workload.
pub fn options() -> Options {
    Options { append_segment_bytes: SEGMENT_BYTES, ..Options::default() }
}

fn append_op(rng: &mut Rng, has_dict: bool) -> Op {
    let n = 1 + rng.below(24) as usize;
    let fixed = rng.chance(0.3);
    let size_max = if rng.chance(0.2) { RECORD_BYTES_MAX } else { 4096 };
    let fixed_len = rng.below(size_max) as usize;
    let records = (0..n)
        .map(|_| {
            let len = if fixed {
                fixed_len
            } else if rng.chance(0.05) {
                0
            } else {
                rng.below(size_max) as usize
            };
            record(rng, len)
        })
        .collect();
    let codecs: &[Codec] =
        if has_dict { &[Codec::Raw, Codec::Zstd, Codec::ZstdDict] } else { &[Codec::Raw, Codec::Zstd] };
    Op::Append { codec: codecs[rng.below(codecs.len() as u64) as usize], fixed, records }
}

fn delete_op(rng: &mut Rng, len: u64) -> Op {
    let n = 1 + rng.below(len.min(8));
    let mut picks: Vec<u64> = (0..n).map(|_| rng.below(len)).collect();
    if rng.chance(0.3) {
        picks.push(len - 1);
    }
    Op::Delete(picks)
}

/// The compactions a `Compact` workload cycles through: the fill, the
/// repack, and the fill with a byte budget.
fn compact_op(rng: &mut Rng, turn: usize) -> Op {
    Op::Compact(match turn % 3 {
        0 => CompactOptions::default(),
        1 => CompactOptions { repack: true, ..CompactOptions::default() },
        _ => CompactOptions { max_bytes: Some(rng.below(100_000)), repack: false },
    })
}

/// The operations of workload `kind` for `seed`: `Create`, then `count`
/// more. `Append` installs the dictionary halfway (zstd_dict appends
/// follow); `Delete` and `Compact` append for their first third, then
/// `Delete` mixes appends and deletes, and `Compact` alternates a delete
/// with a compaction (the fill, the repack, a budgeted fill, in turn).
pub fn ops(kind: Kind, seed: u64, count: usize) -> Vec<Op> {
    let mut rng = Rng::new(seed ^ (kind as u64) << 56);
    if kind == Kind::Table {
        return table_ops(&mut rng, count);
    }
    if kind == Kind::Rollover {
        let rows = |rng: &mut Rng| (0..1 + rng.below(12)).map(|_| record(rng, ROW_BYTES)).collect();
        return [Op::CreateDataset].into_iter().chain((0..count).map(|_| Op::AppendRows(rows(&mut rng)))).collect();
    }
    let mut out = vec![Op::Create];
    let (mut len, mut has_dict) = (0u64, false);
    let warmup = match kind {
        Kind::Append | Kind::Rollover | Kind::Table => 0,
        Kind::Delete | Kind::Compact => count.div_ceil(3),
    };
    for k in 0..count {
        let op = match kind {
            Kind::Append if k == count / 2 => Op::InstallDict,
            _ if k < warmup || len == 0 => append_op(&mut rng, has_dict),
            Kind::Append => append_op(&mut rng, has_dict),
            Kind::Delete if rng.chance(0.5) => append_op(&mut rng, has_dict),
            Kind::Delete => delete_op(&mut rng, len),
            Kind::Compact if (k - warmup) % 2 == 0 => delete_op(&mut rng, len),
            Kind::Compact => compact_op(&mut rng, (k - warmup) / 2),
            Kind::Rollover | Kind::Table => unreachable!("drawn above"),
        };
        match &op {
            Op::Append { records, .. } => len += records.len() as u64,
            Op::Delete(picks) => len -= unique(picks),
            Op::InstallDict => has_dict = true,
            _ => {}
        }
        out.push(op);
    }
    out
}

fn unique(picks: &[u64]) -> u64 {
    let mut p = picks.to_vec();
    p.sort_unstable();
    p.dedup();
    p.len() as u64
}

/// The model after each prefix of `ops`: `models[k]` is the store's
/// records once the first `k` operations are acknowledged (`models[0]`:
/// before the store exists, empty).
pub fn models(ops: &[Op]) -> Vec<Vec<Vec<u8>>> {
    let mut out = vec![Vec::new()];
    for op in ops {
        let before = out.last().expect("one model");
        let after = match op {
            Op::Append { records, .. } | Op::AppendRows(records) => [before.clone(), records.clone()].concat(),
            Op::Delete(picks) => swap_delete(before, picks),
            Op::AppendTable { batches, mark: Some(_) } => {
                [before.clone(), batches.iter().flatten().map(Row::encode).collect()].concat()
            }
            Op::Create
            | Op::InstallDict
            | Op::Compact(_)
            | Op::CreateDataset
            | Op::CreateTable
            | Op::AppendTable { mark: None, .. } => before.clone(),
        };
        out.push(after);
    }
    out
}

/// What a workload writes through: a store, or a dataset's appender.
pub enum Handle {
    /// A store (`Create`).
    Store(Box<Zrecord>),
    /// A sharded dataset open for appending (`CreateDataset`).
    Dataset(Box<DatasetAppender>),
    /// A table's writer (`CreateTable`).
    Table(Box<TableWriter>),
}

/// The options of a `Rollover` workload's dataset.
pub fn dataset_options() -> WriteOptions {
    WriteOptions { shard_records: Some(SHARD_RECORDS), store: options(), ..WriteOptions::codec(Codec::Zstd) }
}

/// Opens the `Rollover` workload's dataset at `dir` to append.
pub fn dataset_appender(dir: &Path) -> Result<DatasetAppender, DatasetError> {
    DatasetAppender::fixed_in(Arc::new(RealFs), dir, DType::parse("|u1")?, &[ROW_BYTES], &dataset_options())
}

/// Runs one operation at `dir` (`handle` is `None` before the creation).
pub fn execute(handle: &mut Option<Handle>, dir: &Path, op: &Op) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    match (op, handle.as_mut()) {
        (Op::Create, _) => {
            *handle = Some(Handle::Store(Box::new(Zrecord::open_with(dir, options()).map_err(|e| err(&e))?)))
        }
        (Op::CreateDataset, _) => {
            let mut appender = dataset_appender(dir).map_err(|e| err(&e))?;
            appender.finish().map_err(|e| err(&e))?;
            *handle = Some(Handle::Dataset(Box::new(appender)));
        }
        (Op::AppendRows(rows), Some(Handle::Dataset(d))) => drop(d.append_fixed(&rows.concat()).map_err(|e| err(&e))?),
        (Op::CreateTable, _) => {
            let writer = TableWriter::create(dir, &table_columns(), &table_options()).map_err(|e| err(&e))?;
            *handle = Some(Handle::Table(Box::new(writer)));
        }
        (Op::AppendTable { batches, mark }, Some(Handle::Table(t))) => {
            append_batches(t, batches)?;
            match mark {
                Some(m) => drop(t.commit_marked(Some(m.clone())).map_err(|e| err(&e))?),
                None => {
                    *handle = None;
                    let writer = TableWriter::open(dir, &table_options()).map_err(|e| err(&e))?;
                    *handle = Some(Handle::Table(Box::new(writer)));
                }
            }
        }
        (op, Some(Handle::Store(s))) => store_op(s, op).map_err(|e| err(&e))?,
        (op, _) => return Err(format!("{} before its creation", op.describe())),
    }
    Ok(())
}

fn store_op(s: &mut Zrecord, op: &Op) -> loaderx::Result<()> {
    match op {
        Op::Append { codec, fixed, records } => {
            let src = records.concat();
            if *fixed {
                s.append(&src, records.len(), records[0].len(), *codec)?;
            } else {
                let lens: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
                let offsets: Vec<u64> =
                    lens.iter().scan(0u64, |at, &l| Some(std::mem::replace(at, *at + u64::from(l)))).collect();
                s.append_var(&src, &offsets, &lens, *codec)?;
            }
        }
        Op::InstallDict => {
            s.install_dict(trained_dict().to_vec())?;
        }
        Op::Delete(picks) => s.delete(picks)?,
        Op::Compact(options) => {
            s.compact_with(*options, |_, _| {})?;
        }
        other => return Err(loaderx::Error::InvalidArgument(format!("{} on a store", other.describe()))),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_seeded_and_deletes_stay_in_range() {
        for kind in Kind::ALL {
            for seed in 0..20 {
                let ops = ops(kind, seed, 16);
                assert_eq!(ops, super::ops(kind, seed, 16));
                let first = match kind {
                    Kind::Rollover => Op::CreateDataset,
                    Kind::Table => Op::CreateTable,
                    _ => Op::Create,
                };
                assert_eq!(ops[0], first);
                let models = models(&ops);
                for (k, op) in ops.iter().enumerate() {
                    if let Op::Delete(picks) = op {
                        assert!(picks.iter().all(|&p| p < models[k].len() as u64), "{kind:?} {seed} op {k}");
                    }
                }
            }
        }
        assert_ne!(ops(Kind::Append, 1, 16), ops(Kind::Append, 2, 16));
    }

    #[test]
    fn a_workload_matches_its_model_on_a_real_directory() {
        let tmp = tempdir();
        for kind in Kind::ALL {
            let dir = tmp.join(kind.name());
            let ops = ops(kind, 5, 12);
            let models = models(&ops);
            let mut handle = None;
            for op in &ops {
                execute(&mut handle, &dir, op).expect("runs");
            }
            drop(handle);
            let got = crate::check::read_records(&dir, kind).expect("reads");
            assert_eq!(&got, models.last().expect("a model"), "{kind:?}");
        }
        std::fs::remove_dir_all(&tmp).expect("cleans up");
    }

    fn tempdir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("loaderx-crashtest-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("creates");
        dir
    }
}
