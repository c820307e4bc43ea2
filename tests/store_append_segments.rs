//! Appends of many segments each ([`Options::append_segment_bytes`]) on real
//! threads and the real filesystem: several threads append calls of more
//! than 8 MiB each to one store, through `append` and `append_var`, with
//! every codec, while readers gather. Appends are atomic and serialized, so
//! each call's records occupy `first..first + n`; the (first, call) pairs
//! rebuild the naive model afterwards, checked byte for byte, by `verify`
//! and again after a reopen.
//!
//! Every record is a pure function of its identity (thread, call, record
//! number) and starts with it and its length when it is long enough, so a
//! reader checks whatever it reads without shared state: a record too short
//! to describe itself is placed by the nearest one before it that does (a
//! call's first record always does). A reader also checks that the length
//! it sees always ends a call.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use loaderx::format::RECORD_BYTES_MAX;
use loaderx::{Codec, Options, Zrecord};

/// Bytes of a record's self-description: thread, call, record, length.
const HEADER: usize = 16;
const READERS: u64 = 2;
/// Rounds a reader runs at least, however soon the writers finish.
const ROUNDS_MIN: u32 = 20;
/// Random records a reader gathers per round.
const BATCH: usize = 8;

/// The shape of a run.
#[derive(Clone, Copy, Debug)]
struct Spec {
    threads: u32,
    calls: u32,
    /// Input bytes of a call, at least.
    call_bytes: usize,
    /// Bound of the ordinary record lengths.
    record_max: u32,
    /// Length of the long records (RECORD_BYTES_MAX, or less to keep a run small).
    long: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Via {
    /// `append`: records of one length.
    Fixed,
    /// `append_var`, the records back to back.
    Contiguous,
    /// `append_var`, the records last first with gaps between them.
    Scattered,
}

/// Call number `i = thread * calls + call` of a run appends the `WAYS[i % 6]` way.
const WAYS: [(Codec, Via); 6] = [
    (Codec::Raw, Via::Fixed),
    (Codec::Zstd, Via::Contiguous),
    (Codec::ZstdDict, Via::Fixed),
    (Codec::Zstd, Via::Fixed),
    (Codec::ZstdDict, Via::Scattered),
    (Codec::Raw, Via::Scattered),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Id {
    thread: u32,
    call: u32,
    record: u32,
}

/// A call as appended: the index of its first record, thread, call.
type Call = (u64, u32, u32);

/// What a call appends: how, and its records' lengths.
struct Plan {
    codec: Codec,
    via: Via,
    lens: Vec<u32>,
}

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn hash(words: &[u32]) -> u64 {
    words.iter().fold(0x5EED, |h, &w| mix(h ^ u64::from(w)))
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^ (x << 17)
}

fn plan(spec: &Spec, thread: u32, call: u32) -> Plan {
    let i = (thread * spec.calls + call) as usize;
    let (codec, via) = WAYS[i % WAYS.len()];
    let target = spec.call_bytes + (hash(&[thread, call]) % (spec.call_bytes as u64 / 8)) as usize;
    let lens = if via == Via::Fixed {
        let items = [spec.long, spec.long - 7, spec.record_max, spec.record_max / 2 + HEADER as u32];
        let item = items[(i * 3 + i / WAYS.len()) % items.len()];
        vec![item; target.div_ceil(item as usize)]
    } else {
        var_lens(spec, thread, call, target)
    };
    Plan { codec, via, lens }
}

/// Lengths adding up to `target` at least: empty, short, long and ordinary
/// records, the first always long enough to describe itself, and sometimes
/// two empty records at the end.
fn var_lens(spec: &Spec, thread: u32, call: u32, target: usize) -> Vec<u32> {
    let mut lens = Vec::new();
    let mut total = 0;
    while total < target {
        let k = lens.len() as u32;
        let h = hash(&[thread, call, k]);
        let r = (h >> 8) as u32;
        let len = match h % 128 {
            _ if k == 0 => HEADER as u32 + r % spec.record_max,
            0..12 => 0,
            12..18 => 1 + r % (HEADER as u32 - 1),
            18 => spec.long - r % 2,
            _ => HEADER as u32 + r % spec.record_max,
        };
        total += len as usize;
        lens.push(len);
    }
    if hash(&[thread, call]).is_multiple_of(2) {
        lens.extend([0, 0]);
    }
    lens
}

const WORDS: [&[u8]; 10] =
    [b"the", b"store", b"record", b"segment", b"append", b"chunk", b"of", b"a", b"gather", b"dictionary"];

/// The record `id` of `len` bytes: its identity and length, then bytes of
/// one of four kinds (runs, a noisy ramp, noise, words); cut to `len`.
fn record(id: Id, len: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(len as usize + 16);
    for word in [id.thread, id.call, id.record, len] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    let mut x = hash(&[id.thread, id.call, id.record, len]) | 1;
    let kind = x % 4;
    while out.len() < len as usize {
        x = xorshift(x);
        let p = out.len();
        match kind {
            0 => out.extend_from_slice(&[(id.record as usize + p / 512) as u8; 8]),
            1 => out.extend((0..8).map(|i| (((p + i) / 4) as u8).wrapping_add((x >> (8 * i)) as u8 & 3))),
            2 => out.extend_from_slice(&x.to_le_bytes()),
            _ => {
                out.extend_from_slice(WORDS[(x % WORDS.len() as u64) as usize]);
                out.push(b' ');
            }
        }
    }
    out.truncate(len as usize);
    out
}

/// The identity a record of at least [`HEADER`] bytes claims.
fn claimed(bytes: &[u8]) -> Id {
    let word = |k: usize| u32::from_le_bytes(bytes[4 * k..4 * k + 4].try_into().unwrap());
    Id { thread: word(0), call: word(1), record: word(2) }
}

/// Checks that `got` is record `id`.
fn check(spec: &Spec, id: Id, got: &[u8]) {
    assert!(id.thread < spec.threads && id.call < spec.calls, "a record claims to be {id:?}");
    let lens = plan(spec, id.thread, id.call).lens;
    let Some(&len) = lens.get(id.record as usize) else {
        panic!("{id:?} is past its call's {} records", lens.len());
    };
    assert_eq!(got.len(), len as usize, "length of {id:?}");
    assert!(got == record(id, len), "bytes of {id:?}");
}

/// The identity of record `index` (below a length the caller saw), its
/// bytes checked.
fn identify(store: &Zrecord, spec: &Spec, index: u64) -> Id {
    let got = store.get(index).unwrap();
    let id = if got.len() >= HEADER {
        claimed(&got)
    } else {
        let mut at = index;
        let anchor = loop {
            at = at.checked_sub(1).expect("record 0 describes itself");
            let bytes = store.get(at).unwrap();
            if bytes.len() >= HEADER {
                break claimed(&bytes);
            }
        };
        Id { record: anchor.record + (index - at) as u32, ..anchor }
    };
    check(spec, id, &got);
    id
}

/// Appends call (`thread`, `call`) the way its plan says; returns the index
/// of its first record.
fn append_call(store: &Zrecord, spec: &Spec, thread: u32, call: u32) -> u64 {
    let plan = plan(spec, thread, call);
    let records: Vec<Vec<u8>> =
        plan.lens.iter().enumerate().map(|(k, &len)| record(Id { thread, call, record: k as u32 }, len)).collect();
    let lens = &plan.lens;
    let mut src = Vec::new();
    let mut offsets = vec![0u64; records.len()];
    let first = match plan.via {
        Via::Fixed => store.append(&records.concat(), records.len(), lens[0] as usize, plan.codec),
        Via::Contiguous => {
            for (k, r) in records.iter().enumerate() {
                offsets[k] = src.len() as u64;
                src.extend_from_slice(r);
            }
            store.append_var(&src, &offsets, lens, plan.codec)
        }
        Via::Scattered => {
            for (k, r) in records.iter().enumerate().rev() {
                src.extend_from_slice(b"gap");
                offsets[k] = src.len() as u64;
                src.extend_from_slice(r);
            }
            store.append_var(&src, &offsets, lens, plan.codec)
        }
    };
    first.unwrap_or_else(|e| panic!("append of ({thread}, {call}): {e}"))
}

/// One writer thread: its calls, each checked at both ends as soon as it
/// returns. Returns (first index, thread, call) per call.
fn writer(store: &Zrecord, spec: &Spec, thread: u32) -> Vec<Call> {
    (0..spec.calls)
        .map(|call| {
            let first = append_call(store, spec, thread, call);
            let n = plan(spec, thread, call).lens.len() as u64;
            assert_eq!(identify(store, spec, first), Id { thread, call, record: 0 });
            assert_eq!(identify(store, spec, first + n - 1), Id { thread, call, record: n as u32 - 1 });
            (first, thread, call)
        })
        .collect()
}

/// Gathers `indices` (below a length the caller saw) and checks every record.
fn gather_checked(store: &Zrecord, spec: &Spec, indices: &[u64]) {
    for (got, &index) in common::gathered(store, indices).iter().zip(indices) {
        let id = if got.len() >= HEADER { claimed(got) } else { identify(store, spec, index) };
        check(spec, id, got);
    }
}

/// If record `index` is `id` of a fixed-length call, gathers it and up to
/// three records after it in that call with `gather` and checks them.
fn gather_fixed_checked(store: &Zrecord, spec: &Spec, index: u64, id: Id) {
    let plan = plan(spec, id.thread, id.call);
    if plan.via != Via::Fixed {
        return;
    }
    let m = (plan.lens.len() - id.record as usize).min(4);
    let item = plan.lens[0] as usize;
    let indices: Vec<u64> = (index..index + m as u64).collect();
    let mut dst = vec![0u8; m * item];
    store.gather(&indices, &mut dst, item).unwrap();
    for (j, got) in dst.chunks(item).enumerate() {
        check(spec, Id { record: id.record + j as u32, ..id }, got);
    }
}

/// One reader: until the writers are done (and at least [`ROUNDS_MIN`]
/// rounds), the length never goes down and always ends a call, and random
/// records below it read back right. Returns the lengths it saw.
fn reader(store: &Zrecord, spec: &Spec, seed: u64, done: &AtomicBool) -> Vec<u32> {
    let mut seen = vec![0];
    let mut x = mix(seed) | 1;
    let mut rounds = 0;
    while !done.load(Ordering::Acquire) || rounds < ROUNDS_MIN {
        rounds += 1;
        let len = store.len();
        let before = *seen.last().unwrap();
        assert!(len >= before, "the length went from {before} down to {len}");
        if len != before {
            seen.push(len);
        }
        if len == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
            continue;
        }
        let last = identify(store, spec, u64::from(len) - 1);
        let n = plan(spec, last.thread, last.call).lens.len();
        assert_eq!(last.record as usize + 1, n, "length {len} ends inside call {last:?}");
        let indices: Vec<u64> = (0..BATCH)
            .map(|_| {
                x = xorshift(x);
                x % u64::from(len)
            })
            .collect();
        gather_checked(store, spec, &indices);
        gather_fixed_checked(store, spec, indices[0], identify(store, spec, indices[0]));
    }
    seen
}

/// Checks the records of one call, at `first..first + n`, against the model:
/// all through `gather_var`, a fixed call's also through `gather`, some
/// through `get`.
fn check_call(store: &Zrecord, spec: &Spec, first: u64, thread: u32, call: u32) {
    let plan = plan(spec, thread, call);
    let n = plan.lens.len();
    let model: Vec<Vec<u8>> =
        plan.lens.iter().enumerate().map(|(k, &len)| record(Id { thread, call, record: k as u32 }, len)).collect();
    let indices: Vec<u64> = (first..first + n as u64).collect();
    for (k, got) in common::gathered(store, &indices).iter().enumerate() {
        assert!(got == &model[k], "record {} (record {k} of call ({thread}, {call}))", first + k as u64);
    }
    if plan.via == Via::Fixed {
        let item = plan.lens[0] as usize;
        let mut dst = vec![0u8; n * item];
        store.gather(&indices, &mut dst, item).unwrap();
        assert!(dst.chunks(item).eq(model.iter().map(Vec::as_slice)), "gather of call ({thread}, {call})");
    }
    for k in (0..n).step_by(97).chain([n - 1]) {
        assert!(store.get(first + k as u64).unwrap() == model[k], "get of record {k} of call ({thread}, {call})");
    }
}

/// Checks the whole store against the model the calls (sorted by first
/// index) rebuild. Returns the number of empty records and the longest.
fn check_store(store: &Zrecord, spec: &Spec, calls: &[Call]) -> (usize, u32) {
    let (mut at, mut empty, mut longest) = (0u64, 0, 0);
    for &(first, thread, call) in calls {
        assert_eq!(first, at, "call ({thread}, {call}) starts where the one before it ends");
        check_call(store, spec, first, thread, call);
        let lens = plan(spec, thread, call).lens;
        empty += lens.iter().filter(|&&l| l == 0).count();
        longest = longest.max(*lens.iter().max().unwrap());
        at += lens.len() as u64;
    }
    assert_eq!(u64::from(store.len()), at, "length");
    (empty, longest)
}

/// Trains the store's dictionary on records like the appended ones (of a
/// thread that appends nothing).
fn train_dict(store: &Zrecord) {
    let sizes: Vec<usize> = (0..200).map(|k| 500 + k * 13).collect();
    let samples: Vec<u8> = sizes
        .iter()
        .enumerate()
        .flat_map(|(k, &len)| record(Id { thread: u32::MAX, call: 0, record: k as u32 }, len as u32))
        .collect();
    store.train_dict(&samples, &sizes, 16 << 10).unwrap();
}

/// Runs the writers and the readers; returns the calls, sorted by first
/// index, and the lengths each reader saw.
fn append_while_reading(store: &Zrecord, spec: &Spec) -> (Vec<Call>, Vec<Vec<u32>>) {
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let writers: Vec<_> = (0..spec.threads).map(|t| s.spawn(move || writer(store, spec, t))).collect();
        let done = &done;
        let readers: Vec<_> = (0..READERS).map(|r| s.spawn(move || reader(store, spec, r, done))).collect();
        let written: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
        // Even when a writer panicked: the readers would never stop.
        done.store(true, Ordering::Release);
        let seen = readers.into_iter().map(|r| r.join().expect("reader")).collect();
        let mut calls: Vec<_> = written.into_iter().flat_map(|w| w.expect("writer")).collect();
        calls.sort_unstable();
        (calls, seen)
    })
}

fn run(spec: Spec, options: Options) {
    assert!(spec.call_bytes >= 4 * options.append_segment_bytes, "a call spans several segments");
    assert!((spec.threads * spec.calls) as usize >= WAYS.len(), "every way of appending is used");
    let dir = tempfile::tempdir().unwrap();
    let store = Zrecord::open_with(dir.path(), options).unwrap();
    train_dict(&store);
    let (calls, seen) = append_while_reading(&store, &spec);
    assert_eq!(calls.len(), (spec.threads * spec.calls) as usize);
    let ends: BTreeSet<u32> =
        calls.iter().map(|&(first, t, c)| (first + plan(&spec, t, c).lens.len() as u64) as u32).chain([0]).collect();
    for len in seen.iter().flatten() {
        assert!(ends.contains(len), "a reader saw length {len}, which ends no call");
    }
    let (empty, longest) = check_store(&store, &spec, &calls);
    assert!(empty > 0 && longest == spec.long, "{empty} empty records, the longest {longest} bytes");
    let stats = store.stats().unwrap();
    assert!(stats.codec_records.iter().all(|&n| n > 0), "every codec stored records: {stats:?}");
    let report = store.verify().unwrap();
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.records, store.len());
    drop(store);
    let store = Zrecord::open(dir.path()).unwrap();
    check_store(&store, &spec, &calls);
    assert!(store.verify().unwrap().is_ok());
}

/// Calls of more than 8 MiB, records up to `RECORD_BYTES_MAX`.
const LARGE: Spec =
    Spec { threads: 4, calls: 2, call_bytes: (8 << 20) + 1, record_max: 40_000, long: RECORD_BYTES_MAX };

#[test]
fn threads_append_calls_of_default_segments_while_readers_gather() {
    run(LARGE, Options::default());
}

#[test]
fn threads_append_calls_of_small_segments_while_readers_gather() {
    run(LARGE, Options { append_segment_bytes: (192 << 10) + 1, ..Options::default() });
}

/// Every record its own segment (empty ones join the next), over about ten
/// thousand records.
#[test]
fn one_record_per_segment() {
    let spec = Spec { threads: 3, calls: 2, call_bytes: 1 << 20, record_max: 700, long: 5000 };
    run(spec, Options { append_segment_bytes: 1, ..Options::default() });
}
