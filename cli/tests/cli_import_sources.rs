//! `loaderx import` of JSON Lines, WebDataset tars and an image folder:
//! each format by its extension or `--format`, its options, the values
//! read back exactly, an image folder's `classes.json`, and a WebDataset
//! import killed at points and rerun giving exactly the source's rows.

mod common;

use std::path::Path;

use common::*;
use loaderx::table::{Table, TableColumn};

fn ints(dest: &Path, column: &str) -> Vec<i64> {
    let table = Table::open(dest).unwrap();
    let Some(TableColumn::Fixed(d)) = table.column(column) else { panic!("no fixed {column}") };
    let all: Vec<u64> = (0..d.len()).collect();
    let mut bytes = vec![0u8; all.len() * 8];
    d.gather_bytes(&all, &mut bytes).unwrap();
    bytes.chunks(8).map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect()
}

fn all_rows(dest: &Path) -> Vec<u64> {
    (0..Table::open(dest).unwrap().rows()).collect()
}

/// A tar of `members` (name, bytes), regular files.
fn write_tar(path: &Path, members: &[(String, Vec<u8>)]) {
    let mut builder = tar::Builder::new(std::fs::File::create(path).unwrap());
    for (name, data) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, name, data.as_slice()).unwrap();
    }
    builder.finish().unwrap();
}

/// Sample `k`'s image bytes (of a length that varies) and label.
fn sample(k: usize) -> (Vec<u8>, i64) {
    ((0..(k * 37) % 300 + 1).map(|j| (j * 7 + k) as u8).collect(), (k % 10) as i64)
}

/// Shards `shard-000.tar`.. of `per` samples each, `jpg` and `cls` members.
fn write_shards(dir: &Path, shards: usize, per: usize) {
    for s in 0..shards {
        let mut members = Vec::new();
        for k in s * per..(s + 1) * per {
            let (image, label) = sample(k);
            members.push((format!("s{k:06}.jpg"), image));
            members.push((format!("s{k:06}.cls"), label.to_string().into_bytes()));
        }
        write_tar(&dir.join(format!("shard-{s:03}.tar")), &members);
    }
}

#[test]
fn import_jsonl_by_its_extension_with_infer_rows() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("in.ndjson");
    let lines: String = (0..20).map(|i| format!("{{\"id\": {i}, \"text\": \"line {i}\"}}\n")).collect();
    std::fs::write(&file, lines).unwrap();
    let dest = dir.path().join("t");
    let json = ok_json(&loaderx(&["import", path_str(&file), path_str(&dest), "--infer-rows", "5", "--json"]));
    assert_eq!(json["table_rows"].as_u64(), Some(20));
    assert_eq!(ints(&dest, "id"), (0..20).collect::<Vec<_>>());
    let texts = Table::open(&dest).unwrap().strings("text", &all_rows(&dest)).unwrap();
    assert_eq!(texts, (0..20).map(|i| format!("line {i}")).collect::<Vec<_>>());
    let text = ok(&loaderx(&["import", path_str(&file), path_str(&dest), "--infer-rows", "5"]));
    assert!(text.contains("imported already"), "{text}");
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"id\": 1}\n{\"id\": \n").unwrap();
    assert_fails(&loaderx(&["import", path_str(&bad), path_str(&dir.path().join("u"))]), "bad.jsonl");
    let out = loaderx(&["import", path_str(&file), path_str(&dir.path().join("v")), "--path-column"]);
    assert_fails(&out, "--path-column is for --format imagefolder");
}

#[test]
fn import_webdataset_shards_by_a_brace_pattern() {
    let dir = tempfile::tempdir().unwrap();
    write_shards(dir.path(), 3, 7);
    let pattern = dir.path().join("shard-{000..002}.tar");
    let dest = dir.path().join("t");
    let json = ok_json(&loaderx(&["import", path_str(&pattern), path_str(&dest), "--json"]));
    assert_eq!(json["table_rows"].as_u64(), Some(21));
    let table = Table::open(&dest).unwrap();
    let images = table.values("jpg", &all_rows(&dest)).unwrap();
    assert_eq!(images, (0..21).map(|k| sample(k).0).collect::<Vec<_>>());
    assert_eq!(ints(&dest, "cls"), (0..21).map(|k| sample(k).1).collect::<Vec<_>>());
}

#[test]
fn import_an_image_folder_writes_its_class_names_beside_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("images");
    let mut expected = Vec::new();
    for (label, class) in ["cat", "dog"].iter().enumerate() {
        std::fs::create_dir_all(root.join(class)).unwrap();
        for k in 0..3 {
            let bytes = format!("{class} image {k}").into_bytes();
            std::fs::write(root.join(class).join(format!("{k}.jpg")), &bytes).unwrap();
            expected.push((bytes, label as i64, format!("{class}/{k}.jpg")));
        }
    }
    std::fs::write(root.join("cat").join("notes.txt"), b"not an image").unwrap();
    let dest = dir.path().join("t");
    let out = loaderx(&["import", path_str(&root), path_str(&dest)]);
    assert_fails(&out, "--format");
    let args = ["import", path_str(&root), path_str(&dest), "--format", "imagefolder", "--path-column", "--json"];
    assert_eq!(ok_json(&loaderx(&args))["table_rows"].as_u64(), Some(6));
    let table = Table::open(&dest).unwrap();
    let rows = all_rows(&dest);
    assert_eq!(table.values("image", &rows).unwrap(), expected.iter().map(|e| e.0.clone()).collect::<Vec<_>>());
    assert_eq!(ints(&dest, "label"), expected.iter().map(|e| e.1).collect::<Vec<_>>());
    assert_eq!(table.strings("path", &rows).unwrap(), expected.iter().map(|e| e.2.clone()).collect::<Vec<_>>());
    let classes: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dest.join("classes.json")).unwrap()).unwrap();
    assert_eq!(classes, serde_json::json!(["cat", "dog"]));
    assert!(!dest.join("classes.json.tmp").exists());
    std::fs::remove_file(dest.join("classes.json")).unwrap();
    let out = ok(&loaderx(&args[..args.len() - 1]));
    assert!(out.contains("imported already"), "{out}");
    assert!(dest.join("classes.json").exists(), "a rerun writes the class names again");
}

#[test]
fn import_webdataset_killed_at_any_point_then_rerun_gives_exactly_the_source_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (shards, per) = (8, 4_000);
    let n = shards * per;
    write_shards(dir.path(), shards, per);
    let dest = dir.path().join("t");
    let args = ["import", path_str(dir.path()), path_str(&dest), "--commit-rows", "2000", "--codec", "raw"];
    let killed_with_rows =
        import_killed_at(&args, &dest, &[(0, 2), (2_000, 0), (6_000, 3), (12_000, 1), (20_000, 7), (28_000, 0)]);
    let json = ok_json(&loaderx(&[&args[..], &["--json"]].concat()));
    let rows = json["table_rows"].as_u64().unwrap();
    assert_eq!(rows, n as u64, "killed with {killed_with_rows:?}");
    assert_eq!(json["skipped"].as_u64().unwrap() + json["rows"].as_u64().unwrap(), rows);
    assert_eq!(ints(&dest, "cls"), (0..n).map(|k| sample(k).1).collect::<Vec<_>>(), "killed with {killed_with_rows:?}");
    let images = Table::open(&dest).unwrap().values("jpg", &all_rows(&dest)).unwrap();
    assert!(images.iter().enumerate().all(|(k, image)| *image == sample(k).0), "killed with {killed_with_rows:?}");
}
