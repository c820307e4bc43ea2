"""`pad` against a NumPy oracle, with and without truncation (issue 36,
finding 4)."""

import numpy as np
import pytest

from loaderx_rs import pad


def oracle(records, max_len, pad_value):
    """Each record cut to max_len rows, then padded: (padded, lengths)."""
    cut = [r[:max_len] for r in records]
    out = np.full((len(records), max_len) + records[0].shape[1:], pad_value, dtype=records[0].dtype)
    for k, r in enumerate(cut):
        out[k, :len(r)] = r
    return out, np.array([len(r) for r in cut], dtype=np.int64)


def packed(records):
    splits = np.concatenate([[0], np.cumsum([len(r) for r in records])]).astype(np.int64)
    return np.concatenate(records), splits


@pytest.mark.parametrize("dtype,tail", [(np.int32, ()), (np.float32, (3,)), (np.uint8, (2, 2))])
def test_pad_truncates_when_asked(rng, dtype, tail):
    records = [rng.integers(0, 100, size=(int(n),) + tail).astype(dtype) for n in rng.integers(0, 12, size=40)]
    values, splits = packed(records)
    for max_len in (0, 1, 4, 11, 15):
        got, lengths = pad(values, splits, max_len=max_len, pad_value=7, truncate=True)
        want, want_lengths = oracle(records, max_len, 7)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(lengths, want_lengths)
        if max_len >= max(len(r) for r in records):
            np.testing.assert_array_equal(pad(values, splits, max_len=max_len, pad_value=7)[0], want)


def test_without_truncate_a_longer_row_is_an_error_that_says_how_to_truncate():
    values, splits = packed([np.arange(3), np.arange(7)])
    with pytest.raises(ValueError, match="record 1 of the batch has 7 rows, over max_len=4") as e:
        pad(values, splits, max_len=4)
    assert "truncate=True" in str(e.value)
    got, lengths = pad(values, splits, max_len=4, truncate=True)
    np.testing.assert_array_equal(got, [[0, 1, 2, 0], [0, 1, 2, 3]])
    np.testing.assert_array_equal(lengths, [3, 4])


def test_truncate_needs_max_len():
    values, splits = packed([np.arange(3)])
    with pytest.raises(ValueError, match="needs max_len"):
        pad(values, splits, truncate=True)


def test_getitems_padded_truncates_as_pad_does(tmp_path, rng):
    from loaderx_rs import RaggedDataset, write_ragged
    records = [rng.integers(0, 100, size=(int(n), 2)).astype(np.int16) for n in rng.integers(0, 9, size=30)]
    write_ragged(tmp_path / "r", records)
    rds = RaggedDataset(tmp_path / "r")
    idxs = [5, 0, 29, 5, 11]
    for max_len in (0, 3, 8):
        got, lengths = rds.getitems_padded(idxs, max_len=max_len, pad_value=-1, truncate=True)
        want, want_lengths = oracle([records[i] for i in idxs], max_len, -1)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(lengths, want_lengths)
    with pytest.raises(ValueError, match="needs max_len"):
        rds.getitems_padded(idxs, truncate=True)
