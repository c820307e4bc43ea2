"""The PyTorch and JAX recipes of docs/python.md, run as written there
(issue 18): the JAX one when jax imports, the PyTorch DataLoader one when
torch does; the sharding and resume recipe needs neither."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from loaderx_rs import DataLoader, Dataset, write_dataset

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"
N = 600


def recipe(name):
    """The python block after `<!-- recipe: NAME -->` in docs/python.md."""
    after = DOC.read_text().split(f"<!-- recipe: {name} -->", 1)[1]
    return after.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.fixture
def datasets(workdir, rng):
    """train_data.zr (column 0 is the record's index) and train_label.zr in the working directory."""
    data = rng.standard_normal((N, 6)).astype(np.float32)
    data[:, 0] = np.arange(N)
    labels = np.arange(N, dtype=np.int64) * 10
    write_dataset("train_data.zr", data)
    write_dataset("train_label.zr", labels)
    return data, labels


def run_shards(monkeypatch, **env):
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    scope = {}
    exec(compile(recipe("shards"), "<docs/python.md: shards>", "exec"), scope)
    return scope["batch"], scope["checkpoint"]


def test_sharding_by_rank_and_resuming(datasets, monkeypatch):
    data, labels = datasets
    whole, checkpoint = run_shards(monkeypatch, RANK=0, WORLD_SIZE=1)
    assert checkpoint == {"step": 1} and len(whole["label"]) == 256
    halves = [run_shards(monkeypatch, RANK=r, WORLD_SIZE=2)[0] for r in (0, 1)]
    assert [len(h["label"]) for h in halves] == [128, 128]
    np.testing.assert_array_equal(np.concatenate([h["label"] for h in halves]), whole["label"])
    np.testing.assert_array_equal(np.concatenate([h["data"] for h in halves]), data[whole.indices])
    # Resumed at the checkpoint: the batch the first run had next.
    resumed, _ = run_shards(monkeypatch, RANK=0, WORLD_SIZE=1, RESUME_STEP=checkpoint["step"])
    with DataLoader({"label": Dataset("train_label.zr")}, batch_size=256) as loader:
        next(loader)
        np.testing.assert_array_equal(resumed["label"], next(loader)["label"])


def test_torch_map_style_dataset_with_spawn_workers(datasets, tmp_path, monkeypatch):
    pytest.importorskip("torch", reason="needs torch (pip install torch); .ci/run does not install it")
    data, _ = datasets
    (tmp_path / "torch_recipe.py").write_text(recipe("torch"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import torch_recipe

    rows = [batch.numpy() for batch in torch_recipe.batches()]
    assert all(r.shape[1:] == (6,) for r in rows) and sum(len(r) for r in rows) == N
    seen = np.concatenate(rows)
    np.testing.assert_array_equal(np.sort(seen[:, 0]), np.arange(N))
    np.testing.assert_array_equal(seen, data[seen[:, 0].astype(np.int64)])


# Four CPU devices in one process, so that the global array is sharded.
JAX_CHECK = """
import json, os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ["JAX_PLATFORMS"] = "cpu"
import numpy as np
import loaderx_rs
scope = {}
exec(compile(sys.argv[1], "<docs/python.md: jax>", "exec"), scope)
x, y, batch = scope["x"], scope["y"], scope["batch"]
data = loaderx_rs.Dataset("train_data.zr")[batch.indices]
labels = loaderx_rs.Dataset("train_label.zr")[batch.indices]
print(json.dumps({
    "devices": len(scope["jax"].devices()),
    "step": batch.step,
    "x": list(x.shape), "y": list(y.shape),
    "shards": sorted(len(s.data) for s in x.addressable_shards),
    "x_equal": bool((np.asarray(x) == data).all()),
    "y_equal": bool((np.asarray(y) == labels).all()),
}))
"""


def test_jax_global_array_from_per_host_batches(datasets):
    pytest.importorskip("jax", reason="needs jax (pip install jax); .ci/run installs its CPU wheel")
    out = subprocess.run([sys.executable, "-c", JAX_CHECK, recipe("jax")], capture_output=True, text=True,
                         cwd=os.getcwd(), timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"devices": 4, "step": 2, "x": [256, 6], "y": [256], "shards": [64, 64, 64, 64],
                   "x_equal": True, "y_equal": True}
