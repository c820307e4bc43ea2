"""DataLoader(..., trace_path=...): close() writes a Chrome Trace Event
Format file with one span per stage per step, the consumer's waits, named
tracks, the transform thread's python_transform spans; pickling keeps the
path; an unwritable path is an OSError from close()."""

import json
import pickle

import numpy as np
import pytest

from loaderx_rs import DataLoader, Dataset, write_dataset

STEPS = 20


@pytest.fixture
def x(tmp_path):
    write_dataset(tmp_path / "x", np.arange(200 * 4, dtype=np.float32).reshape(200, 4))
    return Dataset(tmp_path / "x")


def spans(trace, name):
    out = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["name"] == name]
    for e in out:
        assert e["pid"] == 1 and e["dur"] >= 0
    return out


def thread_names(trace):
    return {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name"}


def run(loader, steps=STEPS):
    with loader:
        for _ in range(steps):
            next(loader)


def assert_stages(trace, workers):
    for stage in ("sample", "gather", "transform"):
        found = spans(trace, stage)
        for step in range(STEPS):
            at = [s for s in found if s["args"]["step"] == step]
            assert len(at) == 1, (stage, step, at)
            assert 1 <= at[0]["tid"] <= workers
    for tid in range(1, workers + 1):
        track = sorted((s for n in ("sample", "gather", "transform") for s in spans(trace, n) if s["tid"] == tid),
                       key=lambda s: s["ts"])
        for a, b in zip(track, track[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + 0.001, (a, b)


def test_close_writes_every_stage_of_every_step(x, tmp_path):
    path = tmp_path / "trace.json"
    run(DataLoader({"x": x}, num_workers=2, batch_size=8, prefetch_size=2, trace_path=path))
    trace = json.loads(path.read_text())
    assert_stages(trace, 2)
    waits = spans(trace, "wait")
    assert [w["args"]["step"] for w in waits] == list(range(STEPS))
    assert all(w["tid"] == 0 for w in waits)
    assert thread_names(trace) == {0: "consumer", 1: "worker 0", 2: "worker 1"}
    assert trace["otherData"]["dropped_events"] == 0
    assert spans(trace, "python_transform") == []


def test_a_transform_has_its_own_track(x, tmp_path):
    path = tmp_path / "trace.json"

    def double(batch):
        return {"x": batch["x"] * 2}

    run(DataLoader({"x": x}, num_workers=2, batch_size=8, prefetch_size=2, transform=double, trace_path=str(path)))
    trace = json.loads(path.read_text())
    assert_stages(trace, 2)
    assert thread_names(trace)[3] == "python transform"
    python = spans(trace, "python_transform")
    steps = sorted(s["args"]["step"] for s in python)
    # The thread runs ahead of next(): the 20 taken and at most a queue's more.
    assert steps[:STEPS] == list(range(STEPS)) and len(set(steps)) == len(steps), steps
    assert all(s["tid"] == 3 for s in python)


def test_without_a_trace_path_nothing_is_written(x, tmp_path):
    before = set(tmp_path.iterdir())
    run(DataLoader({"x": x}, num_workers=2, batch_size=8))
    assert set(tmp_path.iterdir()) == before


def test_pickling_keeps_the_trace_path(x, tmp_path):
    path = tmp_path / "trace.json"
    loader = DataLoader({"x": x}, num_workers=1, batch_size=8, trace_path=path)
    next(loader)
    loader.close()
    path.unlink()
    again = pickle.loads(pickle.dumps(loader))
    run(again, 3)
    trace = json.loads(path.read_text())
    # Resumed at step 1.
    assert [w["args"]["step"] for w in spans(trace, "wait")] == [1, 2, 3]


def test_an_unwritable_path_is_an_oserror_from_close(x, tmp_path):
    path = tmp_path / "missing" / "trace.json"
    loader = DataLoader({"x": x}, num_workers=2, batch_size=8, trace_path=path)
    next(loader)
    with pytest.raises(FileNotFoundError):
        loader.close()
    loader.close()  # raised once
    loader = DataLoader({"x": x}, num_workers=2, batch_size=8, transform=lambda b: b, trace_path=path)
    next(loader)
    with pytest.raises(OSError):
        loader.close()
    # Dropped without close(): nothing raised.
    loader = DataLoader({"x": x}, num_workers=2, batch_size=8, trace_path=path)
    next(loader)
    del loader


def test_a_trace_draws_as_svg(tmp_path):
    """python/bench/trace_svg.py (the picture in docs/loader.md) draws a real trace."""
    import importlib.util
    import xml.etree.ElementTree as ET
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "bench" / "trace_svg.py"
    spec = importlib.util.spec_from_file_location("trace_svg", bench)
    trace_svg = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trace_svg)
    write_dataset(tmp_path / "x", np.arange(400 * 4, dtype=np.float32).reshape(400, 4))
    trace = tmp_path / "trace.json"
    with DataLoader({"x": Dataset(tmp_path / "x")}, num_workers=2, batch_size=10, trace_path=trace) as loader:
        for _ in range(20):
            next(loader)
    out = tmp_path / "trace.svg"
    trace_svg.draw(json.loads(trace.read_text()), out)
    root = ET.parse(out).getroot()
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert sum(1 for t in titles if t.startswith("gather step")) >= 20
    assert any(t.startswith("wait step") for t in titles)
