//! The check of one crash state: the simulator's invariant, on a store
//! that a real kernel recovered (journal replay at mount included).
//!
//! - the store opens with the normal open (a writer's, which recovers);
//! - `verify` finds nothing, and every record is covered by its checksum;
//! - its records are exactly the model after the acknowledged operations,
//!   or, with an operation in flight, exactly the model after it: every
//!   acknowledged operation is there, the one in flight wholly or not at
//!   all, and no record holds bytes that are not its own;
//! - a later append works and reads back.

use crate::replay::Point;
use crate::table::{marks, recover_table, table_rows};
use crate::workload::{Kind, Op, ROW_BYTES, SHARD_RECORDS, dataset_appender, options};
use loaderx::dataset::{Dataset, shard_dir};
use loaderx::table::Table;
use loaderx::{Codec, Zrecord};
use std::path::Path;

/// The record a check appends after recovery (a row's worth for a dataset).
const LATER_RECORD: &[u8] = b"appended after the crash";

/// Checks the store (or the sharded dataset, for a `Rollover` workload) at
/// `dir` against `models` (see [`crate::workload::models`]) for the state
/// `point` describes. `Err` says what is wrong, naming the operations
/// concerned.
pub fn check_state(dir: &Path, ops: &[Op], models: &[Vec<Vec<u8>>], point: &Point) -> Result<(), String> {
    let acked = point.acked.min(ops.len());
    if !dir.exists() {
        return match acked {
            0 => Ok(()), // the creation was in flight
            _ => Err(format!("the store directory is missing after {acked} acknowledged operations")),
        };
    }
    let kind = match ops.first() {
        Some(Op::CreateDataset) => Kind::Rollover,
        Some(Op::CreateTable) => return check_table(dir, ops, models, point),
        _ => Kind::Append,
    };
    let records = match read_records(dir, kind) {
        // A dataset whose creation was in flight may be a directory no
        // reader opens: as if absent, if a writer then appends to it.
        Err(_) if kind == Kind::Rollover && acked == 0 => Vec::new(),
        read => read?,
    };
    let allowed = allowed(point, ops.len());
    let whole = allowed.iter().any(|&k| records == models[k]);
    let partial = kind == Kind::Rollover && allowed.len() == 2 && is_prefix(&records, models, acked);
    if !(whole || partial) {
        return Err(mismatch(&records, ops, models, &allowed));
    }
    later_append(dir, kind, records.len() as u64)
}

/// The models a state may match: the acknowledged operations', and with
/// an operation in flight, the one after it too.
fn allowed(point: &Point, ops: usize) -> Vec<usize> {
    let acked = point.acked.min(ops);
    let mut allowed = vec![acked];
    if point.in_flight && acked < ops {
        allowed.push(acked + 1);
    }
    allowed
}

/// [`check_state`] of a `Table` workload: what a reader sees (the
/// committed rows and the commit's mark) is an allowed model, whatever the
/// columns hold past it; then [`recover_table`].
fn check_table(dir: &Path, ops: &[Op], models: &[Vec<Vec<u8>>], point: &Point) -> Result<(), String> {
    let found = match Table::open(dir) {
        // A table whose creation was in flight may have no commit file yet.
        Err(_) if point.acked == 0 => None,
        Err(e) => return Err(format!("table open failed: {e}")),
        Ok(table) => Some(table_rows(&table)?),
    };
    let (records, mark) = found.clone().unwrap_or_default();
    let (marks, allowed) = (marks(ops), allowed(point, ops.len()));
    if !allowed.iter().any(|&k| records == models[k] && mark == marks[k]) {
        return Err(format!("{} the table's mark: {mark:?}", mismatch(&records, ops, models, &allowed)));
    }
    recover_table(dir, found.is_some(), records.len() as u64)
}

/// A dataset's append that rolls shards over is a sequence of store
/// appends (docs/crash-safety.md, "Shard rollover"): a crash leaves a
/// prefix of its records, at least the records before it.
fn is_prefix(records: &[Vec<u8>], models: &[Vec<Vec<u8>>], acked: usize) -> bool {
    let (before, after) = (&models[acked], &models[acked + 1]);
    (before.len()..=after.len()).contains(&records.len()) && records == &after[..records.len()]
}

/// Opens what is at `dir` with the normal open, checks it (`verify` clean,
/// every record under its checksum; a dataset's sealed shards full) and
/// reads every record (a table's: what a reader sees, [`table_rows`]).
pub fn read_records(dir: &Path, kind: Kind) -> Result<Vec<Vec<u8>>, String> {
    if kind == Kind::Table {
        let table = Table::open(dir).map_err(|e| format!("table open failed: {e}"))?;
        return table_rows(&table).map(|(rows, _)| rows);
    }
    if kind != Kind::Rollover {
        let store = Zrecord::open_with(dir, options()).map_err(|e| format!("open failed: {e}"))?;
        verify(&store)?;
        return (0..u64::from(store.len()))
            .map(|i| store.get(i).map_err(|e| format!("record {i} unreadable: {e}")))
            .collect();
    }
    let dataset = Dataset::open(dir).map_err(|e| format!("dataset open failed: {e}"))?;
    let rows = dataset.len();
    let mut bytes = vec![0u8; rows as usize * ROW_BYTES];
    let all: Vec<u64> = (0..rows).collect();
    dataset.gather_bytes(&all, &mut bytes).map_err(|e| format!("dataset read failed: {e}"))?;
    let shards = dataset.shards();
    drop(dataset);
    for k in 0..shards {
        let store = Zrecord::open_with(shard_dir(dir, k), options()).map_err(|e| format!("shard {k}: open: {e}"))?;
        verify(&store).map_err(|e| format!("shard {k}: {e}"))?;
        if k + 1 < shards && u64::from(store.len()) != SHARD_RECORDS {
            return Err(format!("sealed shard {k} holds {} records, not {SHARD_RECORDS}", store.len()));
        }
    }
    Ok(bytes.chunks(ROW_BYTES).map(<[u8]>::to_vec).collect())
}

pub(crate) fn verify(store: &Zrecord) -> Result<(), String> {
    let report = store.verify().map_err(|e| format!("verify failed: {e}"))?;
    if !report.is_ok() {
        let problems: Vec<String> = report.problems.iter().take(3).map(ToString::to_string).collect();
        return Err(format!("verify: {} problems: {problems:?}", report.problems_total));
    }
    if report.unchecked > 0 {
        return Err(format!("verify: {} records without a checksum", report.unchecked));
    }
    Ok(())
}

/// Appends one record (a row) after the `len` found, and reads it back.
fn later_append(dir: &Path, kind: Kind, len: u64) -> Result<(), String> {
    let (at, got) = if kind == Kind::Rollover {
        let row: Vec<u8> = LATER_RECORD.iter().copied().cycle().take(ROW_BYTES).collect();
        let mut appender = dataset_appender(dir).map_err(|e| format!("later append: {e}"))?;
        appender.append_fixed(&row).map_err(|e| format!("later append: {e}"))?;
        drop(appender);
        let dataset = Dataset::open(dir).map_err(|e| format!("reopen after the later append: {e}"))?;
        let mut got = vec![0u8; ROW_BYTES];
        let read = dataset.gather_bytes(&[len], &mut got).map(|()| got == row);
        (len, read.map_err(|e| e.to_string()))
    } else {
        let store = Zrecord::open_with(dir, options()).map_err(|e| format!("reopen: {e}"))?;
        let at =
            store.append(LATER_RECORD, 1, LATER_RECORD.len(), Codec::Raw).map_err(|e| format!("later append: {e}"))?;
        (at, store.get(at).map(|got| got == LATER_RECORD).map_err(|e| e.to_string()))
    };
    match got {
        Ok(true) if at == len => Ok(()),
        Ok(true) => Err(format!("the later append went to {at}, not {len}")),
        Ok(false) => Err("the later append reads back other bytes".into()),
        Err(e) => Err(format!("the later append does not read back: {e}")),
    }
}

/// What differs between the records found and each model allowed.
fn mismatch(records: &[Vec<u8>], ops: &[Op], models: &[Vec<Vec<u8>>], allowed: &[usize]) -> String {
    let mut out = format!("{} records match no allowed model:", records.len());
    for &k in allowed {
        let want = &models[k];
        let what = match k {
            0 => "before the creation".to_string(),
            _ => format!("after op {k} ({})", ops[k - 1].describe()),
        };
        let first = (0..records.len().max(want.len())).find(|&i| records.get(i) != want.get(i));
        out += &format!(" {what}: {} records, first difference at record {first:?};", want.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::PointKind;
    use crate::workload::{Kind, execute, models, ops};

    fn point(acked: usize, in_flight: bool) -> Point {
        Point { prefix: 0, end: 0, kind: PointKind::Flush, acked, in_flight }
    }

    fn run(dir: &Path, ops: &[Op], upto: usize) {
        let mut handle = None;
        for op in &ops[..upto] {
            execute(&mut handle, dir, op).expect("runs");
        }
    }

    #[test]
    fn the_check_accepts_the_model_and_refuses_others() {
        let tmp = std::env::temp_dir().join(format!("loaderx-crashtest-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let ops = ops(Kind::Delete, 3, 10);
        let models = models(&ops);
        // Every prefix checks against its own count, with or without the next op in flight.
        for upto in [1, 4, 7] {
            let dir = tmp.join(format!("p{upto}"));
            run(&dir, &ops, upto);
            check_state(&dir, &ops, &models, &point(upto, false)).expect("the model");
            // The check appended a record: the store now holds more than any model.
            assert!(check_state(&dir, &ops, &models, &point(upto, true)).is_err());
        }
        let dir = tmp.join("q");
        run(&dir, &ops, 6);
        let lost = (1..6).rev().find(|&k| models[k] != models[6]).expect("a change");
        let err = check_state(&dir, &ops, &models, &point(lost - 1, true)).expect_err("too new");
        assert!(err.contains("match no allowed model"), "{err}");
        check_state(&dir, &ops, &models, &point(5, true)).expect("op 6 in flight, found done");
        // What a lost data sync (A1) leaves: a durable header over a chunk cut short.
        let dir = tmp.join("cut");
        run(&dir, &ops, 3);
        let chunk = std::fs::OpenOptions::new().write(true).open(dir.join("0.zr")).expect("0.zr");
        let len = chunk.metadata().expect("stat").len();
        chunk.set_len(len / 2).expect("cuts");
        let err = check_state(&dir, &ops, &models, &point(3, false)).expect_err("records past the chunk's end");
        assert!(err.contains("past the end of 0.zr"), "{err}");
        assert!(check_state(&tmp.join("absent"), &ops, &models, &point(0, true)).is_ok());
        // A sharded dataset rolled over several times.
        let ops = crate::workload::ops(Kind::Rollover, 4, 8);
        let models = crate::workload::models(&ops);
        for upto in [1, 5, 9] {
            let dir = tmp.join(format!("r{upto}"));
            run(&dir, &ops, upto);
            if upto > 1 {
                assert!(check_state(&dir, &ops, &models, &point(upto - 1, false)).is_err(), "rows too many");
            }
            check_state(&dir, &ops, &models, &point(upto, false)).expect("the model");
        }
        // An append across a rollover cut short: a prefix of its rows.
        let dir = tmp.join("partial");
        run(&dir, &ops, 2);
        let Op::AppendRows(rows) = &ops[2] else { panic!("a rollover workload appends rows") };
        let mut appender = crate::workload::dataset_appender(&dir).expect("opens");
        appender.append_fixed(&rows[..1].concat()).expect("appends");
        drop(appender);
        let err = check_state(&dir, &ops, &models, &point(2, false)).expect_err("nothing in flight");
        assert!(err.contains("match no allowed model"), "{err}");
        check_state(&dir, &ops, &models, &point(2, true)).expect("a prefix of the append in flight");
        let shards = loaderx::dataset::Dataset::open(tmp.join("r9")).expect("opens").shards();
        assert!(shards as u64 > models[9].len() as u64 / SHARD_RECORDS, "{shards} shards");
        assert!(check_state(&tmp.join("absent"), &ops, &models, &point(1, false)).is_err());
        std::fs::remove_dir_all(&tmp).expect("cleans up");
    }

    #[test]
    fn the_check_of_a_table_holds_it_to_its_commits_and_marks() {
        use crate::table::{Row, append_batches, table_options};
        use loaderx::table::TableWriter;
        let tmp = std::env::temp_dir().join(format!("loaderx-crashtest-table-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let ops = ops(Kind::Table, 2, 10);
        let models = models(&ops);
        for upto in [1, 4, 11] {
            let dir = tmp.join(format!("p{upto}"));
            run(&dir, &ops, upto);
            check_state(&dir, &ops, &models, &point(upto, false)).expect("the model");
        }
        assert!(models[11].len() as u64 > 2 * crate::table::TABLE_SHARD_ROWS, "columns rolled over");
        // The next commit's rows, acknowledged but missing.
        let k = (1..10).find(|&k| models[k + 1] != models[k]).expect("a commit");
        let dir = tmp.join("lost");
        run(&dir, &ops, k);
        let err = check_state(&dir, &ops, &models, &point(k + 1, false)).expect_err("a commit lost");
        assert!(err.contains("match no allowed model"), "{err}");
        // Rows appended and not committed (a crash in K0): the reader does
        // not see them, and the writer's open cuts them.
        let dir = tmp.join("tail");
        run(&dir, &ops, k);
        let mut writer = TableWriter::open(&dir, &table_options()).expect("opens");
        let mut rng = loaderx_sim::rng::Rng::new(9);
        append_batches(&mut writer, &[(0..12).map(|_| Row::random(&mut rng)).collect()]).expect("appends");
        drop(writer);
        check_state(&dir, &ops, &models, &point(k, false)).expect("the tail is not committed");
        // The same rows under another mark.
        let dir = tmp.join("mark");
        run(&dir, &ops, k + 1);
        let mut writer = TableWriter::open(&dir, &table_options()).expect("opens");
        writer.commit_marked(Some("another".into())).expect("commits");
        drop(writer);
        let err = check_state(&dir, &ops, &models, &point(k + 1, false)).expect_err("another mark");
        assert!(err.contains("\"another\""), "{err}");
        assert!(check_state(&tmp.join("absent"), &ops, &models, &point(0, true)).is_ok());
        std::fs::remove_dir_all(&tmp).expect("cleans up");
    }
}
