"""What one `write_table` of a Ray write task's block costs its process
(docs/benchmarks.md, "Ray Data"): wall, user and system seconds and minor
page faults per write of `--rows` rows of the Parquet data `ray_read.py`
exported, each into a new table, medians of `--writes`.

    python python/bench/ray_read.py --rows 400000 --sides w-import --rounds 1   # exports the data
    python python/bench/write_faults.py --rows 100000 --writes 7
"""

import argparse
import os
import resource
import shutil
import statistics
import time

import pyarrow.parquet as pq

import loaderx_rs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/loaderx-ray-bench")
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--writes", type=int, default=7)
    args = ap.parse_args()
    data = pq.read_table(os.path.join(args.dir, "parquet")).slice(0, args.rows)
    dest = os.path.join(args.dir, "faults")
    samples = []
    for _ in range(args.writes):
        shutil.rmtree(dest, ignore_errors=True)
        before, t = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        loaderx_rs.write_table(dest, data, mode="append")
        wall, after = time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF)
        samples.append((wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime,
                        after.ru_minflt - before.ru_minflt))
    wall, user, system, faults = (statistics.median(s[k] for s in samples) for k in range(4))
    print(f"{data.num_rows} rows, {data.nbytes / 1e6:.0f} MB, {args.writes} writes; medians per write: "
          f"{wall:.3f} s wall, {user:.3f} s user, {system:.3f} s system, {faults:.0f} minor faults")


if __name__ == "__main__":
    main()
