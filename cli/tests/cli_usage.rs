//! The command line as a whole: usage errors exit 2, every subcommand's help
//! documents the exit codes, errors are one line.

mod common;

use common::*;

const SUBCOMMANDS: [&str; 9] = ["stats", "verify", "compact", "convert", "cat", "delete", "bench", "push", "pull"];

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let p = path_str(dir.path());
    for args in [
        vec!["cat", p, "1", "--range", "0..2"],
        vec!["cat", p, "--range", "5..2"],
        vec!["cat", p, "--range", "x"],
        vec!["cat", p, "-1"],
        vec!["stats"],
        vec!["verify", p, "--fix"],
        vec!["convert", p],
        vec!["frobnicate"],
        vec![],
    ] {
        let out = loaderx(&args);
        assert_usage(&out);
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn help_documents_exit_codes() {
    let mut all = vec![vec!["--help"]];
    all.extend(SUBCOMMANDS.iter().map(|s| vec![*s, "--help"]));
    for args in all {
        let text = ok(&loaderx(&args));
        for code in
            ["  0  success", "  1  the command failed", "  2  invalid command line", "  3  verify found problems"]
        {
            assert!(text.contains(code), "{args:?}: {code:?} missing in {text}");
        }
    }
    let top = ok(&loaderx(&["--help"]));
    for sub in SUBCOMMANDS {
        assert!(top.contains(&format!("  {sub} ")), "{sub} missing in {top}");
    }
}

#[test]
fn errors_are_one_line_with_their_cause() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("meta.zr"), [0u8; 64]).unwrap();
    for sub in ["stats", "cat", "compact", "bench"] {
        assert_fails(&loaderx(&[sub, path_str(dir.path())]), "not a zrecord store");
    }
    let file = dir.path().join("f");
    std::fs::write(&file, "").unwrap();
    assert_fails(&loaderx(&["stats", path_str(&file)]), "not a directory");
}
