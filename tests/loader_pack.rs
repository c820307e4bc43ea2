//! Sequence packing (`loader::pack`) against an oracle walk of its output:
//! every element once, in order within its segment, positions from 0,
//! segment ids per row, padding zero; long sequences split or truncated;
//! bad splits refused; and the transform in a loader, resumed exactly.

use loaderx::dataset::{Ragged, RaggedDataset, Tensor, WriteOptions, write_ragged};
use loaderx::loader::{DataLoader, pack, pack_transform};
use loaderx::sampler::Mode;

fn ragged(seqs: &[Vec<i32>]) -> Ragged {
    let values: Vec<i32> = seqs.concat();
    let mut splits = vec![0u64];
    for s in seqs {
        splits.push(splits.last().unwrap() + s.len() as u64);
    }
    Ragged { values: Tensor::from_slice(&values, &[values.len()]).unwrap(), row_splits: splits }
}

/// Sequences with distinct elements: sequence `k`'s element `j` is
/// `k * 100_000 + j + 1` (never 0, the padding).
fn sequences(lens: &[usize]) -> Vec<Vec<i32>> {
    lens.iter().enumerate().map(|(k, &n)| (0..n).map(|j| (k * 100_000 + j + 1) as i32).collect()).collect()
}

/// Walks the packed arrays: each segment must be a run of consecutive
/// elements of one sequence starting at position 0; returns, per
/// sequence, its elements in the order the segments hold them.
fn unpack(tokens: &[i32], segs: &[i32], pos: &[i32], seq_len: usize, n: usize) -> Vec<Vec<i32>> {
    let mut out = vec![Vec::new(); n];
    for row in 0..tokens.len() / seq_len {
        let at = |k: usize| row * seq_len + k;
        let mut expect_seg = 1;
        let mut k = 0;
        while k < seq_len && segs[at(k)] != 0 {
            assert_eq!(segs[at(k)], expect_seg, "segment ids count up in row {row}");
            let start = k;
            while k < seq_len && segs[at(k)] == expect_seg {
                assert_eq!(pos[at(k)] as usize, k - start, "positions restart in each segment");
                k += 1;
            }
            let seq = (tokens[at(start)] as usize - 1) / 100_000;
            out[seq].extend_from_slice(&tokens[at(start)..at(k)]);
            expect_seg += 1;
        }
        for k in k..seq_len {
            assert_eq!((tokens[at(k)], segs[at(k)], pos[at(k)]), (0, 0, 0), "padding fills the row's end");
        }
    }
    out
}

#[test]
fn every_element_once_and_in_order_within_its_segment() {
    let mut x = 12345u64;
    for _ in 0..50 {
        let lens: Vec<usize> = (0..64)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                10 + (x >> 33) as usize % 191
            })
            .collect();
        let seqs = sequences(&lens);
        let packed = pack(&ragged(&seqs), 512, false).unwrap();
        let (tokens, segs, pos) = (
            packed.tokens.as_slice::<i32>().unwrap(),
            packed.segment_ids.as_slice::<i32>().unwrap(),
            packed.positions.as_slice::<i32>().unwrap(),
        );
        assert_eq!(packed.tokens.shape()[1], 512);
        assert_eq!(unpack(tokens, segs, pos, 512, seqs.len()), seqs);
        assert_eq!(packed.placed, lens.iter().sum::<usize>());
        let slots = packed.tokens.shape()[0] * 512;
        assert_eq!(packed.slots(), slots);
        assert!((packed.efficiency() - packed.placed as f64 / slots as f64).abs() < 1e-12);
        assert!(packed.efficiency() >= 0.85, "{}", packed.efficiency());
        assert_eq!(pack(&ragged(&seqs), 512, false).unwrap(), packed, "deterministic");
    }
}

#[test]
fn long_sequences_are_split_or_truncated() {
    let seqs = sequences(&[1200, 5, 0, 300]);
    let split = pack(&ragged(&seqs), 512, false).unwrap();
    let got = unpack(
        split.tokens.as_slice::<i32>().unwrap(),
        split.segment_ids.as_slice::<i32>().unwrap(),
        split.positions.as_slice::<i32>().unwrap(),
        512,
        seqs.len(),
    );
    // Pieces of one sequence land in rows in placement order; each piece
    // is consecutive, and together they hold every element once.
    let mut whole = got[0].clone();
    whole.sort_unstable();
    assert_eq!(whole, seqs[0]);
    assert_eq!(got[1..], seqs[1..]);
    let cut = pack(&ragged(&seqs), 512, true).unwrap();
    assert_eq!(cut.placed, 512 + 5 + 300);
    let got = unpack(
        cut.tokens.as_slice::<i32>().unwrap(),
        cut.segment_ids.as_slice::<i32>().unwrap(),
        cut.positions.as_slice::<i32>().unwrap(),
        512,
        seqs.len(),
    );
    assert_eq!(got[0], seqs[0][..512]);
}

#[test]
fn bad_arguments_are_errors() {
    let mut r = ragged(&sequences(&[3, 4]));
    assert!(pack(&r, 0, false).is_err());
    r.row_splits = vec![0, 5, 3];
    assert!(pack(&r, 8, false).is_err(), "falling splits");
    r.row_splits = vec![0, 3, 9];
    assert!(pack(&r, 8, false).is_err(), "splits past the values");
    r.row_splits = vec![1, 3, 7];
    assert!(pack(&r, 8, false).is_err(), "splits not from 0");
    let empty = pack(&ragged(&[]), 8, false).unwrap();
    assert_eq!((empty.tokens.shape(), empty.efficiency()), (&[0usize, 8][..], 1.0));
}

#[test]
fn a_packing_loader_resumes_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let lens: Vec<usize> = (0..500).map(|k| 10 + (k * 37) % 190).collect();
    let seqs = sequences(&lens);
    write_ragged(dir.path(), &[], &seqs, &WriteOptions::default()).unwrap();
    let loader = |start: u64| {
        DataLoader::builder()
            .stream("tokens", RaggedDataset::open(dir.path()).unwrap())
            .batch_size(64)
            .num_workers(2)
            .mode(Mode::Cyclic)
            .seed(3)
            .start_step(start)
            .transform(pack_transform("tokens", 512, false))
            .build()
            .unwrap()
    };
    let mut first = loader(0);
    let batches: Vec<_> = (0..6).map(|_| first.next_batch().unwrap()).collect();
    let mut resumed = loader(4);
    assert_eq!(resumed.next_batch().unwrap(), batches[4]);
    let b = &batches[0];
    let tokens = b.dense("tokens").unwrap();
    assert_eq!(tokens.shape()[1], 512);
    let segs = b.dense("tokens_segment_ids").unwrap();
    let pos = b.dense("tokens_positions").unwrap();
    let got = unpack(
        tokens.as_slice::<i32>().unwrap(),
        segs.as_slice::<i32>().unwrap(),
        pos.as_slice::<i32>().unwrap(),
        512,
        seqs.len(),
    );
    for &i in b.indices() {
        assert_eq!(got[i as usize], seqs[i as usize], "record {i}");
    }
}
