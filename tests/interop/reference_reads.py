"""Reads, with the reference package (loaderx 0.7.3), every record of every
store this crate wrote (`cargo run --release --example interop_write -- OUTDIR`)
and compares it with the expected bytes.

Usage: python reference_reads.py OUTDIR

For each OUTDIR/stores/NAME it checks, against OUTDIR/expected/NAME.{bin,lens,stats}:
  * len() and lengths() of every record,
  * gather_var of every record in index order, and again in a shuffled order
    (so a record boundary that is off by some bytes cannot cancel out),
  * gather with a fixed stride when every record has the same nonzero length,
  * stats(): records, live_bytes, chunk_bytes.
Prints `ok NAME ...` or `FAIL NAME: reason` per store and exits 1 if any failed.
"""

import sys
import traceback
from pathlib import Path

import numpy as np

import loaderx
from loaderx import Zrecord

assert loaderx.__version__ == "0.7.3", loaderx.__version__


def gather_var(z, idx, lens):
    lens = lens.astype(np.uint64)
    offsets = np.zeros(len(idx), dtype=np.uint64)
    if len(idx) > 1:
        offsets[1:] = np.cumsum(lens[:-1])
    dst = np.zeros(max(int(lens.sum()), 1), dtype=np.uint8)
    z.gather_var(np.asarray(idx, dtype=np.uint64), dst, offsets)
    return dst[:int(lens.sum())].tobytes()


def check(out, name):
    """Returns a one-line summary; raises AssertionError on a mismatch."""
    exp = out / "expected"
    want = (exp / f"{name}.bin").read_bytes()
    want_lens = np.array([int(l) for l in (exp / f"{name}.lens").read_text().split()], dtype=np.uint32)
    want_stats = dict(kv.split("=") for kv in (exp / f"{name}.stats").read_text().split())
    n = len(want_lens)
    starts = np.zeros(n + 1, dtype=np.int64)
    starts[1:] = np.cumsum(want_lens.astype(np.int64))
    assert starts[-1] == len(want), f"{name}.lens and {name}.bin disagree"
    record = lambda i: want[starts[i]:starts[i + 1]]

    with Zrecord(out / "stores" / name) as z:
        assert len(z) == n, f"len() is {len(z)}, expected {n}"
        idx = np.arange(n, dtype=np.uint64)
        lens = z.lengths(idx)
        bad = np.nonzero(lens != want_lens)[0]
        assert bad.size == 0, f"lengths() differs at {bad[:10].tolist()}: {lens[bad[:10]].tolist()} != {want_lens[bad[:10]].tolist()}"

        got = gather_var(z, idx, lens)
        if got != want:
            first = next(i for i in range(n) if gather_var(z, [i], lens[i:i + 1]) != record(i))
            raise AssertionError(f"gather_var: record {first} differs")

        perm = np.random.default_rng(n).permutation(n)
        got = gather_var(z, perm, lens[perm])
        assert got == b"".join(record(int(i)) for i in perm), "gather_var in shuffled order differs"

        how = "gather_var"
        if n and want_lens.min() == want_lens.max() and want_lens[0] > 0:
            stride = int(want_lens[0])
            dst = np.zeros(n * stride, dtype=np.uint8)
            z.gather(idx[::-1].copy(), dst, stride)
            assert dst.tobytes() == b"".join(record(i) for i in reversed(range(n))), "gather (fixed stride) differs"
            how = "gather_var+gather"

        stats = z.stats()
        for key in ("records", "live_bytes", "chunk_bytes"):
            assert int(stats[key]) == int(want_stats[key]), \
                f"stats()[{key!r}] is {stats[key]}, this crate says {want_stats[key]}"
        zero = int((want_lens == 0).sum())
        extra = f", {zero} zero-length" if zero else ""
        return f"{n} records, {len(want)} bytes{extra}, {how}, stats agree"


def main(out):
    out = Path(out)
    names = sorted(p.name for p in (out / "stores").iterdir() if p.is_dir())
    if not names:
        sys.exit(f"reference_reads: no stores under {out / 'stores'}")
    failed = 0
    for name in names:
        try:
            print(f"ok   {name:<22} {check(out, name)}")
        except Exception as e:  # a mismatch, or the reference refused the store
            failed += 1
            kind = "" if isinstance(e, AssertionError) else f"{type(e).__name__}: "
            print(f"FAIL {name:<22} {kind}{e}")
            if not isinstance(e, AssertionError):
                traceback.print_exc(file=sys.stderr)
    print(f"reference_reads: {len(names)} stores read by loaderx {loaderx.__version__}, {failed} mismatches")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: reference_reads.py OUTDIR")
    main(sys.argv[1])
