"""Compaction after deletes, this crate beside the reference package
(loaderx 0.7.3), on identical copies of one store: bytes written per byte
reclaimed, time, and the space left unreclaimed.

    python python/bench/compact.py [--dir DIR] [--records 40000]
        [--fractions 0.0001,0.01,0.3] [--rounds 2]

Two stores are written once under DIR (default target/compact-bench): a
fixed one (raw records of 12,288 bytes) and a variable one (raw records of
1 to 24 KiB). For each deleted fraction, the records are deleted (at random,
swap-with-last, the same indices for both sides) from a copy of the store;
each side then compacts its own copy of that state in a child process,
which reports the bytes it wrote (`wchar` of /proc/self/io: the bytes
passed to write calls, the issue's measure; table updates through a
mapping are not in it, for either side) and the bytes of the pages it
dirtied (`write_bytes`: by a write or through a mapping, whole page-cache
folios, which may be larger than 4 KiB; each copy is made durable first,
so that its pages start clean) and the wall
time of `compact()` plus an `fsync` of every file (the reference syncs
nothing itself). Each compacted copy must pass `verify()`. The sides alternate within each of
`--rounds` rounds; the median round is printed. Bytes reclaimed are chunk
bytes before minus after (`stats()`); left unreclaimed is `reclaimable`
after. This crate's `compact()` is the fill (the default); `--repack`
runs a third side, this crate's `compact(repack=True)`.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

MIB = float(1 << 20)


def io_counters():
    """`wchar` (bytes passed to write calls) and `write_bytes` (bytes of the
    pages this process dirtied, by a write or through a mapping) of
    /proc/self/io."""
    fields = dict(line.split(":") for line in Path("/proc/self/io").read_text().splitlines())
    return int(fields["wchar"]), int(fields["write_bytes"])


def child(side, store):
    """Compacts `store` as `side` and prints what it cost (one JSON line)."""
    if side == "reference":
        import loaderx as mod
    else:
        import loaderx_rs as mod
    zr = mod.Zrecord(store)
    before = io_counters()
    t0 = time.perf_counter()
    if side == "repack":
        zr.compact(repack=True)
    else:
        zr.compact()
    del zr
    for f in Path(store).iterdir():
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    seconds = time.perf_counter() - t0
    after = io_counters()
    print(json.dumps({"written": after[0] - before[0], "dirtied": after[1] - before[1], "seconds": seconds}))


def write_store(path, sizes, seed):
    import loaderx_rs as ours

    if (path / "meta.zr").exists() and len(ours.Zrecord(str(path), read_only=True)) == len(sizes):
        return
    shutil.rmtree(path, ignore_errors=True)
    zr = ours.Zrecord(str(path), codec="raw")
    rng = np.random.default_rng(seed)
    step = 2000
    for first in range(0, len(sizes), step):
        lens = np.array(sizes[first : first + step], dtype=np.uint32)
        data = rng.integers(0, 256, size=int(lens.sum()), dtype=np.uint8)
        offsets = np.concatenate([[0], np.cumsum(lens[:-1])]).astype(np.uint64)
        zr.append_var(data, offsets, lens)
    zr.sync()


def copy_store(src, dst):
    """Copies a store (keeping `meta.zr` sparse) and makes the copy durable,
    so that its pages are clean: a write to a page that is still dirty is
    not counted again."""
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    for f in src.iterdir():
        subprocess.run(["cp", "--sparse=always", str(f), str(dst / f.name)], check=True)
        fd = os.open(dst / f.name, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def stats(path):
    import loaderx_rs as ours

    return ours.Zrecord(str(path), read_only=True).stats()


def ours_verify(path):
    import loaderx_rs as ours

    return ours.Zrecord(str(path), read_only=True).verify()["ok"]


def measure(side, base, work):
    copy_store(base, work)
    before = stats(work)
    out = subprocess.run([sys.executable, __file__, "--child", side, str(work)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{side}: {out.stderr}")
    cost = json.loads(out.stdout.strip().splitlines()[-1])
    after = stats(work)
    if not ours_verify(work):
        raise SystemExit(f"{side}: the compacted store does not verify")
    reclaimed = before["chunk_bytes"] - after["chunk_bytes"]
    return {
        "written_per_reclaimed": cost["written"] / max(reclaimed, 1),
        "dirtied_per_reclaimed": cost["dirtied"] / max(reclaimed, 1),
        "written_mib": cost["written"] / MIB,
        "reclaimed_mib": reclaimed / MIB,
        "left_mib": after["reclaimable"] / MIB,
        "seconds": cost["seconds"],
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--child", nargs=2)
    p.add_argument("--dir", default="target/compact-bench")
    p.add_argument("--records", type=int, default=40000)
    p.add_argument("--fractions", default="0.0001,0.01,0.3")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repack", action="store_true")
    args = p.parse_args()
    if args.child:
        return child(*args.child)
    import loaderx_rs as ours

    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    layouts = {
        "fixed 12 KiB": [12288] * args.records,
        "variable 1-24 KiB": list(rng.integers(1024, 24577, size=args.records)),
    }
    sides = ["loaderx_rs", "reference"] + (["repack"] if args.repack else [])
    for name, sizes in layouts.items():
        source = root / name.split()[0]
        write_store(source, sizes, 1)
        for fraction in [float(f) for f in args.fractions.split(",")]:
            holed = root / f"{name.split()[0]}-holed"
            copy_store(source, holed)
            n = len(sizes)
            doomed = rng.choice(n, size=max(1, round(n * fraction)), replace=False)
            ours.Zrecord(str(holed)).delete(doomed)
            runs = {side: [] for side in sides}
            for r in range(args.rounds):
                for side in sides[r % len(sides) :] + sides[: r % len(sides)]:
                    runs[side].append(measure(side, holed, root / f"work-{side}"))
            for side in sides:
                rs = runs[side]
                med = {k: statistics.median(x[k] for x in rs) for k in rs[0]}
                print(
                    f"{name:<18} {fraction * 100:>6.2f}% deleted  {side:<11} "
                    f"written/reclaimed {med['written_per_reclaimed']:>9.2f}x  "
                    f"dirtied/reclaimed {med['dirtied_per_reclaimed']:>9.2f}x  "
                    f"written {med['written_mib']:>8.1f} MiB  reclaimed {med['reclaimed_mib']:>7.1f} MiB  "
                    f"left {med['left_mib']:>6.1f} MiB  {med['seconds']:>7.3f} s",
                    flush=True,
                )
    for side in sides:
        shutil.rmtree(root / f"work-{side}", ignore_errors=True)


if __name__ == "__main__":
    main()
