//! The layering that a read of the sources can check (docs/ARCHITECTURE.md):
//! the I/O layer (`src/io/`) uses nothing of the crate but `format`,
//! `error`, `sync` and `io` itself. Publishing, which opens stores and reads
//! `shards.json`, lives above the dataset layer (`src/publish.rs`).

use std::path::{Path, PathBuf};

/// The crate modules that `src/io/` may use.
const IO_MAY_USE: [&str; 4] = ["io", "format", "error", "sync"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of `text` outside line comments (doc comments included).
fn code(text: &str) -> String {
    text.lines().map(|line| line.split("//").next().unwrap()).collect::<Vec<_>>().join("\n")
}

fn identifier(text: &str) -> &str {
    let end = text.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(text.len());
    &text[..end]
}

/// The first segment of every path that follows `crate::` in `code`:
/// `crate::format::X` gives `format`, `crate::{error::Error, io}` gives
/// `error` and `io`.
fn crate_modules(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        if at > 0 && code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue; // `my_crate::`, not `crate::`
        }
        let rest = code[at + "crate::".len()..].trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let (mut depth, mut start) = (0, 0);
            for (k, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push(identifier(group[start..].trim_start()).to_string());
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(identifier(group[start..].trim_start()).to_string());
                        start = k + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(identifier(rest).to_string());
        }
    }
    out.retain(|m| !m.is_empty());
    out
}

/// How many `super::` a path in `file` (under `src/`) takes to reach the
/// crate root: `src/io/mod.rs` is module `io` (1), `src/io/real.rs` is
/// `io::real` (2).
fn depth(file: &Path) -> usize {
    let parts = file.components().count();
    if file.file_name().is_some_and(|n| n == "mod.rs") { parts - 1 } else { parts }
}

/// The crate modules `code` names through `super::` chains that reach the
/// crate root from a file `depth` modules deep.
fn super_modules(code: &str, depth: usize) -> Vec<String> {
    let needle = "super::".repeat(depth);
    let mut out = Vec::new();
    for (at, _) in code.match_indices(&needle) {
        if code[..at].ends_with("super::") || code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        out.push(identifier(&code[at + needle.len()..]).to_string());
    }
    out.retain(|m| !m.is_empty() && m != "super");
    out
}

/// The crate modules the file `name` (under `src/`) uses that the I/O layer may not.
fn io_violations(name: &Path, text: &str) -> Vec<String> {
    let code = code(text);
    let mut used = crate_modules(&code);
    used.extend(super_modules(&code, depth(name)));
    used.retain(|m| !IO_MAY_USE.contains(&m.as_str()));
    used
}

#[test]
fn the_io_layer_uses_only_format_error_and_sync() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src.join("io"), &mut files);
    assert!(files.len() >= 5, "found the I/O layer's sources");
    for path in files {
        let name = path.strip_prefix(&src).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let used = io_violations(name, &text);
        assert!(
            used.is_empty(),
            "src/{} uses crate::{:?}: the I/O layer knows no layer above it",
            name.display(),
            used
        );
    }
}

#[test]
fn the_check_catches_what_it_is_for() {
    let file = Path::new("io/remote/publish.rs");
    for (text, caught) in [
        ("use crate::dataset::SCHEMA_FILE;", vec!["dataset"]),
        ("use crate::store::Zrecord;", vec!["store"]),
        ("use crate::{error::Error, dataset::shard_dir};", vec!["dataset"]),
        ("let x = crate::dataset::ShardTable::read(fs, dir);", vec!["dataset"]),
        ("use super::super::super::store::Zrecord;", vec!["store"]),
        ("use super::super::{BatchRead, Vfs};", vec![]),
        ("use crate::format::META_FILE;\nuse crate::io::Vfs;\nuse crate::sync::Mutex;", vec![]),
        ("// see crate::dataset::shard_dir\nuse crate::error::Error;", vec![]),
    ] {
        assert_eq!(io_violations(file, text), caught, "{text}");
    }
    assert_eq!(io_violations(Path::new("io/mod.rs"), "use super::store::Zrecord;"), vec!["store"]);
    assert_eq!(io_violations(Path::new("io/real.rs"), "use super::super::loader::Batch;"), vec!["loader"]);
}

#[test]
fn publishing_is_above_the_io_layer() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(root.join("src/publish.rs").is_file(), "push and pull live in src/publish.rs");
    assert!(!root.join("src/io/remote/publish.rs").exists(), "publishing is not part of the I/O boundary");
}
