"""DataLoader.state_dict() / load_state_dict(): torchdata's
StatefulDataLoader protocol. A resumed loader gives the uninterrupted
run's batches byte for byte (with a transform, across shard counts, over
a Mixture); a state of another dataset, seed or batch size is refused
with a message that says what differs; malformed states are refused."""

import json
import pickle

import numpy as np
import pytest

from loaderx_rs import DataLoader, Dataset, Mixture, RaggedDataset, write_dataset, write_ragged


@pytest.fixture
def streams(tmp_path):
    write_dataset(tmp_path / "x", np.arange(300 * 3, dtype=np.float32).reshape(300, 3))
    write_dataset(tmp_path / "y", np.arange(300, dtype=np.int64))
    return {"x": Dataset(tmp_path / "x"), "y": Dataset(tmp_path / "y")}


def batches(loader, n):
    return [{k: np.array(v, copy=True) for k, v in next(loader).items()} for _ in range(n)]


def assert_same(a, b):
    assert len(a) == len(b)
    for p, q in zip(a, b):
        assert p.keys() == q.keys()
        for k in p:
            assert p[k].dtype == q[k].dtype and p[k].tobytes() == q[k].tobytes(), k


def test_the_state_is_small_plain_and_names_what_it_depends_on(streams):
    with DataLoader(streams, num_workers=2, batch_size=10, seed=5, mode="cyclic") as loader:
        batches(loader, 7)
        state = loader.state_dict()
    assert json.loads(json.dumps(state)) == state
    assert state["step"] == 7 and state["seed"] == 5 and state["mode"] == "cyclic"
    assert state["batch_size"] == 10 and (state["shard_index"], state["shard_count"]) == (0, 1)
    [source] = state["sources"]
    x = next(s for s in source["streams"] if s["name"] == "x")
    assert x == {"name": "x", "kind": "fixed", "dtype": "<f4", "shape": [3], "len": 300}
    assert state["schedule"] is None


@pytest.mark.parametrize("mode", ["sequential", "iid", "cyclic"])
@pytest.mark.parametrize("transform", [None, lambda b: {k: v * 2 for k, v in b.items()}])
def test_a_resumed_loader_gives_the_uninterrupted_batches(streams, mode, transform):
    with DataLoader(streams, num_workers=3, batch_size=12, mode=mode, seed=9, transform=transform) as whole:
        expected = batches(whole, 25)
    with DataLoader(streams, num_workers=3, batch_size=12, mode=mode, seed=9, transform=transform) as first:
        got = batches(first, 11)
        state = first.state_dict()
    with DataLoader(streams, num_workers=1, batch_size=12, mode=mode, seed=9, transform=transform) as resumed:
        resumed.load_state_dict(state)
        assert resumed.step == 11
        got += batches(resumed, 14)
    assert_same(got, expected)


def test_a_loader_resumes_in_place_mid_run(streams):
    with DataLoader(streams, num_workers=2, batch_size=8) as whole:
        expected = batches(whole, 12)
    with DataLoader(streams, num_workers=2, batch_size=8) as loader:
        batches(loader, 4)
        state = loader.state_dict()
        batches(loader, 5)  # past the checkpoint: the run "failed" here
        loader.load_state_dict(state)
        got = batches(loader, 8)
    assert_same(got, expected[4:])


def test_elastic_resume_on_another_shard_count(streams):
    with DataLoader(streams, num_workers=2, batch_size=12, seed=3) as whole:
        expected = batches(whole, 10)
    with DataLoader(streams, num_workers=2, batch_size=12, seed=3, shard_index=0, shard_count=2) as host:
        batches(host, 6)
        state = host.state_dict()
    assert state["shard_count"] == 2
    parts = []
    for index in range(3):
        with DataLoader(streams, num_workers=1, batch_size=12, seed=3, shard_index=index, shard_count=3) as host:
            host.load_state_dict(state)
            parts.append(batches(host, 4))
    for k in range(4):
        for name in ("x", "y"):
            joined = np.concatenate([p[k][name] for p in parts])
            assert joined.tobytes() == expected[6 + k][name].tobytes()


def test_a_mixture_resumes_and_its_schedule_is_in_the_state(tmp_path):
    write_dataset(tmp_path / "a", np.arange(100, dtype=np.int64))
    write_dataset(tmp_path / "b", np.arange(1000, 1050, dtype=np.int64))

    def mixture(weights_from=10):
        return Mixture(
            [{"v": Dataset(tmp_path / "a")}, {"v": Dataset(tmp_path / "b")}],
            [3.0, 1.0],
            schedule=[(weights_from, [1.0, 1.0])],
        )

    with DataLoader(mixture(), num_workers=2, batch_size=8, seed=1) as whole:
        expected = batches(whole, 20)
    with DataLoader(mixture(), num_workers=2, batch_size=8, seed=1) as first:
        batches(first, 13)
        state = first.state_dict()
    assert state["schedule"] == [[0, [3.0, 1.0]], [10, [1.0, 1.0]]]
    assert len(state["sources"]) == 2
    with DataLoader(mixture(), num_workers=2, batch_size=8, seed=1) as resumed:
        resumed.load_state_dict(state)
        assert_same(batches(resumed, 7), expected[13:])
    with DataLoader(mixture(weights_from=12), num_workers=2, batch_size=8, seed=1) as other:
        with pytest.raises(ValueError, match="weight schedule"):
            other.load_state_dict(state)


def test_ragged_streams_resume(tmp_path):
    rows = [np.arange(k % 7, dtype=np.int32) for k in range(90)]
    write_ragged(tmp_path / "r", rows)
    with DataLoader({"r": RaggedDataset(tmp_path / "r")}, num_workers=2, batch_size=6) as whole:
        expected = [next(whole)["r"] for _ in range(9)]
        state = whole.state_dict()
    with DataLoader({"r": RaggedDataset(tmp_path / "r")}, num_workers=2, batch_size=6) as first:
        for _ in range(4):
            next(first)
        state = first.state_dict()
    assert state["sources"][0]["streams"][0]["kind"] == "ragged"
    with DataLoader({"r": RaggedDataset(tmp_path / "r")}, num_workers=2, batch_size=6) as resumed:
        resumed.load_state_dict(state)
        for k in range(4, 9):
            values, splits = next(resumed)["r"]
            assert values.tobytes() == expected[k][0].tobytes()
            assert splits.tobytes() == expected[k][1].tobytes()


def test_another_dataset_seed_or_batch_size_is_refused(streams, tmp_path):
    with DataLoader(streams, num_workers=1, batch_size=10, seed=4) as loader:
        next(loader)
        state = loader.state_dict()
    write_dataset(tmp_path / "z", np.arange(301, dtype=np.int64))
    write_dataset(tmp_path / "w", np.zeros((301, 3), dtype=np.float32))
    write_dataset(tmp_path / "i", np.arange(300, dtype=np.int32))
    grown = {"x": Dataset(tmp_path / "w"), "y": Dataset(tmp_path / "z")}
    cases = [
        (grown, {}, r'stream "[xy]" held .* 300 records and now holds .* 301 records'),
        (dict(streams, y=Dataset(tmp_path / "i")), {}, r'stream "y" held <i8 records of shape \[\], 300 records'),
        ({"x": streams["x"], "w": streams["y"]}, {}, "another dataset"),
        (streams, {"seed": 5}, "build the loader with seed=4"),
        (streams, {"batch_size": 20}, "batch_size=10"),
        (streams, {"mode": "cyclic"}, "mode"),
    ]
    for other, kwargs, message in cases:
        args = {"num_workers": 1, "batch_size": 10, "seed": 4, **kwargs}
        with DataLoader(other, **args) as loader:
            before = next(loader)
            with pytest.raises(ValueError, match=message):
                loader.load_state_dict(state)
            # A refused state leaves the loader as it was.
            assert loader.step == 1 and before.step == 0
            assert next(loader).step == 1


def test_sequential_mode_ignores_the_seed(streams):
    with DataLoader(streams, num_workers=1, batch_size=10, mode="sequential", seed=1) as loader:
        batches(loader, 3)
        state = loader.state_dict()
    with DataLoader(streams, num_workers=1, batch_size=10, mode="sequential", seed=2) as loader:
        loader.load_state_dict(state)
        assert next(loader).step == 3


@pytest.mark.parametrize(
    "bad",
    [
        None,
        5,
        [],
        {},
        {"format": "something else"},
        {"format": "loaderx.loader_state", "version": 99},
        {"format": "loaderx.loader_state", "version": 1, "step": -1},
        {"format": "loaderx.loader_state", "version": 1, "step": 2**70},
        {"format": "loaderx.loader_state", "version": 1, "step": "3"},
        {"format": "loaderx.loader_state", "version": 1, "step": 3, "sources": [{"streams": [{"kind": "weird"}]}]},
        {"format": "loaderx.loader_state", "version": 1, "step": 3, "sources": [{"streams": 1}]},
        {"format": "loaderx.loader_state", "version": 1, "step": 3, "sources": [], "schedule": None},
    ],
)
def test_malformed_states_are_refused(streams, bad):
    with DataLoader(streams, num_workers=1, batch_size=10) as loader:
        with pytest.raises(ValueError, match="not a loader state"):
            loader.load_state_dict(bad)
        assert next(loader).step == 0


def test_every_field_of_a_real_state_is_checked(streams):
    with DataLoader(streams, num_workers=1, batch_size=10) as loader:
        state = loader.state_dict()
        for key in state:
            broken = dict(state)
            del broken[key]
            if key == "schedule":
                loader.load_state_dict(broken)  # absent is a loader over streams
                continue
            with pytest.raises(ValueError, match="not a loader state"):
                loader.load_state_dict(broken)


def test_a_state_survives_pickle_and_a_loader_pickles_after_loading_one(streams):
    with DataLoader(streams, num_workers=1, batch_size=10, seed=8) as whole:
        expected = batches(whole, 6)
    with DataLoader(streams, num_workers=1, batch_size=10, seed=8) as loader:
        batches(loader, 2)
        state = pickle.loads(pickle.dumps(loader.state_dict()))
    with DataLoader(streams, num_workers=1, batch_size=10, seed=8) as loader:
        loader.load_state_dict(state)
        clone = pickle.loads(pickle.dumps(loader))
    with clone:
        assert_same(batches(clone, 4), expected[2:])


def test_epochs_end_where_the_uninterrupted_run_ends(streams):
    with DataLoader(streams, num_workers=1, batch_size=100, mode="cyclic", epochs=2) as whole:
        total = len(list(whole))
    with DataLoader(streams, num_workers=1, batch_size=100, mode="cyclic", epochs=2) as first:
        next(first)
        state = first.state_dict()
    with DataLoader(streams, num_workers=1, batch_size=100, mode="cyclic", epochs=2) as resumed:
        resumed.load_state_dict(state)
        assert len(resumed) == total - 1
        assert len(list(resumed)) == total - 1


def test_a_closed_or_unopened_loader(streams):
    loader = DataLoader(streams, num_workers=1, batch_size=10)
    loader.close()
    state = loader.state_dict()  # still has its step
    assert state["step"] == 0

    class Late(DataLoader):
        def __init__(self):
            pass

    with pytest.raises(RuntimeError, match="not open"):
        Late().state_dict()
