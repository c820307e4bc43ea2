//! Arrow IPC into tables: the file and the stream formats, a Hugging Face
//! `save_to_disk` directory (its `state.json`'s files in order), a resumed
//! import cutting a batch, a truncated stream, a schema change.
#![cfg(feature = "arrow")]

use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int32Array, RecordBatch, StringArray};
use arrow_ipc::writer::{FileWriter, StreamWriter};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use loaderx::import::{ImportError, ImportOptions, IpcSource, Source, import};
use loaderx::table::{Table, TableColumn};

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, false), Field::new("s", DataType::Utf8, false)]))
}

fn batch(start: i32, n: i32) -> RecordBatch {
    let arrays: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter_values(start..start + n)),
        Arc::new(StringArray::from_iter_values((start..start + n).map(|i| format!("v{i}")))),
    ];
    RecordBatch::try_new(schema(), arrays).unwrap()
}

fn write_stream(path: &Path, batches: &[RecordBatch]) {
    let mut w = StreamWriter::try_new(std::fs::File::create(path).unwrap(), &batches[0].schema()).unwrap();
    batches.iter().for_each(|b| w.write(b).unwrap());
    w.finish().unwrap();
}

fn write_file(path: &Path, batches: &[RecordBatch]) {
    let mut w = FileWriter::try_new(std::fs::File::create(path).unwrap(), &batches[0].schema()).unwrap();
    batches.iter().for_each(|b| w.write(b).unwrap());
    w.finish().unwrap();
}

fn xs(dest: &Path) -> Vec<i32> {
    let table = Table::open(dest).unwrap();
    let all: Vec<u64> = (0..table.rows()).collect();
    let Some(TableColumn::Fixed(x)) = table.column("x") else { panic!() };
    let mut bytes = vec![0u8; all.len() * 4];
    x.gather_bytes(&all, &mut bytes).unwrap();
    let xs: Vec<i32> = bytes.chunks(4).map(|c| i32::from_le_bytes(c.try_into().unwrap())).collect();
    let strings = table.strings("s", &all).unwrap();
    assert_eq!(strings, xs.iter().map(|i| format!("v{i}")).collect::<Vec<_>>());
    xs
}

#[test]
fn the_file_and_the_stream_formats_import_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.arrow"), dir.path().join("b.arrows"));
    write_file(&a, &[batch(0, 5), batch(5, 3)]);
    write_stream(&b, &[batch(8, 4)]);
    let mut source = IpcSource::open(&[a, b]).unwrap();
    assert!(source.bytes_hint().unwrap() > 0);
    let dest = dir.path().join("t");
    let summary = import(&mut source, &dest, &ImportOptions::default(), &mut |_| Ok(())).unwrap();
    assert_eq!(summary.rows, 12);
    assert!(summary.bytes > 0 && summary.bytes <= source.bytes_hint().unwrap(), "{summary:?}");
    assert_eq!(xs(&dest), (0..12).collect::<Vec<_>>());
}

#[test]
fn a_save_to_disk_directory_reads_its_state_files_in_their_order_and_resumes_mid_batch() {
    let dir = tempfile::tempdir().unwrap();
    let hf = dir.path().join("ds");
    std::fs::create_dir(&hf).unwrap();
    // Listed in an order other than the names' sort.
    write_stream(&hf.join("data-00001-of-00002.arrow"), &[batch(0, 6), batch(6, 6)]);
    write_stream(&hf.join("data-00000-of-00002.arrow"), &[batch(12, 9)]);
    let state = r#"{"_data_files": [{"filename": "data-00001-of-00002.arrow"}, {"filename": "data-00000-of-00002.arrow"}],
        "_fingerprint": "f", "_format_type": null, "_split": "train"}"#;
    std::fs::write(hf.join("state.json"), state).unwrap();
    std::fs::write(hf.join("dataset_info.json"), "{}").unwrap();
    let dest = dir.path().join("t");
    let opts = ImportOptions { commit_rows: 4, ..ImportOptions::default() };
    let mut seen = 0;
    let mut stop = |_: &loaderx::import::Progress| {
        seen += 1;
        if seen == 2 { Err(ImportError::InvalidArgument("stopped".into())) } else { Ok(()) }
    };
    import(&mut IpcSource::open(std::slice::from_ref(&hf)).unwrap(), &dest, &opts, &mut stop).unwrap_err();
    assert_eq!(Table::open(&dest).unwrap().rows(), 12);
    // Commits every 5 rows of batches of 6: the rerun cuts a batch.
    let opts = ImportOptions { commit_rows: 5, ..ImportOptions::default() };
    let dest2 = dir.path().join("u");
    let mut seen = 0;
    let mut stop = |_: &loaderx::import::Progress| {
        seen += 1;
        if seen == 1 { Err(ImportError::InvalidArgument("stopped".into())) } else { Ok(()) }
    };
    import(&mut IpcSource::open(std::slice::from_ref(&hf)).unwrap(), &dest2, &opts, &mut stop).unwrap_err();
    assert_eq!(Table::open(&dest2).unwrap().rows(), 6);
    for dest in [&dest, &dest2] {
        let summary =
            import(&mut IpcSource::open(std::slice::from_ref(&hf)).unwrap(), dest, &opts, &mut |_| Ok(())).unwrap();
        assert_eq!(summary.table_rows, 21);
        assert_eq!(xs(dest), (0..21).collect::<Vec<_>>());
    }
}

#[test]
fn a_truncated_stream_is_bad_input_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cut.arrow");
    write_stream(&file, &[batch(0, 100), batch(100, 100)]);
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() - 300]).unwrap();
    let dest = dir.path().join("t");
    let err = import(
        &mut IpcSource::open(std::slice::from_ref(&file)).unwrap(),
        &dest,
        &ImportOptions::default(),
        &mut |_| Ok(()),
    )
    .unwrap_err();
    assert!(
        matches!(&err, ImportError::BadInput { path, at: loaderx::import::Position::Row(100), .. } if *path == file),
        "{err}"
    );
    assert_eq!(Table::open(&dest).unwrap().rows(), 0, "nothing of the failed import is committed");
}

#[test]
fn a_file_of_another_schema_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.arrow"), dir.path().join("b.arrow"));
    write_stream(&a, &[batch(0, 2)]);
    let other = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, false)]));
    let b_batch = RecordBatch::try_new(other, vec![Arc::new(arrow_array::Int64Array::from(vec![1]))]).unwrap();
    write_stream(&b, &[b_batch]);
    let err = import(
        &mut IpcSource::open(&[dir.path().to_path_buf()]).unwrap(),
        &dir.path().join("t"),
        &ImportOptions::default(),
        &mut |_| Ok(()),
    )
    .unwrap_err();
    assert!(err.to_string().contains("b.arrow"), "{err}");
}
