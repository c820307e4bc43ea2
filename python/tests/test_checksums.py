"""Checksums from Python: `verify_reads` on stores, datasets and the loader,
`verify()`'s counts and `cover()`. The oracle is the array written: a read
returns its rows or raises, never other bytes."""

import pickle

import numpy as np
import pytest

import loaderx_rs
from loaderx_rs import DataLoader, Dataset, Zrecord

ROW = 64


def raw_store(tmp_path, rng, n=100):
    """A raw store of `n` rows of ROW bytes, and the rows."""
    data = rng.integers(0, 255, size=(n, ROW), dtype=np.uint8)
    loaderx_rs.write_dataset(tmp_path / "d", data, codec="raw")
    return tmp_path / "d", data


def flip(path, offset):
    """Flips the low bit of the byte at `offset` of chunk 0."""
    with open(path / "0.zr", "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ 1]))


def raw_offset(store, index):
    """Where record `index` of a store of raw rows starts in chunk 0: raw
    rows are appended back to back, so the sizes before it say."""
    return int(store.lengths(np.arange(index, dtype=np.int64)).sum())


def test_a_clean_store_verifies_checksummed_and_sealed(tmp_path, rng):
    path, data = raw_store(tmp_path, rng)
    with Zrecord(path, read_only=True) as store:
        report = store.verify()
        assert store.verify_reads == "device"
    assert report["ok"], report
    assert report["checksummed"] == len(data) and report["unchecked"] == 0
    assert report["sealed"] is True


def test_a_flipped_bit_in_a_raw_record_is_an_error_not_bytes(tmp_path, rng):
    path, data = raw_store(tmp_path, rng)
    with Zrecord(path, read_only=True) as store:
        flip(path, raw_offset(store, 37) + 5)
    dst = np.zeros((1, ROW), dtype=np.uint8)
    for mode, verify in [("mapped", "always"), ("mapped", True), ("batched", "device"), ("direct", "device")]:
        with Zrecord(path, read_only=True, read_mode=mode, verify_reads=verify) as store:
            with pytest.raises(loaderx_rs.CorruptError) as err:
                store.gather(np.array([37]), dst, ROW)
            assert err.value.index == 37, (mode, verify, err.value)
            assert "checksum" in str(err.value), str(err.value)
            # The others read as written.
            good = np.array([36, 38, 0, 99])
            out = np.zeros((4, ROW), dtype=np.uint8)
            store.gather(good, out, ROW)
            np.testing.assert_array_equal(out, data[good])
    # Unchecked warm reads return the stored bytes: what "never" means.
    with Zrecord(path, read_only=True, read_mode="mapped", verify_reads="never") as store:
        store.gather(np.array([37]), dst, ROW)
        assert (dst[0] != data[37]).sum() == 1
        report = store.verify()
    assert not report["ok"] and len(report["problems"]) == 1, report
    assert "record 37" in report["problems"][0], report


def test_verify_reads_rejects_what_it_does_not_name(tmp_path, rng):
    path, _ = raw_store(tmp_path, rng, n=4)
    for bad in ["sometimes", 1, 2.5]:
        with pytest.raises(ValueError, match="verify_reads"):
            Zrecord(path, read_only=True, verify_reads=bad)
        with pytest.raises(ValueError, match="verify_reads"):
            Dataset(path, verify_reads=bad)


def test_verify_reads_survives_pickling(tmp_path, rng):
    path, _ = raw_store(tmp_path, rng, n=4)
    with Zrecord(path, read_only=True, verify_reads="always") as store:
        again = pickle.loads(pickle.dumps(store))
        assert again.verify_reads == "always"
        again.close()
    ds = Dataset(path, read_mode="mapped", verify_reads=False)
    again = pickle.loads(pickle.dumps(ds))
    assert again._store.verify_reads == "never" and ds._store.verify_reads == "never"


def test_a_dataset_and_the_loader_stop_at_the_corrupt_record(tmp_path, rng):
    path, data = raw_store(tmp_path, rng)
    with Zrecord(path, read_only=True) as store:
        flip(path, raw_offset(store, 11))
    ds = Dataset(path, read_mode="mapped", verify_reads="always")
    np.testing.assert_array_equal(ds[np.array([10, 12])], data[[10, 12]])
    with pytest.raises(loaderx_rs.CorruptError):
        ds[np.array([11])]
    with DataLoader({"x": ds}, num_workers=2, batch_size=50, mode=1, seed=3) as loader:
        with pytest.raises(loaderx_rs.ZrecordError) as err:
            for _ in range(10):
                next(loader)
    assert "11" in str(err.value) and "checksum" in str(err.value), str(err.value)


def test_cover_checksums_a_store_written_without_them(tmp_path, rng):
    path, data = raw_store(tmp_path, rng)
    (path / "sums.zr").unlink()
    with Zrecord(path, read_only=True) as store:
        report = store.verify()
    assert report["ok"] and report["unchecked"] == len(data) and report["sealed"] is False, report
    with Zrecord(path) as store:
        covered = store.cover()
        assert covered == {"records": len(data), "summed": len(data), "failed": 0, "created": True}
        assert store.cover()["summed"] == 0
        report = store.verify()
    assert report["ok"] and report["checksummed"] == len(data) and report["unchecked"] == 0, report
    assert report["sealed"] is True


def test_skip_corrupt_replaces_logs_and_counts(tmp_path, rng, caplog):
    path, data = raw_store(tmp_path, rng)
    with Zrecord(path, read_only=True) as store:
        for index in (5, 6):
            flip(path, raw_offset(store, index))
    ds = Dataset(path, read_mode="mapped", verify_reads="always")
    with caplog.at_level("WARNING", logger="loaderx_rs"):
        with DataLoader({"x": ds}, num_workers=2, batch_size=20, mode=0, skip_corrupt=True) as loader:
            batch = next(loader)
            stats = loader.stats()
            again = pickle.loads(pickle.dumps(loader))
    want = [0, 1, 2, 3, 4, 7, 7] + list(range(7, 20))
    assert batch.indices.tolist() == want
    assert batch.skipped == [(5, 5, 7), (6, 6, 7)]
    np.testing.assert_array_equal(batch["x"], data[want])
    assert stats["run"]["skipped"] == 2
    warned = [r.getMessage() for r in caplog.records if r.name == "loaderx_rs"]
    assert len(warned) == 2 and "record 5 is damaged" in warned[0] and "read record 7" in warned[0], warned
    # The option travels with the loader.
    with again:
        assert next(again).skipped == []
