//! Each owner of the store's state is the only code that touches its
//! fields (docs/ARCHITECTURE.md, "Code map"): no field of an owner in
//! `src/store/` is declared visible outside its file (`pub`, `pub(crate)`,
//! `pub(super)`, `pub(in ..)`); the other files call its methods. A struct
//! of `src/store/` with visible fields is a plain value (a parameter bag,
//! a record of a plan, the public API's options and reports) and is named
//! below as one, so that a new struct is classified when it is added.

use std::path::Path;

/// The owners: each holds state only its own file changes.
const OWNERS: [(&str, &str); 13] = [
    ("src/store/mod.rs", "Zrecord"),
    ("src/store/access.rs", "Home"),
    ("src/store/meta.rs", "Meta"),
    ("src/store/meta.rs", "AppendGuard"),
    ("src/store/chunks.rs", "ChunkSet"),
    ("src/store/chunks.rs", "Chunk"),
    ("src/store/fail_stop.rs", "FailStop"),
    ("src/store/readers.rs", "Exclusive"),
    ("src/store/batch.rs", "Residency"),
    ("src/store/codec.rs", "Dictionary"),
    ("src/store/entry.rs", "ValidEntry"),
    ("src/store/read.rs", "View"),
    ("src/store/read_stats.rs", "ReadCounters"),
];

/// Plain values, whose fields are their interface.
const VALUES: [&str; 17] = [
    "Options",
    "ReadOptions",
    "Stats",
    "ReadStats",
    "CompactOptions",
    "CompactPlan",
    "CompactReport",
    "VerifyReport",
    "Encoding",
    "Encoded",
    "Block",
    "Bounds",
    "Intent",
    "Sum",
    "CoverReport",
    "Group",
    "Move",
];

/// `(file, struct, fields declared visible)` for every struct of `src/store/`.
fn structs() -> Vec<(String, String, Vec<String>)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root.join("src/store")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let file = path.strip_prefix(root).unwrap().display().to_string().replace('\\', "/");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let code = line.trim_start();
            let Some(rest) = code
                .strip_prefix("pub(crate) struct ")
                .or_else(|| code.strip_prefix("pub struct "))
                .or_else(|| code.strip_prefix("struct "))
            else {
                continue;
            };
            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let after = &rest[name.len()..];
            let after = after.trim_start_matches(|c| c != '{' && c != '(' && c != ';');
            let mut visible = Vec::new();
            if after.starts_with('(') {
                // A tuple struct: its fields are on this line.
                if after.contains("(pub") || after.contains(", pub") {
                    visible.push(after.to_string());
                }
            } else if after.starts_with('{') && !after.contains('}') {
                for field in &lines[n + 1..] {
                    let field = field.trim_start();
                    if field.starts_with('}') {
                        break;
                    }
                    if field.starts_with("pub ") || field.starts_with("pub(") {
                        visible.push(field.to_string());
                    }
                }
            }
            out.push((file.clone(), name, visible));
        }
    }
    assert!(out.len() > 10, "found the structs of src/store/");
    out
}

#[test]
fn no_owner_declares_a_field_visible_outside_its_file() {
    let structs = structs();
    for (file, owner) in OWNERS {
        let found = structs.iter().find(|(f, name, _)| f == file && name == owner);
        let (_, _, visible) = found.unwrap_or_else(|| panic!("owner {owner} not found in {file}: update the list"));
        assert!(visible.is_empty(), "{file}: the fields of {owner} are its file's alone: {visible:?}");
    }
}

#[test]
fn every_struct_with_visible_fields_is_a_plain_value() {
    for (file, name, visible) in structs() {
        assert!(
            visible.is_empty() || VALUES.contains(&name.as_str()),
            "{file}: {name} declares fields visible outside its file ({visible:?}): give it methods, or, if it is \
             a plain value, name it in VALUES"
        );
    }
}
