"""After os.fork() (PyTorch DataLoader workers, multiprocessing's fork
start method) the child has none of the parent's threads. Reads, writes and
loaders in a fork child must work, not wait forever for a thread pool that
exists only in the parent."""

import os
import signal
import sys

import numpy as np

from loaderx_rs import DataLoader, Dataset, RaggedDataset, Zrecord, Zsampler, write_dataset, write_ragged

def in_child(fn, seconds=60):
    """Runs fn() in a fork child; returns its exit status (0: fn returned)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            signal.alarm(seconds)  # a hang ends the child, and the test fails
            fn()
            status = 0
        except BaseException as e:  # noqa: BLE001 - reported, then the status says it
            print(f"child failed: {e!r}", file=sys.stderr)
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    return status


def test_reads_writes_and_loaders_in_a_fork_child(tmp_path, rng):
    data = rng.standard_normal((4000, 256)).astype(np.float32)
    write_dataset(tmp_path / "d", data)
    ds = Dataset(tmp_path / "d")
    # The parent's parallel decode starts the global pool (a batch of 4 MiB).
    np.testing.assert_array_equal(ds[:], data)
    seqs = [np.arange(n) for n in range(1, 300)]
    write_ragged(tmp_path / "r", seqs)

    def child():
        idx = np.arange(3999, -1, -1)
        np.testing.assert_array_equal(ds[idx], data[idx])  # a handle from the parent
        np.testing.assert_array_equal(Dataset(tmp_path / "d")[idx], data[idx])
        values, splits = RaggedDataset(tmp_path / "r")[np.arange(299)]
        assert splits[-1] == sum(len(s) for s in seqs)
        write_dataset(tmp_path / "child", data)
        np.testing.assert_array_equal(Dataset(tmp_path / "child")[:], data)
        write_ragged(tmp_path / "child_r", seqs)
        assert len(RaggedDataset(tmp_path / "child_r")) == 299
        store = Zrecord(tmp_path / "d", read_only=True)
        dst = np.empty_like(data)
        store.gather(np.arange(4000), dst, 1024)
        np.testing.assert_array_equal(dst, data)
        assert len(Zsampler(10**6, 1 << 17).next()) == 1 << 17
        loader = DataLoader({"x": Dataset(tmp_path / "d")}, batch_size=512)
        for _ in range(5):
            assert next(loader)["x"].shape == (512, 256)
        loader.close()

    assert in_child(child) == 0
    # The parent is unaffected.
    np.testing.assert_array_equal(ds[::-1], data[::-1])
    assert len(Zsampler(10**6, 1 << 17).next()) == 1 << 17
