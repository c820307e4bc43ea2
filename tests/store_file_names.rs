//! Chunk file names are recognised by one rule (`loaderx::format::chunk_id_of`):
//! exactly the names the store writes (`7.zr`), as the reference does, whose
//! chunk files are `0.zr`, `1.zr`, ... (`docs/format.md`). A file named
//! `07.zr` is not a chunk file: a store never wrote it, so an open neither
//! takes it for a store's data nor removes it with the files past the
//! frontier.

use loaderx::format::{chunk_file_name, chunk_id_of};
use loaderx::{Codec, Error, Zrecord};

const FOREIGN: &[u8] = b"not a chunk of this store";

#[test]
fn one_rule_names_and_recognises_chunk_files() {
    assert_eq!(chunk_file_name(7), "7.zr");
    assert_eq!(chunk_id_of("7.zr"), Some(7));
    assert_eq!(chunk_id_of("07.zr"), None);
}

#[test]
fn a_directory_holding_07_zr_is_no_store_s_data() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("07.zr"), FOREIGN).unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    store.append(b"abc", 1, 3, Codec::Raw).unwrap();
    drop(store);
    assert_eq!(std::fs::read(dir.path().join("07.zr")).unwrap(), FOREIGN);
    // A chunk file the store would have written, without meta.zr, is refused.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("7.zr"), FOREIGN).unwrap();
    assert!(matches!(Zrecord::open(other.path()), Err(Error::MetaMissing { .. })));
}

#[test]
fn a_writer_s_open_removes_chunk_files_past_the_frontier_but_not_07_zr() {
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    store.append(b"abcdef", 2, 3, Codec::Raw).unwrap();
    drop(store);
    std::fs::write(dir.path().join("7.zr"), FOREIGN).unwrap();
    std::fs::write(dir.path().join("07.zr"), FOREIGN).unwrap();
    let store = Zrecord::open(dir.path()).unwrap();
    assert_eq!(store.get(1).unwrap(), b"def");
    drop(store);
    assert!(!dir.path().join("7.zr").exists(), "a chunk file past the frontier is removed");
    assert_eq!(std::fs::read(dir.path().join("07.zr")).unwrap(), FOREIGN, "07.zr is not a chunk file");
}
