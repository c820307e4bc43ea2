"""The loader benchmark on the reference package (loaderx 0.7.3): its
DataLoader, through its Python API, with the method of benches/loader.rs on
the same data.

    python reference_loader.py --data DIR --work DIR --json OUT
        [--batches 1000] [--warmup 100] [--reps 3] [--workers 4] [--batch 256]
        [--codecs zstd,raw]

DIR/float.npy (make_data.py: 20,000 x 3,072 float32, mildly compressible) is
converted with the reference's write_dataset (codec zstd, then raw), plus
20,000 int64 labels (np.arange); then DataLoader({'data': ..., 'label': ...},
num_workers=4, batch_size=256, prefetch_size=4, mode=IID, seed=42):
--warmup batches first, then --reps timed runs of --batches batches, each
batch dropped before the next is taken; batches/s of the median run, and
the process's CPU time per batch (all threads; time.process_time).
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

import loaderx
from loaderx import DataLoader, Dataset, write_dataset

MIB = float(1 << 20)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--batches", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--codecs", default="zstd,raw")
    ap.add_argument("--no-sampler", action="store_true")
    args = ap.parse_args()

    floats = np.load(args.data / "float.npy", mmap_mode="r")
    labels = np.arange(len(floats), dtype=np.int64)
    rows = []
    for codec in args.codecs.split(","):
        base = args.work / f"ref-loader-{codec}"
        data, label = base / "data", base / "label"
        if not (data / "schema.json").is_file():
            start = time.perf_counter()
            write_dataset(data, floats, codec=codec)
            write_dataset(label, labels, codec=codec)
            print(f"write   {codec:<6} {time.perf_counter() - start:.1f} s")
        loader = DataLoader({"data": Dataset(data), "label": Dataset(label)},
                            num_workers=args.workers, batch_size=args.batch,
                            prefetch_size=4, mode=1, seed=42)
        batch_bytes = 0
        for _ in range(args.warmup):
            b = next(loader)
            batch_bytes = b["data"].nbytes + b["label"].nbytes
        runs, cpu = [], []
        for _ in range(args.reps):
            start, cpu_start = time.perf_counter(), time.process_time()
            for _ in range(args.batches):
                b = next(loader)
                del b
            runs.append(args.batches / (time.perf_counter() - start))
            cpu.append((time.process_time() - cpu_start) / args.batches * 1e3)
        cpu_ms = sorted(cpu)[len(cpu) // 2]
        loader.close()
        median = sorted(runs)[len(runs) // 2]
        print(f"loader  {codec:<6} workers {args.workers} (reference) {median:>8.1f} batches/s  "
              f"{1e3 / median:>7.3f} ms/batch  cpu {cpu_ms:>6.3f} ms/batch  {median * batch_bytes / MIB:>8.0f} MiB/s  "
              f"(runs {[round(r) for r in runs]})")
        rows.append({"codec": codec, "workers": args.workers, "batches_s": median,
                     "mib_s": median * batch_bytes / MIB, "cpu_ms": cpu_ms, "runs": runs})
    sampler_rows = [] if args.no_sampler else bench_sampler()
    if args.json:
        args.json.write_text(json.dumps({"side": "reference", "version": loaderx.__version__,
                                         "loader": rows, "sampler": sampler_rows}) + "\n")


def bench_sampler():
    """The reference's Sampler.next() over an index space of 1M, per batch:
    median of 5 runs of at least 0.2 s (as benches/loader.rs)."""
    from loaderx._sampler import Sampler
    rows = []
    for batch in (256, 8192):
        for name, mode in (("sequential", 0), ("iid", 1), ("cyclic", 2)):
            s = Sampler(1 << 20, batch, mode, 42)
            runs = []
            for _ in range(5):
                start, n = time.perf_counter(), 0
                while time.perf_counter() - start < 0.2:
                    for _ in range(64):
                        s.next()
                    n += 64
                runs.append((time.perf_counter() - start) / n)
            us = sorted(runs)[2] * 1e6
            print(f"sampler {name:<10} batch {batch:>5}: {us:>8.2f} us/batch (reference, Python API)")
            rows.append({"mode": name, "batch": batch, "us_per_batch": us})
    return rows


if __name__ == "__main__":
    main()
