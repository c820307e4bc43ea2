"""The store benchmark on the reference package (loaderx 0.7.3), through its
Python API, with the method of benches/store.rs on the same data.

    python reference_store.py --data DIR --json OUT [--work DIR] [--reps 5]
        [--append-reps 5] [--batches 100] [--warmup 20] [--dict-subset 2000]
        [--datasets float,image] [--groups bounds,raw,zstd,zstd_dict] [--round N]

Append: `Zrecord.append` in calls of 64 MiB (write_dataset's step) into a
fresh store, then `sync()` (write_dataset's closing call), timed together;
MiB/s of logical bytes, median and best of --append-reps. zstd_dict first
trains the dictionary as write_dataset does (the same strided sample and
default size), timed apart, on the first --dict-subset records only: the
reference's level-19 dictionary write runs at a few MiB/s.

Gather: `Zrecord.gather` of the indices.npy batches (uint64, batch 256) into one
preallocated numpy buffer, --warmup batches first, then --reps timed runs of
--batches batches; median and best MiB/s. Bounds: numpy memcpy of the same
bytes (`np.copyto`), and a `np.load(mmap_mode='r')` fancy-index gather
(`a[idx]`, which allocates its result, as client code writes it).

--groups picks what to measure (default all); run.sh runs one group at a time,
alternating with the crate's bench, and --round tags the results.
"""

import argparse
import json
import os
import platform
import shutil
import time
from pathlib import Path

import numpy as np

import loaderx
from loaderx import Zrecord
from loaderx._zrecord import DICT_MAX, DICT_MIN, DICT_MAX_SAMPLES, DICT_SAMPLE_BYTES, WRITE_CHUNK_BYTES

MIB = float(1 << 20)


def cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except (OSError, ValueError):
        return None


def time_batches(idx, batch_bytes, warmup, batches, reps, fn):
    for k in range(warmup):
        fn(idx[k % len(idx)])
    runs = []
    for r in range(reps):
        start = time.perf_counter()
        for k in range(batches):
            fn(idx[(warmup + r * batches + k) % len(idx)])
        runs.append(batches * batch_bytes / MIB / (time.perf_counter() - start))
    return runs


def row(dataset, kind, name, runs, records, ratio=None, train_s=None, note=""):
    s = sorted(runs)
    n = len(s)
    median = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return {"dataset": dataset, "kind": kind, "name": name, "mib_s": median,
            "mib_s_best": max(runs), "runs": runs, "records": records,
            "ratio": ratio, "train_s": train_s, "note": note}


def dict_sample(arr, count):
    """write_dataset's _train_dict sample: evenly strided, at most 8192 records."""
    itemsize = arr[0].nbytes
    k = min(count, DICT_MAX_SAMPLES, max(1, DICT_SAMPLE_BYTES // max(itemsize, 1)))
    idx = np.unique(np.linspace(0, count - 1, k).astype(np.int64))
    buf = np.ascontiguousarray(arr[idx]).reshape(-1).view(np.uint8)
    sizes = np.full(len(idx), itemsize, dtype=np.uintp)
    target = min(DICT_MAX, max(DICT_MIN, int(buf.nbytes) // 100))
    return buf, sizes, target


def bench_append(dataset, arr, work, codec, records, reps):
    src = arr[:records]
    itemsize = src[0].nbytes
    step = max(1, WRITE_CHUNK_BYTES // itemsize)
    runs, train_s, last = [], None, None
    for rep in range(reps):
        path = work / f"{dataset}-{codec}-{rep}"
        shutil.rmtree(path, ignore_errors=True)
        with Zrecord(path, codec=codec) as store:
            if codec == "zstd_dict":
                buf, sizes, target = dict_sample(src, records)
                start = time.perf_counter()
                store.train_dict(buf, sizes, target)
                train_s = time.perf_counter() - start
            start = time.perf_counter()
            for lo in range(0, records, step):
                block = np.ascontiguousarray(src[lo:lo + step])
                store.append(block, len(block), itemsize)
            store.sync()
            runs.append(src.nbytes / MIB / (time.perf_counter() - start))
            stats = store.stats()
            assert stats["records"] == records
            ratio = src.nbytes / stats["live_bytes"]
        if last is not None:
            shutil.rmtree(last[0])
        last = (path, ratio)
    return row(dataset, "append", codec, runs, records, last[1], train_s), last[0]


def bench_gather(args, idx, dataset, path, append_row, itemsize):
    with Zrecord(path) as store:
        n = len(store)
        batches = [np.ascontiguousarray(b % np.uint64(n)) for b in idx]
        dst = np.empty(len(batches[0]) * itemsize, dtype=np.uint8)
        runs = time_batches(batches, dst.nbytes, args.warmup, args.batches, args.reps,
                            lambda ix: store.gather(ix, dst, itemsize))
    r = dict(append_row, kind="gather", train_s=None)
    r.update(row(dataset, "gather", append_row["name"], runs, append_row["records"], append_row["ratio"]))
    return r


def bench_bounds(args, idx, dataset, npy_path):
    arr = np.load(npy_path)  # in memory, for memcpy
    flat = arr.reshape(-1).view(np.uint8)
    itemsize = arr[0].nbytes
    batch_bytes = len(idx[0]) * itemsize
    dst = np.empty(batch_bytes, dtype=np.uint8)
    slots = flat.size // batch_bytes
    state = {"k": 0}

    def copy(_):
        state["k"] = (state["k"] + 1) % slots
        k = state["k"]
        np.copyto(dst, flat[k * batch_bytes:(k + 1) * batch_bytes])

    out = [row(dataset, "bound", "numpy memcpy",
               time_batches(idx, batch_bytes, args.warmup, args.batches, args.reps, copy),
               len(arr), note="np.copyto of a contiguous batch-sized slice")]
    del arr, flat
    mm = np.load(npy_path, mmap_mode="r")
    ix = [b.astype(np.intp) for b in idx]
    out.append(row(dataset, "bound", "numpy mmap fancy-index",
                   time_batches(ix, batch_bytes, args.warmup, args.batches, args.reps, lambda b: mm[b]),
                   len(mm), note="np.load(mmap_mode='r')[idx], allocating"))
    dst3 = np.empty((len(idx[0]),) + mm.shape[1:], dtype=mm.dtype)
    out.append(row(dataset, "bound", "numpy mmap take(out=)",
                   time_batches(ix, batch_bytes, args.warmup, args.batches, args.reps,
                                lambda b: np.take(mm, b, axis=0, out=dst3)),
                   len(mm), note="np.take(mmap, idx, axis=0, out=preallocated)"))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--append-reps", type=int, default=5)
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--dict-subset", type=int, default=2000)
    ap.add_argument("--datasets", default="float,image")
    ap.add_argument("--groups", default="bounds,raw,zstd,zstd_dict")
    ap.add_argument("--round", type=int, default=0)
    args = ap.parse_args()
    work = args.work or args.data / "reference-stores"
    work.mkdir(parents=True, exist_ok=True)
    idx = list(np.load(args.data / "indices.npy"))
    idx = [np.ascontiguousarray(b, dtype=np.uint64) for b in idx]
    print(f"reference loaderx {loaderx.__version__}: batch {len(idx[0])}, {args.reps} x {args.batches} "
          f"batches after {args.warmup} warm-up, append median of {args.append_reps}; {args.groups}", flush=True)
    groups = args.groups.split(",")
    results = []
    load_start = load_average()
    for dataset in args.datasets.split(","):
        npy_path = args.data / f"{dataset}.npy"
        arr = np.load(npy_path, mmap_mode="r")
        n, itemsize = len(arr), arr[0].nbytes
        arr = np.ascontiguousarray(arr)  # in memory, as the crate's bench holds it
        print(f"== {dataset}: {n} records of {itemsize} B", flush=True)
        if "bounds" in groups:
            results += bench_bounds(args, idx, dataset, npy_path)
        for codec, records in [("raw", n), ("zstd", n), ("zstd_dict", min(n, args.dict_subset))]:
            if codec not in groups:
                continue
            a, path = bench_append(dataset, arr, work, codec, records, args.append_reps)
            print(f"   append {codec:<10} {a['mib_s']:8.0f} MiB/s  ratio {a['ratio']:.3f}", flush=True)
            g = bench_gather(args, idx, dataset, path, a, itemsize)
            print(f"   gather {codec:<10} {g['mib_s']:8.0f} MiB/s", flush=True)
            results += [a, g]
            shutil.rmtree(path)
        del arr
    doc = {
        "side": "reference",
        "version": loaderx.__version__,
        "machine": {"nproc": os.cpu_count(), "cpu": cpu_model(),
                    "load_start": load_start, "load_end": load_average()},
        "config": {"batch": len(idx[0]), "batches": args.batches, "reps": args.reps,
                   "warmup": args.warmup, "append_reps": args.append_reps, "round": args.round},
        "results": results,
    }
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"results: {args.json}")


if __name__ == "__main__":
    main()
