"""A store handed from the reference package (loaderx 0.7.3) to this crate's
writer and back.

Usage: python handover.py write DIR | python handover.py check DIR

`write`: the reference writes DIR/store (its chunk file preallocated to 4 GiB)
with 40 records of mixed codecs, and DIR/expected.bin / DIR/expected.lens for
the store as it must be after this crate deletes index 3 (run.sh runs
`loaderx delete DIR/store 3` between the two steps).

`check`: the reference opens the store this crate's writer left (its chunk
file trimmed to the frontier), reads every record back and compares it with
the expectation, appends 5 records, and rewrites DIR/expected.* for the
final store, which run.sh reads back with `loaderx cat`. Prints `ok handover`
or `FAIL handover: ...`.
"""

import os
import sys
from pathlib import Path

import numpy as np

import loaderx
from loaderx import Zrecord

assert loaderx.__version__ == "0.7.3", loaderx.__version__

DELETED = 3


def records(seed, n):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 4, size=int(rng.integers(1, 600)), dtype=np.uint8) for _ in range(n)]


def append(z, recs, codec):
    data = np.concatenate(recs)
    lengths = np.array([len(r) for r in recs], dtype=np.uint64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.uint64)
    z.append_var(data, offsets, lengths, codec=codec)


def save(out, recs):
    (out / "expected.bin").write_bytes(b"".join(r.tobytes() for r in recs))
    (out / "expected.lens").write_text("".join(f"{len(r)}\n" for r in recs))


def read_all(z):
    lengths = np.asarray(z.lengths(np.arange(len(z), dtype=np.uint64)), dtype=np.uint64)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.uint64)
    buf = np.empty(int(lengths.sum()), dtype=np.uint8)
    z.gather_var(np.arange(len(z), dtype=np.uint64), buf, offsets)
    return [buf[o:o + n] for o, n in zip(offsets.tolist(), lengths.tolist())]


def main(mode, out):
    out = Path(out)
    store = out / "store"
    model = records(1, 20) + records(2, 20)
    if mode == "write":
        out.mkdir(parents=True, exist_ok=True)
        with Zrecord(store) as z:
            append(z, model[:20], "raw")
            append(z, model[20:], "zstd")
            z.sync()
        model[DELETED] = model[-1]
        model.pop()
        save(out, model)
        return 0
    model[DELETED] = model[-1]
    model.pop()
    chunk = os.path.getsize(store / "0.zr")
    with Zrecord(store) as z:
        got = read_all(z)
        if len(got) != len(model) or any(not np.array_equal(a, b) for a, b in zip(got, model)):
            print("FAIL handover: the reference reads other records than the model's")
            return 1
        more = records(3, 5)
        append(z, more, "zstd")
        z.sync()
    save(out, model + more)
    print(f"ok   handover               {len(model)} records read by the reference after this crate's delete "
          f"(chunk file {chunk} bytes), 5 appended")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
