//! The I/O boundary's size and shape (docs/ARCHITECTURE.md, `src/io/mod.rs`):
//! three traits of 25 methods at most, and no implementation that finds
//! its own files by their type: a batch over several files names them by
//! their `Handle`, so nothing in `src/io/`, `src/store/` or the
//! simulator's filesystem downcasts.

use std::path::Path;

/// The methods of each trait of `src/io/mod.rs`: a line `    fn` or
/// `    unsafe fn` between `pub trait NAME` and the closing brace.
fn trait_methods() -> Vec<(String, usize)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/io/mod.rs");
    let text = std::fs::read_to_string(path).unwrap();
    let mut traits: Vec<(String, usize)> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("pub trait ") {
            let name = rest.split([':', ' ', '<']).next().unwrap().to_string();
            traits.push((name, 0));
            inside = true;
        } else if inside && line == "}" {
            inside = false;
        } else if inside && (line.starts_with("    fn ") || line.starts_with("    unsafe fn ")) {
            traits.last_mut().unwrap().1 += 1;
        }
    }
    traits
}

#[test]
fn the_boundary_is_three_traits_of_25_methods_at_most() {
    let traits = trait_methods();
    let names: Vec<&str> = traits.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["Vfs", "VfsFile", "Map"], "{traits:?}");
    let total: usize = traits.iter().map(|(_, n)| n).sum();
    assert!(total <= 25, "the I/O boundary grew to {total} methods: {traits:?}");
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_implementation_downcasts_a_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src/io"), &mut files);
    rust_files(&root.join("src/store"), &mut files);
    files.push(root.join("sim/src/fs.rs"));
    assert!(files.len() > 5, "found the sources");
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap();
            for banned in ["downcast", "as_any(", "dyn Any", "std::any::Any", "fn raw_fd", ".raw_fd("] {
                assert!(!code.contains(banned), "{}:{}: `{banned}`: {line}", path.display(), n + 1);
            }
        }
    }
}
