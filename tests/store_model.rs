//! A state-machine test of the store against the naive model (a
//! `Vec<Vec<u8>>` is a perfect model of a record store) on a real temporary
//! directory: random sequences of appends (every codec, fixed and variable,
//! empty records included), deletes, compactions, dictionary training and
//! reopens.

mod common;

use common::{append_all, assert_matches, model_delete, record};
use loaderx::{Codec, CompactOptions, Zrecord};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Append {
        codec: u8,
        sizes: Vec<usize>,
        seed: u64,
    },
    AppendFixed {
        codec: u8,
        n: usize,
        size: usize,
        seed: u64,
    },
    Delete(Vec<u64>),
    /// The fill (with a byte budget or not) or the repack.
    Compact {
        repack: bool,
        budget: Option<u64>,
    },
    Reopen,
    TrainDict,
}

fn op() -> impl Strategy<Value = Op> {
    let size = prop_oneof![Just(0usize), 1usize..64, 64usize..3000];
    prop_oneof![
        4 => (0u8..3, prop::collection::vec(size, 1..12), any::<u64>())
            .prop_map(|(codec, sizes, seed)| Op::Append { codec, sizes, seed }),
        2 => (0u8..3, 1usize..20, 0usize..700, any::<u64>())
            .prop_map(|(codec, n, size, seed)| Op::AppendFixed { codec, n, size, seed }),
        3 => prop::collection::vec(any::<u64>(), 0..10).prop_map(Op::Delete),
        2 => (any::<bool>(), prop::option::of(0u64..20_000)).prop_map(|(repack, budget)| Op::Compact { repack, budget: budget.filter(|_| !repack) }),
        1 => Just(Op::Reopen),
        1 => Just(Op::TrainDict),
    ]
}

fn codec(tag: u8, has_dict: bool) -> Codec {
    match tag {
        0 => Codec::Raw,
        1 => Codec::Zstd,
        _ if has_dict => Codec::ZstdDict,
        _ => Codec::Zstd,
    }
}

/// Compacts and checks the result against the plan made before it and
/// against the model: the live bytes stay, the logical bytes are the
/// model's, and the chunk bytes are what the plan said. The repack leaves
/// nothing to reclaim (a store here has one chunk); the fill, run to its
/// end, leaves a store it would not change again.
fn compact(store: &mut Zrecord, model: &[Vec<u8>], repack: bool, budget: Option<u64>) {
    let options = CompactOptions { repack, max_bytes: budget };
    let before = store.stats().unwrap();
    let plan = store.compact_plan(options).unwrap();
    let report = store.compact_with(options, |_, _| {}).unwrap();
    let after = store.stats().unwrap();
    assert_eq!(after.logical_bytes, model.iter().map(|r| r.len() as u64).sum::<u64>());
    assert_eq!(after.live_bytes, before.live_bytes);
    assert_eq!((report.bytes_before, report.bytes_after), (plan.bytes_before, plan.bytes_after), "{plan:?} {report:?}");
    assert_eq!(after.chunk_file_bytes, report.bytes_after);
    assert_eq!(report.removed_chunks, plan.removed_chunks);
    if repack {
        assert_eq!((after.chunks, after.reclaimable), (1, 0), "{after:?}");
        return;
    }
    assert_eq!((report.moved_bytes, report.remaining_bytes), (plan.move_bytes, plan.remaining_bytes));
    assert!(budget.is_none_or(|b| report.moved_bytes <= b), "{report:?}");
    // Run to its end the fill leaves nothing for the next; stopped by the
    // budget, it says what is left, and the next plan finds it.
    let next = store.compact_plan(CompactOptions::default()).unwrap();
    assert_eq!(next.move_bytes == 0, report.remaining_bytes == 0, "{next:?} after {report:?}");
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Zrecord::open(dir.path()).unwrap();
    let mut model: Vec<Vec<u8>> = Vec::new();
    for op in ops {
        match op {
            Op::Append { codec: c, sizes, seed } => {
                let records: Vec<Vec<u8>> =
                    sizes.iter().enumerate().map(|(k, &n)| record(seed.wrapping_add(k as u64), n)).collect();
                let first = append_all(&store, &records, codec(c, store.has_dict()));
                assert_eq!(first, model.len() as u64);
                model.extend(records);
            }
            Op::AppendFixed { codec: c, n, size, seed } => {
                let records: Vec<Vec<u8>> = (0..n).map(|k| record(seed ^ k as u64, size)).collect();
                let first = store.append(&records.concat(), n, size, codec(c, store.has_dict())).unwrap();
                assert_eq!(first, model.len() as u64);
                model.extend(records);
            }
            Op::Delete(picks) => {
                if model.is_empty() {
                    continue;
                }
                let indices: Vec<u64> = picks.iter().map(|p| p % model.len() as u64).collect();
                store.delete(&indices).unwrap();
                model_delete(&mut model, &indices);
            }
            Op::Compact { repack, budget } => compact(&mut store, &model, repack, budget),
            Op::Reopen => {
                drop(store);
                store = Zrecord::open(dir.path()).unwrap();
            }
            Op::TrainDict => {
                if store.has_dict() {
                    continue;
                }
                let samples: Vec<Vec<u8>> = (0..64).map(|k| record(k % 9, 200)).collect();
                store.train_dict(&samples.concat(), &[200; 64], 8 << 10).unwrap();
            }
        }
        assert_matches(&store, &model);
    }
    drop(store);
    assert_matches(&Zrecord::open_read_only(dir.path()).unwrap(), &model);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn store_matches_the_model(ops in prop::collection::vec(op(), 1..25)) {
        run(ops);
    }
}

#[test]
fn empty_record_moved_to_the_start_of_chunk_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Zrecord::open(dir.path()).unwrap();
    let mut model = vec![record(1, 100), Vec::new(), record(2, 50)];
    append_all(&store, &model, Codec::Raw);
    store.delete(&[0]).unwrap(); // record 2 moves to slot 0
    model_delete(&mut model, &[0]);
    store.delete(&[0]).unwrap(); // only the empty record remains, at (0, 100)
    model_delete(&mut model, &[0]);
    store.compact().unwrap(); // it moves to (0, 0): its entry must not be all zero
    assert_matches(&store, &model);
    drop(store);
    assert_matches(&Zrecord::open(dir.path()).unwrap(), &model);
}
