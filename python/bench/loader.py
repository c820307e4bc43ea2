"""The Python loader as a user's script runs it: every measurement in a
fresh process that opens the datasets and builds its `DataLoader` first,
side by side with the reference's loader and with the bound, in
alternating rounds.

    python python/bench/loader.py [--rounds 5] [--codecs raw,zstd] [--quick]
        [--sides ours,reference,gathered,bound] [--steady] [--base SIDE]
        [--python LABEL[:SIDE]=INTERPRETER ...] [--out FILE]

The workload is the reference README's (`workload.py`): 20,000 float32
records of 12,288 bytes and their int64 labels, two streams, the defaults
of both APIs (batch 256, 4 workers, IID, seed 42). The datasets are
written once, by this module's `write_dataset`, and every side reads the
same stores. A side's process takes `--warmup` batches (20: the queue is
full), then counts batches for `--seconds` (0.4), and exits; the sides of
a round run one after the other, the order rotating from round to round.

The sides:
- `ours`: `loaderx_rs.DataLoader`, built first, as a script does;
- `reference`: the reference package's `DataLoader` (loaderx 0.7.3);
- `gathered`: `ours` after one `Dataset.__getitems__` of 256 records in
  the process, before the loader is built (the case that hid a regression
  from a benchmark that read the store first);
- `bound`: this module's own `Dataset.__getitems__` of the loader's batches
  (the same sampler's steps) in a loop on one thread, with a second thread
  gathering their labels: what four workers on two cores can at most add
  up to;
- `steady` (with `--steady`): `ours` after 400 batches of warm-up, a
  steady-state figure beside the fresh one, not in place of it;
- `--python LABEL[:SIDE]=INTERPRETER`: side SIDE (default `ours`) run by
  another interpreter (another build of this module in its own venv), as
  side LABEL;
  `benches/compare/python_loader_revisions.sh` uses it to compare two
  revisions.

Prints, per codec, each side's median batches/s over the rounds and its
range, its CPU milliseconds per batch, and the median (and range) of the
per-round ratios of `ours` (`--base`; without `ours`, the first side) to it; writes the
tables to `--out` (default target/bench/python_loader.md).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WARMUP_STEADY = 400


# ------------------------------------------------------------- the child


def child(args):
    """One measurement, in this fresh process; prints one JSON line."""
    import numpy as np

    side = args.child
    lib = __import__("loaderx" if side == "reference" else "loaderx_rs")
    data, labels = lib.Dataset(str(args.data / args.codec)), lib.Dataset(str(args.data / "labels"))
    if side == "bound":
        return print(json.dumps(bound(lib, data, labels, args)))
    if side == "gathered":
        data[np.random.default_rng(0).integers(0, len(data), 256).astype(np.uint64)]
    loader = lib.DataLoader({"data": data, "label": labels})
    warmup = WARMUP_STEADY if side == "steady" else args.warmup
    for _ in range(warmup):
        next(loader)
    n, cpu, start = 0, time.process_time(), time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        next(loader)
        n += 1
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    print(json.dumps({"batches_s": n / elapsed, "cpu_ms": cpu / n * 1e3}), flush=True)
    os._exit(0)  # the loader's threads are not joined: the next side starts at once


def bound(lib, data, labels, args):
    """`Dataset.__getitems__` of the loader's batches on one thread, their
    labels on another; batches/s of the pair."""
    sampler = lib.Zsampler(len(data), 256, mode=1, seed=42)
    steps = [sampler.batch(step) for step in range(512)]
    ahead = threading.Semaphore(0)  # the labels thread takes no step the data thread has not
    stop = threading.Event()
    done = [0, 0]

    def labels_loop():
        k = 0
        while ahead.acquire(timeout=1) and not stop.is_set():
            labels.__getitems__(steps[k % len(steps)])
            k += 1
            done[1] = k

    thread = threading.Thread(target=labels_loop)
    thread.start()
    k = 0
    for _ in range(args.warmup):
        data.__getitems__(steps[k % len(steps)])
        ahead.release()
        k += 1
    n0, start, cpu = k, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < args.seconds:
        data.__getitems__(steps[k % len(steps)])
        ahead.release()
        k += 1
    while done[1] < k:  # the last steps' labels
        time.sleep(0)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    stop.set()
    ahead.release()
    thread.join()
    return {"batches_s": (k - n0) / elapsed, "cpu_ms": cpu / (k - n0) * 1e3}


# ------------------------------------------------------------ the parent


def write_data(root):
    """The workload's datasets (raw and zstd data, labels) under `root`."""
    import numpy as np

    import loaderx_rs as ours
    from workload import RECORDS, make_data

    data = make_data(np.random.default_rng(1))
    for codec in ("raw", "zstd"):
        ours.write_dataset(str(root / codec), data, codec=codec)
    ours.write_dataset(str(root / "labels"), np.arange(RECORDS, dtype=np.int64), codec="raw")


def run_side(python, side, codec, root, args):
    cmd = [python, str(Path(__file__).resolve()), "--child", side, "--data", str(root), "--codec", codec,
           "--seconds", str(args.seconds), "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=HERE).stdout
    return json.loads(out.strip().splitlines()[-1])


def spread(values, fmt="{:.0f}"):
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def table(codec, sides, runs, first):
    """Markdown rows: per side, batches/s, CPU, and `first`'s ratio to it."""
    rows = [f"| {codec} | side | batches/s, median (range) | CPU ms/batch | {first} / side, median of rounds (range) |",
            "|---|---|---:|---:|---:|"]
    for label, _, _ in sides:
        speeds = [r["batches_s"] for r in runs[label]]
        cpu = statistics.median(r["cpu_ms"] for r in runs[label])
        ratios = [a["batches_s"] / b["batches_s"] for a, b in zip(runs[first], runs[label])]
        ratio = "-" if label == first else spread(ratios, "{:.2f}x")
        rows.append(f"| {codec} | {label} | {spread(speeds)} | {cpu:.2f} | {ratio} |")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--codec", help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--codecs", default="raw,zstd")
    ap.add_argument("--sides", default="ours,reference,gathered,bound")
    ap.add_argument("--steady", action="store_true", help="also `ours` after 400 batches of warm-up")
    ap.add_argument("--python", action="append", default=[], metavar="LABEL[:SIDE]=INTERPRETER",
                    help="side SIDE (default ours) run by another interpreter, as side LABEL (repeatable)")
    ap.add_argument("--base", help="the side the ratios are of (default: ours if run, else the first)")
    ap.add_argument("--seconds", type=float, default=0.4)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="one round (a smoke run)")
    ap.add_argument("--out", default="target/bench/python_loader.md")
    args = ap.parse_args()
    if args.child:
        return child(args)
    rounds = 1 if args.quick else args.rounds
    sides = [(s, sys.executable, s) for s in args.sides.split(",") if s]
    if args.steady:
        sides.append(("steady", sys.executable, "steady"))
    others = []
    for spec in args.python:
        label, _, python = spec.partition("=")
        label, _, kind = label.partition(":")
        others.append((label, python, kind or "ours"))
    sides = others + sides
    labels = [label for label, _, _ in sides]
    first = args.base or ("ours" if "ours" in labels else labels[0])
    header = (f"python {sys.version.split()[0]}, {os.cpu_count()} cpus, load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, {rounds} rounds, a fresh process per "
              f"measurement, {args.warmup} batches of warm-up, then {args.seconds} s")
    print(header, flush=True)
    out = [header, ""]
    with tempfile.TemporaryDirectory(prefix="loaderx-pyloader-") as tmp:
        root = Path(tmp)
        write_data(root)
        for codec in args.codecs.split(","):
            runs = {label: [] for label, _, _ in sides}
            for r in range(rounds):
                turn = sides[r % len(sides):] + sides[:r % len(sides)]
                for label, python, kind in turn:
                    runs[label].append(run_side(python, kind, codec, root, args))
                print(f"  {codec} round {r + 1}: " + ", ".join(
                    f"{label} {runs[label][-1]['batches_s']:.0f}" for label, _, _ in sides), flush=True)
            rows = table(codec, sides, runs, first)
            print("\n".join(rows) + "\n", flush=True)
            out += rows + [""]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(out) + "\n")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
