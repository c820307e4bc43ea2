//! Helpers shared by the store tests: record generators and a naive model.
#![allow(dead_code)]

use loaderx::{Codec, Zrecord};

/// Deterministic bytes: mildly compressible (a ramp with noise), so zstd
/// shrinks them but not to nothing.
pub fn record(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (i as u8 / 4).wrapping_add((x % 4) as u8)
        })
        .collect()
}

/// Appends `records` (any sizes) in one call and returns the first index.
pub fn append_all(store: &Zrecord, records: &[Vec<u8>], codec: Codec) -> u64 {
    try_append_all(store, records, codec).expect("append_var")
}

/// As [`append_all`], returning the error.
pub fn try_append_all(store: &Zrecord, records: &[Vec<u8>], codec: Codec) -> loaderx::Result<u64> {
    let mut src = Vec::new();
    let mut offsets = Vec::new();
    let mut lens = Vec::new();
    for r in records {
        offsets.push(src.len() as u64);
        lens.push(r.len() as u32);
        src.extend_from_slice(r);
    }
    store.append_var(&src, &offsets, &lens, codec)
}

/// Reads every record through `gather_var` and compares with `model`.
pub fn assert_matches(store: &Zrecord, model: &[Vec<u8>]) {
    assert_eq!(store.len() as usize, model.len(), "length");
    let indices: Vec<u64> = (0..model.len() as u64).collect();
    let mut lens = vec![0u32; model.len()];
    store.lengths(&indices, &mut lens).expect("lengths");
    let mut offsets = Vec::with_capacity(model.len());
    let mut total = 0u64;
    for (k, (len, want)) in lens.iter().zip(model).enumerate() {
        assert_eq!(*len as usize, want.len(), "length of record {k}");
        offsets.push(total);
        total += u64::from(*len);
    }
    let mut dst = vec![0u8; total as usize];
    store.gather_var(&indices, &mut dst, &offsets, &lens).expect("gather_var");
    for (k, want) in model.iter().enumerate() {
        let got = &dst[offsets[k] as usize..][..want.len()];
        assert!(got == &want[..], "record {k} differs");
    }
}

/// Swap-with-last in descending order, as the store deletes.
pub fn model_delete(model: &mut Vec<Vec<u8>>, indices: &[u64]) {
    let mut doomed = indices.to_vec();
    doomed.sort_unstable_by(|a, b| b.cmp(a));
    doomed.dedup();
    for d in doomed {
        model.swap_remove(d as usize);
    }
}

/// Records `indices` (below a length the caller saw), read through
/// `lengths` and `gather_var`.
pub fn gathered(store: &Zrecord, indices: &[u64]) -> Vec<Vec<u8>> {
    let mut lens = vec![0u32; indices.len()];
    store.lengths(indices, &mut lens).unwrap();
    let mut offsets = Vec::with_capacity(indices.len());
    let mut total = 0u64;
    for &l in &lens {
        offsets.push(total);
        total += u64::from(l);
    }
    let mut dst = vec![0u8; total as usize];
    store.gather_var(indices, &mut dst, &offsets, &lens).unwrap();
    offsets.iter().zip(&lens).map(|(&at, &l)| dst[at as usize..][..l as usize].to_vec()).collect()
}
