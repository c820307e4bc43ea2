"""The loader table's Grain row: Grain's DataLoader over an ArrayRecord file,
on the loader workload of reference_loader.py and benches/loader.rs.

    python grain_loader.py --data DIR --work DIR --json OUT
        [--batches 200] [--warmup 20] [--reps 3] [--workers 4] [--batch 256]

DIR/float.npy (make_data.py: 20,000 x 3,072 float32, mildly compressible)
and 20,000 int64 labels (np.arange) go into one ArrayRecord file, a record
per sample (the 12,288 data bytes then the 8 label bytes), `group_size:1`
with ArrayRecord's default compression (zstd level 3). Then
grain.DataLoader(ArrayRecordDataSource, IndexSampler(shuffle, endless,
seed 42), [parse into {'data': (3072,) float32, 'label': int64},
Batch(256)], worker_count=4): --warmup batches first, then --reps timed runs
of --batches batches; batches/s of the median run, and CPU time per batch of
this process and its worker processes (psutil, which Grain installs).
Grain's workers are processes, so a batch crosses a process boundary.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np

MIB = float(1 << 20)


def cpu_seconds():
    import psutil
    p = psutil.Process()
    total = sum(p.cpu_times()[:2])
    for c in p.children(recursive=True):
        try:
            total += sum(c.cpu_times()[:2])
        except psutil.Error:
            pass
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args()

    import grain
    from array_record.python import array_record_module as ar

    floats = np.load(args.data / "float.npy", mmap_mode="r")
    n, floats_per = floats.shape[0], int(np.prod(floats.shape[1:]))
    args.work.mkdir(parents=True, exist_ok=True)
    path = args.work / "float.array_record"
    if not path.is_file():
        start = time.perf_counter()
        w = ar.ArrayRecordWriter(str(path), "group_size:1")
        for i in range(n):
            w.write(np.ascontiguousarray(floats[i]).tobytes() + np.int64(i).tobytes())
        w.close()
        print(f"write   arrayrecord {time.perf_counter() - start:.1f} s")

    class Parse(grain.transforms.Map):
        def map(self, record):
            return {"data": np.frombuffer(record, dtype=np.float32, count=floats_per),
                    "label": np.frombuffer(record, dtype=np.int64, offset=floats_per * 4)[0]}

    source = grain.sources.ArrayRecordDataSource([str(path)])
    sampler = grain.samplers.IndexSampler(num_records=len(source), shard_options=grain.sharding.NoSharding(),
                                          shuffle=True, num_epochs=None, seed=42)
    loader = grain.DataLoader(data_source=source, sampler=sampler,
                              operations=[Parse(), grain.transforms.Batch(batch_size=args.batch,
                                                                           drop_remainder=True)],
                              worker_count=args.workers)
    it = iter(loader)
    batch_bytes = 0
    for _ in range(args.warmup):
        b = next(it)
        batch_bytes = b["data"].nbytes + b["label"].nbytes
    assert b["data"].shape == (args.batch, floats_per), b["data"].shape
    runs, cpu = [], []
    for _ in range(args.reps):
        start, cpu_start = time.perf_counter(), cpu_seconds()
        for _ in range(args.batches):
            b = next(it)
            del b
        runs.append(args.batches / (time.perf_counter() - start))
        cpu.append((cpu_seconds() - cpu_start) / args.batches * 1e3)
    median = sorted(runs)[len(runs) // 2]
    cpu_ms = sorted(cpu)[len(cpu) // 2]
    print(f"loader  grain (arrayrecord) workers {args.workers} {median:>8.1f} batches/s  "
          f"{1e3 / median:>7.3f} ms/batch  cpu {cpu_ms:>6.3f} ms/batch  {median * batch_bytes / MIB:>8.0f} MiB/s  "
          f"(runs {[round(r, 1) for r in runs]})", flush=True)
    del it, loader
    if args.json:
        args.json.write_text(json.dumps({"side": "grain", "version": getattr(grain, "__version__", "?"),
                                         "loader": [{"codec": "arrayrecord (zstd)", "workers": args.workers,
                                                     "batches_s": median, "mib_s": median * batch_bytes / MIB,
                                                     "cpu_ms": cpu_ms, "runs": runs}]}) + "\n")


if __name__ == "__main__":
    main()
