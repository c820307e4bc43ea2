//! The readers' lock and files that are not files, from the command line:
//! `delete` and `compact` are refused while the store is open for reading
//! elsewhere, or with `--wait` run once the reader has closed; `verify`,
//! `cat` and `stats` with a FIFO in place of `meta.zr` or `0.zr` return
//! with an error naming it (or, where they read no record, a result)
//! instead of blocking in `open`.

mod common;
#[path = "../../tests/common/mod.rs"]
mod store_common;

use common::*;
use loaderx::{Codec, Zrecord};

#[test]
fn delete_and_compact_are_refused_while_a_reader_is_open() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 20, Codec::Zstd);
    let reader = Zrecord::open_read_only(dir.path()).unwrap();
    assert_fails(&loaderx(&["delete", path_str(dir.path()), "3"]), "open for reading elsewhere");
    assert_fails(&loaderx(&["compact", path_str(dir.path())]), "open for reading elsewhere");
    assert_eq!(reader.len(), 20);
    drop(reader);
    ok(&loaderx(&["delete", path_str(dir.path()), "3"]));
    ok(&loaderx(&["compact", path_str(dir.path())]));
    assert_eq!(Zrecord::open_read_only(dir.path()).unwrap().len(), 19);
}

#[test]
#[cfg(target_os = "linux")]
fn delete_and_compact_with_wait_run_once_the_reader_closes() {
    let _x = exclusive();
    let dir = tempfile::tempdir().unwrap();
    make_store(dir.path(), 20, Codec::Zstd);
    let lock_file = dir.path().join("readers.lock");
    for args in [
        vec!["delete", path_str(dir.path()), "3", "--wait"],
        vec!["compact", path_str(dir.path()), "--repack", "--wait"],
    ] {
        let reader = Zrecord::open_read_only(dir.path()).unwrap();
        let len = reader.len();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_loaderx"));
        let mut child = command.args(&args).stdout(std::process::Stdio::null()).spawn().unwrap();
        let waited = store_common::until_blocked(
            || store_common::lock_waiters(&lock_file) > 0,
            || child.try_wait().unwrap().is_some(),
        );
        assert!(waited, "{args:?} returned with a reader open: {:?}", child.wait());
        assert_eq!(reader.len(), len);
        drop(reader);
        assert!(child.wait().unwrap().success(), "{args:?}");
    }
    let store = Zrecord::open_read_only(dir.path()).unwrap();
    assert_eq!((store.len(), store.stats().unwrap().reclaimable), (19, 0));
}

#[test]
#[cfg(unix)]
fn a_fifo_in_place_of_meta_or_a_chunk_file_is_an_error_not_a_hang() {
    let _x = exclusive();
    for name in ["meta.zr", "0.zr"] {
        let dir = tempfile::tempdir().unwrap();
        make_store(dir.path(), 5, Codec::Raw);
        let path = dir.path().join(name);
        std::fs::remove_file(&path).unwrap();
        store_common::mkfifo(&path);
        let _unblock = store_common::Unblocker::new(&path);
        let refused = format!("{name} is not a regular file but a FIFO");
        assert_fails(&loaderx(&["cat", path_str(dir.path())]), &refused);
        let verify = loaderx(&["verify", path_str(dir.path())]);
        assert_ne!(verify.status.code(), Some(0), "verify of a store with a FIFO {name}");
        assert!(format!("{}{}", stdout(&verify), stderr(&verify)).contains(&refused), "{}", stderr(&verify));
        let stats = loaderx(&["stats", path_str(dir.path())]);
        if name == "meta.zr" {
            assert_fails(&stats, &refused);
        } else {
            // The table alone answers stats: no record is read.
            assert!(ok(&stats).contains("records"), "{}", stdout(&stats));
        }
    }
}
