"""What the binding costs a gather: the same store, the same batch size, read
through `loaderx_rs.Zrecord.gather` from Python and through the crate's own
`loaderx bench` (Rust), alternating, in one run.

    cargo build --release --bin loaderx
    target/pyvenv/bin/python python/bench/overhead.py [--records 20000] [--rounds 3]

Writes a raw store of float32 records of 12,288 bytes (random, in a temporary
directory), then per round: 5 runs of 200 random batches of 256 from Python
(into one preallocated array) and `loaderx bench --batches 1000` on the same
store. Prints MiB/s of both per round and the median ratio.
"""

import argparse
import pathlib
import re
import statistics
import subprocess
import tempfile
import time

import numpy as np

import loaderx_rs as lx

RECORD = 12288
BATCH = 256


def python_gather(store, n, rng):
    dst = np.empty((BATCH, RECORD), dtype=np.uint8)
    for _ in range(20):
        store.gather(rng.integers(0, n, BATCH), dst, RECORD)
    runs = []
    for _ in range(5):
        batches = [rng.integers(0, n, BATCH) for _ in range(200)]
        started = time.perf_counter()
        for idx in batches:
            store.gather(idx, dst, RECORD)
        runs.append(200 * BATCH * RECORD / (time.perf_counter() - started) / 2**20)
    return statistics.median(runs)


def rust_gather(binary, path):
    out = subprocess.run([binary, "bench", str(path), "--batches", "1000"], check=True, capture_output=True, text=True)
    return float(re.search(r"gather\s+([\d.]+) MiB/s", out.stdout).group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    root = pathlib.Path(__file__).resolve().parents[2]
    parser.add_argument("--loaderx", default=str(root / "target" / "release" / "loaderx"))
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "store"
        store = lx.Zrecord(str(path))
        for start in range(0, args.records, 4096):
            count = min(4096, args.records - start)
            store.append(rng.standard_normal((count, RECORD // 4), dtype=np.float32), count, RECORD, "raw")
        ratios = []
        for round_ in range(args.rounds):
            py = python_gather(store, args.records, rng)
            rs = rust_gather(args.loaderx, path)
            ratios.append(py / rs)
            print(f"round {round_ + 1}: Python {py:,.0f} MiB/s, Rust {rs:,.0f} MiB/s, Python / Rust {py / rs:.2f}x")
        print(f"median Python / Rust: {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
