//! The WebDataset tar source by the batches it gives: tars the `tar` crate
//! writes here and tars webdataset's `ShardWriter` and Python's `tarfile`
//! wrote (`tests/fixtures/wds/make_fixtures.py`); columns by extension, a
//! missing member as a null, shards and brace patterns in order, the bad
//! tars named by tar and member, skip against read-then-drop, the
//! fingerprint.
#![cfg(feature = "arrow")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, RecordBatch};
use arrow_schema::{DataType, Field, Schema};
use loaderx::import::{ImportError, KEY_COLUMN, Position, Source, WebDatasetOptions, WebDatasetSource, expand_braces};

/// A tar of `members` (name, bytes), regular files, by the `tar` crate.
fn tar_of(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, data) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, name, *data).unwrap();
    }
    builder.into_inner().unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_string()
}

fn all(source: &mut dyn Source) -> Result<Vec<RecordBatch>, ImportError> {
    let mut out = Vec::new();
    while let Some(batch) = source.next_batch()? {
        assert_eq!(batch.schema(), source.schema(), "every batch has the source's schema");
        out.push(batch);
    }
    Ok(out)
}

/// One sample's values as the fixtures' `sample(i)` makes them.
struct Expected {
    jpg: Vec<u8>,
    cls: i64,
    txt: String,
    json: String,
}

fn sample(i: usize) -> Expected {
    Expected {
        jpg: (0..100 + i * 10).map(|j| ((i * 7 + j) % 256) as u8).collect(),
        cls: (i % 3) as i64,
        txt: format!("caption {i} é"),
        json: format!("{{\"i\": {i}}}"),
    }
}

/// The rows of `batches` as (cls, jpg, json, txt), nulls as `None`.
type Row = (Option<i64>, Option<Vec<u8>>, Option<String>, Option<String>);

fn rows(batches: &[RecordBatch]) -> Vec<Row> {
    let mut out = Vec::new();
    for b in batches {
        let cls = b.column_by_name("cls").unwrap().as_primitive::<Int64Type>();
        let jpg = b.column_by_name("jpg").unwrap().as_binary::<i32>();
        let json = b.column_by_name("json").unwrap().as_string::<i32>();
        let txt = b.column_by_name("txt").unwrap().as_string::<i32>();
        for r in 0..b.num_rows() {
            out.push((
                cls.is_valid(r).then(|| cls.value(r)),
                jpg.is_valid(r).then(|| jpg.value(r).to_vec()),
                json.is_valid(r).then(|| json.value(r).to_string()),
                txt.is_valid(r).then(|| txt.value(r).to_string()),
            ));
        }
    }
    out
}

fn expected_row(i: usize) -> Row {
    let s = sample(i);
    (Some(s.cls), Some(s.jpg), Some(s.json), Some(s.txt))
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/wds").join(name).to_str().unwrap().to_string()
}

#[test]
fn shardwriter_shards_read_by_a_brace_pattern_give_every_sample_in_order() {
    let pattern = fixture("python-shardwriter-{0..1}.tar");
    let options = WebDatasetOptions { batch_rows: 2, key_column: true, ..Default::default() };
    let mut source = WebDatasetSource::open(&[pattern], options).unwrap();
    assert_eq!(source.shards().len(), 2);
    let schema = source.schema();
    let columns: Vec<(&str, &DataType)> = schema.fields().iter().map(|f| (f.name().as_str(), f.data_type())).collect();
    assert_eq!(
        columns,
        [
            (KEY_COLUMN, &DataType::Utf8),
            ("cls", &DataType::Int64),
            ("jpg", &DataType::Binary),
            ("json", &DataType::Utf8),
            ("txt", &DataType::Utf8)
        ]
    );
    let batches = all(&mut source).unwrap();
    assert!(batches.iter().all(|b| b.num_rows() <= 2));
    assert_eq!(rows(&batches), (0..5).map(expected_row).collect::<Vec<_>>());
    let keys: Vec<String> = batches
        .iter()
        .flat_map(|b| b.column(0).as_string::<i32>().iter().map(|k| k.unwrap().to_string()).collect::<Vec<_>>())
        .collect();
    assert_eq!(keys, ["s0000", "s0001", "s0002", "s0003", "s0004"]);
    assert_eq!(source.bytes_read(), source.bytes_hint().unwrap(), "every byte read at the end");
}

#[test]
fn a_pax_tar_from_tarfile_gives_its_long_and_non_ascii_keys() {
    let options = WebDatasetOptions { key_column: true, ..Default::default() };
    let mut source = WebDatasetSource::open(&[fixture("python-tarfile.tar")], options).unwrap();
    let batches = all(&mut source).unwrap();
    assert_eq!(rows(&batches), vec![expected_row(0), expected_row(1)]);
    let keys = batches[0].column(0).as_string::<i32>();
    let deep = format!("{}/{}", "d".repeat(60), "e".repeat(60));
    assert_eq!(keys.value(0), format!("{deep}/long-key-{}", "x".repeat(40)));
    assert_eq!(keys.value(1), "日本/été");
}

#[test]
fn a_later_sample_without_a_member_has_a_null_and_gnu_long_names_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("{}/k", "p".repeat(150));
    let a_cls = format!("{long}.cls");
    let a_seg = format!("{long}.seg.PNG");
    let tar = tar_of(&[
        (&a_cls, b" 7\n"),
        (&a_seg, b"\x89PNG"),
        ("b.cls", b"-3"),
        ("noext", b"passed over"),
        ("c.seg.png", b"x"),
    ]);
    let path = write(dir.path(), "a.tar", &tar);
    let mut source = WebDatasetSource::open(&[path], WebDatasetOptions::default()).unwrap();
    let schema = source.schema();
    assert_eq!(schema.field(0), &Field::new("cls", DataType::Int64, true));
    assert_eq!(schema.field(1), &Field::new("seg.png", DataType::Binary, true), "lowercased, typed by its last part");
    let b = &all(&mut source).unwrap()[0];
    let cls = b.column(0).as_primitive::<Int64Type>();
    assert_eq!((cls.value(0), cls.value(1), cls.is_null(2)), (7, -3, true));
    let seg = b.column(1).as_binary::<i32>();
    assert_eq!((seg.value(0), seg.is_null(1), seg.value(2)), (&b"\x89PNG"[..], true, &b"x"[..]));
}

fn member_error(error: ImportError) -> (PathBuf, String, String) {
    match error {
        ImportError::BadInput { path, at: Position::Member(member), reason } => (path, member, reason),
        other => panic!("expected a bad member, got {other:?}"),
    }
}

#[test]
fn a_torn_member_names_the_tar_and_the_member() {
    let dir = tempfile::tempdir().unwrap();
    let data = vec![5u8; 3000];
    let tar = tar_of(&[("a.cls", b"1"), ("a.jpg", &data), ("b.cls", b"2")]);
    // a.jpg's header is at 1024, its bytes at 1536: cut inside them.
    let path = write(dir.path(), "torn.tar", &tar[..1536 + 1000]);
    let error = WebDatasetSource::open(std::slice::from_ref(&path), WebDatasetOptions::default())
        .and_then(|mut s| all(&mut s).map(|_| ()))
        .unwrap_err();
    let (at, member, reason) = member_error(error);
    assert_eq!((at.to_str().unwrap(), member.as_str()), (path.as_str(), "a.jpg"), "{reason}");
    assert!(reason.contains("cut short"), "{reason}");
    // Cut inside a header: named by its byte.
    let path = write(dir.path(), "torn-header.tar", &tar[..1024 + 100]);
    match WebDatasetSource::open(std::slice::from_ref(&path), WebDatasetOptions::default()).unwrap_err() {
        ImportError::BadInput { path: at, at: Position::Byte(1024), reason } => {
            assert_eq!(at.to_str().unwrap(), path);
            assert!(reason.contains("cut short"), "{reason}");
        }
        other => panic!("expected a torn header at byte 1024, got {other:?}"),
    }
    // A directory whose header claims more bytes than the tar holds is torn too.
    let mut dir_header = tar::Header::new_gnu();
    dir_header.set_entry_type(tar::EntryType::Directory);
    dir_header.set_size(1 << 40);
    dir_header.set_path("d/").unwrap();
    dir_header.set_cksum();
    let mut bytes = tar.clone();
    bytes[..512].copy_from_slice(dir_header.as_bytes()); // over a.cls's header
    let path = write(dir.path(), "huge-dir.tar", &bytes);
    let error = WebDatasetSource::open(&[path], WebDatasetOptions::default()).unwrap_err();
    let (_, member, reason) = member_error(error);
    assert_eq!(member, "d/", "{reason}");
    // Cut inside the last member's padding: its bytes are whole, the tar reads as complete.
    let path = write(dir.path(), "short-padding.tar", &tar[..tar.len() - 1024 - 100]);
    let mut source = WebDatasetSource::open(&[path], WebDatasetOptions::default()).unwrap();
    assert_eq!(all(&mut source).unwrap().iter().map(RecordBatch::num_rows).sum::<usize>(), 2);
}

#[test]
fn a_key_whose_members_are_not_adjacent_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.tar", &tar_of(&[("a.cls", b"1"), ("b.cls", b"2"), ("a.jpg", b"x")]));
    let error = WebDatasetSource::open(&[path], WebDatasetOptions::default()).unwrap_err();
    let (_, member, reason) = member_error(error);
    assert_eq!(member, "a.jpg", "{reason}");
    assert!(reason.contains("adjacent"), "{reason}");
}

#[test]
fn a_member_that_is_not_a_regular_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(1);
    header.set_mode(0o644);
    builder.append_data(&mut header, "a.cls", &b"1"[..]).unwrap();
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Symlink);
    link.set_size(0);
    builder.append_link(&mut link, "a.jpg", "/etc/passwd").unwrap();
    let path = write(dir.path(), "a.tar", &builder.into_inner().unwrap());
    let (_, member, reason) = member_error(WebDatasetSource::open(&[path], WebDatasetOptions::default()).unwrap_err());
    assert_eq!(member, "a.jpg");
    assert!(reason.contains("not a regular file"), "{reason}");
}

/// A tar's members, (name, bytes).
type Members<'a> = &'a [(&'a str, &'a [u8])];

#[test]
fn bad_values_and_unknown_extensions_name_the_member() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(Members, &str, &str); 4] = [
        (&[("a.cls", b"1"), ("b.cls", b"one")], "b.cls", "not an integer"),
        (&[("a.txt", b"ok"), ("b.txt", b"\xff\xfe")], "b.txt", "not UTF-8"),
        (&[("a.cls", b"1"), ("b.cls", b"2"), ("b.wav", b"RIFF")], "b.wav", "not a column"),
        (&[("a.cls", b"1"), ("a.cls", b"2")], "a.cls", "a second"),
    ];
    for (members, name, words) in cases {
        let path = write(dir.path(), "a.tar", &tar_of(members));
        let options = WebDatasetOptions { infer_samples: 1, ..Default::default() };
        let error = WebDatasetSource::open(&[path], options).and_then(|mut s| all(&mut s).map(|_| ())).unwrap_err();
        let (_, member, reason) = member_error(error);
        assert_eq!(member, name, "{reason}");
        assert!(reason.contains(words), "{name}: {reason}");
    }
}

#[test]
fn a_tar_without_samples_gives_no_columns_and_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.tar", &tar_of(&[("noext", b"x")]));
    let error = WebDatasetSource::open(std::slice::from_ref(&path), WebDatasetOptions::default()).unwrap_err();
    assert!(matches!(&error, ImportError::InvalidArgument(m) if m.contains("no columns")), "{error:?}");
    let options = WebDatasetOptions { batch_rows: 0, ..Default::default() };
    let error = WebDatasetSource::open(&[path], options).unwrap_err();
    assert!(matches!(&error, ImportError::InvalidArgument(m) if m.contains("batch_rows")), "{error:?}");
}

#[test]
fn given_columns_take_the_place_of_inference() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.tar", &tar_of(&[("a.cls", b"4"), ("a.txt", b"hi")]));
    let schema =
        Arc::new(Schema::new(vec![Field::new("cls", DataType::Utf8, true), Field::new("jpg", DataType::Binary, true)]));
    let options = WebDatasetOptions { schema: Some(schema.clone()), ..Default::default() };
    let error = WebDatasetSource::open(std::slice::from_ref(&path), options.clone())
        .and_then(|mut s| all(&mut s).map(|_| ()))
        .unwrap_err();
    assert_eq!(member_error(error).1, "a.txt", "txt is not a given column");
    let path = write(dir.path(), "b.tar", &tar_of(&[("a.cls", b"4")]));
    let mut source = WebDatasetSource::open(&[path], options).unwrap();
    let b = &all(&mut source).unwrap()[0];
    assert_eq!(b.column(0).as_string::<i32>().value(0), "4", "cls as text, as given");
    assert!(b.column(1).is_null(0));
    let bad = Arc::new(Schema::new(vec![Field::new("x", DataType::Float32, true)]));
    let options = WebDatasetOptions { schema: Some(bad), ..Default::default() };
    assert!(matches!(
        WebDatasetSource::open(&[fixture("python-tarfile.tar")], options),
        Err(ImportError::ColumnType { .. })
    ));
}

#[test]
fn skip_then_read_equals_read_then_drop() {
    let inputs =
        [fixture("python-shardwriter-0.tar"), fixture("python-shardwriter-1.tar"), fixture("python-tarfile.tar")];
    for infer_samples in [1, 4, 64] {
        let options = WebDatasetOptions { infer_samples, batch_rows: 3, ..Default::default() };
        let whole = rows(&all(&mut WebDatasetSource::open(&inputs, options.clone()).unwrap()).unwrap());
        assert_eq!(whole.len(), 7);
        for k in 0..=7 {
            let mut source = WebDatasetSource::open(&inputs, options.clone()).unwrap();
            source.skip(k as u64).unwrap();
            assert_eq!(
                rows(&all(&mut source).unwrap()),
                whole[k..].to_vec(),
                "skip {k}, inferring from {infer_samples}"
            );
        }
        let mut source = WebDatasetSource::open(&inputs, options).unwrap();
        assert!(matches!(source.skip(8), Err(ImportError::InvalidArgument(_))), "past the end is refused");
    }
}

#[test]
fn the_fingerprint_covers_the_shards_and_the_options() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "a.tar", &tar_of(&[("a.cls", b"1")]));
    let print = |options: WebDatasetOptions| {
        WebDatasetSource::open(std::slice::from_ref(&path), options).unwrap().fingerprint()
    };
    let first = print(WebDatasetOptions::default());
    assert_eq!(first, print(WebDatasetOptions { batch_rows: 7, ..Default::default() }), "batching shapes no row");
    assert_ne!(first, print(WebDatasetOptions { key_column: true, ..Default::default() }));
    write(dir.path(), "a.tar", &tar_of(&[("a.cls", b"1"), ("b.cls", b"2")]));
    assert_ne!(first, print(WebDatasetOptions::default()), "a changed tar, another input");
}

#[test]
fn brace_patterns_expand_as_webdataset_does() {
    assert_eq!(expand_braces("s-{000..002}.tar").unwrap(), ["s-000.tar", "s-001.tar", "s-002.tar"]);
    assert_eq!(expand_braces("{8..10}").unwrap(), ["8", "9", "10"]);
    assert_eq!(expand_braces("{a,b}/{0..1}").unwrap(), ["a/0", "a/1", "b/0", "b/1"]);
    assert_eq!(expand_braces("plain.tar").unwrap(), ["plain.tar"]);
    for bad in ["s-{0..", "{5..1}", "{0..99999999999999999999}", "{0..999}{0..999}{0..9}"] {
        assert!(matches!(expand_braces(bad), Err(ImportError::InvalidArgument(_))), "{bad}");
    }
}
