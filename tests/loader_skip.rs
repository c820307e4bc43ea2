//! `skip_corrupt`: a damaged record stops the loader with an error naming
//! the stream, the step and the record; with the option it is replaced by
//! the next readable index, the batch says so, the statistics count it, and
//! a resumed loader yields the same batches. The oracle is the rows written.

use std::sync::Arc;

use loaderx::dataset::{Dataset, WriteOptions, write_dataset};
use loaderx::loader::{Batch, DataLoader, LoaderError, Mixture, Skip};
use loaderx::sampler::Mode;
use loaderx::{Codec, ReadOptions, VerifyReads};

const N: usize = 200;
const ROW: usize = 8; // u32s per row

fn rows() -> Vec<u32> {
    (0..(N * ROW) as u32).map(|v| v.wrapping_mul(2_654_435_761)).collect()
}

/// A raw dataset of `rows()` in `dir/name` with the low bit of the first
/// byte of each record of `damaged` flipped.
fn damaged_dataset(dir: &std::path::Path, name: &str, damaged: &[u64]) -> Arc<Dataset> {
    let path = dir.join(name);
    let options = WriteOptions { codec: Codec::Raw, ..WriteOptions::default() };
    write_dataset(&path, &rows(), &[ROW], &options).unwrap();
    // Raw rows lie back to back in chunk 0.
    let chunk = path.join("0.zr");
    let mut bytes = std::fs::read(&chunk).unwrap();
    assert_eq!(bytes.len(), N * ROW * 4);
    for &i in damaged {
        bytes[i as usize * ROW * 4] ^= 1;
    }
    std::fs::write(&chunk, bytes).unwrap();
    // Every read checked, warm ones from the page cache too.
    let reads = ReadOptions { verify: VerifyReads::Always, ..ReadOptions::default() };
    Arc::new(Dataset::open_with(&path, reads).unwrap())
}

/// The rows of `batch`'s column `x`, checked against the rows written at
/// the batch's indices.
fn check_rows(batch: &Batch) {
    let got = batch.get("x").unwrap().as_dense().unwrap().as_slice::<u32>().unwrap();
    let all = rows();
    for (k, &i) in batch.indices().iter().enumerate() {
        assert_eq!(&got[k * ROW..][..ROW], &all[i as usize * ROW..][..ROW], "position {k}, record {i}");
    }
}

#[test]
fn a_damaged_record_stops_the_loader_naming_stream_step_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let x = damaged_dataset(dir.path(), "x", &[37]);
    let mut loader = DataLoader::builder().stream("x", x).batch_size(16).mode(Mode::Sequential).build().unwrap();
    for _ in 0..2 {
        check_rows(&loader.next_batch().unwrap());
    }
    let err = loader.next_batch().unwrap_err();
    let LoaderError::Gather { step, stream, source } = &err else { panic!("{err}") };
    assert_eq!((*step, stream.as_str()), (2, "x"));
    let shown = source.to_string();
    assert!(shown.contains("record 37") && shown.contains("checksum"), "{shown}");
}

#[test]
fn with_skip_corrupt_the_next_readable_record_takes_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let x = damaged_dataset(dir.path(), "x", &[5, 6, 199]);
    let mut loader =
        DataLoader::builder().stream("x", x).batch_size(20).mode(Mode::Sequential).skip_corrupt(true).build().unwrap();
    let first = loader.next_batch().unwrap();
    let want: Vec<u64> = [0, 1, 2, 3, 4, 7, 7].into_iter().chain(7..20).collect();
    assert_eq!(first.indices(), &want[..]);
    let skips = [Skip { position: 5, index: 5, replacement: 7 }, Skip { position: 6, index: 6, replacement: 7 }];
    assert_eq!(first.skipped(), skips);
    check_rows(&first);
    // The last record wraps to the first.
    let mut last = loader.next_batch().unwrap();
    while last.step() < 9 {
        assert!(last.skipped().is_empty(), "step {}", last.step());
        last = loader.next_batch().unwrap();
    }
    assert_eq!(last.skipped(), [Skip { position: 19, index: 199, replacement: 0 }]);
    check_rows(&last);
    assert_eq!(loader.stats().skipped, 3);
}

#[test]
fn skips_are_deterministic_so_resume_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let damaged: Vec<u64> = (0..N as u64).filter(|i| i % 7 == 3).collect();
    let x = damaged_dataset(dir.path(), "x", &damaged);
    let build = |start: u64| {
        let builder = DataLoader::builder().stream("x", x.clone()).batch_size(32).num_workers(3).seed(9);
        builder.skip_corrupt(true).start_step(start).build().unwrap()
    };
    let mut whole = build(0);
    let run: Vec<Batch> = (0..30).map(|_| whole.next_batch().unwrap()).collect();
    assert!(run.iter().map(|b| b.skipped().len()).sum::<usize>() > 30, "the damaged records were drawn");
    for batch in &run {
        check_rows(batch);
        assert!(batch.indices().iter().all(|i| i % 7 != 3), "step {}: a damaged record read", batch.step());
    }
    let mut resumed = build(12);
    for want in &run[12..] {
        let got = resumed.next_batch().unwrap();
        assert_eq!((got.step(), got.indices(), got.skipped()), (want.step(), want.indices(), want.skipped()));
    }
}

#[test]
fn a_mixture_replaces_from_the_damaged_records_own_source() {
    let dir = tempfile::tempdir().unwrap();
    let a = damaged_dataset(dir.path(), "a", &[0, 1, 2]);
    let b = damaged_dataset(dir.path(), "b", &[]);
    let mixture = Mixture::new([1.0, 1.0]).source([("x", a)]).source([("x", b)]);
    let mut loader = DataLoader::builder()
        .mixture(mixture)
        .batch_size(40)
        .mode(Mode::Sequential)
        .skip_corrupt(true)
        .build()
        .unwrap();
    let batch = loader.next_batch().unwrap();
    let source = batch.source().unwrap();
    for skip in batch.skipped() {
        assert_eq!(source[skip.position], 0, "{skip:?}");
        assert_eq!(skip.replacement, 3, "{skip:?}");
    }
    assert_eq!(batch.skipped().len(), 3, "{:?}", batch.skipped());
}
