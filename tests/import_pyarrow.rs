//! A Parquet file pyarrow wrote (`tests/data/import/make_pyarrow.py`), every
//! type of the mapping (a fixed-shape tensor, a string view, a dictionary,
//! nested structs included), imported and checked exactly against what
//! pyarrow and NumPy read from it (`pyarrow_types.json`).
#![cfg(feature = "arrow")]

use std::path::PathBuf;

use loaderx::import::{ImportOptions, ParquetSource, import};
use loaderx::table::{ColumnType, Table, TableColumn};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_pyarrow_file_imports_to_the_values_pyarrow_reads() {
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/import");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("pyarrow_types.json")).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("t");
    // Batches of 4 across row groups of 10: batches and groups unaligned.
    let mut source = ParquetSource::open(&[data.join("pyarrow_types.parquet")], 4).unwrap();
    let summary = import(&mut source, &dest, &ImportOptions::default(), &mut |_| Ok(())).unwrap();
    let rows = expected["rows"].as_u64().unwrap();
    assert_eq!(summary.table_rows, rows);
    let table = Table::open(&dest).unwrap();
    let columns = expected["columns"].as_object().unwrap();
    let names: Vec<&str> = table.columns().map(|(n, _, _)| n).collect();
    let want_names: Vec<&str> = expected["names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert_eq!(names, want_names);
    let all: Vec<u64> = (0..rows).collect();
    for (name, kind, column) in table.columns() {
        let want = &columns[name];
        match (want["kind"].as_str().unwrap(), kind, column) {
            ("fixed", ColumnType::Fixed, TableColumn::Fixed(d)) => {
                let mut bytes = vec![0u8; all.len() * d.row_bytes()];
                d.gather_bytes(&all, &mut bytes).unwrap();
                assert_eq!(hex(&bytes), want["hex"].as_str().unwrap(), "{name}");
            }
            (want_kind, _, TableColumn::Ragged(d)) => {
                assert_eq!(kind.name(), want_kind, "{name}");
                let batch = d.gather(&all).unwrap();
                let got: Vec<String> = (0..all.len()).map(|k| hex(batch.record(k).unwrap())).collect();
                let want: Vec<&str> = want["rows"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
                assert_eq!(got, want, "{name}");
            }
            (want_kind, kind, _) => panic!("{name}: {} where pyarrow's is {want_kind}", kind.name()),
        }
    }
    let Some(TableColumn::Fixed(t)) = table.column("tensor") else { panic!() };
    assert_eq!(t.shape(), &[2, 3]);
    let Some(TableColumn::Fixed(m)) = table.column("mat") else { panic!() };
    assert_eq!(m.shape(), &[3, 2]);
}
