//! The loader's checkpoint ([`LoaderState`]): a loader resumed from a
//! state gives the uninterrupted run's batches, on any shard count; a
//! state that does not fit is refused before any thread starts; the JSON
//! form round-trips, and malformed or hostile JSON is an error, never a
//! panic.

use std::sync::Arc;

use loaderx::dataset::{Dataset, RaggedDataset, WriteOptions, write_dataset, write_ragged};
use loaderx::loader::{Batch, DataLoader, LoaderBuilder, LoaderError, LoaderState, Mixture, STATE_ITEMS_MAX};
use loaderx::sampler::Mode;
use proptest::prelude::*;

struct Fixture {
    _dir: tempfile::TempDir,
    x: Arc<Dataset>,
    tokens: Arc<RaggedDataset>,
    other: Arc<Dataset>,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let xs: Vec<f32> = (0..240 * 2).map(|v| v as f32).collect();
    write_dataset(p("x"), &xs, &[2], &WriteOptions::default()).unwrap();
    let seqs: Vec<Vec<i32>> = (0..240).map(|k| (0..k % 5).collect()).collect();
    write_ragged(p("tokens"), &[], &seqs, &WriteOptions::default()).unwrap();
    let grown: Vec<f32> = (0..241 * 2).map(|v| v as f32).collect();
    write_dataset(p("other"), &grown, &[2], &WriteOptions::default()).unwrap();
    Fixture {
        x: Arc::new(Dataset::open(p("x")).unwrap()),
        tokens: Arc::new(RaggedDataset::open(p("tokens")).unwrap()),
        other: Arc::new(Dataset::open(p("other")).unwrap()),
        _dir: dir,
    }
}

fn builder(f: &Fixture, mode: Mode) -> LoaderBuilder {
    DataLoader::builder()
        .stream("x", f.x.clone())
        .stream("tokens", f.tokens.clone())
        .batch_size(12)
        .num_workers(2)
        .mode(mode)
        .seed(11)
}

/// A batch's bytes, column by column, in name order.
fn bytes(batch: &Batch) -> Vec<u8> {
    let mut out = Vec::new();
    for name in ["x", "tokens"] {
        match (batch.dense(name), batch.ragged(name)) {
            (Some(t), _) => out.extend_from_slice(t.as_bytes()),
            (_, Some(r)) => {
                out.extend_from_slice(r.values.as_bytes());
                out.extend(r.row_splits.iter().flat_map(|s| s.to_le_bytes()));
            }
            _ => panic!("no column {name}"),
        }
    }
    out
}

fn take(loader: &mut DataLoader, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| bytes(&loader.next_batch().unwrap())).collect()
}

#[test]
fn a_resumed_loader_gives_the_uninterrupted_batches_on_any_shard_count() {
    let f = fixture();
    for mode in [Mode::Sequential, Mode::Iid, Mode::Cyclic] {
        let expected = take(&mut builder(&f, mode).build().unwrap(), 30);
        let mut first = builder(&f, mode).shard(1, 2).build().unwrap();
        take(&mut first, 9);
        let state = first.state();
        assert_eq!((state.step, state.shard), (9, (1, 2)));
        let text = state.to_json().to_string();
        let state: LoaderState = text.parse().unwrap();
        let mut resumed = builder(&f, mode).resume(&state).build().unwrap();
        assert_eq!(resumed.step(), 9);
        assert_eq!(take(&mut resumed, 21), expected[9..], "{mode:?}");
    }
}

#[test]
fn a_state_that_does_not_fit_is_refused_saying_what_differs() {
    let f = fixture();
    let mut loader = builder(&f, Mode::Iid).build().unwrap();
    take(&mut loader, 3);
    let state = loader.state();
    let refused = |b: LoaderBuilder, what: &str| match b.resume(&state).build() {
        Err(LoaderError::State(message)) => assert!(message.contains(what), "{message:?} lacks {what:?}"),
        other => panic!("expected a refusal naming {what:?}, got {other:?}"),
    };
    refused(builder(&f, Mode::Iid).seed(12), "seed=11");
    refused(builder(&f, Mode::Iid).batch_size(24), "batch_size=12");
    refused(builder(&f, Mode::Cyclic), "mode");
    let other = DataLoader::builder().stream("x", f.other.clone()).stream("tokens", f.tokens.clone());
    // The lengths differ from each other: the loader itself refuses first.
    assert!(matches!(other.batch_size(12).seed(11).build(), Err(LoaderError::LengthMismatch(_))));
    let renamed = DataLoader::builder().stream("y", f.x.clone()).stream("tokens", f.tokens.clone());
    refused(renamed.batch_size(12).seed(11), "another dataset");
    let mixed = DataLoader::builder().mixture(Mixture::new([1.0]).source([("x", f.x.clone())]));
    refused(mixed.batch_size(12).seed(11), "Mixture");
}

#[test]
fn a_grown_dataset_is_refused() {
    let f = fixture();
    let one = |d: &Arc<Dataset>| DataLoader::builder().stream("x", d.clone()).batch_size(12).seed(11);
    let state = one(&f.x).build().unwrap().state();
    match one(&f.other).resume(&state).build() {
        Err(LoaderError::State(m)) => assert!(m.contains("240 records") && m.contains("241 records"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_mixture_state_holds_its_schedule_and_source_modes() {
    let f = fixture();
    let mixture = || {
        Mixture::new([2.0, 1.0])
            .source([("x", f.x.clone())])
            .source_in_mode([("x", f.x.clone())], Mode::Sequential)
            .weights_from(5, [1.0, 1.0])
    };
    let b = || DataLoader::builder().mixture(mixture()).batch_size(6).seed(3);
    let mut loader = b().build().unwrap();
    loader.next_batch().unwrap();
    let state = loader.state();
    assert_eq!(state.schedule.as_deref(), Some(&[(0, vec![2.0, 1.0]), (5, vec![1.0, 1.0])][..]));
    assert_eq!(state.sources[1].mode, Some(Mode::Sequential));
    let back = LoaderState::from_json(&state.to_json()).unwrap();
    assert_eq!(back, state);
    assert_eq!(b().resume(&back).build().unwrap().next_batch().unwrap().step(), 1);
}

#[test]
fn oversized_lists_are_refused_before_they_are_read() {
    let f = fixture();
    let mut value = builder(&f, Mode::Iid).build().unwrap().state().to_json();
    let stream = value["sources"][0]["streams"][0].clone();
    value["sources"][0]["streams"] = serde_json::Value::Array(vec![stream; STATE_ITEMS_MAX + 1]);
    assert!(matches!(LoaderState::from_json(&value), Err(LoaderError::State(_))));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Any JSON text, and any one-byte change of a real state's text, is
    /// a state or an error: never a panic.
    #[test]
    fn hostile_json_never_panics(at in 0usize..400, byte in any::<u8>(), junk in ".{0,40}") {
        let f = fixture_once();
        let text = f.to_json().to_string();
        let mut bytes = text.into_bytes();
        let at = at % bytes.len();
        bytes[at] = byte;
        if let Ok(text) = String::from_utf8(bytes) {
            let _ = text.parse::<LoaderState>();
        }
        let _ = junk.parse::<LoaderState>();
    }
}

/// A real state, made once for the property test.
fn fixture_once() -> &'static LoaderState {
    static STATE: std::sync::OnceLock<LoaderState> = std::sync::OnceLock::new();
    STATE.get_or_init(|| {
        let f = fixture();
        let mixture = Mixture::new([1.0, 1.0]).source([("x", f.x.clone())]).source([("x", f.x.clone())]);
        DataLoader::builder().mixture(mixture).batch_size(4).build().unwrap().state()
    })
}
