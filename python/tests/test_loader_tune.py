"""DataLoader(num_workers="auto", prefetch_size="auto", memory_budget=...):
the batches are the fixed loader's, the tuner's decisions and reasons are
in stats()["tuning"] and the trace, the budget bounds the window, and bad
arguments are refused."""

import json
import pickle
import time

import numpy as np
import pytest

from loaderx_rs import DataLoader, Dataset, write_dataset

ROW = 64 * 4  # bytes of one record


@pytest.fixture
def x(tmp_path):
    write_dataset(tmp_path / "x", np.arange(2000 * 64, dtype=np.float32).reshape(2000, 64))
    return Dataset(tmp_path / "x")


@pytest.fixture
def heavy(tmp_path):
    """zstd records whose decoding keeps one worker busier than the consumer."""
    rng = np.random.default_rng(0)
    write_dataset(tmp_path / "h", rng.standard_normal((20000, 256)).astype(np.float32), codec="zstd")
    return Dataset(tmp_path / "h")


def slow(batch):
    time.sleep(0.002)
    return batch


def test_auto_gives_the_fixed_loaders_batches(x):
    with DataLoader({"x": x}, num_workers=3, batch_size=16, seed=4) as fixed:
        expected = [next(fixed)["x"].copy() for _ in range(150)]
    with DataLoader({"x": x}, num_workers="auto", prefetch_size="auto", batch_size=16, seed=4) as tuned:
        for k in range(150):
            assert next(tuned)["x"].tobytes() == expected[k].tobytes()


def test_the_decisions_and_their_reasons_are_in_the_stats(heavy):
    with DataLoader({"h": heavy}, num_workers="auto", batch_size=256, memory_budget="64MiB") as loader:
        for _ in range(300):
            next(loader)
        tuning = loader.stats()["tuning"]
    assert tuning["memory_budget"] == 64 << 20
    assert tuning["decided"] >= 1 and tuning["decisions"]
    for d in tuning["decisions"]:
        assert d["workers"] >= 1 and d["window"] >= 1 and isinstance(d["reason"], str) and d["reason"]
    assert tuning["workers"] == tuning["decisions"][-1]["workers"]


def test_fixed_settings_have_no_tuning(x):
    with DataLoader({"x": x}, num_workers=2, batch_size=16) as loader:
        next(loader)
        assert loader.stats()["tuning"] is None


def test_a_budget_bounds_the_window(x):
    batch = 16 * ROW
    with DataLoader({"x": x}, num_workers=4, batch_size=16, memory_budget=4 * batch, transform=slow) as loader:
        for _ in range(100):
            next(loader)
            time.sleep(0.0005)
            tuning = loader.stats()["tuning"]
            assert tuning["window_limit"] in (None, 3)
            assert tuning["window"] <= 3 and tuning["workers"] <= 3
        assert tuning["window_limit"] == 3


def test_decisions_are_in_the_trace(heavy, tmp_path):
    path = tmp_path / "trace.json"
    with DataLoader({"h": heavy}, num_workers="auto", batch_size=256, trace_path=path) as loader:
        for _ in range(300):
            next(loader)
        decided = loader.stats()["tuning"]["decided"]
    marks = [e for e in json.loads(path.read_text())["traceEvents"] if e["name"] == "tune"]
    assert decided >= 1 and len(marks) == decided
    assert all(m["ph"] == "i" and m["args"]["reason"] for m in marks)


def test_auto_pickles_as_auto(x):
    with DataLoader({"x": x}, num_workers="auto", batch_size=16, memory_budget="1GB") as loader:
        next(loader)
        clone = pickle.loads(pickle.dumps(loader))
    with clone:
        assert next(clone).step == 1
        assert clone.stats()["tuning"]["memory_budget"] == 10**9


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"num_workers": "many"}, ValueError, "num_workers must be an int or \"auto\""),
        ({"prefetch_size": 1.5}, TypeError, "prefetch_size must be"),
        ({"memory_budget": "2 parsecs"}, ValueError, "not a size"),
        ({"memory_budget": 0}, ValueError, "above 0"),
        ({"memory_budget": [1]}, TypeError, "memory_budget must be bytes"),
        ({"memory_budget": -5}, TypeError, "memory_budget must be bytes"),
    ],
)
def test_bad_tuning_arguments(x, kwargs, error, message):
    with pytest.raises(error, match=message):
        DataLoader({"x": x}, batch_size=16, **kwargs)
