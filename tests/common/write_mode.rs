//! Helpers of the write-mode tests (`dataset_write_mode`,
//! `dataset_write_mode_kill`).

use std::path::{Path, PathBuf};

use loaderx::dataset::{Dataset, WriteMode, WriteOptions};

pub fn opts(mode: WriteMode) -> WriteOptions {
    WriteOptions { mode, ..WriteOptions::default() }
}

/// The dataset's values, record by record.
pub fn values(path: &Path) -> Vec<u32> {
    let ds = Dataset::open(path).unwrap();
    let idx: Vec<u64> = (0..ds.len()).collect();
    let mut out = vec![0u32; idx.len()];
    ds.gather_into(&idx, &mut out).unwrap();
    out
}

pub fn siblings(path: &Path) -> (PathBuf, PathBuf) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    (path.with_file_name(format!("{name}.overwrite-new")), path.with_file_name(format!("{name}.overwrite-old")))
}
