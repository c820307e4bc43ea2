"""The sampler table's Python side: the reference package's sampler (loaderx
0.7.3, through its Python API) and NumPy's two random APIs, drawing one batch
of indices per call.

    python sampler_peers.py --json OUT [--len 1000000] [--batches 256,1024,8192]
        [--rounds 9] [--run-ms 60]

Per batch size, every contender draws batches in --rounds rounds of one
--run-ms run each (the order rotating from round to round); its figure is the
median run in microseconds per batch. Contenders: `np.random.randint(0, len,
size=batch)` (the legacy API), `default_rng().integers(0, len, size=batch)`,
and `loaderx.Sampler(len, batch, mode).next()` for IID and cyclic (one cffi
call per batch, the copy it returns included).
"""

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

import loaderx
from loaderx._sampler import Sampler

from reference_store import load_average


def contenders(n, batch):
    rs = np.random.RandomState(42)
    rng = np.random.default_rng(42)
    iid = Sampler(n, batch, Sampler.Mode.IID, 42)
    cyc = Sampler(n, batch, Sampler.Mode.CYCLIC, 42)
    return [
        ("numpy randint", "iid", lambda: rs.randint(0, n, size=batch)),
        ("numpy default_rng", "iid", lambda: rng.integers(0, n, size=batch)),
        ("loaderx 0.7.3", "iid", iid.next),
        ("loaderx 0.7.3", "cyclic", cyc.next),
    ]


def run(fn, budget):
    calls, start = 0, time.perf_counter()
    while True:
        for _ in range(16):
            fn()
        calls += 16
        elapsed = time.perf_counter() - start
        if elapsed >= budget:
            return elapsed / calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--len", type=int, default=1_000_000)
    ap.add_argument("--batches", default="256,1024,8192")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--run-ms", type=float, default=60)
    args = ap.parse_args()
    rows = []
    load_start = load_average()
    for batch in map(int, args.batches.split(",")):
        cs = contenders(args.len, batch)
        for _, _, fn in cs:
            run(fn, 0.02)  # warm-up
        runs = [[] for _ in cs]
        for r in range(args.rounds):
            for k in range(len(cs)):
                m = (r + k) % len(cs)
                runs[m].append(run(cs[m][2], args.run_ms / 1e3))
        for (name, mode, _), rr in zip(cs, runs):
            us = statistics.median(rr) * 1e6
            rows.append({"name": name, "mode": mode, "len": args.len, "batch": batch, "us_per_batch": us})
            print(f"sampler {name:<18} {mode:<6} batch {batch:>5} {us:9.2f} us/batch", flush=True)
    doc = {"side": "python", "version": loaderx.__version__, "numpy": np.__version__,
           "machine": {"nproc": os.cpu_count(), "load_start": load_start, "load_end": load_average()},
           "sampler": rows}
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
