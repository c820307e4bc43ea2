"""Zsampler: the three modes, seek, shards, bad arguments."""

import numpy as np
import pytest

from loaderx_rs import Zsampler


def test_sequential_wraps_around():
    s = Zsampler(10, 4, Zsampler.SEQUENTIAL)
    got = [s.next().tolist() for _ in range(3)]
    assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]
    assert s.step == 3 and s.next().dtype == np.uint64


def test_iid_is_uniform_and_in_range():
    s = Zsampler(2000, 1024, Zsampler.IID, seed=1)
    draws = np.concatenate([next(s) for _ in range(100)])
    assert draws.max() < 2000
    counts = np.bincount(draws.astype(np.int64), minlength=2000)
    # 102400 draws over 2000 values: each count is 51.2 +- 7.2 (1 sd).
    assert counts.min() > 15 and counts.max() < 95
    # With replacement: a batch repeats indices (1024 of 2000: surely).
    assert len(set(s.next().tolist())) < 1024
    # Fewer records than a batch: every record once per batch, as the reference.
    assert sorted(Zsampler(10, 64, Zsampler.IID).next().tolist()) == list(range(10))


def test_cyclic_is_a_permutation_per_cycle():
    s = Zsampler(1000, 300, Zsampler.CYCLIC, seed=7)
    first = np.concatenate([s.next() for _ in range(3)])
    assert len(set(first.tolist())) == 900  # the remainder of 100 is dropped
    second = np.concatenate([s.next() for _ in range(3)])
    assert len(set(second.tolist())) == 900 and not np.array_equal(first, second)
    few = Zsampler(5, 8, Zsampler.CYCLIC)
    assert sorted(few.next().tolist()) == [0, 1, 2, 3, 4]


def test_seek_reproduces_the_stream():
    for mode in (0, 1, 2):
        a = Zsampler(12345, 256, mode, seed=3)
        stream = [a.next() for _ in range(50)]
        b = Zsampler(12345, 256, mode, seed=3)
        b.seek(37)
        np.testing.assert_array_equal(b.next(), stream[37])
        np.testing.assert_array_equal(a.batch(12), stream[12])
        c = Zsampler(12345, 256, mode, seed=3, step=49)
        np.testing.assert_array_equal(next(c), stream[49])
        other = Zsampler(12345, 256, mode, seed=4)
        if mode != 0:
            assert not np.array_equal(other.batch(0), stream[0])


def test_shards_split_the_global_batch():
    whole = Zsampler(5000, 64, 1, seed=9)
    parts = [Zsampler(5000, 64, 1, seed=9, shard_index=i, shard_count=4) for i in range(4)]
    assert parts[0].batch_len == 16
    for step in range(5):
        np.testing.assert_array_equal(np.concatenate([p.batch(step) for p in parts]), whole.batch(step))


def test_bad_arguments():
    for args in ((0, 4), (10, 0), (10, 4, 3), (10, 4, 1, 42, 4, 4), (10, 4, 1, 42, 0, 3), (10, 4, 1, 42, 0, 0)):
        with pytest.raises(ValueError):
            Zsampler(*args)
    for args in ((-1, 4), (10, -4), (10, 4, 1, -1)):
        with pytest.raises(OverflowError):
            Zsampler(*args)
    with pytest.raises(TypeError):
        Zsampler("10", 4)
