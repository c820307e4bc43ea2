"""Cold-cache random-batch gather through the Python APIs, side by side in
one run: loaderx_rs (this module), the reference package (loaderx 0.7.3) on
the same store, a memory-mapped .npy of the same records, and the crate
itself without Python (`loaderx bench --cold`, the CLI); each
measurement evicts the files from the page cache first
(posix_fadvise(DONTNEED)) and counts the device's bytes
(/sys/dev/block/MAJ:MIN/stat).

    python python/bench/cold.py --store DIR --record-bytes N [--batches 20]
        [--batch 256] [--rounds 3] [--npy FILE] [--no-fio]

The bound runs in the same rounds: fio, io_uring, direct, random reads of
N bytes over the store's chunk files at queue depths 32 and 128. The
ratios printed at the end are of medians of the same run.

DIR is a raw store of records of N bytes, as `cargo bench -p loaderx
--bench cold` leaves them under target/cold (e.g. target/cold/12k-raw-2048m).
The .npy (default: next to the store) is written once from the store. The
sides alternate within each round; the median round is printed.
"""

import argparse
import json
import os
import subprocess
import statistics
import time
from pathlib import Path

import numpy as np

import loaderx as ref
import loaderx_rs as ours

MIB = float(1 << 20)


def evict(paths):
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def device_bytes(path):
    dev = os.stat(path).st_dev
    stat = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}/stat").read_text().split()
    return int(stat[2]) * 512


def chunk_files(store):
    return sorted(p for p in Path(store).glob("*.zr") if p.name != "meta.zr")


def ensure_npy(store, record_bytes, npy):
    zr = ours.Zrecord(str(store), read_only=True)
    n = len(zr)
    if npy.exists() and npy.stat().st_size >= n * record_bytes:
        return n
    out = np.lib.format.open_memmap(npy, mode="w+", dtype=np.uint8, shape=(n, record_bytes))
    step = max(1, (64 << 20) // record_bytes)
    for first in range(0, n, step):
        idx = np.arange(first, min(n, first + step), dtype=np.uint64)
        zr.gather(idx, out[first:first + len(idx)].reshape(-1), record_bytes)
    out.flush()
    del out
    return n


def fio(files, record_bytes, qd):
    """fio's random-read MiB/s over `files`, or None without fio."""
    try:
        out = subprocess.run(
            ["fio", "--name=bound", "--rw=randread", "--direct=1", "--ioengine=io_uring",
             "--time_based", "--runtime=4", f"--bs={record_bytes}", f"--iodepth={qd}",
             "--filename=" + ":".join(files), "--output-format=terse", "--terse-version=3"],
            check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return float(out.split(";")[6]) / 1024.0


def measure(name, gather, files, batches, record_bytes):
    evict(files)
    dev0, t0 = device_bytes(files[0]), time.perf_counter()
    for idx in batches:
        gather(idx)
    seconds = time.perf_counter() - t0
    returned = sum(len(b) for b in batches) * record_bytes
    return returned / MIB / seconds, (device_bytes(files[0]) - dev0) / returned


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--record-bytes", type=int, required=True)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--npy")
    ap.add_argument("--no-fio", action="store_true", help="leave out the device bound")
    ap.add_argument("--cli", default="target/release/loaderx", help="the loaderx binary (cargo build --release -p loaderx-cli)")
    a = ap.parse_args()
    store = Path(a.store)
    npy = Path(a.npy) if a.npy else store.with_suffix(".npy")
    n = ensure_npy(store, a.record_bytes, npy)
    files = [str(p) for p in chunk_files(store)]
    o_zr = ours.Zrecord(str(store), read_only=True)
    r_zr = ref.Zrecord(str(store))
    arr = np.load(npy, mmap_mode="r")
    dst_o = np.empty(a.batch * a.record_bytes, dtype=np.uint8)
    dst_r = np.empty(a.batch * a.record_bytes, dtype=np.uint8)
    sides = [
        ("loaderx_rs Zrecord.gather", lambda i: o_zr.gather(i, dst_o, a.record_bytes), files),
        ("loaderx 0.7.3 Zrecord.gather", lambda i: r_zr.gather(i, dst_r, a.record_bytes), files),
        ("np.load(mmap_mode='r')[idx]", lambda i: arr[i.astype(np.int64)], [str(npy)]),
    ]
    rng = np.random.default_rng(1)
    results = {name: [] for name, _, _ in sides}
    cli = Path(a.cli)
    if cli.exists():
        results["the crate, no Python (loaderx bench --cold)"] = []
    bound = {} if a.no_fio else {32: [], 128: []}
    for round_ in range(a.rounds):
        for qd, runs in bound.items():
            mib_s = fio(files, a.record_bytes, qd)
            if mib_s is not None:
                runs.append(mib_s)
        if cli.exists():
            out = subprocess.run(
                [str(cli), "bench", str(store), "--cold", "--json", "--batches", str(a.batches),
                 "--batch-size", str(a.batch), "--seed", str(round_ + 1)],
                check=True, capture_output=True, text=True).stdout
            gather = json.loads(out)["gather"]
            results["the crate, no Python (loaderx bench --cold)"].append((gather["mib_per_s"], float("nan")))
        for name, gather, side_files in sides:
            # No record twice: a repeat would come from the cache.
            picks = rng.permutation(n)[: a.batches * a.batch].astype(np.uint64)
            batches = [picks[k : k + a.batch] for k in range(0, len(picks), a.batch)]
            results[name].append(measure(name, gather, side_files, batches, a.record_bytes))
    print(f"cold gather, {a.record_bytes} B records, batches of {a.batch}, {o_zr.read_engine()} engine")
    print(f"| side | MiB/s | device bytes per byte returned |\n|---|---:|---:|")
    for name, runs in results.items():
        mib_s = statistics.median(r[0] for r in runs)
        amp = statistics.median(r[1] for r in runs)
        print(f"| {name} | {mib_s:.1f} | " + ("-" if amp != amp else f"{amp:.2f}x") + " |")
    for qd, runs in bound.items():
        if runs:
            print(f"| fio, io_uring, direct, QD{qd} (the bound) | {statistics.median(runs):.1f} | 1.00x |")
    print_ratios(results, bound)


def print_ratios(results, bound):
    med = {name: statistics.median(r[0] for r in runs) for name, runs in results.items() if runs}
    ours_ = med["loaderx_rs Zrecord.gather"]
    print(f"binding / reference: {ours_ / med['loaderx 0.7.3 Zrecord.gather']:.2f}x")
    crate = med.get("the crate, no Python (loaderx bench --cold)")
    if crate:
        print(f"binding / the crate: {ours_ / crate:.2f}x")
    for qd, runs in bound.items():
        if runs:
            print(f"binding / fio QD{qd}: {ours_ / statistics.median(runs):.2f}x")


if __name__ == "__main__":
    main()
