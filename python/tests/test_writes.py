"""Writes that fail leave nothing behind (or a dataset the next write
continues), and write_ragged refuses conversions that change values unless
asked (casting="unsafe"), a difference from the reference (issue 18,
findings 3 and 5)."""

import numpy as np
import pytest

from loaderx_rs import DictionaryError, RaggedDataset, Dataset, write_dataset, write_ragged

from conftest import smooth


def test_an_untrainable_dictionary_creates_nothing(tmp_path, rng):
    few = smooth(rng, 5, 4)
    with pytest.raises(DictionaryError, match="cannot train a zstd_dict dictionary on 5 records") as e:
        write_dataset(tmp_path / "out.zr", few, codec="zstd_dict")
    assert e.value.path == str(tmp_path / "out.zr")
    assert not (tmp_path / "out.zr").exists()
    with pytest.raises(DictionaryError):
        write_ragged(tmp_path / "r.zr", list(few), codec="zstd_dict")
    assert not (tmp_path / "r.zr").exists()
    # The path takes the next write, plain or with enough records to train on.
    assert write_dataset(tmp_path / "out.zr", few) == 5
    assert Dataset(tmp_path / "out.zr").codec == "zstd"
    many = smooth(rng, 400, 32)
    assert write_dataset(tmp_path / "dict.zr", many, codec="zstd_dict") == 400
    np.testing.assert_array_equal(Dataset(tmp_path / "dict.zr")[[0, 399]], many[[0, 399]])


def test_a_failed_ragged_write_leaves_nothing_or_a_continuable_dataset(tmp_path):
    def records(fail_at):
        for k in range(10):
            if k == fail_at:
                raise KeyError("from the generator")
            yield np.array([k, k + 1], dtype=np.int32)

    with pytest.raises(KeyError):
        write_ragged(tmp_path / "new", records(3))
    assert not (tmp_path / "new").exists()
    # Calls of one record each: three are written before the failure.
    with pytest.raises(KeyError):
        write_ragged(tmp_path / "part", records(3), chunk_bytes=1)
    assert len(RaggedDataset(tmp_path / "part")) == 3
    write_ragged(tmp_path / "part", (np.array([k, k + 1], dtype=np.int32) for k in range(3, 10)))
    np.testing.assert_array_equal(RaggedDataset(tmp_path / "part")[9], [9, 10])


def test_lossy_conversions_are_refused_by_default(tmp_path):
    with pytest.raises(TypeError, match="array 1: cannot write float64 values as int64 under casting='same_kind'"):
        write_ragged(tmp_path / "f", [np.array([1, 2]), np.array([1.7, -2.9, 3.5])])
    assert not (tmp_path / "f").exists()
    with pytest.raises(ValueError, match="do not fit int32"):
        write_ragged(tmp_path / "i", [np.array([1, 2**31 + 5])], dtype=np.int32)
    with pytest.raises(ValueError, match="do not fit float32"):
        write_ragged(tmp_path / "o", [np.array([1e300])], dtype=np.float32)
    with pytest.raises(TypeError, match="casting='safe'"):
        write_ragged(tmp_path / "s", [np.array([1, 2])], dtype=np.int32, casting="safe")
    with pytest.raises(ValueError, match="casting must be one of"):
        write_ragged(tmp_path / "b", [np.array([1])], casting="bogus")


def test_conversions_that_keep_values_are_made(tmp_path):
    write_ragged(tmp_path / "n", [np.array([1, 2**31 - 1]), np.array([-2**15], dtype=np.int16), np.array([-2**31])], dtype=np.int32)
    np.testing.assert_array_equal(RaggedDataset(tmp_path / "n")[:][0], [1, 2**31 - 1, -2**15, -2**31])
    write_ragged(tmp_path / "f", [np.array([1.5, 2.0]), np.array([3], dtype=np.int8)], dtype=np.float32)
    np.testing.assert_array_equal(RaggedDataset(tmp_path / "f")[:][0], [1.5, 2.0, 3.0])


def test_unsafe_casting_converts_as_numpy(tmp_path):
    write_ragged(tmp_path / "u", [np.array([1, 2]), np.array([1.7, -2.9, 3.5])], casting="unsafe")
    np.testing.assert_array_equal(RaggedDataset(tmp_path / "u")[:][0], [1, 2, 1, -2, 3])
    write_ragged(tmp_path / "w", [np.array([2**31 + 5])], dtype=np.int32, casting="unsafe")
    np.testing.assert_array_equal(RaggedDataset(tmp_path / "w")[0], [-2147483643])
