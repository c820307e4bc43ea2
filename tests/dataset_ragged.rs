//! Ragged datasets: packed gathers, pad and the fused gather-into-padded
//! against an oracle (a `Vec` of records), zero-length records, max_len
//! errors and truncation, appends.

use loaderx::Codec;
use loaderx::dataset::{
    DType, DatasetError, RaggedDataset, Tensor, WriteOptions, pad, pad_bytes, pad_truncated, write_dataset,
    write_ragged, write_ragged_bytes, write_ragged_results,
};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `n` token sequences of 0..=max_rows rows of `row` i32 each (some empty).
fn sequences(n: usize, max_rows: u64, row: usize, seed: u64) -> Vec<Vec<i32>> {
    let mut rng = Rng(seed | 1);
    (0..n)
        .map(|k| {
            let rows = if k % 5 == 0 { 0 } else { rng.below(max_rows + 1) as usize };
            (0..rows * row).map(|_| (rng.below(50) as i32) - 10).collect()
        })
        .collect()
}

/// The oracle's padded batch.
fn padded_oracle(seqs: &[Vec<i32>], indices: &[u64], row: usize, max_len: usize, pad: i32) -> Vec<i32> {
    indices
        .iter()
        .flat_map(|&i| {
            let s = &seqs[i as usize];
            let mut out = s.clone();
            out.resize(max_len * row, pad);
            out
        })
        .collect()
}

#[test]
fn packed_padded_and_fused_match_the_oracle() {
    let dir = tempfile::tempdir().unwrap();
    for (row_shape, row) in [(vec![], 1usize), (vec![3usize], 3)] {
        let seqs = sequences(400, 40, row, 9 + row as u64);
        for codec in [Codec::Raw, Codec::Zstd, Codec::ZstdDict] {
            let path = dir.path().join(format!("{}-{row}", codec.name()));
            let opts = WriteOptions { chunk_bytes: 4096, ..WriteOptions::codec(codec) };
            assert_eq!(write_ragged(&path, &row_shape, &seqs, &opts).unwrap(), 400);
            let rds = RaggedDataset::open(&path).unwrap();
            assert_eq!((rds.len(), rds.item_shape(), rds.row_bytes()), (400, &row_shape[..], 4 * row));
            assert_eq!(rds.shard(0).unwrap().has_dict(), codec == Codec::ZstdDict);
            let mut rng = Rng(3);
            for batch in [0usize, 1, 5, 64, 256] {
                let indices: Vec<u64> = (0..batch).map(|_| rng.below(400)).collect();
                let packed = rds.gather(&indices).unwrap();
                let want: Vec<i32> = indices.iter().flat_map(|&i| seqs[i as usize].clone()).collect();
                assert_eq!(packed.values.as_slice::<i32>().unwrap(), &want[..], "{codec:?} {batch}");
                assert_eq!(packed.len(), batch);
                let mut expect_splits = vec![0u64];
                for &i in &indices {
                    expect_splits.push(expect_splits.last().unwrap() + (seqs[i as usize].len() / row) as u64);
                }
                assert_eq!(packed.row_splits, expect_splits);
                for (k, &i) in indices.iter().enumerate() {
                    assert_eq!(packed.record(k), Some(bytemuck::cast_slice::<i32, u8>(&seqs[i as usize])));
                }
                let longest = indices.iter().map(|&i| seqs[i as usize].len() / row).max().unwrap_or(0);
                for (max_len, pad_value) in [(None, 0), (Some(longest + 3), -1), (Some(longest), 7)] {
                    let ml = max_len.unwrap_or(longest);
                    let want = padded_oracle(&seqs, &indices, row, ml, pad_value);
                    let p = packed.pad(max_len, pad_value).unwrap();
                    let fused = rds.gather_padded(&indices, max_len, pad_value).unwrap();
                    let mut shape = vec![batch, ml];
                    shape.extend(&row_shape);
                    assert_eq!(p.values.shape(), &shape[..]);
                    assert_eq!(p.values.as_slice::<i32>().unwrap(), &want[..], "pad {codec:?} {batch} {max_len:?}");
                    assert_eq!(fused, p, "fused {codec:?} {batch} {max_len:?}");
                    let lengths: Vec<u64> = indices.iter().map(|&i| (seqs[i as usize].len() / row) as u64).collect();
                    assert_eq!(p.lengths, lengths);
                    assert_eq!(p.lengths_tensor().as_slice::<i64>().unwrap().len(), batch);
                }
            }
            let r = rds.get(1).unwrap();
            assert_eq!(r.as_slice::<i32>().unwrap(), &seqs[1][..]);
            assert_eq!(r.shape()[0], seqs[1].len() / row);
            assert_eq!(rds.row_counts(&[0, 1]).unwrap(), [0, (seqs[1].len() / row) as u64]);
        }
    }
}

#[test]
fn a_record_longer_than_max_len_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let seqs: Vec<Vec<i32>> = [3usize, 1, 4, 0, 5].iter().map(|&n| (0..n as i32).collect()).collect();
    write_ragged(dir.path(), &[], &seqs, &WriteOptions::default()).unwrap();
    let rds = RaggedDataset::open(dir.path()).unwrap();
    let err = rds.gather_padded(&[1, 4, 2], Some(3), 0i32).unwrap_err();
    assert!(matches!(err, DatasetError::TooLong { position: 1, rows: 5, max_len: 3 }), "{err}");
    let packed = rds.gather(&[1, 4, 2]).unwrap();
    assert!(matches!(packed.pad(Some(4), 0i32), Err(DatasetError::TooLong { position: 1, rows: 5, max_len: 4 })));
    assert!(matches!(rds.gather_padded(&[0], None, 0f32), Err(DatasetError::DtypeMismatch { .. })));
    assert!(matches!(rds.gather_padded_bytes(&[0], None, &[0u8; 2]), Err(DatasetError::InvalidArgument(_))));
    // Zero-length records only, and an empty batch.
    let p = rds.gather_padded(&[3, 3], None, 9i32).unwrap();
    assert_eq!((p.values.shape(), p.lengths.as_slice()), (&[2, 0][..], &[0u64, 0][..]));
    let p = rds.gather_padded(&[], None, 9i32).unwrap();
    assert_eq!(p.values.shape(), &[0, 0]);
    assert!(matches!(rds.gather_padded(&[], Some(usize::MAX), 9i32), Err(DatasetError::InvalidArgument(_))));
    assert_eq!((packed.record(3), packed.rows(3)), (None, None));
}

#[test]
fn pad_checks_its_input() {
    let values = Tensor::from_slice(&[1i32, 2, 3, 4], &[4]).unwrap();
    assert!(matches!(pad(&values, &[], None, 0i32), Err(DatasetError::InvalidArgument(_))));
    assert!(matches!(pad(&values, &[0, 3, 2], None, 0i32), Err(DatasetError::InvalidArgument(_))));
    assert!(matches!(pad(&values, &[0, 5], None, 0i32), Err(DatasetError::InvalidArgument(_))));
    assert!(matches!(pad(&values, &[0, 4], None, 0u32), Err(DatasetError::DtypeMismatch { .. })));
    assert!(matches!(pad_bytes(&values, &[0, 4], None, &[0; 3]), Err(DatasetError::InvalidArgument(_))));
    let scalar = Tensor::from_slice(&[1i32], &[]).unwrap();
    assert!(matches!(pad(&scalar, &[0, 1], None, 0i32), Err(DatasetError::ShapeMismatch(_))));
    // row_splits need not start at 0 (a slice of a bigger batch).
    let p = pad(&values, &[1, 2, 4], Some(3), -1i32).unwrap();
    assert_eq!(p.values.as_slice::<i32>().unwrap(), &[2, -1, -1, 3, 4, -1]);
    // A multi-byte pad pattern, byte-level.
    let p = pad_bytes(&values, &[0, 1], Some(2), &0x0102_0304i32.to_ne_bytes()).unwrap();
    assert_eq!(p.values.as_slice::<i32>().unwrap(), &[1, 0x0102_0304]);
}

#[test]
fn pad_truncated_keeps_the_first_max_len_rows() {
    for (row_shape, row) in [(vec![], 1usize), (vec![3usize], 3)] {
        let seqs = sequences(60, 12, row, 21 + row as u64);
        let mut shape = vec![seqs.iter().map(|s| s.len() / row).sum::<usize>()];
        shape.extend(&row_shape);
        let values = Tensor::from_slice(&seqs.concat(), &shape).unwrap();
        let splits: Vec<u64> = std::iter::once(0)
            .chain(seqs.iter().scan(0u64, |at, s| {
                *at += (s.len() / row) as u64;
                Some(*at)
            }))
            .collect();
        for max_len in [0usize, 1, 5, 12, 20] {
            let cut: Vec<Vec<i32>> = seqs.iter().map(|s| s[..s.len().min(max_len * row)].to_vec()).collect();
            let all: Vec<u64> = (0..seqs.len() as u64).collect();
            let p = pad_truncated(&values, &splits, max_len, -7i32).unwrap();
            assert_eq!(p.values.as_slice::<i32>().unwrap(), padded_oracle(&cut, &all, row, max_len, -7));
            let lengths: Vec<u64> = cut.iter().map(|s| (s.len() / row) as u64).collect();
            assert_eq!(p.lengths, lengths);
            // Where nothing is longer than max_len, it is pad's result.
            if max_len >= 12 {
                assert_eq!(p, pad(&values, &splits, Some(max_len), -7i32).unwrap());
            } else {
                let err = pad(&values, &splits, Some(max_len), -7i32).unwrap_err();
                assert!(matches!(err, DatasetError::TooLong { .. }), "{err}");
                assert!(err.to_string().contains("truncat"), "{err}");
            }
        }
    }
}

#[test]
fn writing_ragged_records() {
    let dir = tempfile::tempdir().unwrap();
    let opts = WriteOptions::default();
    // Not a whole number of rows.
    let err = write_ragged(dir.path().join("a"), &[3], &[vec![1i32, 2, 3], vec![1, 2]], &opts).unwrap_err();
    assert!(matches!(err, DatasetError::ShapeMismatch(_)), "{err}");
    // A record over the 1 MiB limit.
    let err = write_ragged(dir.path().join("b"), &[], &[vec![0u8; (1 << 20) + 1]], &opts).unwrap_err();
    assert!(matches!(err, DatasetError::RecordTooLarge { .. }), "{err}");
    // A record of exactly 1 MiB, empty records, then an append.
    let big = vec![vec![7u8; 1 << 20], vec![], vec![1, 2, 3]];
    write_ragged(dir.path().join("c"), &[], &big, &opts).unwrap();
    write_ragged(dir.path().join("c"), &[], &[vec![9u8; 5]], &opts).unwrap();
    let rds = RaggedDataset::open(dir.path().join("c")).unwrap();
    assert_eq!(rds.len(), 4);
    assert_eq!(rds.row_counts(&[0, 1, 2, 3]).unwrap(), [1 << 20, 0, 3, 5]);
    assert!(matches!(
        write_ragged(dir.path().join("c"), &[], &[vec![1i32]], &opts),
        Err(DatasetError::Incompatible { .. })
    ));
    assert!(matches!(
        write_dataset(dir.path().join("c"), &[1u8, 2], &[2], &opts),
        Err(DatasetError::Incompatible { .. })
    ));
    // Byte-level, a dtype without a Rust element type; an empty iterator.
    let dtype = DType::parse("<f2").unwrap();
    write_ragged_bytes(dir.path().join("d"), dtype, &[2], [vec![0u8; 8], vec![]], &opts).unwrap();
    assert_eq!(RaggedDataset::open(dir.path().join("d")).unwrap().row_counts(&[0, 1]).unwrap(), [2, 0]);
    assert_eq!(write_ragged(dir.path().join("e"), &[], Vec::<Vec<i64>>::new(), &opts).unwrap(), 0);
    assert_eq!(RaggedDataset::open(dir.path().join("e")).unwrap().len(), 0);
}

/// A source that fails ends the write: before the first call, a new
/// dataset is not created; after it, the dataset holds the completed calls'
/// records and the next write continues it.
#[test]
fn a_failing_source_leaves_nothing_or_a_continuable_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let dtype = DType::parse("<i4").unwrap();
    let record = |k: i32| -> Result<Vec<u8>, DatasetError> { Ok(bytemuck::cast_slice(&[k, k + 1]).to_vec()) };
    let failing = |k: i32| if k == 3 { Err(DatasetError::InvalidArgument("refused".into())) } else { record(k) };
    // One call would hold all ten records: the failure is before it.
    let fresh = dir.path().join("fresh");
    let got = write_ragged_results(&fresh, dtype, &[], (0..10).map(failing), &WriteOptions::default());
    assert!(matches!(got, Err(DatasetError::InvalidArgument(_))), "{got:?}");
    assert!(!fresh.exists());
    // Calls of one record: three complete before the failure.
    let opts = WriteOptions { chunk_bytes: 1, ..WriteOptions::default() };
    let partial = dir.path().join("partial");
    assert!(write_ragged_results(&partial, dtype, &[], (0..10).map(failing), &opts).is_err());
    assert_eq!(RaggedDataset::open(&partial).unwrap().len(), 3);
    assert_eq!(write_ragged_results(&partial, dtype, &[], (3..10).map(record), &opts).unwrap(), 7);
    let ds = RaggedDataset::open(&partial).unwrap();
    assert_eq!(ds.len(), 10);
    let got = ds.gather(&[9]).unwrap();
    assert_eq!(got.record(0).unwrap(), bytemuck::cast_slice::<i32, u8>(&[9, 10]));
}
