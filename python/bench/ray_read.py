"""Ray Data against our own paths and against Ray's own ceilings, on one
table, side by side in alternating rounds, each side in a fresh process
(docs/benchmarks.md, "Ray Data"; docs/ray.md).

Reads, each consuming every row in batches of `--batch` rows, or in Ray's
blocks as they come (`batch_size=None`):
  ray            loaderx_rs.ray.read(table).iter_batches(batch_format="pyarrow")
  ray-blocks     the same, its blocks whole
  ceiling        Ray's ceiling: read tasks that only take the blocks ours
                 make from Ray's object store, where they were put before
                 the clock starts (`ceiling_source`), iterated the same
                 way: what any read through Ray of these rows costs past
                 making its blocks
  ceiling-blocks the same, its blocks whole
  loader         DataLoader(open_table(table), mode=SEQUENTIAL, num_workers=N)
  parquet        ray.data.read_parquet(the same rows exported to Parquet files)
  parquet-blocks the same, its blocks whole
Writes, of the same rows in Ray's object store
(ray.data.from_arrow(t cut in 2 x CPUs slices).materialize(), before the
clock starts: one block per slice, no copy through a repartition, whose
intermediate blocks made the object store spill at 1.6M rows) or, for the import, in memory as one Arrow table:
  w-ray          loaderx_rs.ray.write(blocks, dest)
  w-ray-0cpu     the same, its tasks asking no CPU (ray_remote_args
                 {"num_cpus": 0}) and at most one per CPU (concurrency):
                 Ray Data then starts them side by side from the start
  w-null         Ray's ceiling: a Datasink whose tasks take each block as
                 Arrow and write nothing
  w-import       write_table(dest, arrow_table), one process, no Ray
  w-parquet      blocks.write_parquet(dir)
  w-cli          `loaderx import PARQUET_DIR DEST`: the CLI's import of the
                 same rows from their Parquet files, one process, no Ray
                 (the decoding included; `--cli`, default the workspace's
                 target/release/loaderx)
  w-ray-parquet  lray.write(ray.data.read_parquet(PARQUET_DIR), dest): the
                 route from the same files through Ray, to set beside w-cli

Each measurement runs in a process of its own, which connects to Ray
(`--address`, a cluster from `ray start`; else a local instance of
`--cpus`), prepares its side and then times it alone. Before the clock,
the write sides through Ray also start the job's worker processes (a tiny
Ray Data job), as the stages ahead of a write in a pipeline start them;
`--cold-workers` leaves them to the write. The sides alternate,
their order rotating by round; the figures are medians over the rounds.
The sides that work in their own process, not in Ray's workers (w-import,
w-cli, loader), run at the niceness Ray gives its workers (`--nice`, Ray's
`worker_niceness`, 15): load from outside the run then weighs on every
side alike. At niceness 0 against workers at 15, a loaded machine starves
the Ray sides alone (docs/benchmarks.md, "Ray Data").

    python python/bench/ray_read.py --rows 400000 --rounds 5
    python python/bench/ray_read.py --address 127.0.0.1:PORT   # a cluster from `ray start`
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

READS = ["ray", "ray-blocks", "ceiling", "ceiling-blocks", "loader", "parquet", "parquet-blocks"]
WRITES = ["w-ray", "w-ray-0cpu", "w-null", "w-import", "w-parquet", "w-cli", "w-ray-parquet"]


def make_table(rows, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 64)).astype(np.float32)
    lengths = rng.integers(64, 448, size=rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(rng.integers(0, 50000, offsets[-1],
                                                                                       dtype=np.int32)))
    return pa.table({"label": pa.array(np.arange(rows, dtype=np.int64)),
                     "x": pa.FixedShapeTensorArray.from_numpy_ndarray(x), "tokens": tokens})


def consume(ds, batch):
    return sum(b.num_rows for b in ds.iter_batches(batch_size=batch, batch_format="pyarrow"))


def ceiling_source(table):
    """Ray's ceiling for a read of `table`: a Datasource whose read tasks
    are ours (the same ranges and blocks) but whose blocks were made, and
    put into Ray's object store, before the clock starts: each task only
    takes its blocks from there. What is left is what any read through
    Ray of these rows costs past making its blocks: worker processes,
    scheduling, storing each task's output and cutting it into batches."""
    import ray
    import loaderx_rs.ray as lray
    from ray.data.datasource import Datasource, ReadTask

    ours = lray.LoaderxDatasource(table).get_read_tasks(ray.data.DataContext.get_current().read_op_min_num_blocks)
    made = [(ray.put(list(task.read_fn())), task.metadata) for task in ours]

    class Ceiling(Datasource):
        def estimate_inmemory_data_size(self):
            return sum(meta.size_bytes for _, meta in made)

        def get_read_tasks(self, parallelism, per_task_row_limit=None, data_context=None):
            return [ReadTask(lambda ref=ref: ray.get(ref), meta) for ref, meta in made]

    return Ceiling()


def prepare(side, args, paths):
    """The side's work as a function of no arguments, everything before it
    done: Ray connected, a ceiling's blocks or a write's input in Ray's
    object store."""
    import ray
    import loaderx_rs
    import loaderx_rs.ray as lray
    from ray.data import Datasink

    ray.data.DataContext.get_current().enable_progress_bars = False
    table, pq_dir = paths["table"], paths["parquet"]
    batch = None if side.endswith("-blocks") else args.batch
    if side in ("ray", "ray-blocks"):
        return lambda: consume(lray.read(table), batch)
    if side in ("ceiling", "ceiling-blocks"):
        source = ceiling_source(table)
        return lambda: consume(ray.data.read_datasource(source), batch)
    if side == "loader":
        def read_loader():
            with loaderx_rs.DataLoader(loaderx_rs.open_table(table), batch_size=args.batch,
                                       num_workers=args.workers, mode=loaderx_rs.SEQUENTIAL) as loader:
                for _ in range(args.rows // args.batch):
                    next(loader)
            return args.rows // args.batch * args.batch
        return read_loader
    if side in ("parquet", "parquet-blocks"):
        return lambda: consume(ray.data.read_parquet(pq_dir), batch)
    dest = os.path.join(args.dir, "out-" + side)
    shutil.rmtree(dest, ignore_errors=True)
    if side == "w-cli":
        return lambda: subprocess.run([args.cli, "import", pq_dir, dest, "--json"], check=True,
                                      stdout=subprocess.DEVNULL)
    if side == "w-ray-parquet":
        return lambda: lray.write(ray.data.read_parquet(pq_dir), dest)
    data = pq.read_table(pq_dir)
    if side == "w-import":
        return lambda: loaderx_rs.write_table(dest, data)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    blocks = ray.data.from_arrow(slices(data, cpus * 2)).materialize()

    class NullSink(Datasink):
        def write(self, blocks_in, ctx):
            from ray.data.block import BlockAccessor
            return sum(BlockAccessor.for_block(b).to_arrow().num_rows for b in blocks_in)

    if side == "w-ray":
        return lambda: lray.write(blocks, dest)
    if side == "w-ray-0cpu":
        return lambda: lray.write(blocks, dest, ray_remote_args={"num_cpus": 0}, concurrency=cpus)
    if side == "w-null":
        return lambda: blocks.write_datasink(NullSink())
    return lambda: blocks.write_parquet(dest)


def slices(data, n):
    """`data` cut in `n` slices of about equal rows, each one chunk (as a
    block that a read task makes), views of one copy's buffers."""
    data, part = data.combine_chunks(), data.num_rows // n
    return [data.slice(k * part, part if k < n - 1 else data.num_rows - k * part) for k in range(n)]


def start_workers(ray):
    """Starts the job's worker processes before the clock, as the stages
    ahead of a write in a pipeline start them: a Ray Data job of one tiny
    task per CPU, then a pause for the leases to return."""
    cpus = int(ray.cluster_resources().get("CPU", 1))
    ray.data.range(cpus, override_num_blocks=cpus).map_batches(lambda b: b).materialize()
    time.sleep(2)


def run_side(side, args):
    """One measurement in this process: prints its seconds as JSON."""
    import ray

    if args.address:
        ray.init(address=args.address, logging_level="ERROR", log_to_driver=False)
    else:
        ray.init(num_cpus=args.cpus, logging_level="ERROR", log_to_driver=False, include_dashboard=False)
    paths = {"table": os.path.join(args.dir, "table"), "parquet": os.path.join(args.dir, "parquet")}
    work = prepare(side, args, paths)
    if side in ("w-ray", "w-ray-0cpu", "w-null", "w-parquet", "w-ray-parquet") and not args.cold_workers:
        start_workers(ray)
    if side in ("w-import", "w-cli", "loader"):
        os.nice(max(0, args.nice - os.nice(0)))
    t = time.perf_counter()
    work()
    seconds = time.perf_counter() - t
    nodes = sum(1 for n in ray.nodes() if n["Alive"])
    ray.shutdown()
    print(json.dumps({"side": side, "seconds": seconds, "nodes": nodes}))


def make_inputs(args):
    import loaderx_rs

    shutil.rmtree(args.dir, ignore_errors=True)
    os.makedirs(os.path.join(args.dir, "parquet"))
    data = make_table(args.rows)
    loaderx_rs.write_table(os.path.join(args.dir, "table"), data)
    part = args.rows // 8
    for k in range(8):
        pq.write_table(data.slice(k * part, part if k < 7 else args.rows - 7 * part),
                       os.path.join(args.dir, "parquet", f"{k}.parquet"), compression="none")
    return sum(c.nbytes for c in data.columns) - (args.rows + 1) * 8  # less the list offsets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=400_000)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sides", default=",".join(READS + WRITES))
    ap.add_argument("--dir", default="/tmp/loaderx-ray-bench")
    ap.add_argument("--address", help="a running Ray cluster's address (else a local instance of --cpus)")
    ap.add_argument("--nice", type=int, default=15,
                    help="the niceness of the sides that run outside Ray's workers (Ray's worker_niceness: 15)")
    ap.add_argument("--cli", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "target",
                                                  "release", "loaderx"),
                    help="the loaderx CLI for w-cli (cargo build --release -p loaderx-cli)")
    ap.add_argument("--cold-workers", action="store_true",
                    help="do not start the write sides' Ray workers before the clock (each write then pays them)")
    ap.add_argument("--side", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        return run_side(args.side, args)
    value_bytes = make_inputs(args)
    load = os.getloadavg()[0]
    sides = args.sides.split(",")
    times, nodes = {s: [] for s in sides}, set()
    child = sys.argv[1:]
    for r in range(args.rounds):
        for k in range(len(sides)):
            side = sides[(k + r) % len(sides)]
            settle(args.dir, side)
            out = subprocess.run([sys.executable, __file__, *child, "--side", side], check=True,
                                 capture_output=True, text=True).stdout
            got = json.loads(out.strip().splitlines()[-1])
            times[side].append(got["seconds"])
            nodes.add(got["nodes"])
    report(args, value_bytes, times, nodes, (load, os.getloadavg()[0]))


def settle(root, side):
    """Before a side: its last output removed and the filesystem's dirty
    pages written back (`sync -f`, syncfs: no page is dropped), so that no
    side shares the device's writeback with the side before it (a write
    side leaves up to 4 GB behind at 3.2M rows; write_parquet's is not
    synced when it returns)."""
    shutil.rmtree(os.path.join(root, "out-" + side), ignore_errors=True)
    subprocess.run(["sync", "-f", root], check=True)


def report(args, value_bytes, times, nodes, load):
    mb = value_bytes / 1e6
    med = {s: statistics.median(v) for s, v in times.items()}
    print(f"{args.rows} rows, {mb:.0f} MB of values, batch {args.batch}, loader workers {args.workers}, "
          f"{args.rounds} rounds, Ray nodes {sorted(nodes)}, niceness outside Ray {args.nice}, "
          f"load average {load[0]:.1f} before and {load[1]:.1f} after; medians")
    print("| side | seconds | MB/s | range (s) |\n|---|---|---|---|")
    for s, v in times.items():
        print(f"| {s} | {med[s]:.3f} | {mb / med[s]:,.0f} | {min(v):.3f}-{max(v):.3f} |")
    ratios = [("ray / loader", "loader", "ray"), ("ray / ceiling", "ceiling", "ray"),
              ("ray-blocks / ceiling-blocks", "ceiling-blocks", "ray-blocks"),
              ("ceiling / loader", "loader", "ceiling"), ("ray / parquet", "parquet", "ray"),
              ("w-ray / w-import", "w-import", "w-ray"), ("w-null / w-import", "w-import", "w-null"),
              ("w-ray / w-parquet", "w-parquet", "w-ray"), ("w-ray / w-cli", "w-cli", "w-ray"),
              ("w-ray-parquet / w-cli", "w-cli", "w-ray-parquet"),
              ("w-ray-0cpu / w-import", "w-import", "w-ray-0cpu"), ("w-ray-0cpu / w-ray", "w-ray", "w-ray-0cpu")]
    print("\n| throughput ratio | median of per-round ratios (range) |\n|---|---|")
    for name, num, den in ratios:
        if num in times and den in times:
            # Throughput a / b = time b / time a, round by round.
            r = [tb / ta for ta, tb in zip(times[den], times[num])]
            print(f"| {name} | {statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f}) |")


if __name__ == "__main__":
    main()
