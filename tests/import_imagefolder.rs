//! The image-folder source by the batches it gives: classes in sorted
//! order as labels, files walked in sorted order, other files passed over
//! and counted, the class names to save beside, skip against
//! read-then-drop, the fingerprint.
#![cfg(feature = "arrow")]

use std::path::Path;

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use loaderx::import::{ImageFolderOptions, ImageFolderSource, ImportError, SOURCE_BATCH_ROWS_MAX, Source};

fn put(root: &Path, rel: &str, bytes: &[u8]) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A folder of two classes, `dog` made before `cat`, with files that are
/// not images and one outside any class.
fn folder(root: &Path) {
    put(root, "dog/x.JPEG", b"dog x");
    put(root, "dog/sub/y.gif", b"dog y");
    put(root, "dog/notes.txt", b"not an image");
    put(root, "cat/b.jpg", b"cat b");
    put(root, "cat/a.png", b"cat a");
    put(root, "README", b"outside the classes");
    std::fs::create_dir_all(root.join("empty")).unwrap();
}

fn all(source: &mut dyn Source) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    while let Some(batch) = source.next_batch().unwrap() {
        assert_eq!(batch.schema(), source.schema(), "every batch has the source's schema");
        out.push(batch);
    }
    out
}

/// Each row as (image bytes, label, path if asked).
fn rows(batches: &[RecordBatch]) -> Vec<(Vec<u8>, i64, Option<String>)> {
    let mut out = Vec::new();
    for b in batches {
        let image = b.column_by_name("image").unwrap().as_binary::<i32>();
        let label = b.column_by_name("label").unwrap().as_primitive::<Int64Type>();
        let path = b.column_by_name("path").map(|p| p.as_string::<i32>().clone());
        for r in 0..b.num_rows() {
            out.push((image.value(r).to_vec(), label.value(r), path.as_ref().map(|p| p.value(r).to_string())));
        }
    }
    out
}

#[test]
fn classes_are_sorted_labels_and_files_come_in_sorted_order() {
    let dir = tempfile::tempdir().unwrap();
    folder(dir.path());
    let options = ImageFolderOptions { path_column: true, batch_rows: 3, ..Default::default() };
    let mut source = ImageFolderSource::open(dir.path(), options).unwrap();
    assert_eq!(source.classes(), ["cat", "dog", "empty"]);
    assert_eq!(source.classes_json(), r#"["cat","dog","empty"]"#);
    assert_eq!(source.skipped(), 2, "notes.txt and README");
    assert_eq!(source.rows_hint(), Some(4));
    let schema = source.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["image", "label", "path"]);
    let batches = all(&mut source);
    assert_eq!(batches.iter().map(RecordBatch::num_rows).collect::<Vec<_>>(), [3, 1]);
    let want = [
        ("cat a", 0, "cat/a.png"),
        ("cat b", 0, "cat/b.jpg"),
        ("dog y", 1, "dog/sub/y.gif"),
        ("dog x", 1, "dog/x.JPEG"),
    ];
    let want: Vec<_> = want.iter().map(|(b, l, p)| (b.as_bytes().to_vec(), *l, Some(p.to_string()))).collect();
    assert_eq!(rows(&batches), want);
    assert_eq!(source.bytes_read(), source.bytes_hint().unwrap());
}

#[test]
fn the_extensions_are_the_callers_to_choose() {
    let dir = tempfile::tempdir().unwrap();
    folder(dir.path());
    let options = ImageFolderOptions { extensions: vec!["txt".into()], ..Default::default() };
    let mut source = ImageFolderSource::open(dir.path(), options).unwrap();
    assert_eq!(source.schema().fields().len(), 2, "no path column unless asked");
    assert_eq!(rows(&all(&mut source)), vec![(b"not an image".to_vec(), 1, None)]);
    assert_eq!(source.skipped(), 5);
}

#[test]
fn skip_then_read_equals_read_then_drop() {
    let dir = tempfile::tempdir().unwrap();
    folder(dir.path());
    let options = ImageFolderOptions { batch_rows: 2, path_column: true, ..Default::default() };
    let whole = rows(&all(&mut ImageFolderSource::open(dir.path(), options.clone()).unwrap()));
    for k in 0..=4 {
        let mut source = ImageFolderSource::open(dir.path(), options.clone()).unwrap();
        source.skip(k as u64).unwrap();
        assert_eq!(rows(&all(&mut source)), whole[k..].to_vec(), "skip {k}");
    }
    let mut source = ImageFolderSource::open(dir.path(), options).unwrap();
    assert!(matches!(source.skip(5), Err(ImportError::InvalidArgument(_))), "past the end is refused");
}

#[test]
fn the_fingerprint_covers_the_files_and_the_options() {
    let dir = tempfile::tempdir().unwrap();
    folder(dir.path());
    let print = |options: ImageFolderOptions| ImageFolderSource::open(dir.path(), options).unwrap().fingerprint();
    let first = print(ImageFolderOptions::default());
    assert_eq!(first, print(ImageFolderOptions::default()));
    assert_ne!(first, print(ImageFolderOptions { path_column: true, ..Default::default() }));
    put(dir.path(), "cat/a.png", b"cat a, changed");
    assert_ne!(first, print(ImageFolderOptions::default()), "a changed image, another input");
}

#[test]
fn a_root_that_is_not_a_folder_and_a_batch_size_out_of_bounds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    put(dir.path(), "file.jpg", b"x");
    for batch_rows in [0, SOURCE_BATCH_ROWS_MAX + 1] {
        let error =
            ImageFolderSource::open(dir.path(), ImageFolderOptions { batch_rows, ..Default::default() }).unwrap_err();
        assert!(matches!(error, ImportError::InvalidArgument(_)), "{batch_rows}: {error:?}");
    }
    for root in [dir.path().join("file.jpg"), dir.path().join("missing")] {
        let error = ImageFolderSource::open(&root, ImageFolderOptions::default()).unwrap_err();
        assert!(matches!(error, ImportError::InvalidArgument(_)), "{error:?}");
    }
}
