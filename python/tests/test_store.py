"""Zrecord, every method against an oracle: a Python list of bytes is a
perfect model of a record store."""

import threading

import numpy as np
import pytest

import loaderx_rs
from loaderx_rs import Zrecord


def records(rng, n, size):
    return rng.integers(0, 8, size=(n, size), dtype=np.uint8)


def test_append_gather_lengths(tmp_path, rng):
    data = records(rng, 300, 64)
    with Zrecord(tmp_path / "s") as store:
        assert len(store) == 0 and store.codec == "zstd"
        assert store.append(data[:100], 100, 64) == 0
        assert store.append(data[100:], 200, 64, codec="raw") == 100
        assert len(store) == 300
        idx = rng.integers(0, 300, size=256)
        dst = np.empty((256, 64), dtype=np.uint8)
        store.gather(idx, dst, 64)
        np.testing.assert_array_equal(dst, data[idx])
        # dst of another dtype: bytes are bytes.
        dst32 = np.empty((256, 16), dtype=np.float32)
        store.gather(idx, dst32, 64)
        np.testing.assert_array_equal(dst32.view(np.uint8), data[idx])
        lens = store.lengths([0, 299, 5])
        assert lens.dtype == np.uint32
        np.testing.assert_array_equal(lens, [64, 64, 64])
        stats = store.stats()
        assert stats["records"] == 300 and stats["codec_records"]["raw"] >= 200
        # By codec name, as `loaderx stats --json` (issue 18, finding 10).
        assert list(stats["codec_records"]) == ["raw", "zstd", "zstd_dict"]
        assert sum(stats["codec_records"].values()) == 300
        assert stats["logical_bytes"] == 300 * 64
        assert stats["reclaimable"] == stats["chunk_bytes"] - stats["live_bytes"]
        store.sync()
        report = store.verify()
        want = {"records": 300, "ok": True, "problems": [], "checksummed": 300, "unchecked": 0, "sealed": True}
        assert report == want
        assert store.read_engine() in ("io_uring", "threads")
    with pytest.raises(ValueError, match="closed"):
        len(store)


def test_append_var_gather_var(tmp_path, rng):
    model = [rng.integers(0, 255, size=int(n), dtype=np.uint8).tobytes() for n in rng.integers(0, 500, size=200)]
    src = np.frombuffer(b"".join(model), dtype=np.uint8)
    lens = np.array([len(r) for r in model], dtype=np.uint32)
    offsets = np.concatenate([[0], np.cumsum(lens[:-1])]).astype(np.uint64)
    store = Zrecord(tmp_path / "v")
    assert store.append_var(src, offsets, lens) == 0
    idx = np.array([5, 0, 199, 5, 77])
    got_lens = store.lengths(idx)
    np.testing.assert_array_equal(got_lens, [len(model[i]) for i in idx])
    out_offsets = np.concatenate([[0], np.cumsum(got_lens[:-1])]).astype(np.uint64)
    dst = np.empty(int(got_lens.sum()), dtype=np.uint8)
    store.gather_var(idx, dst, out_offsets)
    assert dst.tobytes() == b"".join(model[i] for i in idx)


def test_delete_is_swap_with_last_and_compact(tmp_path, rng):
    model = [bytes(r) for r in records(rng, 100, 32)]
    store = Zrecord(tmp_path / "d")
    store.append(np.frombuffer(b"".join(model), dtype=np.uint8), 100, 32)
    doomed = [3, 99, 50, 3, 0]
    store.delete(doomed)
    # The oracle: in descending order, the last record moves into the hole.
    for i in sorted(set(doomed), reverse=True):
        model[i] = model[-1]
        model.pop()
    assert len(store) == len(model) == 96
    dst = np.empty((96, 32), dtype=np.uint8)
    store.gather(np.arange(96), dst, 32)
    assert [bytes(r) for r in dst] == model
    before = store.stats()
    report = store.compact()
    assert report["bytes_after"] <= report["bytes_before"]
    after = store.stats()
    assert after["chunk_bytes"] < before["chunk_bytes"]
    store.gather(np.arange(96), dst, 32)
    assert [bytes(r) for r in dst] == model
    assert store.verify()["ok"]


def test_compact_budget_plan_and_repack(tmp_path, rng):
    n, size = 400, 1000
    model = [bytes(r) for r in records(rng, n, size)]
    store = Zrecord(tmp_path / "b", codec="raw")
    store.append(np.frombuffer(b"".join(model), dtype=np.uint8), n, size)
    doomed = list(range(0, n, 5))
    store.delete(doomed)
    for i in sorted(set(doomed), reverse=True):
        model[i] = model[-1]
        model.pop()
    plan = store.compact_plan()
    assert plan["bytes_before"] - plan["bytes_after"] == store.stats()["reclaimable"]
    assert 0 < plan["move_bytes"] <= store.stats()["reclaimable"]
    assert store.compact_plan(max_bytes=5000)["remaining_bytes"] == plan["move_bytes"] - 5000
    first = store.compact(max_bytes=5000)
    assert first["moved_bytes"] == 5000 and first["remaining_bytes"] > 0
    while store.compact(max_bytes=5000)["remaining_bytes"] > 0:
        pass
    assert store.stats()["reclaimable"] == 0
    assert store.compact(repack=True)["moved_bytes"] == 0
    dst = np.empty((len(model), size), dtype=np.uint8)
    store.gather(np.arange(len(model)), dst, size)
    assert [bytes(r) for r in dst] == model
    with pytest.raises(ValueError):
        store.compact(max_bytes=1, repack=True)


def test_dictionary(tmp_path, rng):
    data = np.tile(np.arange(256, dtype=np.uint8), (400, 1)) // rng.integers(1, 4, size=(400, 1), dtype=np.uint8)
    store = Zrecord(tmp_path / "z", codec="zstd_dict")
    assert not store.has_dict()
    with pytest.raises(loaderx_rs.DictionaryError):
        store.append(data, 400, 256)
    size = store.train_dict(data, np.full(400, 256), 4096)
    assert 0 < size <= 4096 and store.has_dict()
    with pytest.raises(loaderx_rs.DictionaryError):
        store.train_dict(data, np.full(400, 256), 4096)
    store.append(data, 400, 256)
    store.close()
    again = Zrecord(tmp_path / "z", read_only=True)
    assert again.has_dict() and again.read_only
    dst = np.empty_like(data)
    again.gather(np.arange(400), dst, 256)
    np.testing.assert_array_equal(dst, data)
    with pytest.raises(loaderx_rs.ReadOnlyError):
        again.append(data, 1, 256)


def test_second_writer_is_refused(tmp_path):
    first = Zrecord(tmp_path / "l")
    with pytest.raises(loaderx_rs.LockedError) as e:
        Zrecord.open(tmp_path / "l")
    assert e.value.path == str(tmp_path / "l")
    first.close()
    Zrecord.open(tmp_path / "l").close()


def test_reader_sees_appends_after_refresh(tmp_path, rng):
    writer = Zrecord(tmp_path / "r")
    writer.append(records(rng, 10, 8), 10, 8)
    reader = Zrecord(tmp_path / "r", read_only=True)
    writer.append(records(rng, 5, 8), 5, 8)
    assert len(reader) == 10
    assert reader.refresh() == 15 and len(reader) == 15


def lock_waiters(path):
    """Flock requests blocked on the file at `path` now (/proc/locks lists
    them with `->`): how the test knows a wait has begun without timing it."""
    suffix = ":%d" % path.stat().st_ino
    with open("/proc/locks") as f:
        return sum(1 for line in f if "->" in line and any(w.endswith(suffix) for w in line.split()))


def test_delete_and_compact_are_refused_or_wait_while_a_reader_is_open(tmp_path, rng):
    writer = Zrecord(tmp_path / "b")
    writer.append(records(rng, 10, 8), 10, 8)
    reader = Zrecord(tmp_path / "b", read_only=True)
    with pytest.raises(loaderx_rs.BusyError, match="open for reading elsewhere") as e:
        writer.delete([3])
    assert e.value.path == str(tmp_path / "b")
    with pytest.raises(loaderx_rs.BusyError):
        writer.compact()
    assert len(writer) == 10
    done = []
    waiting = threading.Thread(target=lambda: done.append(writer.delete([3], wait=True)))
    waiting.start()
    lock_file = tmp_path / "b" / "readers.lock"
    while lock_waiters(lock_file) == 0:
        assert waiting.is_alive(), "the delete returned with a reader open"
    assert len(reader) == 10
    reader.close()
    waiting.join()
    assert done == [None] and len(writer) == 9
    writer.compact(wait=True)


def test_threads_gather_at_once(tmp_path, rng):
    data = records(rng, 2000, 1024)
    store = Zrecord(tmp_path / "t")
    store.append(data, 2000, 1024)
    errors = []

    def reader(seed):
        local = np.random.default_rng(seed)
        dst = np.empty((256, 1024), dtype=np.uint8)
        for _ in range(20):
            idx = local.integers(0, 2000, size=256)
            store.gather(idx, dst, 1024)
            if not np.array_equal(dst, data[idx]):
                errors.append(seed)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_errors_carry_path_index_and_code(tmp_path, rng):
    store = Zrecord(tmp_path / "e")
    store.append(records(rng, 4, 8), 4, 8)
    dst = np.empty((1, 8), dtype=np.uint8)
    with pytest.raises(loaderx_rs.StoreIndexError) as e:
        store.gather([2**40], dst, 8)
    assert isinstance(e.value, IndexError) and isinstance(e.value, loaderx_rs.ZrecordError)
    assert isinstance(e.value, RuntimeError)  # as the reference's ZrecordError
    assert (e.value.path, e.value.index, e.value.code) == (str(tmp_path / "e"), 2**40, -3)
    with pytest.raises(loaderx_rs.LayoutError) as e:
        store.gather([1], dst, 4)  # stored length 8, layout says 4
    assert e.value.index == 1 and isinstance(e.value, ValueError)
    with pytest.raises(loaderx_rs.LayoutError):
        store.gather([0, 1], dst, 8)  # two records, room for one
    with pytest.raises(loaderx_rs.RecordTooLargeError) as e:
        big = np.zeros((1 << 20) + 1, dtype=np.uint8)
        store.append(big, 1, big.size)
    assert e.value.code == -4
    with pytest.raises(ValueError, match="C-contiguous"):
        store.gather([0], np.empty((8, 2), dtype=np.uint8)[:, 0], 8)
    readonly = np.empty((1, 8), dtype=np.uint8)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        store.gather([0], readonly, 8)
    with pytest.raises(ValueError, match="unknown codec"):
        store.append(dst, 1, 8, codec="gzip")
    with pytest.raises(TypeError):
        store.gather([0.5], dst, 8)
    with pytest.raises(TypeError):
        store.gather([0], [0] * 8, 8)
