"""Sharded datasets from Python: `shard_records=N` starts a new shard every
N records; `Dataset` and `RaggedDataset` open either kind; each shard is a
store with its own schema.json that the reference package loaderx 0.7.3
opens by itself."""

import json

import numpy as np
import pytest

import loaderx_rs as ours

from conftest import REFERENCE_MISSING, smooth


def shard_dirs(root, shards):
    return [root] + [root / f"shard-{k:06d}" for k in range(1, shards)]


def test_fixed_shards_read_back_and_append(tmp_path, rng):
    a, b = smooth(rng, 250, 4, 3), smooth(rng, 90, 4, 3)
    assert ours.write_dataset(tmp_path / "d", a, shard_records=64) == 250
    ds = ours.Dataset(tmp_path / "d")
    assert ds.sharded and ds.shards == 4 and len(ds) == 250
    idx = rng.permutation(250)
    np.testing.assert_array_equal(ds[idx], a[idx])
    np.testing.assert_array_equal(ds[-1], a[-1])
    np.testing.assert_array_equal(ds[60:70], a[60:70])
    ours.write_dataset(tmp_path / "d", b, shard_records=64)
    both = np.concatenate([a, b])
    ds = ours.Dataset(tmp_path / "d")
    assert (len(ds), ds.shards) == (340, 6)
    np.testing.assert_array_equal(ds[np.arange(340)], both)
    table = json.loads((tmp_path / "d" / "shards.json").read_text())
    assert [s.get("records") for s in table["shards"]] == [64, 64, 64, 64, 64, None]
    with pytest.raises(IndexError):
        ds[340]
    with pytest.raises(ours.DatasetError, match="sharded"):
        ds._store


def test_a_dataset_that_fits_is_one_store(tmp_path, rng):
    a = smooth(rng, 50, 3)
    ours.write_dataset(tmp_path / "d", a, shard_records=50)
    assert not (tmp_path / "d" / "shards.json").exists()
    ds = ours.Dataset(tmp_path / "d")
    assert not ds.sharded and ds.shards == 1 and len(ds._store) == 50
    with pytest.raises(ValueError):
        ours.write_dataset(tmp_path / "e", a, shard_records=0)


def test_ragged_shards(tmp_path, rng):
    seqs = [rng.integers(0, 1000, size=int(n), dtype=np.int32) for n in rng.integers(0, 20, size=150)]
    ours.write_ragged(tmp_path / "r", seqs, codec="zstd_dict", shard_records=40)
    rds = ours.RaggedDataset(tmp_path / "r")
    assert (len(rds), rds.shards) == (150, 4)
    idx = rng.permutation(150)
    values, row_splits = rds[idx]
    for k, i in enumerate(idx):
        np.testing.assert_array_equal(values[row_splits[k]:row_splits[k + 1]], seqs[i])
    padded, lengths = rds.getitems_padded(idx, pad_value=-1)
    assert list(lengths) == [len(seqs[i]) for i in idx]


def test_the_loader_reads_across_shards(tmp_path, rng):
    a = np.arange(100, dtype=np.int64)
    ours.write_dataset(tmp_path / "d", a, shard_records=7)
    loader = ours.DataLoader({"x": ours.Dataset(tmp_path / "d")}, batch_size=10, mode=ours.Zsampler.CYCLIC, seed=3)
    seen = np.concatenate([next(loader)["x"] for _ in range(10)])
    assert sorted(seen.tolist()) == list(range(100))


def test_the_reference_opens_each_shard(tmp_path, rng):
    reference = pytest.importorskip("loaderx", reason=REFERENCE_MISSING)
    assert reference.__version__ == "0.7.3", reference.__version__
    a = smooth(rng, 300, 8)
    ours.write_dataset(tmp_path / "d", a, codec="zstd_dict", shard_records=128)
    seqs = [rng.integers(0, 50, size=int(n)).astype(np.int16) for n in rng.integers(0, 9, size=100)]
    ours.write_ragged(tmp_path / "r", seqs, shard_records=30)
    # The root is shard 0: the reference, which reads no shard table, sees its records.
    for k, d in enumerate(shard_dirs(tmp_path / "d", 3)):
        alone = reference.Dataset(d)
        np.testing.assert_array_equal(alone[np.arange(len(alone))], a[k * 128:(k + 1) * 128])
    for k, d in enumerate(shard_dirs(tmp_path / "r", 4)):
        alone = reference.RaggedDataset(d)
        assert len(alone) == min(30, 100 - k * 30)
        for i in range(len(alone)):
            np.testing.assert_array_equal(alone[i], seqs[k * 30 + i])


def test_pickles_and_refreshes(tmp_path, rng):
    import pickle
    a = smooth(rng, 50, 2)
    ours.write_dataset(tmp_path / "d", a, shard_records=20)
    ds = ours.Dataset(tmp_path / "d")
    again = pickle.loads(pickle.dumps(ds))
    assert (len(again), again.shards) == (50, 3)
    np.testing.assert_array_equal(again[np.arange(50)], a)
    b = smooth(rng, 30, 2)
    ours.write_dataset(tmp_path / "d", b, shard_records=20)
    assert ds.refresh() == 80 and ds.shards == 4
    np.testing.assert_array_equal(ds[np.arange(80)], np.concatenate([a, b]))


def test_bad_shard_tables_raise_dataset_errors(tmp_path, rng):
    ours.write_dataset(tmp_path / "d", smooth(rng, 50, 2), shard_records=20)
    table = tmp_path / "d" / "shards.json"
    table.write_text(table.read_text().replace('"records": 20', '"records": 99999999999', 1))
    with pytest.raises(ours.DatasetError, match="shards.json"):
        ours.Dataset(tmp_path / "d")
