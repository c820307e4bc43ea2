"""Dataset, RaggedDataset, pad, write_dataset, write_ragged against NumPy."""

import numpy as np
import pytest

import loaderx_rs
from loaderx_rs import Dataset, RaggedDataset, pad, write_dataset, write_ragged

from conftest import smooth


@pytest.fixture
def data(rng):
    return smooth(rng, 500, 4, 3)


@pytest.fixture
def ds(tmp_path, data):
    assert write_dataset(tmp_path / "ds", data) == 500
    return Dataset(tmp_path / "ds")


def test_every_index_form(ds, data, rng):
    assert (len(ds), ds.shape, ds.dtype, ds.codec) == (500, (4, 3), np.dtype("<f4"), "zstd")
    idx = rng.integers(0, 500, size=77)
    mask = rng.random(500) < 0.3
    cases = [
        idx,
        idx.astype(np.int32),
        idx.astype(np.uint16),
        list(idx),
        [int(i) for i in idx],
        slice(None),
        slice(10, 400, 7),
        slice(None, None, -3),
        slice(-20, None),
        mask,
        list(mask),
        np.array([-1, -500, 3]),
        [],
        np.array([], dtype=np.int64),
        np.array([[1, 2], [3, 4]]),
    ]
    for case in cases:
        if isinstance(case, slice):
            want = data[case]
        elif np.asarray(case).dtype == bool:
            want = data[np.asarray(case)]
        else:
            want = data[np.asarray(case, dtype=np.int64).ravel()]
        got = ds[case]
        assert got.shape == (len(want), 4, 3) and got.dtype == np.float32, case
        np.testing.assert_array_equal(got, want)
        if not isinstance(case, slice):
            np.testing.assert_array_equal(ds.__getitems__(case), want)
    for i in (0, 499, -1, -500, np.int64(7), np.uint8(9)):
        np.testing.assert_array_equal(ds[i], data[i])
        assert ds[i].shape == (4, 3)


def test_out_of_range_and_bad_indices(ds):
    for bad in (500, -501, [0, 500], 2**63, 2**70, np.array([2**40], dtype=np.uint64)):
        with pytest.raises(IndexError):
            ds[bad]
    with pytest.raises((IndexError, OverflowError)):
        ds[[2**70]]
    with pytest.raises(TypeError):
        ds[[0.5, 1.5]]
    with pytest.raises(TypeError):
        ds["abc"]
    with pytest.raises(TypeError):
        ds[None]
    with pytest.raises(ValueError, match="mask"):
        ds[np.ones(3, dtype=bool)]


def test_scalar_records_and_dtypes(tmp_path, rng):
    for dtype in ("<i8", "<u2", ">f8", "|b1", "<c8", "|u1"):
        arr = (rng.standard_normal(64) * 100).astype(dtype)
        write_dataset(tmp_path / dtype[1:], arr)
        d = Dataset(tmp_path / dtype[1:])
        assert d.shape == () and d.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(d[:], arr)
        assert d[5] == arr[5]


def test_write_dataset_forms(tmp_path, data, rng):
    # Fortran order and a strided view are made contiguous; an mmapped .npy is read in place.
    fortran = np.asfortranarray(data.reshape(500, 12))
    write_dataset(tmp_path / "f", fortran, codec="raw", chunk_bytes=1000)
    np.testing.assert_array_equal(Dataset(tmp_path / "f")[:], fortran)
    strided = data[::3]
    write_dataset(tmp_path / "s", strided)
    np.testing.assert_array_equal(Dataset(tmp_path / "s")[:], strided)
    np.save(tmp_path / "a.npy", data)
    write_dataset(tmp_path / "m", np.load(tmp_path / "a.npy", mmap_mode="r"))
    np.testing.assert_array_equal(Dataset(tmp_path / "m")[:], data)
    # Lists work as in NumPy.
    write_dataset(tmp_path / "l", [[1, 2], [3, 4]])
    np.testing.assert_array_equal(Dataset(tmp_path / "l")[:], [[1, 2], [3, 4]])
    # Appending the same layout adds records; another layout is refused.
    write_dataset(tmp_path / "s", strided[:5])
    assert len(Dataset(tmp_path / "s")) == len(strided) + 5
    with pytest.raises(loaderx_rs.DatasetError, match="cannot append"):
        write_dataset(tmp_path / "s", data.reshape(len(data), -1)[:, :1])
    # Another dtype of the same kind is converted (same_kind: test_write_modes.py).
    write_dataset(tmp_path / "s", data[:1].astype(np.float64), mode="append")
    assert Dataset(tmp_path / "s").dtype == data.dtype
    with pytest.raises(ValueError, match="sample axis"):
        write_dataset(tmp_path / "z", np.float32(1.0))
    with pytest.raises(ValueError, match="unknown codec"):
        write_dataset(tmp_path / "z", data, codec="lz4")
    with pytest.raises(loaderx_rs.RecordTooLargeError):
        write_dataset(tmp_path / "z", np.zeros((2, 1 << 21), dtype=np.uint8))
    with pytest.raises(TypeError, match="Python objects"):
        write_dataset(tmp_path / "o", np.array([object(), object()]))


def test_open_errors(tmp_path, data):
    with pytest.raises(FileNotFoundError):
        Dataset(tmp_path / "missing")
    with pytest.raises(loaderx_rs.SchemaNotFoundError):
        Dataset(tmp_path)
    write_ragged(tmp_path / "r", [np.arange(3)])
    with pytest.raises(ValueError, match="RaggedDataset"):
        Dataset(tmp_path / "r")
    write_dataset(tmp_path / "d", data)
    with pytest.raises(ValueError, match="Dataset"):
        RaggedDataset(tmp_path / "d")


def test_close_and_context_manager(tmp_path, data):
    write_dataset(tmp_path / "d", data)
    with Dataset(tmp_path / "d") as d:
        assert len(d) == 500
    with pytest.raises(ValueError, match="closed"):
        d[0]


def seqs_of(rng, n, rows=()):
    return [rng.integers(-50, 50, size=(int(rng.integers(0, 30)), *rows)).astype(np.int32) for _ in range(n)]


def packed(seqs, idx):
    values = np.concatenate([seqs[i] for i in idx]) if len(idx) else np.empty((0, *seqs[0].shape[1:]), np.int32)
    splits = np.concatenate([[0], np.cumsum([len(seqs[i]) for i in idx])]).astype(np.int64)
    return values, splits


def numpy_pad(values, row_splits, max_len=None, pad_value=0):
    """The reference's pad, as NumPy code (the oracle)."""
    lengths = np.diff(row_splits)
    ml = int(lengths.max()) if max_len is None else max_len
    out = np.full((len(lengths), ml, *values.shape[1:]), pad_value, dtype=values.dtype)
    for i, n in enumerate(lengths):
        out[i, :n] = values[row_splits[i]:row_splits[i] + n]
    return out, lengths


def test_ragged(tmp_path, rng):
    seqs = seqs_of(rng, 300, rows=(3,))
    assert write_ragged(tmp_path / "r", seqs, codec="zstd_dict") == 300
    rds = RaggedDataset(tmp_path / "r")
    assert (len(rds), rds.item_shape, rds.dtype, rds.codec) == (300, (3,), np.int32, "zstd_dict")
    idx = rng.integers(0, 300, size=64)
    for case in (idx, list(idx), slice(5, 100, 3), rng.random(300) < 0.5, np.array([-1, 0])):
        want_idx = np.arange(300)[case] if not isinstance(case, list) else np.array(case)
        values, splits = rds[case]
        want_values, want_splits = packed(seqs, want_idx)
        np.testing.assert_array_equal(values, want_values)
        np.testing.assert_array_equal(splits, want_splits)
        assert splits.dtype == np.int64 and values.dtype == np.int32
        v2, s2 = rds.__getitems__(case)
        np.testing.assert_array_equal(v2, want_values)
        padded, lengths = rds.getitems_padded(case, pad_value=-7)
        want_padded, want_lengths = numpy_pad(want_values, want_splits, pad_value=-7)
        np.testing.assert_array_equal(padded, want_padded)
        np.testing.assert_array_equal(lengths, want_lengths)
    np.testing.assert_array_equal(rds[17], seqs[17])
    np.testing.assert_array_equal(rds[-1], seqs[-1])
    with pytest.raises(ValueError, match="max_len"):
        rds.getitems_padded(np.arange(300), max_len=1)


def test_pad_against_numpy(rng):
    for dtype, tail in (("<f4", ()), ("<i8", (2,)), ("|u1", (2, 2)), (">i2", ())):
        seqs = [rng.integers(0, 9, size=(int(rng.integers(0, 6)), *tail)).astype(dtype) for _ in range(9)]
        values, splits = packed(seqs, np.arange(9))
        values = values.astype(dtype)
        for max_len, pad_value in ((None, 0), (8, 3), (None, -1 if dtype != "|u1" else 255)):
            got, lengths = pad(values, splits, max_len, pad_value)
            want, want_lengths = numpy_pad(values, splits, max_len, pad_value)
            assert got.dtype == np.dtype(dtype) and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(lengths, want_lengths)
    with pytest.raises(ValueError, match="max_len"):
        pad(np.arange(5), [0, 5], max_len=2)
    with pytest.raises(ValueError):
        pad(np.arange(5), [0, 6])
    with pytest.raises(ValueError):
        pad(np.arange(5), [3, 1])
    with pytest.raises(ValueError):
        pad(np.arange(5), [0, -1])


def test_write_ragged_forms(tmp_path, rng):
    with pytest.raises(ValueError, match="no arrays"):
        write_ragged(tmp_path / "e", [])
    # Empty records are records here (the reference refuses them).
    write_ragged(tmp_path / "z", [np.arange(0), np.arange(2)], dtype=np.int64)
    values, splits = RaggedDataset(tmp_path / "z")[[0, 1]]
    np.testing.assert_array_equal(splits, [0, 0, 2])
    # Generators stream; dtype converts.
    write_ragged(tmp_path / "g", (np.arange(n) for n in range(1, 50)), dtype="<f8", chunk_bytes=64)
    g = RaggedDataset(tmp_path / "g")
    assert len(g) == 49 and g.dtype == np.float64
    np.testing.assert_array_equal(g[48], np.arange(49))
    with pytest.raises(ValueError, match="item_shape"):
        write_ragged(tmp_path / "b", [np.zeros((2, 3)), np.zeros((2, 4))])

    def failing():
        yield np.arange(3)
        raise KeyError("from the generator")

    with pytest.raises(KeyError, match="from the generator"):
        write_ragged(tmp_path / "f", failing())


def test_every_read_mode_reads_the_same(tmp_path, data, rng):
    write_dataset(tmp_path / "ds", data)
    rows = [list(rng.integers(0, 8, size=k)) for k in rng.integers(0, 9, size=60)]
    write_ragged(tmp_path / "rg", [np.array(r, dtype=np.int32) for r in rows])
    idx = rng.integers(0, 500, size=200)
    for mode in ("auto", "mapped", "batched", "direct"):
        np.testing.assert_array_equal(Dataset(tmp_path / "ds", read_mode=mode)[idx], data[idx])
        values, splits = RaggedDataset(tmp_path / "rg", read_mode=mode)[[3, 0, 59]]
        want = [rows[3], rows[0], rows[59]]
        np.testing.assert_array_equal(values, np.concatenate([np.array(r, dtype=np.int32) for r in want]))
        assert list(np.diff(splits)) == [len(r) for r in want]
        store = loaderx_rs.Zrecord(tmp_path / "ds", read_only=True, read_mode=mode)
        assert store.read_engine() in ("io_uring", "threads")
    with pytest.raises(ValueError, match="read_mode"):
        Dataset(tmp_path / "ds", read_mode="fast")
