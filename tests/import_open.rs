//! `open_source`: the format told by a file's extension, a `save_to_disk`
//! directory or a directory's files, or given; the options a format does
//! not take refused; the source it opens reads the file's rows.
#![cfg(feature = "arrow")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{Int64Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use loaderx::import::{Format, ImportError, SourceOptions, detect_format, open_source};

fn write_parquet(path: &Path, n: i64) {
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from_iter_values(0..n))]).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
}

fn invalid(result: Result<impl Sized, ImportError>) -> String {
    match result {
        Err(ImportError::InvalidArgument(message)) => message,
        Err(other) => panic!("expected InvalidArgument, got {other}"),
        Ok(_) => panic!("expected InvalidArgument, got a source"),
    }
}

#[test]
fn the_format_is_told_by_extension_state_json_or_a_directorys_files() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("a.parquet", Format::Parquet),
        ("a.PQ", Format::Parquet),
        ("a.arrow", Format::Arrow),
        ("a.feather", Format::Arrow),
        ("a.ndjson", Format::Jsonl),
        ("shard-{000..009}.tar", Format::WebDataset),
    ];
    let detect = |path: &Path| detect_format(&[path.to_path_buf()]).unwrap();
    for (name, want) in cases {
        assert_eq!(detect(&dir.path().join(name)), Some(want), "{name}");
    }
    let hf = dir.path().join("hf");
    std::fs::create_dir(&hf).unwrap();
    std::fs::write(hf.join("state.json"), b"{}").unwrap();
    assert_eq!(detect(&hf), Some(Format::Arrow), "a save_to_disk directory");
    let mixed = dir.path().join("mixed");
    std::fs::create_dir(&mixed).unwrap();
    for name in ["README", "b.tar", "a.jsonl"] {
        std::fs::write(mixed.join(name), b"").unwrap();
    }
    assert_eq!(detect(&mixed), Some(Format::Jsonl), "the first known file by name");
    assert_eq!(detect(&dir.path().join("data.bin")), None);
    let message = invalid(open_source(None, &[dir.path().join("data.bin")], &SourceOptions::default()));
    assert!(message.contains("data.bin") && message.contains("cannot tell its format"), "{message}");
}

#[test]
fn a_format_parses_from_its_name_and_an_unknown_one_is_listed() {
    for format in Format::ALL {
        assert_eq!(Format::parse(format.name()).unwrap(), format);
    }
    let message = invalid(Format::parse("csv"));
    assert!(message.contains("\"csv\"") && message.contains("imagefolder"), "{message}");
}

#[test]
fn an_option_for_another_format_and_a_bad_count_of_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.parquet");
    write_parquet(&file, 10);
    let inputs = [file.clone()];
    let jsonl_only = SourceOptions { infer_rows: Some(5), ..Default::default() };
    let message = invalid(open_source(None, &inputs, &jsonl_only));
    assert!(message.contains("infer_rows is for jsonl; this import is parquet"), "{message}");
    let folder_only = SourceOptions { path_column: true, ..Default::default() };
    assert!(invalid(open_source(None, &inputs, &folder_only)).contains("path_column is for imagefolder"));
    let two = [dir.path().to_path_buf(), dir.path().to_path_buf()];
    let message = invalid(open_source(Some(Format::ImageFolder), &two, &SourceOptions::default()));
    assert!(message.contains("not 2 paths"), "{message}");
    let none: [PathBuf; 0] = [];
    assert!(invalid(open_source(None, &none, &SourceOptions::default())).contains("no input"));
}

#[test]
fn the_source_opened_reads_every_row_of_its_files() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    write_parquet(&a, 7);
    write_parquet(&b, 5);
    let opts = SourceOptions { batch_rows: Some(3), ..Default::default() };
    let mut opened = open_source(None, &[a, b], &opts).unwrap();
    assert!(opened.classes.is_none());
    let mut ids = Vec::new();
    while let Some(batch) = opened.source.next_batch().unwrap() {
        assert!(batch.num_rows() <= 3, "batch_rows is the source's");
        let column = batch.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
        ids.extend(column.values().iter().copied());
    }
    assert_eq!(ids, (0..7).chain(0..5).collect::<Vec<i64>>());
}

#[test]
fn local_paths_and_urls_do_not_mix_in_one_import() {
    let inputs = [PathBuf::from("a.parquet"), PathBuf::from("s3://bucket/b.parquet")];
    let message = invalid(open_source(None, &inputs, &SourceOptions::default()));
    assert!(message.contains("not both"), "{message}");
}

#[cfg(not(feature = "remote"))]
#[test]
fn a_url_without_the_remote_feature_names_the_feature() {
    let message = invalid(open_source(None, &[PathBuf::from("s3://bucket/a.parquet")], &SourceOptions::default()));
    assert!(message.contains("`remote` feature"), "{message}");
}
