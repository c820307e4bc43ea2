//! Stress on the real filesystem: reader threads gather random batches while
//! writer threads append; then an exclusive delete + compact; then reopen.
//! Every record carries its identity (writer, sequence number) and its
//! content is a function of it, so every gathered byte is verified.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use loaderx::{Codec, Zrecord};

const WRITERS: u32 = 3;
const READERS: usize = 3;
const BATCHES: u32 = 40;
const PER_BATCH: u32 = 8;

/// The record of (writer, seq): its identity, then bytes derived from it.
fn record(writer: u32, seq: u32) -> Vec<u8> {
    let len = 8 + ((writer * 7919 + seq * 104_729) % 3000) as usize;
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&writer.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    let mut x = u64::from(writer) << 32 | u64::from(seq) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.push((x % 7) as u8 + (out.len() / 64) as u8);
    }
    out
}

/// Checks a record read back and returns its identity.
fn identify(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.len() >= 8, "record of {} bytes", bytes.len());
    let writer = u32::from_le_bytes(bytes[..4].try_into().unwrap());
    let seq = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
    assert!(bytes == &record(writer, seq)[..], "record ({writer}, {seq}) differs");
    (writer, seq)
}

fn read_all(store: &Zrecord) -> Vec<(u32, u32)> {
    (0..u64::from(store.len())).map(|i| identify(&store.get(i).unwrap())).collect()
}

fn gather_checked(store: &Zrecord, indices: &[u64]) {
    for record in common::gathered(store, indices) {
        identify(&record);
    }
}

#[test]
fn readers_and_writers_then_delete_compact_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Zrecord::open(dir.path()).unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let store = &store;
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                s.spawn(move || {
                    for b in 0..BATCHES {
                        let records: Vec<Vec<u8>> = (0..PER_BATCH).map(|k| record(w, b * PER_BATCH + k)).collect();
                        let lens: Vec<u32> = records.iter().map(|r| r.len() as u32).collect();
                        let mut offsets = Vec::new();
                        let mut at = 0u64;
                        for &l in &lens {
                            offsets.push(at);
                            at += u64::from(l);
                        }
                        let codec = if b % 2 == 0 { Codec::Zstd } else { Codec::Raw };
                        let first = store.append_var(&records.concat(), &offsets, &lens, codec).unwrap();
                        // The call's records are where it says, whatever the other writers did.
                        for (k, r) in records.iter().enumerate() {
                            assert_eq!(&store.get(first + k as u64).unwrap(), r);
                        }
                    }
                })
            })
            .collect();
        for r in 0..READERS {
            let done = &done;
            s.spawn(move || {
                let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ r as u64;
                let mut rounds = 0;
                while !done.load(Ordering::Acquire) || rounds < 50 {
                    let n = u64::from(store.len());
                    if n > 0 {
                        let indices: Vec<u64> = (0..32)
                            .map(|_| {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                x % n
                            })
                            .collect();
                        gather_checked(store, &indices);
                    }
                    rounds += 1;
                }
            });
        }
        for w in writers {
            w.join().unwrap();
        }
        done.store(true, Ordering::Release);
    });

    let expected: BTreeSet<(u32, u32)> =
        (0..WRITERS).flat_map(|w| (0..BATCHES * PER_BATCH).map(move |s| (w, s))).collect();
    let all = read_all(&store);
    assert_eq!(all.len(), expected.len(), "no append lost, none doubled");
    assert_eq!(all.iter().copied().collect::<BTreeSet<_>>(), expected);

    // Exclusive: delete 30%, compact, then everything else is still there.
    let doomed: Vec<u64> = (0..all.len() as u64).filter(|i| i % 10 < 3).collect();
    let gone: BTreeSet<(u32, u32)> = doomed.iter().map(|&i| all[i as usize]).collect();
    store.delete(&doomed).unwrap();
    let report = store.compact().unwrap();
    assert!(report.moved_records > 0);
    assert_eq!(store.compact_plan(loaderx::CompactOptions::default()).unwrap().move_bytes, 0, "the fill is done");
    let repack = loaderx::CompactOptions { repack: true, ..Default::default() };
    store.compact_with(repack, |_, _| {}).unwrap();
    assert_eq!(store.stats().unwrap().reclaimable, 0);
    let left: BTreeSet<(u32, u32)> = read_all(&store).into_iter().collect();
    assert_eq!(left, &expected - &gone);
    assert!(store.verify().unwrap().is_ok());
    drop(store);

    let store = Zrecord::open(dir.path()).unwrap();
    let again: BTreeSet<(u32, u32)> = read_all(&store).into_iter().collect();
    assert_eq!(again, &expected - &gone);
    assert!(store.verify().unwrap().is_ok());
}
