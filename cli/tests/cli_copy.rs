//! Copying a store compactly (issue 18, finding 11): `meta.zr` is a sparse
//! 256 MiB file, and the README's commands (`tar -S`, `cp --sparse=always`)
//! keep its holes; the copies verify and read back the same records.
//! Unix only: the commands are Unix's, and so is the count of blocks.
#![cfg(unix)]

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;

use common::*;
use loaderx::dataset::{Dataset, WriteOptions, write_dataset};

/// Bytes the file takes on disk.
fn allocated(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().blocks() * 512
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn assert_same_dataset(copy: &Path, values: &[f32]) {
    let meta = copy.join("meta.zr");
    assert_eq!(std::fs::metadata(&meta).unwrap().len(), 16 + (1 << 24) * 16);
    assert!(allocated(&meta) < 1 << 20, "{}: {} bytes on disk", meta.display(), allocated(&meta));
    ok(&loaderx(&["verify", path_str(copy)]));
    let ds = Dataset::open(copy).unwrap();
    let mut got = vec![0f32; values.len()];
    ds.gather_into(&(0..100).collect::<Vec<u64>>(), &mut got).unwrap();
    assert_eq!(got, values);
}

/// The commands this test runs are the README's.
#[test]
fn the_readme_gives_these_commands() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    for command in ["tar -cSf ds.tar -C PARENT ds", "tar -xSf ds.tar -C DEST", "cp -r --sparse=always"] {
        assert!(readme.contains(command), "README.md lacks {command:?}");
    }
}

#[test]
fn the_readmes_copy_commands_keep_the_holes() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    write_dataset(dir.path().join("ds"), &values, &[10], &WriteOptions::default()).unwrap();
    let archive = dir.path().join("ds.tar");
    run("tar", &["-cSf", path_str(&archive), "-C", path_str(dir.path()), "ds"]);
    assert!(std::fs::metadata(&archive).unwrap().len() < 1 << 20, "the archive holds the holes as holes");
    let unpacked = dir.path().join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    run("tar", &["-xSf", path_str(&archive), "-C", path_str(&unpacked)]);
    assert_same_dataset(&unpacked.join("ds"), &values);
    let copied = dir.path().join("copied");
    run("cp", &["-r", "--sparse=always", path_str(&dir.path().join("ds")), path_str(&copied)]);
    assert_same_dataset(&copied, &values);
}
