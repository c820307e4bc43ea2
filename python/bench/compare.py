"""The reference README's three benchmark layers (sampler, store, loader)
through both Python APIs in one run on the same data: loaderx_rs (this
module) against loaderx 0.7.3 (the reference package), plus NumPy for the
sampler.

    python python/bench/compare.py [--quick] [--rounds N] [--out FILE]

Needs numpy, loaderx==0.7.3 and loaderx_rs installed in one interpreter
(.ci/run's target/pyvenv has them). The machine is shared and its load
moves, so each measurement runs both sides back to back, alternating which
goes first, over `--rounds` rounds; the ratio of a row is the median of the
per-round ratios (ours / reference, higher is better for throughput), with
their range. Prints one markdown table per layer (and writes them to
`--out`, default target/bench/python_api.md).
"""

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import loaderx as ref
import loaderx_rs as ours
from loaderx._sampler import Sampler as RefSampler

from workload import BATCH, RECORD_FLOATS, RECORDS, make_data

N_INDEX = 1_000_000  # sampler index space, as the reference's table


CPU = {}  # fn -> process CPU seconds per call of its last measurement (every thread)


def per_call(fn, min_seconds):
    """Seconds per call of fn: calls in a loop until min_seconds have passed.
    The process CPU time per call (all threads) lands in CPU[fn]."""
    fn()
    n, start, cpu = 0, time.perf_counter(), time.process_time()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            CPU[fn] = (time.process_time() - cpu) / n
            return elapsed / n


def paired(a, b, rounds, min_seconds):
    """Per-call seconds of a and b, measured back to back, alternating order."""
    ta, tb = [], []
    for r in range(rounds):
        gc.collect()
        if r % 2 == 0:
            ta.append(per_call(a, min_seconds))
            tb.append(per_call(b, min_seconds))
        else:
            tb.append(per_call(b, min_seconds))
            ta.append(per_call(a, min_seconds))
    return ta, tb


def ratio_text(ours_times, ref_times):
    """Speed-up of ours over ref: median of per-round ratios and its range."""
    ratios = [r / o for o, r in zip(ours_times, ref_times)]
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})", statistics.median(ratios)


# ---------------------------------------------------------------- sampler


class NumpyCyclic:
    """Without replacement, the NumPy way: a fresh permutation per epoch,
    sliced into batches (the permutation's cost is spread over its batches)."""

    def __init__(self, n, batch, seed):
        self.rng, self.n, self.batch = np.random.default_rng(seed), n, batch
        self.perm, self.at = None, n

    def next(self):
        if self.at + self.batch > self.n:
            self.perm, self.at = self.rng.permutation(self.n), 0
        out = self.perm[self.at:self.at + self.batch]
        self.at += self.batch
        return out


class NumpySequential:
    def __init__(self, n, batch):
        self.n, self.batch, self.at = n, batch, 0

    def next(self):
        out = np.arange(self.at, self.at + self.batch) % self.n
        self.at = (self.at + self.batch) % self.n
        return out


def bench_sampler(rounds, min_seconds, batches):
    rows = ["| mode | batch | numpy | per batch (numpy) | reference per batch | loaderx_rs per batch "
            "| loaderx_rs / reference | loaderx_rs / numpy |",
            "|---|---:|---|---:|---:|---:|---:|---:|"]
    verdicts = []
    for mode, name in ((1, "iid"), (2, "cyclic"), (0, "sequential")):
        for b in batches:
            r_s = RefSampler(N_INDEX, b, mode, 42)
            o_s = ours.Zsampler(N_INDEX, b, mode, 42)
            if mode == 1:
                rng = np.random.default_rng(42)
                np_name, np_fn = "default_rng.integers", lambda: rng.integers(0, N_INDEX, b)
            elif mode == 2:
                npc = NumpyCyclic(N_INDEX, b, 42)
                np_name, np_fn = "permutation, sliced", npc.next
            else:
                nps = NumpySequential(N_INDEX, b)
                np_name, np_fn = "arange % n", nps.next
            t_ours, t_ref = paired(o_s.next, r_s.next, rounds, min_seconds)
            t_np = [per_call(np_fn, min_seconds) for _ in range(rounds)]
            text, vs_ref = ratio_text(t_ours, t_ref)
            np_text, vs_np = ratio_text(t_ours, t_np)
            us = lambda ts: f"{statistics.median(ts) * 1e6:.2f} µs"  # noqa: E731
            rows.append(f"| {name} | {b} | {np_name} | {us(t_np)} | {us(t_ref)} | {us(t_ours)} | {text} | {np_text} |")
            verdicts.append((name, b, vs_ref, vs_np))
            print(rows[-1], flush=True)
    return rows, verdicts


# ---------------------------------------------------------------- store


def bench_store(root, data, rounds, min_seconds):
    rows = ["| codec | read through | reference MiB/s | loaderx_rs MiB/s | loaderx_rs / reference "
            "| CPU ms/batch ref | ours | CPU ref / ours |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    verdicts = []
    rng = np.random.default_rng(7)
    batches = [rng.integers(0, RECORDS, BATCH).astype(np.uint64) for _ in range(64)]
    mib = BATCH * RECORD_FLOATS * 4 / (1 << 20)
    for codec in ("zstd", "raw"):
        path = root / f"store_{codec}"
        ref.write_dataset(path, data, codec=codec)  # one store, written once, read by both
        r_ds, o_ds = ref.Dataset(path), ours.Dataset(path)
        r_zr, o_zr = ref.Zrecord(path), ours.Zrecord(path, read_only=True)
        dst_r = np.empty((BATCH, RECORD_FLOATS), dtype=np.float32)
        dst_o = np.empty((BATCH, RECORD_FLOATS), dtype=np.float32)
        for i in (0, 17):  # both read the same bytes
            np.testing.assert_array_equal(r_ds[batches[i]], o_ds[batches[i]])
        k = {"r": 0, "o": 0}
        cpu = {"r": [], "o": []}

        def step(side, fn):
            def call():
                k[side] = (k[side] + 1) % len(batches)
                fn(batches[k[side]])
            return call

        for through, r_fn, o_fn in (
            ("Dataset.__getitems__ (allocates)", r_ds.__getitems__, o_ds.__getitems__),
            ("Zrecord.gather into a buffer", lambda i: r_zr.gather(i, dst_r, RECORD_FLOATS * 4),
             lambda i: o_zr.gather(i, dst_o, RECORD_FLOATS * 4)),
        ):
            o_call, r_call = step("o", o_fn), step("r", r_fn)
            t_ours, t_ref, c_ours, c_ref = [], [], [], []
            for r in range(rounds):
                gc.collect()
                for side in (("o", "r") if r % 2 == 0 else ("r", "o")):
                    fn = o_call if side == "o" else r_call
                    (t_ours if side == "o" else t_ref).append(per_call(fn, min_seconds))
                    (c_ours if side == "o" else c_ref).append(CPU[fn])
            text, vs_ref = ratio_text(t_ours, t_ref)
            c_r, c_o = statistics.median(c_ref), statistics.median(c_ours)
            rows.append(f"| {codec} | {through} | {mib / statistics.median(t_ref):.0f} "
                        f"| {mib / statistics.median(t_ours):.0f} | {text} | {c_r * 1e3:.2f} | {c_o * 1e3:.2f} "
                        f"| {c_r / c_o:.2f}x |")
            verdicts.append((codec, through, vs_ref))
            print(rows[-1], flush=True)
        r_zr.close()
        o_zr.close()
        del r_ds, o_ds
    return rows, verdicts


# ---------------------------------------------------------------- loader


def bench_loader(rounds):
    """The loader layer: `loader.py`'s sides `ours` and `reference`, each
    measurement in a fresh process that builds its loader first (in this
    process, after the store layer, the loader ran faster than a user's
    script does: `docs/benchmarks.md`, "Python loader, fresh processes")."""
    cmd = [sys.executable, str(Path(__file__).resolve().parent / "loader.py"), "--sides", "ours,reference",
           "--rounds", str(rounds), "--out", "target/bench/python_loader.md"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    rows = [line for line in out.splitlines() if line.startswith("|")]
    print("\n".join(rows), flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one round, short measurements (a smoke run)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default="target/bench/python_api.md")
    ap.add_argument("--layers", default="sampler,store,loader")
    args = ap.parse_args()
    rounds = 1 if args.quick else args.rounds
    min_seconds = 0.05 if args.quick else 0.4
    layers = args.layers.split(",")
    out = [f"python {sys.version.split()[0]}, numpy {np.__version__}, loaderx {ref.__version__}, "
           f"loaderx_rs {ours.__version__}, {os.cpu_count()} cpus, load average "
           f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, {rounds} rounds", ""]
    print(out[0], flush=True)
    if "sampler" in layers:
        rows, _ = bench_sampler(rounds, min_seconds / 4, (256, 1024, 8192))
        out += ["**Sampler** (index space 1,000,000; per batch, median of the rounds)", ""] + rows + [""]
    with tempfile.TemporaryDirectory(prefix="loaderx-pybench-") as tmp:
        root = Path(tmp)
        if "store" in layers:
            data = make_data(np.random.default_rng(1))
            rows, _ = bench_store(root, data, rounds, min_seconds)
            out += [f"**Store** (random batches of {BATCH} of {RECORDS} records of 12,288 bytes, "
                    "one store written by the reference, read by both)", ""] + rows + [""]
            del data
    if "loader" in layers:
        rows = bench_loader(rounds)
        out += [f"**Loader** (batch {BATCH}, 4 workers, streams data + label, defaults of both; "
                "a fresh process per measurement, python/bench/loader.py)", ""] + rows + [""]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(out) + "\n")
    print(f"\nwritten to {args.out}")


if __name__ == "__main__":
    main()
