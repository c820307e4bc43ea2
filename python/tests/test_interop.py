"""Stores and datasets both ways between this module and the reference
package loaderx 0.7.3 (installed beside it from PyPI by .ci/run), in one
process: what one writes, the other reads back equal to the NumPy source."""

import json

import numpy as np
import pytest

import loaderx_rs as ours

from conftest import REFERENCE_MISSING, smooth

reference = pytest.importorskip("loaderx", reason=REFERENCE_MISSING)

assert reference.__version__ == "0.7.3", reference.__version__

SIDES = {"reference": reference, "ours": ours}


def dataset_inputs(rng):
    images = rng.integers(0, 256, size=(60, 8, 8, 3), dtype=np.uint8)
    return {
        "f32_zstd": (smooth(rng, 300, 4, 3), "zstd"),
        "f32_raw": (smooth(rng, 200, 12), "raw"),
        "f32_dict": (smooth(rng, 400, 32), "zstd_dict"),
        "labels": (rng.integers(-5, 10, size=500).astype(np.int64), "zstd"),
        "img": (images, "raw"),
        "big_endian": (rng.standard_normal((40, 3)).astype(">f8"), "zstd"),
    }


@pytest.mark.parametrize("writer,reader", [("reference", "ours"), ("ours", "reference")])
def test_datasets_both_ways(tmp_path, rng, writer, reader):
    w, r = SIDES[writer], SIDES[reader]
    for name, (array, codec) in dataset_inputs(rng).items():
        assert w.write_dataset(tmp_path / name, array, codec=codec) == len(array)
        ds = r.Dataset(tmp_path / name)
        assert ds.dtype == array.dtype and tuple(ds.shape) == array.shape[1:], name
        assert len(ds) == len(array)
        idx = rng.permutation(len(array))
        np.testing.assert_array_equal(ds[idx], array[idx])
        np.testing.assert_array_equal(ds[3], array[3])
    # Appending through the other side.
    a, b = smooth(rng, 30, 16), smooth(rng, 20, 16)
    w.write_dataset(tmp_path / "appended", a)
    r.write_dataset(tmp_path / "appended", b)
    np.testing.assert_array_equal(w.Dataset(tmp_path / "appended")[np.arange(50)], np.concatenate([a, b]))


def test_schema_text_is_the_references(tmp_path, rng):
    data = smooth(rng, 10, 64)
    reference.write_dataset(tmp_path / "ref", data)
    ours.write_dataset(tmp_path / "ours", data)
    assert (tmp_path / "ours" / "schema.json").read_text() == (tmp_path / "ref" / "schema.json").read_text()
    seqs = [np.arange(n, dtype=np.int32) for n in (1, 2, 3)]
    reference.write_ragged(tmp_path / "rref", seqs)
    ours.write_ragged(tmp_path / "rours", seqs)
    text = (tmp_path / "rours" / "schema.json").read_text()
    assert text == (tmp_path / "rref" / "schema.json").read_text()
    assert json.loads(text)["ragged"] is True


@pytest.mark.parametrize("writer,reader", [("reference", "ours"), ("ours", "reference")])
def test_ragged_both_ways(tmp_path, rng, writer, reader):
    w, r = SIDES[writer], SIDES[reader]
    for name, rows, codec in (("tokens", (), "zstd"), ("points", (3,), "zstd_dict"), ("raw", (2,), "raw")):
        # At least one row each: the reference refuses empty records.
        seqs = [rng.integers(0, 50, size=(int(rng.integers(1, 40)), *rows)).astype(np.int32) for _ in range(150)]
        assert w.write_ragged(tmp_path / name, seqs, codec=codec) == 150
        rds = r.RaggedDataset(tmp_path / name)
        idx = rng.permutation(150)[:60]
        values, splits = rds[idx]
        np.testing.assert_array_equal(values, np.concatenate([seqs[i] for i in idx]))
        np.testing.assert_array_equal(np.diff(splits), [len(seqs[i]) for i in idx])
        padded, lengths = rds.getitems_padded(idx, pad_value=-1)
        want, want_lengths = reference.pad(values, splits, pad_value=-1)
        np.testing.assert_array_equal(padded, want)
        np.testing.assert_array_equal(lengths, want_lengths)


@pytest.mark.parametrize("writer,reader", [("reference", "ours"), ("ours", "reference")])
def test_zrecord_both_ways(tmp_path, rng, writer, reader):
    w, r = SIDES[writer], SIDES[reader]
    fixed = rng.integers(0, 4, size=(500, 256), dtype=np.uint8)
    model = [bytes(row) for row in fixed]
    store = w.Zrecord(tmp_path / "s", codec="zstd_dict")
    store.train_dict(fixed, np.full(500, 256, dtype=np.uint64), 8192)
    store.append(fixed[:200], 200, 256)
    store.append(fixed[200:], 300, 256, codec="raw")
    lens = np.array([1, 700, 33, 5000], dtype=np.uint32)
    var = rng.integers(0, 255, size=int(lens.sum()), dtype=np.uint8)
    offsets = np.concatenate([[0], np.cumsum(lens[:-1])]).astype(np.uint64)
    store.append_var(var, offsets, lens, codec="zstd")
    model += [var[o:o + n].tobytes() for o, n in zip(offsets, lens)]
    store.delete([7, 501, 0])
    for i in sorted([7, 501, 0], reverse=True):
        model[i] = model[-1]
        model.pop()
    store.compact()
    store.sync()
    want_stats = store.stats()
    store.close()

    other = r.Zrecord(tmp_path / "s")
    assert len(other) == len(model) and other.has_dict()
    got_lens = other.lengths(np.arange(len(model), dtype=np.uint64))
    np.testing.assert_array_equal(got_lens, [len(m) for m in model])
    dst = np.empty(int(got_lens.sum()), dtype=np.uint8)
    offs = np.concatenate([[0], np.cumsum(got_lens[:-1])]).astype(np.uint64)
    other.gather_var(np.arange(len(model), dtype=np.uint64), dst, offs)
    assert dst.tobytes() == b"".join(model)
    got_stats = other.stats()
    for key in ("records", "live_bytes", "chunk_bytes", "reclaimable"):
        assert got_stats[key] == want_stats[key], key
    other.close()
