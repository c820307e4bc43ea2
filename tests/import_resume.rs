//! Resumption: an import stopped after k commits (its source failing, or
//! its progress callback returning an error) and run again gives exactly
//! the source's rows; a rerun of a finished import adds nothing; another
//! input appends; a Parquet rerun skips by row groups and within one.
#![cfg(feature = "arrow")]

use std::path::Path;
use std::sync::Arc;

use arrow_array::types::Int64Type;
use arrow_array::{ArrayRef, Int64Array, ListArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use loaderx::import::{ImportError, ImportOptions, ParquetSource, Source, import};
use loaderx::table::{Table, TableColumn};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("ids", DataType::new_list(DataType::Int64, true), false),
        Field::new("s", DataType::Utf8, false),
    ]))
}

/// Rows `start..start + n` of the input.
fn batch(start: u64, n: u64) -> RecordBatch {
    let r = start..start + n;
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter_values(r.clone().map(|i| i as i64))),
        Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
            r.clone().map(|i| Some((0..i % 4).map(|j| Some((i * 100 + j) as i64)).collect::<Vec<_>>())),
        )),
        Arc::new(StringArray::from_iter_values(r.map(|i| format!("s{i}")))),
    ];
    RecordBatch::try_new(schema(), arrays).unwrap()
}

/// `batches` batches of `rows` rows; fails with an input error after
/// `fail_after` batches (counted from the first, skipped ones included).
struct Memory {
    name: String,
    rows: u64,
    batches: u64,
    next: u64,
    fail_after: Option<u64>,
}

impl Memory {
    fn new(name: &str, rows: u64, batches: u64, fail_after: Option<u64>) -> Memory {
        Memory { name: name.to_string(), rows, batches, next: 0, fail_after }
    }
}

impl Source for Memory {
    fn schema(&self) -> SchemaRef {
        schema()
    }
    fn fingerprint(&self) -> String {
        format!("memory {} {}x{}", self.name, self.batches, self.rows)
    }
    fn rows_hint(&self) -> Option<u64> {
        Some(self.rows * self.batches)
    }
    fn next_batch(&mut self) -> Result<Option<RecordBatch>, ImportError> {
        if self.fail_after == Some(self.next) {
            return Err(ImportError::InvalidArgument(format!("the input failed at batch {}", self.next)));
        }
        if self.next == self.batches {
            return Ok(None);
        }
        self.next += 1;
        Ok(Some(batch((self.next - 1) * self.rows, self.rows)))
    }
}

fn opts(commit_rows: u64) -> ImportOptions {
    ImportOptions { commit_rows, ..ImportOptions::default() }
}

/// The table's rows as (id, ids, s), checked against the input's.
fn assert_rows(dest: &Path, want: impl Iterator<Item = u64>) {
    let table = Table::open(dest).unwrap();
    let want: Vec<u64> = want.collect();
    assert_eq!(table.rows(), want.len() as u64);
    let all: Vec<u64> = (0..table.rows()).collect();
    let Some(TableColumn::Fixed(id)) = table.column("id") else { panic!() };
    let mut bytes = vec![0u8; all.len() * 8];
    id.gather_bytes(&all, &mut bytes).unwrap();
    let ids: Vec<u64> = bytes.chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u64).collect();
    assert_eq!(ids, want);
    let strings = table.strings("s", &all).unwrap();
    assert_eq!(strings, want.iter().map(|i| format!("s{i}")).collect::<Vec<_>>());
    let Some(TableColumn::Ragged(lists)) = table.column("ids") else { panic!() };
    let gathered = lists.gather(&all).unwrap();
    for (k, i) in want.iter().enumerate() {
        let items: Vec<u8> = (0..i % 4).flat_map(|j| ((i * 100 + j) as i64).to_le_bytes()).collect();
        assert_eq!(gathered.record(k).unwrap(), items.as_slice(), "row {k}");
    }
}

#[test]
fn a_source_failing_after_k_batches_then_a_rerun_gives_exactly_its_rows() {
    for fail_after in [0, 1, 3, 4, 6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("t");
        // Commits every 2 batches of 5 rows: a failure at an odd batch
        // leaves a batch appended and not committed.
        let err =
            import(&mut Memory::new("a", 5, 10, Some(fail_after)), &dest, &opts(10), &mut |_| Ok(())).unwrap_err();
        assert!(err.to_string().contains("failed at batch"), "{err}");
        let committed = if dest.join("table.json").exists() { Table::open(&dest).unwrap().rows() } else { 0 };
        assert_eq!(committed, fail_after / 2 * 10, "fail after {fail_after}");
        let summary = import(&mut Memory::new("a", 5, 10, None), &dest, &opts(10), &mut |_| Ok(())).unwrap();
        assert_eq!((summary.skipped, summary.rows, summary.table_rows), (committed, 50 - committed, 50));
        assert_rows(&dest, 0..50);
    }
}

#[test]
fn a_progress_error_stops_at_the_last_commit_and_reruns_resume_until_done() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t");
    let mut runs = 0;
    loop {
        runs += 1;
        assert!(runs < 20, "the import never finished");
        // Each run stops after its third batch (7 rows each, a commit
        // every 10 rows): some rows appended and not committed each time.
        let mut seen = 0;
        let mut stop = |_: &loaderx::import::Progress| {
            seen += 1;
            if seen == 3 { Err(ImportError::InvalidArgument("stopped".into())) } else { Ok(()) }
        };
        match import(&mut Memory::new("a", 7, 13, None), &dest, &opts(10), &mut stop) {
            Ok(summary) => {
                assert_eq!(summary.table_rows, 91);
                break;
            }
            Err(e) => assert_eq!(e.to_string(), "stopped"),
        }
        let rows = Table::open(&dest).unwrap().rows();
        assert_eq!(rows % 7, 0, "a commit holds whole batches");
    }
    assert!(runs > 3, "the import resumed several times ({runs} runs)");
    assert_rows(&dest, 0..91);
}

#[test]
fn a_finished_import_is_a_no_op_and_another_input_appends() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t");
    let first = import(&mut Memory::new("a", 4, 3, None), &dest, &opts(1000), &mut |_| Ok(())).unwrap();
    assert_eq!((first.rows, first.already_done), (12, false));
    let again = import(&mut Memory::new("a", 4, 3, None), &dest, &opts(1000), &mut |_| Ok(())).unwrap();
    assert_eq!((again.rows, again.table_rows, again.already_done), (0, 12, true));
    let other = import(&mut Memory::new("b", 4, 2, None), &dest, &opts(1000), &mut |_| Ok(())).unwrap();
    assert_eq!((other.rows, other.skipped, other.table_rows), (8, 0, 20));
    assert_rows(&dest, (0..12).chain(0..8));
    // A failure of the second input resumes it, not the first.
    let dest = dir.path().join("u");
    import(&mut Memory::new("a", 4, 3, None), &dest, &opts(4), &mut |_| Ok(())).unwrap();
    import(&mut Memory::new("b", 4, 5, Some(3)), &dest, &opts(4), &mut |_| Ok(())).unwrap_err();
    let resumed = import(&mut Memory::new("b", 4, 5, None), &dest, &opts(4), &mut |_| Ok(())).unwrap();
    assert_eq!((resumed.skipped, resumed.rows, resumed.table_rows), (12, 8, 32));
    assert_rows(&dest, (0..12).chain(0..20));
}

#[test]
fn an_import_into_a_table_of_other_columns_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t");
    import(&mut Memory::new("a", 4, 1, None), &dest, &opts(1000), &mut |_| Ok(())).unwrap();
    let mut o = opts(1000);
    o.columns.rename = vec![("s".into(), "text".into())];
    let err = import(&mut Memory::new("b", 4, 1, None), &dest, &o, &mut |_| Ok(())).unwrap_err();
    assert!(err.to_string().contains("\"text\""), "{err}");
    assert_eq!(Table::open(&dest).unwrap().rows(), 4);
}

#[test]
fn a_parquet_rerun_skips_whole_files_row_groups_and_rows_within_one() {
    let dir = tempfile::tempdir().unwrap();
    for (k, start) in [0u64, 30, 55].into_iter().enumerate() {
        let file = std::fs::File::create(dir.path().join(format!("part-{k}.parquet"))).unwrap();
        let props = parquet::file::properties::WriterProperties::builder().set_max_row_group_row_count(Some(8)).build();
        let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema(), Some(props)).unwrap();
        let n = [30, 25, 17][k];
        writer.write(&batch(start, n)).unwrap();
        writer.close().unwrap();
    }
    let input = [dir.path().to_path_buf()];
    for stop_at in [1, 4, 6, 9, 12] {
        let dest = dir.path().join(format!("t{stop_at}"));
        let mut seen = 0;
        let mut stop = |_: &loaderx::import::Progress| {
            seen += 1;
            if seen == stop_at { Err(ImportError::InvalidArgument("stopped".into())) } else { Ok(()) }
        };
        let mut source = ParquetSource::open(&input, 5).unwrap();
        import(&mut source, &dest, &opts(7), &mut stop).unwrap_err();
        let committed = Table::open(&dest).map(|t| t.rows()).unwrap_or(0);
        let mut source = ParquetSource::open(&input, 5).unwrap();
        let summary = import(&mut source, &dest, &opts(7), &mut |_| Ok(())).unwrap();
        assert_eq!((summary.skipped, summary.table_rows), (committed, 72), "stop at {stop_at}");
        assert_rows(&dest, 0..72);
    }
}
