//! Architecture invariants that a grep can check (docs/ARCHITECTURE.md):
//! only `src/io/real.rs` touches `std::fs` or `memmap2` (and, with
//! `src/io/uring.rs`, `libc` and io_uring), every `unsafe`
//! block or impl in `src/` carries a `// SAFETY:` reason, and each of the
//! store's files stays the only owner of what it owns (`meta.rs` of the
//! mapping of `meta.zr`, `chunks.rs` of the chunk files).

use std::path::{Path, PathBuf};

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

fn sources() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(files.len() > 5, "found the sources");
    files
        .into_iter()
        .map(|p| {
            (
                p.strip_prefix(root).unwrap().display().to_string().replace('\\', "/"),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect()
}

#[test]
fn only_the_real_filesystem_touches_std_fs_and_memmap2() {
    for (name, text) in sources() {
        if name == "src/io/real.rs" {
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for banned in ["std::fs", "memmap2", "fs::File", "OpenOptions", "libc::", "io_uring::"] {
                // The io_uring engine is the real filesystem's too, in its own file.
                if name == "src/io/uring.rs" && ["libc::", "io_uring::"].contains(&banned) {
                    continue;
                }
                assert!(!code.contains(banned), "{name}:{}: `{banned}` outside src/io/real.rs: {line}", n + 1);
            }
        }
    }
}

#[test]
fn every_unsafe_block_has_a_safety_reason() {
    for (name, text) in sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") || code.starts_with("pub(crate) unsafe fn") || code.starts_with("unsafe fn") {
                continue;
            }
            if code.contains("unsafe {") || code.starts_with("unsafe impl") {
                let window = &lines[n.saturating_sub(12)..=n];
                assert!(
                    window.iter().any(|l| l.contains("SAFETY")),
                    "{name}:{}: unsafe without a `// SAFETY:` reason above it",
                    n + 1
                );
            }
        }
    }
}

/// `(owner, calls no other store file makes)`.
const OWNERS: [(&str, &[&str]); 3] = [
    (
        "src/store/meta.rs",
        &["store_word(", "flush_range(", "map.write(", "map.read(", "Residency::Hole", "MapMode::Shared"],
    ),
    ("src/store/chunks.rs", &["MapMode::Read", "chunk_file_name(", "chunk_id_of("]),
    ("src/store/sums.rs", &["SUMS_FILE", "SUMS_TMP_FILE", "sum_offset("]),
];

#[test]
fn each_store_owner_is_the_only_caller_of_its_operations() {
    for (name, text) in sources() {
        for (owner, calls) in OWNERS {
            // `open.rs` asks whether a directory without `meta.zr` holds
            // chunk files before a chunk set exists.
            // `sums.zr`'s owner maps, stores into and syncs its own file
            // (`map.write(`: the zeros it writes ahead of its slots).
            let sums = ["store_word(", "flush_range(", "MapMode::Shared", "map.write("];
            let allowed = |call: &str| {
                name == owner
                    || (name == "src/store/open.rs" && call == "chunk_id_of(")
                    || (name == "src/store/sums.rs" && sums.contains(&call))
            };
            if !name.starts_with("src/store/") {
                continue;
            }
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap();
                for call in calls.iter().filter(|c| !allowed(c)) {
                    assert!(!code.contains(call), "{name}:{}: `{call}` belongs to {owner}: {line}", n + 1);
                }
            }
        }
    }
}
