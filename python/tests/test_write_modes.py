"""Writes that say what they do (issue 36): mode="append" | "overwrite" |
"error", a warning when a write without a mode appends to records; errors
that name what happened; write_dataset's dtype= under NumPy's same_kind
rule, and Python int lists stored as int32 when they fit."""

import errno
import warnings

import numpy as np
import pytest

from loaderx_rs import (
    AppendWarning,
    Dataset,
    DatasetExistsError,
    DatasetNotFoundError,
    RaggedDataset,
    SchemaNotFoundError,
    write_dataset,
    write_ragged,
)


def test_a_rerun_without_a_mode_appends_and_warns(tmp_path):
    p = tmp_path / "d.zr"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_dataset(p, np.arange(3))  # nothing there yet: no warning
    with pytest.warns(AppendWarning, match=r"already holds 3 records.*mode=\"append\"") as w:
        write_dataset(p, np.arange(3))
    assert str(p) in str(w[0].message)
    assert issubclass(AppendWarning, UserWarning)
    assert len(Dataset(p)) == 6
    # An explicit append is silent.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_dataset(p, np.arange(3), mode="append")
    assert len(Dataset(p)) == 9
    r = tmp_path / "r.zr"
    write_ragged(r, [np.arange(2), np.arange(5)])
    with pytest.warns(AppendWarning, match="already holds 2 records"):
        write_ragged(r, [np.arange(2)])
    assert len(RaggedDataset(r)) == 3


def test_overwrite_replaces_and_error_refuses(tmp_path):
    p = tmp_path / "d.zr"
    write_dataset(p, np.arange(5, dtype=np.int64))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert write_dataset(p, np.arange(2, dtype=np.float32), mode="overwrite") == 2
    d = Dataset(p)
    assert (len(d), d.dtype) == (2, np.float32)
    np.testing.assert_array_equal(d[[0, 1]], [0.0, 1.0])
    assert sorted(x.name for x in tmp_path.iterdir()) == ["d.zr"]
    with pytest.raises(DatasetExistsError, match="a dataset of 2 records exists") as e:
        write_dataset(p, np.arange(2, dtype=np.float32), mode="error")
    assert isinstance(e.value, FileExistsError) and e.value.path == str(p)
    assert len(Dataset(p)) == 2
    assert write_dataset(tmp_path / "new.zr", np.arange(4), mode="error") == 4
    r = tmp_path / "r.zr"
    write_ragged(r, [np.arange(3)] * 4)
    write_ragged(r, [np.arange(7)], mode="overwrite")
    assert len(RaggedDataset(r)) == 1
    with pytest.raises(DatasetExistsError):
        write_ragged(r, [np.arange(7)], mode="error")
    with pytest.raises(ValueError, match="not one of"):
        write_dataset(p, np.arange(2), mode="replace")


def test_a_missing_dataset_says_so(tmp_path):
    missing = tmp_path / "nonexistent" / "x.zr"
    for cls in (Dataset, RaggedDataset):
        with pytest.raises(FileNotFoundError) as e:
            cls(missing)
        assert isinstance(e.value, DatasetNotFoundError) and isinstance(e.value, SchemaNotFoundError)
        assert e.value.errno == errno.ENOENT
        assert e.value.filename == str(missing)
        assert "no such directory" in str(e.value) and "no schema.json" not in str(e.value)
    # A directory without a schema is still that error.
    (tmp_path / "empty").mkdir()
    with pytest.raises(SchemaNotFoundError, match="no schema.json"):
        Dataset(tmp_path / "empty")


def test_object_arrays_say_what_to_pass(tmp_path):
    ragged_rows = np.empty(2, dtype=object)
    ragged_rows[0], ragged_rows[1] = [1, 2], [3]
    with pytest.raises(TypeError, match=r"array 0 is a builtins.list .*Python objects.*np.asarray\(x, dtype=...\)"):
        write_ragged(tmp_path / "r.zr", [[1, None]])
    with pytest.raises(TypeError, match=r"the array is an array of Python objects"):
        write_dataset(tmp_path / "d.zr", ragged_rows)
    # An object array of numeric arrays is a list of arrays: fine.
    rows = np.empty(2, dtype=object)
    rows[0], rows[1] = np.arange(2), np.arange(3)
    assert write_ragged(tmp_path / "ok.zr", rows) == 2
    assert not (tmp_path / "r.zr").exists() and not (tmp_path / "d.zr").exists()


def test_an_arrow_column_says_what_to_pass(tmp_path):
    pa = pytest.importorskip("pyarrow")
    column = pa.chunked_array([[[1, 2], [3]], [[4, 5, 6]]])
    with pytest.raises(TypeError, match=r"write_ragged got a pyarrow.*ChunkedArray.*to_pylist"):
        write_ragged(tmp_path / "r.zr", column)
    # The advice works.
    assert write_ragged(tmp_path / "r.zr", [np.asarray(x, dtype=np.int32) for x in column.to_pylist()]) == 3


def test_write_dataset_dtype_casts_under_same_kind(tmp_path):
    p = tmp_path / "d.zr"
    assert write_dataset(p, np.arange(4, dtype=np.int64), dtype=np.int16) == 4
    assert Dataset(p).dtype == np.int16
    with pytest.raises(TypeError, match="cannot write float64 values as int16 under casting='same_kind'"):
        write_dataset(p, np.ones(2), dtype=np.int16, mode="append")
    with pytest.raises(ValueError, match="do not fit int16"):
        write_dataset(p, np.array([1 << 20]), dtype=np.int16, mode="append")
    assert write_dataset(p, np.ones(2), dtype=np.int16, casting="unsafe", mode="append") == 2
    assert len(Dataset(p)) == 6


def test_appending_float64_to_float32_casts(tmp_path):
    p = tmp_path / "f.zr"
    write_dataset(p, np.zeros((2, 3), dtype=np.float32))
    write_dataset(p, np.full((1, 3), 0.5), mode="append")  # float64: same_kind
    d = Dataset(p)
    assert (d.dtype, len(d)) == (np.float32, 3)
    np.testing.assert_array_equal(d[2], np.full(3, 0.5, dtype=np.float32))
    # A kind change is refused, naming the rule and the way out.
    with pytest.raises(TypeError, match="casting='unsafe'"):
        write_dataset(p, np.full((1, 3), 1 + 2j), mode="append")
    # Overwrite takes the array's own dtype.
    write_dataset(p, np.ones((1, 3)), mode="overwrite")
    assert Dataset(p).dtype == np.float64


def test_int_lists_take_the_smallest_of_int32_and_int64(tmp_path):
    write_dataset(tmp_path / "a.zr", [1, 2, 3])
    assert Dataset(tmp_path / "a.zr").dtype == np.int32
    write_dataset(tmp_path / "b.zr", [[1, -(1 << 31)], [3, 4]])
    assert Dataset(tmp_path / "b.zr").dtype == np.int32
    write_dataset(tmp_path / "c.zr", [1, 1 << 31])
    assert Dataset(tmp_path / "c.zr").dtype == np.int64
    np.testing.assert_array_equal(Dataset(tmp_path / "c.zr")[[1]], [1 << 31])
    # An array keeps its dtype; dtype= overrides the list rule.
    write_dataset(tmp_path / "d.zr", np.array([1, 2, 3]))
    assert Dataset(tmp_path / "d.zr").dtype == np.int64
    write_dataset(tmp_path / "e.zr", [1, 2], dtype=np.int64)
    assert Dataset(tmp_path / "e.zr").dtype == np.int64
