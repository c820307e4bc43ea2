//! `loaderx gc`: the staged writes whose lock is free removed, a running
//! one (its lock held) left alone, the table untouched; a shard directory
//! no shard table lists removed.

use std::path::Path;
use std::process::Command;

use loaderx::io::real::RealFs;
use loaderx::io::{LockKind, OpenMode, Vfs};

fn gc(table: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_loaderx")).arg("gc").arg("--json").arg(table).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn removes_the_staging_of_writes_not_running() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let spec = [loaderx::table::ColumnSpec::utf8("text")];
    let mut w = loaderx::table::TableWriter::create(&table, &spec, &Default::default()).unwrap();
    w.append(&[loaderx::table::Values::Items(&[b"kept".as_slice()])]).unwrap();
    w.commit().unwrap();
    drop(w);
    let kept = std::fs::read(table.join("table.json")).unwrap();
    let staging = table.join(".staging");
    for w in ["dead", "running"] {
        std::fs::create_dir_all(staging.join(w).join("00000000-x/col-0000")).unwrap();
        std::fs::write(staging.join(format!("{w}.lock")), b"").unwrap();
    }
    let held = RealFs.open(&staging.join("running.lock"), OpenMode::Write).unwrap();
    assert!(held.lock(LockKind::Exclusive, false).unwrap());
    let out = gc(&table);
    let removed = serde_json::from_str::<serde_json::Value>(&out).unwrap()["removed"].clone();
    assert_eq!(removed, serde_json::json!([staging.join("dead").display().to_string()]), "{out}");
    assert!(!staging.join("dead").exists() && !staging.join("dead.lock").exists());
    assert!(staging.join("running").is_dir());
    drop(held);
    assert!(gc(&table).contains(&staging.join("running").display().to_string()));
    assert_eq!(std::fs::read(table.join("table.json")).unwrap(), kept);
    assert_eq!(gc(dir.path()), "{\"removed\":[]}\n");
}

#[test]
fn removes_a_shard_directory_no_shard_table_lists() {
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("t");
    let spec = [loaderx::table::ColumnSpec::utf8("text")];
    let mut w = loaderx::table::TableWriter::create(&table, &spec, &Default::default()).unwrap();
    w.append(&[loaderx::table::Values::Items(&[b"a".as_slice()])]).unwrap();
    w.commit().unwrap();
    drop(w);
    // As a commit that crashed between its renames and its shard tables leaves it.
    let slot = table.join("col-0000/shard-000001");
    std::fs::create_dir_all(slot.join("x")).unwrap();
    let out = gc(&table);
    let removed = serde_json::from_str::<serde_json::Value>(&out).unwrap()["removed"].clone();
    assert_eq!(removed, serde_json::json!([slot.display().to_string()]), "{out}");
    assert!(!slot.exists());
    assert_eq!(loaderx::table::Table::open(&table).unwrap().rows(), 1);
}
