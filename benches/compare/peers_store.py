"""The store benchmark on other stores, through their Python APIs, with the
method of benches/store.rs and reference_store.py on the same data.

    python peers_store.py --data DIR --json OUT [--work DIR] [--reps 3]
        [--append-reps 1] [--batches 100] [--warmup 20] [--budget 4] [--datasets float,image]
        [--peers npy-mmap,hdf5,hdf5-gzip,lmdb,lmdb-zlib,arrayrecord] [--round N]

Every store holds the dataset's records (make_data.py: 20,000 x 12,288 B) one
per key or row, and is written in blocks of 64 MiB (the reference's
write_dataset step), then made durable (fsync, or the store's own sync), timed
together; MiB/s of logical bytes. Gather: the indices.npy batches (256 random
indices), replayed in order, each batch copied into one preallocated buffer
(or, where the API allocates its result, as client code writes it), --warmup
batches first, then --reps timed runs of --batches batches (fewer for a
store whose batch takes longer than --budget / --batches seconds: then as
many as fit in --budget, at least 5); the median run.
"ratio" is logical bytes over the bytes the store's files hold.

- npy-mmap: np.save, then np.load(mmap_mode='r')[idx] (numpy fancy indexing,
  allocating; one thread).
- hdf5 / hdf5-gzip (h5py): a (records, record bytes) uint8 dataset,
  contiguous / chunked one record per chunk with gzip level 4 (h5py's
  default); a batch is 256 one-row reads (`dst[j] = ds[i]`), which on this
  data is 1.5-20x faster than h5py's fancy indexing of the sorted distinct
  indices.
- lmdb / lmdb-zlib (py-lmdb): one key per record (big-endian u64), one write
  transaction per block, `env.sync(True)`; values raw / zlib level 6; a batch
  is one read transaction of 256 `get`s, each copied (or inflated) into the
  buffer.
- arrayrecord (array_record): `group_size:1` (one record per chunk, its
  random-access setting) with its default compression, zstd level 3; a batch
  is one `read(indices)` (which reads in parallel) with
  `readahead_buffer_size:0`, each record copied into the buffer.

A peer whose module is missing is skipped with a note in the output and in
the JSON ("skipped").
"""

import argparse
import importlib
import json
import os
import shutil
import time
import zlib
from pathlib import Path

import numpy as np

from reference_store import MIB, cpu_model, load_average, row, time_batches

BLOCK_BYTES = 64 << 20
PEERS = ["npy-mmap", "hdf5", "hdf5-gzip", "lmdb", "lmdb-zlib", "arrayrecord"]
MODULE = {"npy-mmap": "numpy", "hdf5": "h5py", "hdf5-gzip": "h5py", "lmdb": "lmdb", "lmdb-zlib": "lmdb",
          "arrayrecord": "array_record.python.array_record_module"}


def fsync_path(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def du(path):
    """Bytes the files at path hold (their sizes, as the store laid them out)."""
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def blocks(arr):
    step = max(1, BLOCK_BYTES // arr[0].nbytes)
    for lo in range(0, len(arr), step):
        yield lo, np.ascontiguousarray(arr[lo:lo + step]).reshape(min(step, len(arr) - lo), -1)


class NpyMmap:
    def write(self, path, arr):
        path = path.with_suffix(".npy")
        with open(path, "wb") as f:
            np.lib.format.write_array(f, np.ascontiguousarray(arr))
            f.flush()
            os.fsync(f.fileno())
        self.path = path
        return path

    def open(self):
        self.mm = np.load(self.path, mmap_mode="r")

    def gather(self, b, dst):
        return self.mm[b]  # allocating, as client code writes it

    def close(self):
        del self.mm


class Hdf5:
    def __init__(self, gzip):
        import h5py
        self.h5py, self.gzip = h5py, gzip

    def write(self, path, arr):
        path = path.with_suffix(".h5")
        itemsize = arr[0].nbytes
        with self.h5py.File(path, "w") as f:
            kw = {"chunks": (1, itemsize), "compression": "gzip", "compression_opts": 4} if self.gzip else {}
            ds = f.create_dataset("data", shape=(len(arr), itemsize), dtype=np.uint8, **kw)
            for lo, block in blocks(arr):
                ds[lo:lo + len(block)] = block.view(np.uint8)
            f.flush()
        fsync_path(path)
        self.path = path
        return path

    def open(self):
        self.f = self.h5py.File(self.path, "r")
        self.ds = self.f["data"]

    def gather(self, b, dst):
        ds = self.ds
        for j, i in enumerate(b.tolist()):
            dst[j] = ds[i]

    def close(self):
        self.f.close()


class Lmdb:
    def __init__(self, compress):
        import lmdb
        self.lmdb, self.compress = lmdb, compress

    def write(self, path, arr):
        path = path.with_suffix(".lmdb")
        env = self.lmdb.open(str(path), map_size=4 * arr.nbytes + (64 << 20), subdir=True, sync=False,
                             metasync=False)
        for lo, block in blocks(arr):
            with env.begin(write=True) as txn:
                for k, rec in enumerate(block):
                    v = rec.tobytes()
                    if self.compress:
                        v = zlib.compress(v, 6)
                    txn.put((lo + k).to_bytes(8, "big"), v, append=True)
        env.sync(True)
        self.used = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
        env.close()
        self.path = path
        return path

    def open(self):
        self.env = self.lmdb.open(str(self.path), readonly=True, lock=False, subdir=True)
        self.keys = [i.to_bytes(8, "big") for i in range(self.env.stat()["entries"])]

    def gather(self, b, dst):
        keys = self.keys
        with self.env.begin(buffers=True) as txn:
            for j, i in enumerate(b.tolist()):
                v = txn.get(keys[i])
                if self.compress:
                    v = zlib.decompress(v)
                dst[j] = np.frombuffer(v, dtype=np.uint8)

    def close(self):
        self.env.close()


class ArrayRecord:
    def __init__(self):
        from array_record.python import array_record_module as ar
        self.ar = ar

    def write(self, path, arr):
        path = path.with_suffix(".array_record")
        w = self.ar.ArrayRecordWriter(str(path), "group_size:1")
        for _, block in blocks(arr):
            for rec in block:
                w.write(rec.tobytes())
        w.close()
        fsync_path(path)
        self.path = path
        return path

    def open(self):
        self.r = self.ar.ArrayRecordReader(str(self.path), "readahead_buffer_size:0")

    def gather(self, b, dst):
        for j, v in enumerate(self.r.read(b.tolist())):
            dst[j] = np.frombuffer(v, dtype=np.uint8)

    def close(self):
        self.r.close()


def make(peer):
    return {"npy-mmap": NpyMmap, "hdf5": lambda: Hdf5(False), "hdf5-gzip": lambda: Hdf5(True),
            "lmdb": lambda: Lmdb(False), "lmdb-zlib": lambda: Lmdb(True), "arrayrecord": ArrayRecord}[peer]()


def bench_peer(args, idx, dataset, arr, peer, work):
    n, itemsize = len(arr), arr[0].nbytes
    runs, last = [], None
    for rep in range(args.append_reps):
        store = make(peer)
        base = work / f"{dataset}-{peer}-{rep}"
        start = time.perf_counter()
        path = store.write(base, arr)
        runs.append(arr.nbytes / MIB / (time.perf_counter() - start))
        if last is not None:
            shutil.rmtree(last, ignore_errors=True) if last.is_dir() else last.unlink()
        last = path
    held = getattr(store, "used", None) or du(path)
    a = row(dataset, "append", peer, runs, n, arr.nbytes / held, note=f"{held} bytes held")
    a["disk_bytes"] = held
    store.open()
    dst = np.empty((len(idx[0]), itemsize), dtype=np.uint8)
    ix = [b.astype(np.intp) for b in idx]
    start = time.perf_counter()
    for b in ix[:2]:
        store.gather(b, dst)
    per_batch = (time.perf_counter() - start) / 2
    batches = max(5, min(args.batches, int(args.budget / per_batch)))
    warmup = min(args.warmup, batches)
    g = row(dataset, "gather", peer,
            time_batches(ix, dst.nbytes, warmup, batches, args.reps, lambda b: store.gather(b, dst)),
            n, a["ratio"], note=f"{args.reps} runs of {batches} batches")
    g["disk_bytes"] = held
    # The last batch, checked against the source bytes.
    b = ix[(warmup + args.reps * batches - 1) % len(ix)]
    got = store.gather(b, dst)
    got = dst if got is None else got
    assert np.array_equal(np.asarray(got).reshape(len(b), -1).view(np.uint8),
                          arr[b].reshape(len(b), -1).view(np.uint8)), f"{peer}: wrong bytes"
    store.close()
    shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()
    return [a, g]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--append-reps", type=int, default=1)
    ap.add_argument("--batches", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--budget", type=float, default=4.0, help="seconds per timed gather run, at most")
    ap.add_argument("--datasets", default="float,image")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--round", type=int, default=0)
    args = ap.parse_args()
    work = args.work or args.data / "peer-stores"
    work.mkdir(parents=True, exist_ok=True)
    idx = [np.ascontiguousarray(b, dtype=np.uint64) for b in np.load(args.data / "indices.npy")]
    peers, skipped, versions = [], [], {}
    for p in args.peers.split(","):
        mod = MODULE[p]
        try:
            m = importlib.import_module(mod.split(".")[0])
            importlib.import_module(mod)
            versions[p] = getattr(m, "__version__", "?")
            peers.append(p)
        except ImportError as e:
            print(f"   skipped {p}: {mod} is not installed ({e})", flush=True)
            skipped.append({"name": p, "reason": f"{mod} not installed"})
    results = []
    load_start = load_average()
    for dataset in args.datasets.split(","):
        arr = np.ascontiguousarray(np.load(args.data / f"{dataset}.npy"))
        print(f"== peers {dataset}: {len(arr)} records of {arr[0].nbytes} B", flush=True)
        for p in peers:
            a, g = bench_peer(args, idx, dataset, arr, p, work)
            print(f"   {p:<12} append {a['mib_s']:8.0f} MiB/s  gather {g['mib_s']:8.0f} MiB/s  "
                  f"ratio {a['ratio']:.3f}", flush=True)
            results += [a, g]
        del arr
    doc = {
        "side": "peers",
        "versions": versions,
        "skipped": skipped,
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
