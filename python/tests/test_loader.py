"""DataLoader: batches as dicts of NumPy arrays, step order, resume,
shards, transforms, failures that reach next() instead of hanging."""

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import loaderx_rs
from loaderx_rs import DataLoader, Dataset, RaggedDataset, Zsampler, write_dataset, write_ragged

from conftest import smooth


@pytest.fixture
def streams(tmp_path, rng):
    data = smooth(rng, 1000, 16)
    write_dataset(tmp_path / "x", data)
    write_dataset(tmp_path / "y", np.arange(1000, dtype=np.int64))
    return data, Dataset(tmp_path / "x"), Dataset(tmp_path / "y")


def within(seconds, fn):
    """fn() in a thread; fails the test if it has not returned in time (a hang)."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            out["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"no answer within {seconds} s"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_batches_line_up_with_the_sampler(streams):
    data, x, y = streams
    for mode in (0, 1, 2):
        loader = DataLoader({"x": x, "y": y}, num_workers=3, batch_size=64, mode=mode, seed=5)
        sampler = Zsampler(1000, 64, mode, seed=5)
        for step in range(30):
            batch = next(loader)
            assert set(batch) == {"x", "y"}
            assert batch["x"].shape == (64, 16) and batch["x"].dtype == np.float32
            assert batch["y"].dtype == np.int64
            np.testing.assert_array_equal(batch["y"], sampler.next().astype(np.int64))
            np.testing.assert_array_equal(batch["x"], data[batch["y"]])
        assert loader.step == 30
        loader.close()


def test_resume_at_a_step(streams):
    _, x, y = streams
    with DataLoader({"x": x, "y": y}, batch_size=32, mode=2) as loader:
        labels = [next(loader)["y"] for _ in range(40)]
    with DataLoader({"x": x, "y": y}, batch_size=32, mode=2, start_step=25) as again:
        assert again.step == 25
        for step in range(25, 40):
            np.testing.assert_array_equal(next(again)["y"], labels[step])


def test_shards_split_each_batch(streams):
    _, x, y = streams
    whole = DataLoader({"y": y}, batch_size=64, seed=3)
    parts = [DataLoader({"y": y}, batch_size=64, seed=3, shard_index=i, shard_count=2) for i in range(2)]
    for _ in range(10):
        got = np.concatenate([next(p)["y"] for p in parts])
        np.testing.assert_array_equal(got, next(whole)["y"])
    assert parts[0].batch_len == 32


def test_batches_outlive_the_loader_and_are_writeable(streams):
    data, x, y = streams
    loader = DataLoader({"x": x, "y": y}, batch_size=16)
    kept = [next(loader) for _ in range(20)]
    loader.close()
    for batch in kept:
        np.testing.assert_array_equal(batch["x"], data[batch["y"]])
    kept[0]["x"][:] = 0  # the arrays are the consumer's
    assert not kept[0]["x"].any()


def test_ragged_stream(tmp_path, rng):
    seqs = [np.arange(int(n), dtype=np.int16) for n in rng.integers(0, 20, size=100)]
    write_ragged(tmp_path / "t", seqs)
    write_dataset(tmp_path / "l", np.arange(100))
    loader = DataLoader({"t": RaggedDataset(tmp_path / "t"), "l": Dataset(tmp_path / "l")}, batch_size=10)
    for _ in range(5):
        batch = next(loader)
        values, splits = batch["t"]
        assert values.dtype == np.int16 and splits.dtype == np.int64
        for k, label in enumerate(batch["l"]):
            np.testing.assert_array_equal(values[splits[k]:splits[k + 1]], seqs[label])


def test_transform(streams):
    data, x, y = streams

    def collate(batch):
        return {"sum": batch["x"].sum(axis=1), "y": batch["y"]}

    loader = DataLoader({"x": x, "y": y}, batch_size=8, transform=collate)
    for _ in range(5):
        batch = next(loader)
        np.testing.assert_allclose(batch["sum"], data[batch["y"]].sum(axis=1), rtol=1e-6)
    with pytest.raises(TypeError):
        DataLoader({"x": x}, transform=3)


def test_transform_error_reaches_next(streams):
    _, x, y = streams
    calls = []

    def transform(batch):
        calls.append(1)
        if len(calls) == 3:
            raise KeyError("broken collate")
        return batch

    loader = DataLoader({"x": x, "y": y}, batch_size=8, transform=transform)
    within(10, lambda: next(loader))
    within(10, lambda: next(loader))
    with pytest.raises(KeyError, match="broken collate"):
        within(10, lambda: next(loader))
    # The loader stopped: iteration ends, and it never hangs.
    with pytest.raises(StopIteration):
        within(10, lambda: next(loader))
    assert within(10, lambda: list(loader)) == []


def test_gather_error_reaches_next(tmp_path, rng):
    # A store whose records are not the schema's size: every gather fails.
    write_dataset(tmp_path / "bad", np.zeros((50, 4), dtype=np.float32))
    store = loaderx_rs.Zrecord(tmp_path / "wrong", codec="raw")
    store.append(np.zeros(50 * 8, dtype=np.uint8), 50, 8)
    store.close()
    (tmp_path / "wrong" / "schema.json").write_text((tmp_path / "bad" / "schema.json").read_text())
    loader = DataLoader({"x": Dataset(tmp_path / "wrong")}, batch_size=4)
    with pytest.raises(loaderx_rs.LoaderError) as e:
        within(10, lambda: next(loader))
    assert e.value.step == 0 and e.value.path == str(tmp_path / "wrong")
    assert isinstance(e.value.__cause__, loaderx_rs.LayoutError)


def test_bad_configuration(streams, tmp_path):
    _, x, y = streams
    write_dataset(tmp_path / "short", np.arange(10))
    short = Dataset(tmp_path / "short")
    with pytest.raises(ValueError, match="same length"):
        DataLoader({"x": x, "s": short})
    with pytest.raises(ValueError, match="at least one stream"):
        DataLoader({})
    with pytest.raises(ValueError):
        DataLoader({"x": x}, num_workers=0)
    with pytest.raises(ValueError):
        DataLoader({"x": x}, batch_size=0)
    with pytest.raises(ValueError):
        DataLoader({"x": x}, mode=7)
    with pytest.raises(ValueError):
        DataLoader({"x": x}, batch_size=10, shard_count=3)
    with pytest.raises(TypeError, match="not a loaderx_rs Dataset"):
        DataLoader({"x": [1, 2, 3]})
    loader = DataLoader({"x": x})
    with pytest.raises(TypeError, match="endless"):
        len(loader)
    loader.close()
    with pytest.raises(StopIteration):
        next(loader)


def test_transform_runs_ahead_bounded(streams):
    _, x, y = streams
    calls = []

    def transform(batch):
        calls.append(threading.get_ident())
        return batch["y"]

    loader = DataLoader({"x": x, "y": y}, batch_size=8, prefetch_size=3, transform=transform, mode=0)
    np.testing.assert_array_equal(within(10, lambda: next(loader)), np.arange(8))
    deadline = time.monotonic() + 10
    while len(calls) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    # Prefetched: the queue of 3 refilled behind the consumer, on another thread...
    assert len(calls) >= 4 and threading.get_ident() not in calls
    time.sleep(0.2)
    # ...and bounded by it (3 queued, one taken, one in the making).
    assert len(calls) <= 5
    assert loader.step == 1
    for step in range(1, 6):
        np.testing.assert_array_equal(next(loader), np.arange(8 * step, 8 * step + 8))
    assert loader.step == 6
    loader.close()
    with pytest.raises(StopIteration):
        next(loader)


def test_interpreter_exits_with_loaders_open(tmp_path):
    """Loaders left open (with a transform thread waiting for room, or
    blocked in the transform) never keep the interpreter from exiting."""
    write_dataset(tmp_path / "d", np.arange(1000))
    script = f"""
import time
import numpy as np
import loaderx_rs as L
ds = L.Dataset({str(tmp_path / "d")!r})
a = L.DataLoader({{"x": ds}}, batch_size=4, transform=lambda b: b)
next(a)
b = L.DataLoader({{"x": ds}}, batch_size=4, transform=lambda b: (time.sleep(0.05), b)[1])
next(b)
c = L.DataLoader({{"x": ds}}, batch_size=4)
next(c)
d = L.DataLoader({{"x": ds}}, batch_size=4, transform=lambda b: b)
del d
print("done")
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done"


def test_a_loader_does_not_survive_fork(streams):
    _, x, y = streams
    loader = DataLoader({"y": y}, batch_size=4, transform=lambda b: b)
    next(loader)
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            signal.alarm(30)
            try:
                next(loader)
            except RuntimeError as e:
                status = 0 if "fork" in str(e) else 2
            fresh = DataLoader({"y": y}, batch_size=4)
            next(fresh)
            fresh.close()
            del loader
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    assert next(loader)["y"].shape == (4,)  # the parent's loader goes on
    loader.close()
