//! The JSON Lines source by the batches it gives: every inferred type, a
//! missing key as a null, files in sorted order, bounded batches, the bad
//! inputs named by file and line, skip against read-then-drop, and the
//! fingerprint.
#![cfg(feature = "arrow")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_cast::display::{ArrayFormatter, FormatOptions};
use arrow_schema::{DataType, Field, Schema};
use loaderx::import::{ImportError, JsonlOptions, JsonlSource, Position, SOURCE_BATCH_ROWS_MAX, Source};

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn all(source: &mut dyn Source) -> Result<Vec<RecordBatch>, ImportError> {
    let mut out = Vec::new();
    while let Some(batch) = source.next_batch()? {
        assert_eq!(batch.schema(), source.schema(), "every batch has the source's schema");
        out.push(batch);
    }
    Ok(out)
}

/// Each row as text, every column formatted: an order- and value-exact view.
fn rows(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("<null>");
    let mut out = Vec::new();
    for batch in batches {
        let formatters: Vec<_> =
            batch.columns().iter().map(|c| ArrayFormatter::try_new(c, &options).unwrap()).collect();
        for r in 0..batch.num_rows() {
            out.push(formatters.iter().map(|f| f.value(r).to_string()).collect::<Vec<_>>().join(" | "));
        }
    }
    out
}

const EVERY_TYPE: &str = r#"{"id": 1, "x": 0.5, "ok": true, "name": "a", "tokens": [1, 2, 3], "w": [0.25, 1.5], "meta": {"lang": "en", "n": 7}}
{"id": -9007199254740993, "x": -2.0, "ok": false, "name": "é日本\n", "tokens": [], "w": [3.0], "meta": {"lang": "fr", "n": 8}}

{"id": 3, "x": 1e300, "name": "", "tokens": [9223372036854775807], "w": [], "meta": {"lang": "de", "n": -1}}
"#;

#[test]
fn every_type_is_inferred_and_a_missing_key_is_a_null() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.jsonl", EVERY_TYPE);
    let mut source = JsonlSource::open(&[path], JsonlOptions::default()).unwrap();
    let schema = source.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "meta", "name", "ok", "tokens", "w", "x"], "inferred columns in key order");
    let t = |name: &str| schema.field_with_name(name).unwrap().data_type().clone();
    let list = |t| DataType::List(Arc::new(Field::new("item", t, true)));
    assert_eq!(t("id"), DataType::Int64);
    assert_eq!(t("x"), DataType::Float64);
    assert_eq!(t("ok"), DataType::Boolean);
    assert_eq!(t("name"), DataType::Utf8);
    assert_eq!(t("tokens"), list(DataType::Int64));
    assert_eq!(t("w"), list(DataType::Float64));
    assert!(matches!(t("meta"), DataType::Struct(f) if f.len() == 2), "{:?}", t("meta"));

    let batches = all(&mut source).unwrap();
    assert_eq!(batches.len(), 1);
    let b = &batches[0];
    assert_eq!(b.num_rows(), 3, "the blank line is not a row");
    let col = |name: &str| b.column_by_name(name).unwrap();
    assert_eq!(col("id").as_primitive::<Int64Type>().values().to_vec(), vec![1, -9007199254740993, 3]);
    assert_eq!(col("x").as_primitive::<Float64Type>().values().to_vec(), vec![0.5, -2.0, 1e300]);
    let ok = col("ok").as_boolean();
    assert!(ok.value(0) && !ok.value(1) && ok.is_null(2), "the missing key is a null");
    let name = col("name").as_string::<i32>();
    assert_eq!((name.value(0), name.value(1), name.value(2)), ("a", "é日本\n", ""));
    let tokens = col("tokens").as_list::<i32>();
    assert_eq!(tokens.value_offsets(), &[0, 3, 3, 4]);
    assert_eq!(tokens.values().as_primitive::<Int64Type>().values().to_vec(), vec![1, 2, 3, i64::MAX]);
    let meta = col("meta").as_struct();
    assert_eq!(meta.column_by_name("n").unwrap().as_primitive::<Int64Type>().values().to_vec(), vec![7, 8, -1]);
    assert_eq!(source.bytes_read(), source.bytes_hint().unwrap(), "every byte read at the end");
}

#[test]
fn files_are_read_in_sorted_order_and_a_directory_gives_its_jsonl_files() {
    let dir = tempfile::tempdir().unwrap();
    let b = write(dir.path(), "b.jsonl", "{\"n\": 3}\n{\"n\": 4}\n");
    let a = write(dir.path(), "a.jsonl", "{\"n\": 1}\n{\"n\": 2}"); // no final newline
    write(dir.path(), "notes.txt", "not json");
    let mut given = JsonlSource::open(&[b.clone(), a.clone()], JsonlOptions::default()).unwrap();
    assert_eq!(given.files(), vec![a.clone(), b.clone()]);
    let from_dir = JsonlSource::open(&[dir.path().to_path_buf()], JsonlOptions::default()).unwrap();
    assert_eq!(from_dir.files(), vec![a, b]);
    assert_eq!(given.fingerprint(), from_dir.fingerprint(), "the same files, the same input");
    assert_eq!(rows(&all(&mut given).unwrap()), vec!["1", "2", "3", "4"]);
}

#[test]
fn batches_hold_at_most_batch_rows() {
    let dir = tempfile::tempdir().unwrap();
    let text: String = (0..10).map(|i| format!("{{\"n\": {i}}}\n")).collect();
    let path = write(dir.path(), "a.jsonl", &text);
    let mut source = JsonlSource::open(&[path], JsonlOptions { batch_rows: 3, ..Default::default() }).unwrap();
    let sizes: Vec<usize> = all(&mut source).unwrap().iter().map(RecordBatch::num_rows).collect();
    assert_eq!(sizes, vec![3, 3, 3, 1]);
}

fn bad_line(error: ImportError) -> (PathBuf, u64, String) {
    match error {
        ImportError::BadInput { path, at: Position::Line(n), reason } => (path, n, reason),
        other => panic!("expected a bad line, got {other:?}"),
    }
}

#[test]
fn a_line_that_does_not_parse_is_named_by_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.jsonl", "{\"n\": 1}\n\n{\"n\": 2}\n{\"n\": 3,,}\n{\"n\": 4}\n");
    let options = JsonlOptions { infer_rows: 1, ..Default::default() };
    let mut source = JsonlSource::open(std::slice::from_ref(&path), options).unwrap();
    let (at, line, reason) = bad_line(all(&mut source).unwrap_err());
    assert_eq!((at, line), (path.clone(), 4), "{reason}");
    // In the sample that inference reads, the same line is refused the same way.
    let error = JsonlSource::open(std::slice::from_ref(&path), JsonlOptions::default()).unwrap_err();
    assert_eq!(bad_line(error).1, 4);
    assert!(error_text(&path).contains("a.jsonl, line 4"), "{}", error_text(&path));
}

fn error_text(path: &Path) -> String {
    JsonlSource::open(&[path.to_path_buf()], JsonlOptions::default()).unwrap_err().to_string()
}

#[test]
fn a_type_that_changes_after_the_sample_is_named_by_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let a = write(dir.path(), "a.jsonl", "{\"n\": 1}\n{\"n\": 2}\n");
    let b = write(dir.path(), "b.jsonl", "{\"n\": 3}\n{\"n\": \"three\"}\n");
    let options = JsonlOptions { infer_rows: 2, ..Default::default() };
    let mut source = JsonlSource::open(&[a, b.clone()], options).unwrap();
    assert_eq!(source.schema().field(0).data_type(), &DataType::Int64);
    let (at, line, reason) = bad_line(all(&mut source).unwrap_err());
    assert_eq!((at, line), (b, 2), "{reason}");
}

#[test]
fn a_value_of_another_json_type_is_refused_not_converted() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("{\"n\": 1}\n{\"n\": \"12\"}\n", "a string"),
        ("{\"n\": 1}\n{\"n\": 1.5}\n", "a fraction"),
        ("{\"n\": [1]}\n{\"n\": [2, \"3\"]}\n", "a string"),
        ("{\"n\": \"a\"}\n{\"n\": 4}\n", "an integer"),
        ("{\"n\": {\"m\": true}}\n{\"n\": {\"m\": 1}}\n", "m: an integer"),
    ];
    for (text, words) in cases {
        let path = write(dir.path(), "a.jsonl", text);
        let options = JsonlOptions { infer_rows: 1, ..Default::default() };
        let mut source = JsonlSource::open(&[path], options).unwrap();
        let (_, line, reason) = bad_line(all(&mut source).unwrap_err());
        assert_eq!(line, 2, "{text:?}: {reason}");
        assert!(reason.contains("column \"n\"") && reason.contains(words), "{text:?}: {reason}");
    }
    // Integers are numbers enough for a float column.
    let path = write(dir.path(), "b.jsonl", "{\"x\": 0.5}\n{\"x\": 2}\n");
    let mut source = JsonlSource::open(&[path], JsonlOptions { infer_rows: 1, ..Default::default() }).unwrap();
    assert_eq!(rows(&all(&mut source).unwrap()), vec!["0.5", "2.0"]);
}

#[test]
fn a_key_outside_the_schema_is_refused_unless_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.jsonl", "{\"n\": 1}\n{\"n\": 2, \"extra\": true}\n");
    let strict = JsonlOptions { infer_rows: 1, ..Default::default() };
    let mut source = JsonlSource::open(std::slice::from_ref(&path), strict).unwrap();
    assert_eq!(bad_line(all(&mut source).unwrap_err()).1, 2);
    let lax = JsonlOptions { infer_rows: 1, ignore_unknown_keys: true, ..Default::default() };
    let mut source = JsonlSource::open(&[path], lax).unwrap();
    assert_eq!(rows(&all(&mut source).unwrap()), vec!["1", "2"]);
}

#[test]
fn two_values_or_half_a_value_on_a_line_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (text, line) in [("{\"n\": 1}\n{\"n\": 2}{\"n\": 3}\n", 2), ("{\"n\": 1}\n{\"n\": 2\n}\n", 2)] {
        let path = write(dir.path(), "a.jsonl", text);
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, true)]));
        let options = JsonlOptions { schema: Some(schema), ..Default::default() };
        let mut source = JsonlSource::open(&[path], options).unwrap();
        assert_eq!(bad_line(all(&mut source).unwrap_err()).1, line, "{text:?}");
    }
}

#[test]
fn a_given_schema_types_the_columns_and_refuses_a_wrong_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.jsonl", "{\"n\": 1, \"s\": \"x\"}\n{\"s\": \"y\"}\n{\"n\": 2, \"s\": 5}\n");
    let schema =
        Arc::new(Schema::new(vec![Field::new("n", DataType::Int32, true), Field::new("s", DataType::Utf8, true)]));
    let options = JsonlOptions { schema: Some(schema.clone()), batch_rows: 2, ..Default::default() };
    let mut source = JsonlSource::open(std::slice::from_ref(&path), options).unwrap();
    assert_eq!(source.schema(), schema);
    let first = source.next_batch().unwrap().unwrap();
    let n = first.column(0).as_primitive::<Int32Type>();
    assert_eq!((n.value(0), n.is_null(1)), (1, true));
    let (at, line, reason) = bad_line(source.next_batch().unwrap_err());
    assert_eq!((at, line), (path, 3), "{reason}");
}

#[test]
fn skip_then_read_equals_read_then_drop() {
    let dir = tempfile::tempdir().unwrap();
    let text = |lo: usize, hi: usize| -> String {
        (lo..hi)
            .map(|i| {
                format!("{{\"n\": {i}, \"t\": [{}]}}\n{}", "1,".repeat(i % 3) + "0", if i % 4 == 0 { "\n" } else { "" })
            })
            .collect()
    };
    let a = write(dir.path(), "a.jsonl", &text(0, 7));
    let b = write(dir.path(), "b.jsonl", &text(7, 12));
    let options = JsonlOptions { batch_rows: 4, ..Default::default() };
    let whole = rows(&all(&mut JsonlSource::open(&[a.clone(), b.clone()], options.clone()).unwrap()).unwrap());
    assert_eq!(whole.len(), 12);
    for k in 0..=12 {
        let mut source = JsonlSource::open(&[a.clone(), b.clone()], options.clone()).unwrap();
        source.skip(k as u64).unwrap();
        assert_eq!(rows(&all(&mut source).unwrap()), whole[k..].to_vec(), "skip {k}");
    }
    let mut source = JsonlSource::open(&[a, b], options).unwrap();
    assert!(matches!(source.skip(13), Err(ImportError::InvalidArgument(_))), "past the end is refused");
}

#[test]
fn the_fingerprint_covers_the_files_and_the_options() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.jsonl", "{\"n\": 1}\n");
    let print = |options: JsonlOptions| JsonlSource::open(std::slice::from_ref(&path), options).unwrap().fingerprint();
    let first = print(JsonlOptions::default());
    assert_eq!(first, print(JsonlOptions::default()), "the same input, the same fingerprint");
    assert_ne!(first, print(JsonlOptions { ignore_unknown_keys: true, ..Default::default() }));
    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int32, true)]));
    assert_ne!(first, print(JsonlOptions { schema: Some(schema), ..Default::default() }));
    write(dir.path(), "a.jsonl", "{\"n\": 2}\n{\"n\": 3}\n");
    assert_ne!(first, print(JsonlOptions::default()), "a changed file, another input");
}

#[test]
fn a_batch_size_out_of_bounds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.jsonl", "{\"n\": 1}\n");
    for batch_rows in [0, SOURCE_BATCH_ROWS_MAX + 1, usize::MAX] {
        let options = JsonlOptions { batch_rows, ..Default::default() };
        let error = JsonlSource::open(std::slice::from_ref(&path), options).unwrap_err();
        assert!(matches!(error, ImportError::InvalidArgument(_)), "{batch_rows}: {error:?}");
    }
    let options = JsonlOptions { batch_rows: SOURCE_BATCH_ROWS_MAX, ..Default::default() };
    assert_eq!(rows(&all(&mut JsonlSource::open(&[path], options).unwrap()).unwrap()), vec!["1"]);
}
