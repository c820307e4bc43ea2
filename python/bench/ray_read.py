"""Ray Data against our own paths, on one table, side by side in one run
(docs/benchmarks.md, "Ray Data"; docs/ray.md).

Reads, each consuming every row in batches of `--batch` rows (and, for
Ray, also in its blocks as they come, `batch_size=None`):
  ray      loaderx_rs.ray.read(table).iter_batches(batch_format="pyarrow")
  direct   the read tasks' body (`_read_range`) in this process, no Ray
  loader   DataLoader(open_table(table), mode=SEQUENTIAL, num_workers=N)
  parquet  ray.data.read_parquet(the same rows exported to Parquet files)
Writes, of the same rows held in memory as one Arrow table:
  ray      loaderx_rs.ray.write(ray.data.from_arrow(...), dest)
  import   write_table(dest, arrow_table), one process
  parquet  ray.data.from_arrow(...).write_parquet(dir)

A local Ray instance of `--cpus` CPUs (ray.init, no cluster). Each figure
is the best of `--repeat` runs, MB/s of column values and rows/s.

    python python/bench/ray_read.py --rows 200000 --dir /tmp/raybench
    python python/bench/ray_read.py --address 127.0.0.1:PORT   # a cluster from `ray start`
"""

import argparse
import os
import shutil
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import ray

import loaderx_rs
import loaderx_rs.ray as lray


def make_table(rows, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 64)).astype(np.float32)
    lengths = rng.integers(64, 448, size=rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(rng.integers(0, 50000, offsets[-1],
                                                                                       dtype=np.int32)))
    return pa.table({"label": pa.array(np.arange(rows, dtype=np.int64)),
                     "x": pa.FixedShapeTensorArray.from_numpy_ndarray(x), "tokens": tokens})


def timed(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def read_ray(path, batch):
    n = 0
    for b in lray.read(path).iter_batches(batch_size=batch, batch_format="pyarrow"):
        n += b.num_rows
    return n


def read_direct(path):
    source = lray.LoaderxDatasource(path)
    rows = source._rows
    return sum(b.num_rows for b in lray._read_range(path, True, source._columns, 0, rows, lray.BLOCK_ROWS))


def read_loader(path, batch, workers, rows):
    with loaderx_rs.DataLoader(loaderx_rs.open_table(path), batch_size=batch, num_workers=workers,
                               mode=loaderx_rs.SEQUENTIAL) as loader:
        for _ in range(rows // batch):
            next(loader)


def read_parquet(path, batch):
    n = 0
    for b in ray.data.read_parquet(path).iter_batches(batch_size=batch, batch_format="pyarrow"):
        n += b.num_rows
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dir", default="/tmp/loaderx-ray-bench")
    ap.add_argument("--address", help="a running Ray cluster's address (else a local instance of --cpus)")
    args = ap.parse_args()
    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(args.dir)
    data = make_table(args.rows)
    value_bytes = sum(c.nbytes for c in data.columns) - (args.rows + 1) * 8  # less the list offsets
    table, pq_dir = os.path.join(args.dir, "table"), os.path.join(args.dir, "parquet")
    loaderx_rs.write_table(table, data)
    os.makedirs(pq_dir)
    for k, part in enumerate(range(0, args.rows, args.rows // 8)):
        pq.write_table(data.slice(part, args.rows // 8), os.path.join(pq_dir, f"{k}.parquet"), compression="none")
    if args.address:
        ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
        args.cpus = int(ray.cluster_resources().get("CPU", 1))
    else:
        ray.init(num_cpus=args.cpus, logging_level="ERROR", log_to_driver=False, include_dashboard=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    results = {}
    assert read_ray(table, args.batch) == args.rows
    results["read: ray (loaderx_rs.ray.read)"] = timed(lambda: read_ray(table, args.batch), args.repeat)
    results["read: ray, its blocks whole (batch_size=None)"] = timed(lambda: read_ray(table, None), args.repeat)
    results["read: one read task's body in the driver, no Ray"] = timed(lambda: read_direct(table), args.repeat)
    results["read: DataLoader"] = timed(lambda: read_loader(table, args.batch, args.workers, args.rows), args.repeat)
    results["read: ray read_parquet"] = timed(lambda: read_parquet(pq_dir, args.batch), args.repeat)
    results["read: ray read_parquet, its blocks whole"] = timed(lambda: read_parquet(pq_dir, None), args.repeat)

    def fresh(name):
        path = os.path.join(args.dir, name)
        shutil.rmtree(path, ignore_errors=True)
        return path

    blocks = ray.data.from_arrow(data).repartition(args.cpus * 2).materialize()
    results["write: ray (loaderx_rs.ray.write)"] = timed(lambda: lray.write(blocks, fresh("w-ray")), args.repeat)
    results["write: write_table, one process"] = timed(lambda: loaderx_rs.write_table(fresh("w-import"), data),
                                                       args.repeat)
    results["write: ray write_parquet"] = timed(lambda: blocks.write_parquet(fresh("w-pq")), args.repeat)
    mb = value_bytes / 1e6
    nodes = sum(1 for n in ray.nodes() if n["Alive"]) if ray.is_initialized() else "?"
    print(f"{args.rows} rows, {mb:.0f} MB of values, batch {args.batch}, {args.cpus} Ray CPUs, "
          f"{args.workers} loader workers, best of {args.repeat}, nodes {nodes}")
    print(f"| path | seconds | MB/s | rows/s |\n|---|---|---|---|")
    for name, s in results.items():
        print(f"| {name} | {s:.2f} | {mb / s:.0f} | {args.rows / s:,.0f} |")
    ray.shutdown()


if __name__ == "__main__":
    main()
