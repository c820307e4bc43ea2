"""DataLoader.stats() and metrics_text(): counts that add up, a slow
transform seen in the transform time and the consumer's wait, a window
since the previous call, Prometheus text that parses."""

import re
import time

import numpy as np
import pytest

from loaderx_rs import DataLoader, Dataset, write_dataset


@pytest.fixture
def x(tmp_path):
    write_dataset(tmp_path / "x", np.arange(400 * 4, dtype=np.float32).reshape(400, 4))
    return Dataset(tmp_path / "x")


def test_counts_add_up(x):
    with DataLoader({"x": x}, num_workers=2, batch_size=10, prefetch_size=4) as loader:
        for _ in range(12):
            next(loader)
        s = loader.stats()
    run = s["run"]
    assert run["batches"] == 12
    assert run["bytes"] % (10 * 4 * 4) == 0 and run["bytes"] >= 12 * 160
    assert len(run["worker_busy"]) == 2
    assert all(0.0 <= b <= 1.0 for b in run["worker_busy"])
    assert sum(run["worker_batches"]) * 160 == run["bytes"]
    assert 0 <= run["wait_p50_s"] <= run["wait_p99_s"]
    assert run["wait_s"] <= run["elapsed_s"]
    assert s["consumer_wait_s"] >= 0 and s["python_transform_s"] == 0


def test_a_window_is_since_the_previous_call(x):
    with DataLoader({"x": x}, num_workers=2, batch_size=10) as loader:
        for _ in range(5):
            next(loader)
        first = loader.stats()
        for _ in range(3):
            next(loader)
        second = loader.stats()
    assert first["window"]["batches"] == 5
    assert second["window"]["batches"] == 3
    assert second["run"]["batches"] == 8


def test_a_slow_transform_shows_in_the_transform_time_and_the_wait(x):
    def slow(batch):
        time.sleep(0.02)
        return batch

    with DataLoader({"x": x}, num_workers=1, batch_size=10, prefetch_size=1, transform=slow) as loader:
        for _ in range(6):
            next(loader)
        s = loader.stats()
    assert s["python_transform_s"] >= 6 * 0.02 - 0.005
    # One slot: the consumer waits for most transforms.
    assert s["consumer_wait_s"] >= 4 * 0.02 * 0.5


SAMPLE = re.compile(r'^(loaderx_[a-z_]+)(\{[a-z]+="[^"]*"\})? (\S+)$')


def test_metrics_text_parses(x):
    with DataLoader({"x": x}, num_workers=2, batch_size=10) as loader:
        for _ in range(7):
            next(loader)
        text = loader.metrics_text()
    declared = set()
    samples = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram")
            declared.add(name)
            continue
        if line.startswith("# HELP "):
            continue
        m = SAMPLE.match(line)
        assert m, line
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in declared or base in declared, line
        samples[name + labels] = value
    assert samples["loaderx_batches_taken_total"] == 7
    assert samples['loaderx_wait_seconds_bucket{le="+Inf"}'] == 7
    assert samples["loaderx_wait_seconds_count"] == 7
    assert "loaderx_consumer_wait_seconds_total" in samples
    assert samples['loaderx_worker_batches_total{worker="0"}'] + samples[
        'loaderx_worker_batches_total{worker="1"}'
    ] == samples["loaderx_read_bytes_total"] / 160


@pytest.mark.parametrize("read_mode, path", [("mapped", "memory"), ("batched", "device")])
def test_reads_are_split_by_where_the_bytes_came_from(tmp_path, read_mode, path):
    write_dataset(tmp_path / "r", np.arange(400 * 4, dtype=np.float32).reshape(400, 4))
    data = Dataset(tmp_path / "r", read_mode=read_mode)
    with DataLoader({"x": data}, num_workers=2, batch_size=10) as loader:
        for _ in range(8):
            next(loader)
        run = loader.stats()["run"]
        text = loader.metrics_text()
    other = "device" if path == "memory" else "memory"
    assert run[f"read_{path}_bytes"] >= 8 * 10 * 4 * 4 and run[f"read_{path}_bytes"] % 160 == 0
    assert run[f"read_{other}_bytes"] == 0 and run[f"read_{other}_s"] == 0
    assert run[f"read_{path}_s"] > 0
    assert f'loaderx_store_read_bytes_total{{from="{path}"}}' in text
