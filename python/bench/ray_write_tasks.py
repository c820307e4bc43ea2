"""Where a write through Ray Data spends its time (docs/benchmarks.md,
"Ray Data"): each write task's rows, seconds and worker process, printed
by the task, and the same staged writes in one process without Ray.

Reads the Parquet files `ray_read.py` exported (`--dir`, its default), so
run that first:

    python python/bench/ray_write_tasks.py --dir /tmp/loaderx-ray-bench --blocks 4
"""

import argparse
import os
import shutil
import time

import pyarrow.parquet as pq
import ray
from ray.data.block import BlockAccessor

import loaderx_rs
import loaderx_rs.ray as lray


class TimedSink(lray.Sink):
    """`lray.Sink` whose tasks print their rows, seconds and process id."""

    def write(self, blocks, ctx):
        started, rows = time.perf_counter(), 0
        path = os.path.join(self.staging, f"{ctx.task_idx:08d}-timed")
        for block in blocks:
            table = lray._to_storable(BlockAccessor.for_block(block).to_arrow())
            loaderx_rs.write_table(path, table, mode="append")
            rows += table.num_rows
        print(f"task {ctx.task_idx}: {rows} rows, {time.perf_counter() - started:.3f} s, pid {os.getpid()}",
              flush=True)
        return {"path": path, "rows": rows, "task": ctx.task_idx}


def show_budget():
    """Prints, each time it changes, what Ray Data's resource allocator
    tells the write operator: may it start a task, its budget, its active
    tasks and the execution's global limits (Ray 2.60 internals; a probe,
    not an API)."""
    from ray.data._internal.execution import resource_manager as rm

    allocator = rm.ReservationOpResourceAllocator
    asked = allocator.can_submit_new_task
    last = [None]

    def can_submit_new_task(self, op):
        can = asked(self, op)
        if "Write" in str(op):
            now = (can, str(self.get_budget(op)), op.num_active_tasks(),
                   str(self._resource_manager.get_global_limits()))
            if now != last[0]:
                last[0] = now
                print(f"write operator: may start a task {now[0]}, budget {now[1]}, active {now[2]}, "
                      f"limits {now[3]}", flush=True)
        return can

    allocator.can_submit_new_task = can_submit_new_task


def fresh(path):
    shutil.rmtree(path, ignore_errors=True)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/loaderx-ray-bench")
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--no-reservation", action="store_true",
                    help="DataContext.op_resource_reservation_enabled = False: write tasks two at a time")
    ap.add_argument("--task-cpus", type=float, default=None,
                    help="ray_remote_args num_cpus of each write task (Ray's default: 1)")
    ap.add_argument("--concurrency", type=int, default=None, help="write_datasink's concurrency")
    ap.add_argument("--show-budget", action="store_true",
                    help="print what Ray Data's resource allocator grants the write operator")
    args = ap.parse_args()
    if args.show_budget:
        show_budget()
    remote_args = {"num_cpus": args.task_cpus} if args.task_cpus is not None else None
    data = pq.read_table(os.path.join(args.dir, "parquet"))
    ray.init(num_cpus=args.cpus, logging_level="ERROR", include_dashboard=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    if args.no_reservation:
        ray.data.DataContext.get_current().op_resource_reservation_enabled = False
    part = data.num_rows // args.blocks
    blocks = ray.data.from_arrow([data.slice(k * part, part if k < args.blocks - 1 else data.num_rows - k * part)
                                  for k in range(args.blocks)]).materialize()
    for k in range(2):
        t = time.perf_counter()
        blocks.write_datasink(TimedSink(fresh(os.path.join(args.dir, f"timed-{k}"))),
                              ray_remote_args=remote_args, concurrency=args.concurrency)
        print(f"write through Ray {k}: {time.perf_counter() - t:.3f} s", flush=True)
    ray.shutdown()
    # At the niceness of Ray's workers (15), so that outside load weighs alike.
    os.nice(max(0, 15 - os.nice(0)))
    part = data.num_rows // args.blocks
    t = time.perf_counter()
    loaderx_rs.write_table(fresh(os.path.join(args.dir, "whole")), data)
    whole = time.perf_counter() - t
    t = time.perf_counter()
    for k in range(args.blocks):
        rows = data.slice(k * part, part if k < args.blocks - 1 else data.num_rows - k * part)
        loaderx_rs.write_table(fresh(os.path.join(args.dir, f"part-{k}")), rows, mode="append")
    print(f"one process: the whole table {whole:.3f} s, {args.blocks} parts one after another "
          f"{time.perf_counter() - t:.3f} s")


if __name__ == "__main__":
    main()
