"""Pickling and subclassing (issue 18, finding 1), the batch's indices
(finding 6) and the reference's `ds._store` and `Sampler.Mode` (finding 7)."""

import multiprocessing as mp
import pickle

import numpy as np
import pytest

import loaderx_rs
from loaderx_rs import DataLoader, Dataset, RaggedDataset, Zrecord, write_dataset, write_ragged

from conftest import smooth


@pytest.fixture
def datasets(tmp_path, rng):
    data = smooth(rng, 300, 6)
    labels = np.arange(300, dtype=np.int64)
    seqs = [np.arange(k % 7, dtype=np.int32) + k for k in range(300)]
    write_dataset(tmp_path / "data", data)
    write_dataset(tmp_path / "label", labels)
    write_ragged(tmp_path / "tokens", seqs)
    return tmp_path, data, labels, seqs


def test_datasets_and_read_only_stores_pickle_by_path(datasets):
    root, data, labels, seqs = datasets
    ds = pickle.loads(pickle.dumps(Dataset(root / "data", read_mode="mapped")))
    np.testing.assert_array_equal(ds[[5, 299]], data[[5, 299]])
    rg = pickle.loads(pickle.dumps(RaggedDataset(root / "tokens")))
    np.testing.assert_array_equal(rg[13], seqs[13])
    store = pickle.loads(pickle.dumps(Zrecord(root / "label", read_only=True)))
    assert (len(store), store.read_only, store.codec) == (300, True, "zstd")
    with Zrecord(root / "label") as writable, pytest.raises(TypeError, match="read_only=True"):
        pickle.dumps(writable)
    closed = Dataset(root / "data")
    closed.close()
    with pytest.raises(ValueError, match="closed"):
        pickle.dumps(closed)


def test_a_loader_pickles_by_configuration_and_step(datasets):
    root, data, labels, _ = datasets
    streams = {"data": Dataset(root / "data"), "label": Dataset(root / "label")}
    with DataLoader(streams, batch_size=16, mode=2, seed=7, num_workers=2) as loader:
        for _ in range(5):
            next(loader)
        copy = pickle.loads(pickle.dumps(loader))
        want = [next(loader) for _ in range(3)]
    with copy:
        assert copy.step == 5
        for w in want:
            got = next(copy)
            np.testing.assert_array_equal(got["data"], w["data"])
            np.testing.assert_array_equal(got["label"], w["label"])


class Labelled(Dataset):
    """A subclass with an argument of its own, as one wraps the reference's."""

    def __init__(self, path, offset):
        super().__init__(path)
        self.offset = offset

    def __getitems__(self, idxs):
        return super().__getitems__(idxs) + self.offset


def test_subclasses_take_their_own_arguments_and_pickle(datasets):
    root, _, labels, _ = datasets
    ds = Labelled(root / "label", 1000)
    np.testing.assert_array_equal(ds.__getitems__([1, 2]), labels[[1, 2]] + 1000)
    back = pickle.loads(pickle.dumps(ds))
    assert type(back) is Labelled and back.offset == 1000
    np.testing.assert_array_equal(back.__getitems__([3]), [1003])
    for base in (RaggedDataset, Zrecord, DataLoader, loaderx_rs.Zsampler):
        type("Sub", (base,), {})

    class Unopened(Dataset):
        def __init__(self, path):
            pass

    with pytest.raises(RuntimeError, match=r"must call super\(\)\.__init__"):
        len(Unopened(root / "label"))


def spawned(loader, queue):
    with loader:
        batch = next(loader)
        queue.put((loader.step, batch["label"].tolist(), batch.indices.tolist()))


def test_a_spawned_process_resumes_the_loader(datasets):
    root, _, labels, _ = datasets
    ctx = mp.get_context("spawn")
    with DataLoader({"label": Dataset(root / "label")}, batch_size=8, seed=3) as loader:
        next(loader)
        queue = ctx.Queue()
        child = ctx.Process(target=spawned, args=(loader, queue))
        child.start()
        step, got, indices = queue.get(timeout=120)
        child.join(timeout=120)
        want = next(loader)
    assert child.exitcode == 0
    assert step == 2
    assert got == want["label"].tolist() == labels[indices].tolist()


def test_every_batch_names_its_records(datasets):
    root, data, labels, seqs = datasets
    streams = {"data": Dataset(root / "data"), "tokens": RaggedDataset(root / "tokens"), "indices": Dataset(root / "label")}
    seen = []

    def transform(batch):
        seen.append(batch.indices.copy())
        return batch

    for t in (None, transform):
        with DataLoader(streams, batch_size=12, mode=0, transform=t, start_step=3) as loader:
            batch = next(loader)
        assert isinstance(batch, dict) and isinstance(batch, loaderx_rs.Batch)
        assert batch.step == 3 and batch.indices.dtype == np.uint64
        np.testing.assert_array_equal(batch.indices, np.arange(36, 48))
        np.testing.assert_array_equal(batch["data"], data[batch.indices])
        np.testing.assert_array_equal(batch["indices"], labels[batch.indices])  # a stream of that name is a stream
        values, splits = batch["tokens"]
        np.testing.assert_array_equal(values, np.concatenate([seqs[i] for i in batch.indices]))
    np.testing.assert_array_equal(seen[0], np.arange(36, 48))


def test_the_references_store_and_sampler_names(datasets):
    root, data, _, _ = datasets
    ds = Dataset(root / "data")
    assert ds._store is ds._store and len(ds._store) == 300 and ds._store.read_only
    out = np.empty((2, 6), dtype=np.float32)
    ds._store.gather(np.array([0, 7], dtype=np.uint64), out, 24)
    np.testing.assert_array_equal(out, data[[0, 7]])
    assert len(RaggedDataset(root / "tokens")._store) == 300
    from loaderx_rs._sampler import Sampler

    assert (Sampler.Mode.SEQUENTIAL, Sampler.Mode.IID, Sampler.Mode.CYCLIC) == (0, 1, 2)
    assert Sampler is loaderx_rs.Zsampler
    s = Sampler(10, 4, Sampler.Mode.SEQUENTIAL)
    assert [s.next().tolist() for _ in range(3)][2] == [8, 9, 0, 1]


def test_the_references_module_paths_import():
    from loaderx_rs._zrecord import FORMAT, SCHEMA, Zrecord as Z, write_dataset as wd
    from loaderx_rs.dataloader import DataLoader as DL
    from loaderx_rs.dataset import Dataset as D, RaggedDataset as R, pad

    assert (Z, wd, DL, D, R, pad) == (Zrecord, write_dataset, DataLoader, Dataset, RaggedDataset, loaderx_rs.pad)
    assert (SCHEMA, FORMAT) == ("schema.json", "loaderx-zrecord")
