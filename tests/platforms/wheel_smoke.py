"""What a wheel must do where it is installed: run by tests/platforms/wheels.sh (wheel_run.sh)
under the wheel's own platform's interpreter (natively, or under
qemu-aarch64 for Linux arm64). Not a pytest module: it needs nothing but
numpy and the wheel, and exits non-zero on the first failure.

It writes a store in each codec (delete and compaction included), a
dataset, and reads them back through the loader, against values it
computes itself."""

import os
import platform
import sys
import tempfile

import numpy as np

import loaderx_rs as lx


def check_store(root: str, codec: str) -> None:
    rng = np.random.default_rng(7)
    rows = rng.integers(0, 256, size=(300, 48), dtype=np.uint8)
    path = os.path.join(root, f"store-{codec}.zr")
    with lx.Zrecord(path, codec=codec) as z:
        assert z.append(rows, len(rows), rows.shape[1]) == 0
        z.delete(np.arange(0, 300, 3))
        z.compact(wait=True)
        assert z.verify()["ok"], z.verify()
    with lx.Zrecord(path, read_only=True) as z:
        assert len(z) == 200, len(z)
        lens = z.lengths(np.arange(len(z)))
        assert (lens == 48).all(), lens
        out = np.zeros((len(z), 48), dtype=np.uint8)
        z.gather(np.arange(len(z)), out, 48)
    # A swap-delete moves the last records into the holes: compare as sets.
    want = {bytes(r) for i, r in enumerate(rows) if i % 3}
    got = {bytes(r) for r in out}
    assert got == want, f"{codec}: the records read back differ"


def check_loader(root: str) -> None:
    data = np.arange(1000 * 8, dtype=np.float32).reshape(1000, 8)
    label = np.arange(1000, dtype=np.int64)
    lx.write_dataset(os.path.join(root, "data.zr"), data)
    lx.write_dataset(os.path.join(root, "label.zr"), label)
    loader = lx.DataLoader(
        {
            "data": lx.Dataset(os.path.join(root, "data.zr")),
            "label": lx.Dataset(os.path.join(root, "label.zr")),
        },
        batch_size=50,
    )
    for step, batch in enumerate(loader):
        if step == 30:
            break
        idx = batch["label"]
        assert batch["data"].shape == (50, 8)
        assert np.array_equal(batch["data"], data[idx]), step


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        for codec in ("raw", "zstd"):
            check_store(root, codec)
        check_loader(root)
    print(f"loaderx_rs smoke: ok on {sys.platform} {platform.machine()} (Python {platform.python_version()})")


if __name__ == "__main__":
    main()
