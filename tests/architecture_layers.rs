//! The layering that a read of the sources can check (docs/ARCHITECTURE.md,
//! "Layers"): each top-level module of `src/` uses only the modules below
//! it ([`LAYERS`]); the I/O layer (`src/io/`) uses nothing of the crate but
//! `format`, `error`, `sync` and `io` itself; the layers above the store
//! reach it through the crate root's public re-exports, never through
//! `crate::store`; and `unsafe` code stands only in the files that own it
//! ([`UNSAFE_FILES`]). Publishing, which opens stores and reads
//! `shards.json` and `table.json`, lives above the table layer (`src/publish/`).

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
    assert!(root.join("src/publish/mod.rs").is_file(), "push and pull live in src/publish/");
    assert!(!root.join("src/io/remote/publish.rs").exists(), "publishing is not part of the I/O boundary");
}

/// Each top-level module of `src/` and the modules it may use, bottom up.
/// Items of the crate root stand for the module that defines them
/// ([`ROOT_ITEMS`]).
const LAYERS: [(&str, &[&str]); 12] = [
    ("format", &[]),
    ("error", &["format"]),
    ("sync", &[]),
    ("first_fit", &[]),
    ("sampler", &[]),
    ("io", &["format", "error", "sync"]),
    ("store", &["io", "format", "error", "sync", "first_fit"]),
    ("dataset", &["store", "io", "format", "error", "sync"]),
    ("table", &["dataset", "store", "io", "format", "error", "sync"]),
    ("loader", &["dataset", "sampler", "store", "io", "first_fit", "format", "error", "sync"]),
    ("publish", &["table", "dataset", "store", "io", "format", "error"]),
    ("import", &["table", "dataset", "store", "io", "format", "error", "sync"]),
];

/// The crate root's re-exports, by the module that defines them.
const ROOT_ITEMS: [(&str, &str); 14] = [
    ("Zrecord", "store"),
    ("Options", "store"),
    ("ReadMode", "store"),
    ("Stats", "store"),
    ("CompactOptions", "store"),
    ("CompactPlan", "store"),
    ("CompactReport", "store"),
    ("VerifyReport", "store"),
    ("APPEND_SEGMENT_BYTES_DEFAULT", "store"),
    ("default_dict_size", "store"),
    ("Error", "error"),
    ("Result", "error"),
    ("Corruption", "error"),
    ("Codec", "format"),
];

/// The files that hold `unsafe` code (a block, an `unsafe fn` or an
/// `unsafe impl`), each the owner of what it does: the real filesystem's
/// mappings and system calls, io_uring, the mapping contract, the remote
/// backend's mapping over fetched bytes and the positional one (the
/// contract's `unsafe fn`s, no `unsafe` block), the store's reads and word stores
/// through `meta.zr`'s mapping and `sums.zr`'s, and the sampler's vector
/// kernels.
const UNSAFE_FILES: [&str; 10] = [
    "io/mod.rs",
    "io/positional.rs",
    "io/real.rs",
    "io/uring.rs",
    "io/remote/mod.rs",
    "store/meta.rs",
    "store/sums.rs",
    "sampler/feistel.rs",
    "sampler/feistel/avx512.rs",
    "sampler/iid.rs",
];

/// The top-level module a file under `src/` belongs to (`io/real.rs` is in
/// `io`, `publish.rs` is `publish`).
fn top_module(name: &Path) -> String {
    let first = name.components().next().unwrap().as_os_str().to_string_lossy().to_string();
    first.trim_end_matches(".rs").to_string()
}

/// The modules of the crate `name` (under `src/`) uses, other than its own.
fn modules_used(name: &Path, text: &str) -> Vec<String> {
    let code = code(text);
    let mut used = crate_modules(&code);
    used.extend(super_modules(&code, depth(name)));
    let own = top_module(name);
    used.iter()
        .map(|m| ROOT_ITEMS.iter().find(|(item, _)| item == m).map_or(m.as_str(), |(_, module)| module).to_string())
        // A name that is neither a module nor a root item was reached from
        // an inline module (`mod tests { use super::X; }`), not the root.
        .filter(|m| *m != own && LAYERS.iter().any(|(layer, _)| layer == m))
        .collect()
}

fn sources() -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 40, "found the sources");
    files
        .into_iter()
        .filter(|p| p != &src.join("lib.rs"))
        .map(|p| (p.strip_prefix(&src).unwrap().to_path_buf(), std::fs::read_to_string(&p).unwrap()))
        .collect()
}

#[test]
fn every_layer_uses_only_the_layers_below_it() {
    for (name, text) in sources() {
        let own = top_module(&name);
        let (_, may_use) = LAYERS
            .iter()
            .find(|(layer, _)| *layer == own)
            .unwrap_or_else(|| panic!("src/{}: module `{own}` has no row in LAYERS", name.display()));
        for used in modules_used(&name, &text) {
            assert!(
                may_use.contains(&used.as_str()),
                "src/{} (layer `{own}`) uses `{used}`, which is not below it (LAYERS)",
                name.display()
            );
        }
    }
}

#[test]
fn the_layers_above_the_store_use_its_public_api_only() {
    for (name, text) in sources() {
        if ["dataset", "loader", "publish"].contains(&top_module(&name).as_str()) {
            let code = code(&text);
            assert!(
                !code.contains("crate::store") && !code.contains("super::store"),
                "src/{}: the store is reached through the crate root's re-exports",
                name.display()
            );
        }
    }
}

#[test]
fn unsafe_code_stands_only_where_it_is_owned() {
    let mut found = Vec::new();
    for (name, text) in sources() {
        let code = code(&text);
        if ["unsafe {", "unsafe fn", "unsafe impl"].iter().any(|u| code.contains(u)) {
            let name = name.display().to_string().replace('\\', "/");
            assert!(UNSAFE_FILES.contains(&name.as_str()), "src/{name} holds unsafe code: not in UNSAFE_FILES");
            found.push(name);
        }
    }
    for file in UNSAFE_FILES {
        assert!(found.iter().any(|f| f == file), "src/{file} holds no unsafe code any more: drop it from UNSAFE_FILES");
    }
}

#[test]
fn the_layer_check_catches_what_it_is_for() {
    let uses = |file: &str, text: &str| modules_used(Path::new(file), text);
    assert_eq!(uses("sampler/mod.rs", "use crate::dataset::Dataset;"), vec!["dataset"]);
    assert_eq!(uses("dataset/shards.rs", "use crate::{Options, ReadMode, Zrecord};"), vec!["store"; 3]);
    assert_eq!(uses("store/open.rs", "use super::super::loader::Batch;"), vec!["loader"]);
    assert_eq!(uses("store/open.rs", "use super::meta::Meta;\nuse crate::store::Options;"), Vec::<String>::new());
    assert_eq!(uses("publish.rs", "use crate::{Error, Codec};"), vec!["error", "format"]);
}
