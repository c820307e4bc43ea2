//! The `Table` workload: rows appended to every column of a three-column
//! table (fixed, ragged and text, each column sharded every
//! [`TABLE_SHARD_ROWS`] rows) and committed with a mark
//! (`docs/crash-safety.md`, "Table commit", K0-K2); some appended and
//! abandoned: the writer dropped before its commit and opened again, which
//! cuts every column back to the committed rows (K3), across shards.
//!
//! A row's model is its four values, each after its length
//! ([`encode_row`]); a state's model is the committed rows and the mark of
//! the last commit.

use crate::check::verify;
use crate::workload::{Op, options};
use loaderx::Codec;
use loaderx::Zrecord;
use loaderx::dataset::{DType, Dataset, RaggedDataset, WriteOptions, shard_dir};
use loaderx::format::column_dir_name;
use loaderx::table::{ColumnSpec, ColumnType, Table, TableColumn, TableWriter, Values};
use loaderx_sim::rng::Rng;
use loaderx_sim::workload::record;
use std::path::Path;

/// Rows per shard of each column: most commits roll a column over.
pub const TABLE_SHARD_ROWS: u64 = 12;
/// Bytes of a row of the fixed column (`<u4[4]`).
const LABEL_BYTES: usize = 16;
/// The mark the check's later commit records.
const LATER_MARK: &str = "after the crash";

/// One row of the table: a value per column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The fixed column's value, [`LABEL_BYTES`] bytes.
    pub label: Vec<u8>,
    /// The ragged column's value: whole `<i4` items, up to 20 KB.
    pub tokens: Vec<u8>,
    /// The text column's value (UTF-8).
    pub text: Vec<u8>,
}

/// The model of a row: each value after its length (u32, little-endian),
/// in column order.
pub fn encode_row(values: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    for v in values {
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
        out.extend_from_slice(v);
    }
    out
}

impl Row {
    /// A random row: up to 750 tokens (now and then up to 5,000), a line
    /// of text with a two-byte character now and then.
    pub fn random(rng: &mut Rng) -> Row {
        let tokens_max = if rng.chance(0.2) { 5000 } else { 750 };
        let mut text = Vec::new();
        for _ in 0..rng.below(120) {
            if rng.chance(0.05) {
                text.extend_from_slice("é".as_bytes());
            } else {
                text.push(b'a' + rng.below(26) as u8);
            }
        }
        let tokens = 4 * rng.below(tokens_max) as usize;
        Row { label: record(rng, LABEL_BYTES), tokens: record(rng, tokens), text }
    }

    /// The row's model.
    pub fn encode(&self) -> Vec<u8> {
        encode_row(&[&self.label, &self.tokens, &self.text])
    }
}

/// The table's columns: a fixed `<u4[4]` and a ragged `<i4` (raw, the
/// writer's codec), and a text column in zstd. (A bytes column is a text
/// column without the UTF-8 check: the same dataset.)
pub fn table_columns() -> Vec<ColumnSpec> {
    let dtype = |d| DType::parse(d).expect("a dtype");
    vec![
        ColumnSpec::fixed("label", dtype("<u4"), &[4]),
        ColumnSpec::ragged("tokens", dtype("<i4"), &[]),
        ColumnSpec::utf8("text").with_codec(Codec::Zstd),
    ]
}

/// The table's write options: raw, [`TABLE_SHARD_ROWS`] rows per shard,
/// the workloads' store options.
pub fn table_options() -> WriteOptions {
    WriteOptions { shard_records: Some(TABLE_SHARD_ROWS), store: options(), ..WriteOptions::codec(Codec::Raw) }
}

/// The operations of a `Table` workload: `CreateTable`, then `count`
/// appends of 1 or 2 batches of 1 to 5 rows, the middle one and one in
/// five of the others abandoned, the rest committed with the mark `op-K`
/// (K the operation's number).
pub fn table_ops(rng: &mut Rng, count: usize) -> Vec<Op> {
    let mut out = vec![Op::CreateTable];
    for k in 0..count {
        let batches =
            (0..1 + rng.below(2)).map(|_| (0..1 + rng.below(5)).map(|_| Row::random(rng)).collect()).collect();
        let abandoned = rng.chance(0.2) || k == count / 2;
        let mark = (!abandoned).then(|| format!("op-{}", k + 2));
        out.push(Op::AppendTable { batches, mark });
    }
    out
}

/// The mark the table holds after each prefix of `ops` (`marks[0]`: no
/// table yet).
pub fn marks(ops: &[Op]) -> Vec<Option<String>> {
    let mut out = vec![None];
    for op in ops {
        let before = out.last().cloned().expect("one mark");
        out.push(match op {
            Op::AppendTable { mark: Some(m), .. } => Some(m.clone()),
            _ => before,
        });
    }
    out
}

/// Appends `batches` through `writer`, each batch one `append`.
pub fn append_batches(writer: &mut TableWriter, batches: &[Vec<Row>]) -> Result<(), String> {
    for rows in batches {
        let labels: Vec<u8> = rows.iter().flat_map(|r| r.label.iter().copied()).collect();
        let column = |f: fn(&Row) -> &[u8]| rows.iter().map(f).collect::<Vec<&[u8]>>();
        let (tokens, texts) = (column(|r| &r.tokens), column(|r| &r.text));
        let values = [Values::Fixed(&labels), Values::Items(&tokens), Values::Items(&texts)];
        writer.append(&values).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// What a reader opening the table finds: its rows' models and its mark.
pub fn table_rows(table: &Table) -> Result<(Vec<Vec<u8>>, Option<String>), String> {
    let all: Vec<u64> = (0..table.rows()).collect();
    let mut columns: Vec<Vec<Vec<u8>>> = Vec::new();
    for (name, _, column) in table.columns() {
        let read = |e: &dyn std::fmt::Display| format!("column {name}: read failed: {e}");
        columns.push(match column {
            TableColumn::Fixed(d) => {
                let mut bytes = vec![0u8; all.len() * d.row_bytes()];
                d.gather_bytes(&all, &mut bytes).map_err(|e| read(&e))?;
                bytes.chunks(d.row_bytes()).map(<[u8]>::to_vec).collect()
            }
            TableColumn::Ragged(d) => {
                let batch = d.gather(&all).map_err(|e| read(&e))?;
                (0..all.len()).map(|k| batch.record(k).unwrap_or_default().to_vec()).collect()
            }
        });
    }
    let rows =
        (0..all.len()).map(|k| encode_row(&columns.iter().map(|c| c[k].as_slice()).collect::<Vec<_>>())).collect();
    Ok((rows, table.mark().map(str::to_string)))
}

/// The check's recovery of a table found with `rows` committed rows (or
/// none, its creation in flight): the writer's open, which cuts every
/// column back to the rows (K3); every column's length and every shard's
/// store verified; then a later append and commit, read back.
pub fn recover_table(dir: &Path, found: bool, rows: u64) -> Result<(), String> {
    let writer = match found {
        true => TableWriter::open(dir, &table_options()).map_err(|e| format!("the writer's open failed: {e}"))?,
        false => TableWriter::create(dir, &table_columns(), &table_options())
            .map_err(|e| format!("a create after a crashed one failed: {e}"))?,
    };
    drop(writer);
    for (k, spec) in table_columns().iter().enumerate() {
        verify_column(&dir.join(column_dir_name(k)), spec.kind, rows)
            .map_err(|e| format!("column {}: {e}", spec.name))?;
    }
    later_commit(dir, rows)
}

/// A column of `rows` rows whose every shard's store opens, recovers and
/// verifies clean.
fn verify_column(dir: &Path, kind: ColumnType, rows: u64) -> Result<(), String> {
    let (len, shards) = match kind {
        ColumnType::Fixed => Dataset::open(dir).map(|d| (d.len(), d.shards())),
        _ => RaggedDataset::open(dir).map(|d| (d.len(), d.shards())),
    }
    .map_err(|e| format!("open failed: {e}"))?;
    if len != rows {
        return Err(format!("{len} rows after the writer's open, not the committed {rows}"));
    }
    for k in 0..shards {
        let store = Zrecord::open_with(shard_dir(dir, k), options()).map_err(|e| format!("shard {k}: open: {e}"))?;
        verify(&store).map_err(|e| format!("shard {k}: {e}"))?;
    }
    Ok(())
}

/// Appends and commits one row after the `rows` found, and reads it back
/// with its mark.
fn later_commit(dir: &Path, rows: u64) -> Result<(), String> {
    let row = Row { label: vec![7; LABEL_BYTES], tokens: vec![1; 8], text: b"later".to_vec() };
    let mut writer = TableWriter::open(dir, &table_options()).map_err(|e| format!("later append: {e}"))?;
    append_batches(&mut writer, std::slice::from_ref(&vec![row.clone()]))?;
    writer.commit_marked(Some(LATER_MARK.into())).map_err(|e| format!("later commit: {e}"))?;
    drop(writer);
    let table = Table::open(dir).map_err(|e| format!("open after the later commit: {e}"))?;
    let (got, mark) = table_rows(&table)?;
    match got.get(rows as usize) {
        _ if got.len() as u64 != rows + 1 => {
            Err(format!("{} rows after the later commit, not {}", got.len(), rows + 1))
        }
        Some(r) if *r == row.encode() && mark.as_deref() == Some(LATER_MARK) => Ok(()),
        _ => Err(format!("the later row or its mark ({mark:?}) reads back otherwise")),
    }
}
