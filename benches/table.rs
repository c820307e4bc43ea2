//! Appending to a table: 200,000 rows of four columns (an `<i8` label, an
//! `<f4[4]` feature, ragged `<i4` tokens of 0 to 31, text of 8 to 40
//! bytes) in batches of 256 and of 4,096 rows, committed once at the end:
//! the cost of the appends themselves, per batch and per column. Each
//! round writes a new table; rounds of the two batch sizes alternate.
//!
//! ```text
//! cargo bench -p loaderx --bench table               # in a temporary directory
//! LOADERX_BENCH_DIR=/path cargo bench -p loaderx --bench table
//! ```
//!
//! Two revisions side by side: build this bench in each (its only API is
//! `TableWriter::{create, append, commit}`) and run the binaries in turn,
//! each with `--rounds 1`, alternating (`docs/benchmarks.md`, "Tables").

use std::time::Instant;

use loaderx::dataset::{DType, WriteOptions};
use loaderx::table::{ColumnSpec, TableWriter, Values};

const ROWS: usize = 200_000;
const BATCHES: [usize; 2] = [256, 4096];

/// The four columns of rows `range`, as the writer takes them.
struct Batch {
    label: Vec<u8>,
    feature: Vec<u8>,
    tokens: Vec<Vec<u8>>,
    text: Vec<Vec<u8>>,
}

fn batch(range: std::ops::Range<usize>) -> Batch {
    let label = range.clone().flat_map(|i| (i as i64 % 1000).to_le_bytes()).collect();
    let feature =
        range.clone().flat_map(|i| (0..4).flat_map(move |j| ((i * 4 + j) as f32 * 0.25).to_le_bytes())).collect();
    let tokens = range
        .clone()
        .map(|i| (0..(i * 7) % 32).flat_map(|j| ((i + j) as i32 % 50_000).to_le_bytes()).collect())
        .collect();
    let text = range.map(|i| format!("row {i} of the table").repeat(1 + i % 2).into_bytes()).collect();
    Batch { label, feature, tokens, text }
}

/// Seconds to append every row in batches of `size`, then commit.
fn run(dir: &std::path::Path, size: usize, batches: &[Batch]) -> f64 {
    let dtype = |s| DType::parse(s).expect("a dtype");
    let columns = [
        ColumnSpec::fixed("label", dtype("<i8"), &[]),
        ColumnSpec::fixed("feature", dtype("<f4"), &[4]),
        ColumnSpec::ragged("tokens", dtype("<i4"), &[]),
        ColumnSpec::utf8("text"),
    ];
    let path = dir.join(format!("table-{size}"));
    let _ = std::fs::remove_dir_all(&path);
    let start = Instant::now();
    let mut writer = TableWriter::create(&path, &columns, &WriteOptions::default()).expect("create");
    for b in batches {
        let tokens: Vec<&[u8]> = b.tokens.iter().map(Vec::as_slice).collect();
        let text: Vec<&[u8]> = b.text.iter().map(Vec::as_slice).collect();
        let values = [Values::Fixed(&b.label), Values::Fixed(&b.feature), Values::Items(&tokens), Values::Items(&text)];
        writer.append(&values).expect("append");
    }
    assert_eq!(writer.commit().expect("commit"), ROWS as u64);
    drop(writer);
    let seconds = start.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&path).expect("remove");
    seconds
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds = args
        .iter()
        .position(|a| a == "--rounds")
        .and_then(|k| args.get(k + 1))
        .map_or(5, |r| r.parse().expect("a count"));
    let tmp =
        tempfile::tempdir_in(std::env::var_os("LOADERX_BENCH_DIR").unwrap_or_else(|| std::env::temp_dir().into()))
            .expect("a directory");
    let inputs: Vec<Vec<Batch>> =
        BATCHES.iter().map(|&size| (0..ROWS).step_by(size).map(|s| batch(s..(s + size).min(ROWS))).collect()).collect();
    let mut times = vec![Vec::new(); BATCHES.len()];
    for _ in 0..rounds {
        for (k, &size) in BATCHES.iter().enumerate() {
            times[k].push(run(tmp.path(), size, &inputs[k]));
        }
    }
    for (k, &size) in BATCHES.iter().enumerate() {
        let mut t = times[k].clone();
        t.sort_by(f64::total_cmp);
        let median = t[t.len() / 2];
        println!(
            "table append, batches of {size:>5}: median {median:.3} s over {rounds} rounds ({:.0} rows/s, {} batches)",
            ROWS as f64 / median,
            ROWS.div_ceil(size)
        );
    }
}
