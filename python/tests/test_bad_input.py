"""Bad input raises a Python exception, never crashes the interpreter:
damaged stores (the reference package's observed cases, and random byte
flips), damaged schemas, and arguments of the wrong kind."""

import os
import struct

import numpy as np
import pytest

import loaderx_rs
from loaderx_rs import Dataset, Zrecord, write_dataset

HEADER = 16
ENTRY = 16


def make_store(path, rng, codec="zstd", n=50, size=300):
    data = (np.tile(np.arange(size, dtype=np.uint8), (n, 1)) // rng.integers(1, 5, size=(n, 1))).astype(np.uint8)
    data[:, :8] = rng.integers(0, 255, size=(n, 8), dtype=np.uint8)
    with Zrecord(path, codec=codec) as store:
        if codec == "zstd_dict":
            store.train_dict(data, np.full(n, size), 4096)
        store.append(data, n, size)
    return data


def patch(path, offset, raw):
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(raw)


def read_all(path, n, size):
    with Zrecord(path, read_only=True) as store:
        dst = np.empty((n, size), dtype=np.uint8)
        store.gather(np.arange(n), dst, size)
        return dst


def test_garbage_header(tmp_path, rng):
    make_store(tmp_path / "s", rng)
    patch(tmp_path / "s" / "meta.zr", 0, b"JUNK")
    with pytest.raises(loaderx_rs.NotAStoreError) as e:
        Zrecord(tmp_path / "s")
    assert e.value.code == -8 and e.value.path == str(tmp_path / "s")


def test_length_past_the_written_table(tmp_path, rng):
    make_store(tmp_path / "s", rng)
    patch(tmp_path / "s" / "meta.zr", 12, struct.pack("<I", 60))
    with pytest.raises(loaderx_rs.ZrecordError) as e:
        read_all(tmp_path / "s", 60, 300)  # the reference returns uninitialised memory here
    assert isinstance(e.value, (loaderx_rs.CorruptError, loaderx_rs.NotAStoreError))


def test_damaged_entries_and_bytes(tmp_path, rng):
    cases = {
        "offset past the chunk": (HEADER + 5 * ENTRY, struct.pack("<I", 1 << 30)),
        "unknown codec": (HEADER + 6 * ENTRY + 14, b"\x07"),
        "chunk past the last": (HEADER + 7 * ENTRY + 12, struct.pack("<H", 9)),
        "logical length over the slot": (HEADER + 8 * ENTRY + 8, struct.pack("<I", 301)),
    }
    for what, (offset, raw) in cases.items():
        make_store(tmp_path / what, rng)
        patch(tmp_path / what / "meta.zr", offset, raw)
        with pytest.raises(loaderx_rs.ZrecordError) as e:
            read_all(tmp_path / what, 50, 300)
        assert e.value.index in (5, 6, 7, 8), what
        report = Zrecord(tmp_path / what, read_only=True).verify()
        assert not report["ok"] and report["problems"], what


def test_corrupted_compressed_bytes(tmp_path, rng):
    make_store(tmp_path / "s", rng)
    patch(tmp_path / "s" / "0.zr", 20, b"\xff" * 16)
    with pytest.raises(loaderx_rs.CorruptError) as e:
        read_all(tmp_path / "s", 50, 300)
    assert e.value.index == 0 and e.value.code == -7


def test_missing_chunk_and_missing_dictionary(tmp_path, rng):
    make_store(tmp_path / "c", rng)
    os.remove(tmp_path / "c" / "0.zr")
    with pytest.raises(loaderx_rs.ZrecordError):
        read_all(tmp_path / "c", 50, 300)
    make_store(tmp_path / "d", rng, codec="zstd_dict")
    os.remove(tmp_path / "d" / "dict.zr")
    with pytest.raises(loaderx_rs.DictionaryError):
        read_all(tmp_path / "d", 50, 300)


def test_random_byte_flips_never_crash(tmp_path, rng):
    """Every read of a randomly damaged store is right or raises ZrecordError."""
    for trial in range(40):
        path = tmp_path / f"f{trial}"
        data = make_store(path, rng, codec=("zstd", "raw", "zstd_dict")[trial % 3])
        target = path / ("meta.zr" if trial % 2 else "0.zr")
        limit = HEADER + 50 * ENTRY if trial % 2 else os.path.getsize(target)
        for _ in range(4):
            patch(target, int(rng.integers(0, limit)), bytes([int(rng.integers(0, 256))]))
        try:
            store = Zrecord(path, read_only=True)
        except loaderx_rs.ZrecordError:
            continue
        for i in range(50):
            dst = np.empty(300, dtype=np.uint8)
            try:
                store.gather([i], dst, 300)
            except loaderx_rs.ZrecordError:
                continue
            # A warm read checks no raw record by default (verify_reads="device"):
            # a flipped raw byte may read back flipped; verify() names it.
            if store.stats()["codec_records"]["raw"] == 0:
                np.testing.assert_array_equal(dst, data[i])
        store.verify()


def test_damaged_schema(tmp_path):
    write_dataset(tmp_path / "d", np.zeros((4, 2), dtype=np.float32))
    schema = tmp_path / "d" / "schema.json"
    for text in ("{", '{"format": "other", "version": 1}', '{"format": "loaderx-zrecord", "version": 9}',
                 '{"format": "loaderx-zrecord", "version": 1, "dtype": "<O8", "shape": [2], "codec": "zstd"}',
                 '{"format": "loaderx-zrecord", "version": 1, "dtype": "<f4", "shape": [-2], "codec": "zstd"}',
                 '{"format": "loaderx-zrecord", "version": 1, "dtype": "<f4", "shape": [3], "codec": "zstd"}',
                 '{"format": "loaderx-zrecord", "version": 1, "dtype": "<f4", "shape": [99999999999], "codec": "x"}'):
        schema.write_text(text)
        try:
            ds = Dataset(tmp_path / "d")
        except (loaderx_rs.ZrecordError, ValueError):
            continue
        # A schema that opens but does not fit the records: reading says so.
        with pytest.raises(loaderx_rs.LayoutError):
            ds[0]


def test_wrong_kinds_of_arguments(tmp_path, rng):
    make_store(tmp_path / "s", rng)
    store = Zrecord(tmp_path / "s")
    dst = np.empty((1, 300), dtype=np.uint8)
    for bad in (None, object(), "0", [[0, "a"]], {"a": 1}):
        with pytest.raises((TypeError, ValueError)):
            store.gather(bad, dst, 300)
    for bad_stride in (-1, 2**64, "x"):
        with pytest.raises((TypeError, OverflowError)):
            store.gather([0], dst, bad_stride)
    with pytest.raises(loaderx_rs.LayoutError):
        store.gather([0], dst, 2**62)
    with pytest.raises(loaderx_rs.LayoutError):
        store.append(np.zeros(10, dtype=np.uint8), 2**40, 2**30)
    with pytest.raises(loaderx_rs.LayoutError):
        store.append_var(np.zeros(10, dtype=np.uint8), [0, 8], [4, 4])
    with pytest.raises(ValueError):
        store.append_var(np.zeros(10, dtype=np.uint8), [0], [4, 4])
    with pytest.raises(ValueError):
        store.append_var(np.zeros(10, dtype=np.uint8), [-1], [4])
    with pytest.raises(ValueError):
        store.gather_var([0], np.empty(300, dtype=np.uint8), [0, 1])
    with pytest.raises(loaderx_rs.LayoutError):
        store.gather_var([0, 1], np.empty(400, dtype=np.uint8), [0, 100])
    with pytest.raises(loaderx_rs.DictionaryError):
        store.train_dict(np.zeros(10, dtype=np.uint8), [5, 5], 1 << 20)
    with pytest.raises(TypeError):
        Zrecord(12345)
    with pytest.raises(loaderx_rs.NotAStoreError):
        Zrecord(tmp_path / "s" / "meta.zr")
    assert len(store) == 50  # nothing above changed the store
