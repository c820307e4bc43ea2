"""The tuned loader beside tf.data's AUTOTUNE, on one Python transform
whose cost changes during the run (a peer figure, not a test).

    python python/bench/tune_peer.py [--rounds 3] [--steps 900]

Each side runs in a fresh process, the order rotating between rounds:

- `loaderx auto`: DataLoader(num_workers="auto", prefetch_size="auto"),
  the transform as its `transform=`;
- `loaderx 1` / `loaderx 2`: fixed workers;
- `tf.data AUTOTUNE`: from_tensor_slices, batch, map(py_function,
  num_parallel_calls=AUTOTUNE), prefetch(AUTOTUNE);
- `tf.data 1` / `tf.data 2`: num_parallel_calls fixed.

The data: 4,096 records of 4 KiB (float32), batches of 64, in order. The
transform hashes the batch's bytes (hashlib releases the GIL, so threads
can run it in parallel) 2 times a batch for steps 0 to 299, 12 times for
300 to 599 and once for 600 to 899; the consumer sleeps 500 us a batch.
Each side prints its time and peak RSS. tf.data runs where
`tensorflow-cpu` imports; the loaderx sides need only the binding.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

RECORDS, WIDTH, BATCH = 4096, 1024, 64


def repeats(step):
    return 2 if step < 300 else 12 if step < 600 else 1


def burn(step, array):
    data = array.tobytes()
    for _ in range(repeats(step)):
        hashlib.sha256(data).digest()


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def run_loaderx(side, data_dir, steps):
    from loaderx_rs import DataLoader, Dataset

    workers = "auto" if side == "auto" else int(side)
    prefetch = "auto" if side == "auto" else 4

    def transform(batch):
        burn(batch.step, batch["x"])
        return batch

    loader = DataLoader({"x": Dataset(os.path.join(data_dir, "x"))}, num_workers=workers, prefetch_size=prefetch,
                        batch_size=BATCH, mode="sequential", transform=transform)
    start = time.perf_counter()
    with loader:
        for _ in range(steps):
            next(loader)
            time.sleep(0.0005)
    return time.perf_counter() - start


def run_tf(side, data_dir, steps):
    import numpy as np
    import tensorflow as tf

    array = np.load(os.path.join(data_dir, "x.npy"))
    calls = tf.data.AUTOTUNE if side == "auto" else int(side)

    def f(i, x):
        burn(int(i.numpy()), x.numpy())
        return x

    ds = tf.data.Dataset.from_tensor_slices(array).batch(BATCH).repeat().enumerate()
    ds = ds.map(lambda i, x: tf.py_function(f, [i, x], tf.float32), num_parallel_calls=calls, deterministic=True)
    ds = ds.prefetch(tf.data.AUTOTUNE if side == "auto" else 4)
    it = iter(ds)
    start = time.perf_counter()
    for _ in range(steps):
        next(it)
        time.sleep(0.0005)
    return time.perf_counter() - start


def child(kind, side, data_dir, steps):
    run = run_loaderx if kind == "loaderx" else run_tf
    seconds = run(side, data_dir, steps)
    print(json.dumps({"seconds": seconds, "rss_mib": peak_rss_mib()}))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=900)
    p.add_argument("--child", nargs=3, metavar=("KIND", "SIDE", "DIR"))
    a = p.parse_args()
    if a.child:
        return child(*a.child, a.steps)
    import numpy as np
    from loaderx_rs import write_dataset

    sides = [("loaderx", "auto"), ("loaderx", "1"), ("loaderx", "2")]
    try:
        import tensorflow  # noqa: F401

        sides += [("tf", "auto"), ("tf", "1"), ("tf", "2")]
    except ImportError:
        print("tensorflow does not import: the tf.data sides are left out")
    results = {s: [] for s in sides}
    with tempfile.TemporaryDirectory() as d:
        array = np.random.default_rng(0).standard_normal((RECORDS, WIDTH)).astype(np.float32)
        write_dataset(os.path.join(d, "x"), array, codec="raw")
        np.save(os.path.join(d, "x.npy"), array)
        for r in range(a.rounds):
            for k in range(len(sides)):
                kind, side = sides[(k + r) % len(sides)]
                out = subprocess.run([sys.executable, __file__, "--steps", str(a.steps), "--child", kind, side, d],
                                     capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
                if out.returncode != 0:
                    sys.exit(f"{kind} {side} failed:\n{out.stderr[-3000:]}")
                results[(kind, side)].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{'side':>20} {'median s':>9} {'peak RSS MiB':>13}")
    for (kind, side), runs in results.items():
        seconds = sorted(r["seconds"] for r in runs)[len(runs) // 2]
        rss = max(r["rss_mib"] for r in runs)
        name = f"{'loaderx' if kind == 'loaderx' else 'tf.data'} {'AUTOTUNE' if kind == 'tf' and side == 'auto' else side}"
        print(f"{name:>20} {seconds:9.3f} {rss:13.0f}")


if __name__ == "__main__":
    main()
