"""Writes stores with the reference package (loaderx 0.7.3) for this crate to read.

Usage: python reference_writes.py OUTDIR

Writes OUTDIR/stores/NAME/ (a store) and, outside the store directory,
OUTDIR/expected/NAME.bin (every record's bytes, back to back, in index order)
OUTDIR/expected/NAME.lens (one record length per line) and
OUTDIR/expected/NAME.stats (the reference's stats(): records, live_bytes,
chunk_bytes, which this crate's `loaderx stats --json` must repeat).

The expected bytes come from the data handed to the reference, with deletes
applied by a model of swap-with-last in descending index order. Each store is
also read back through the reference's own gather/gather_var and compared with
the model, so a disagreement between the reference and its documented
behaviour is reported as such, not blamed on the Rust reader.
"""

import sys
from pathlib import Path

import numpy as np

import loaderx
from loaderx import Zrecord, write_dataset, write_ragged

assert loaderx.__version__ == "0.7.3", loaderx.__version__

rng = np.random.default_rng(20260501)


def smooth_f32(n, dim):
    """n records of dim float32: quantised sinusoids (compress well)."""
    x = np.linspace(0.0, 1.0, dim, dtype=np.float32)
    phase = rng.uniform(0, 10, size=(n, 1)).astype(np.float32)
    freq = rng.integers(1, 9, size=(n, 1)).astype(np.float32)
    v = np.sin(x[None, :] * freq * 6.283 + phase)
    return (np.round(v * 64) / 64).astype(np.float32)


def token_seqs(n, max_len, rows=()):
    """n int32 sequences of 1..max_len rows from a small vocabulary."""
    out = []
    for _ in range(n):
        length = int(rng.integers(1, max_len + 1))
        out.append(rng.integers(0, 50, size=(length, *rows)).astype(np.int32))
    return out


def delete_model(records, idxs):
    """The documented delete: swap-with-last, descending, duplicates ignored."""
    records = list(records)
    for d in sorted(set(int(i) for i in idxs), reverse=True):
        records[d] = records[-1]
        records.pop()
    return records


def read_back(path):
    """Every record of the store at path, via the reference's gather_var."""
    with Zrecord(path) as z:
        n = len(z)
        idx = np.arange(n, dtype=np.uint64)
        lens = z.lengths(idx).astype(np.uint64)
        offsets = np.zeros(n, dtype=np.uint64)
        if n > 1:
            offsets[1:] = np.cumsum(lens[:-1])
        dst = np.zeros(max(int(lens.sum()), 1), dtype=np.uint8)
        z.gather_var(idx, dst, offsets)
        return [dst[int(o):int(o) + int(l)].tobytes() for o, l in zip(offsets, lens)]


def read_back_fixed(path, item_len):
    """Every record via the reference's fixed-stride gather."""
    with Zrecord(path) as z:
        n = len(z)
        dst = np.zeros(n * item_len, dtype=np.uint8)
        z.gather(np.arange(n, dtype=np.uint64), dst, item_len)
        return [dst[i * item_len:(i + 1) * item_len].tobytes() for i in range(n)]


def finish(out, name, records, fixed=None):
    """Checks the store with the reference, writes the sidecar files."""
    path = out / "stores" / name
    records = [bytes(r) for r in records]
    got = read_back(path)
    if got != records:
        sys.exit(f"reference_writes: {name}: the reference's own gather_var disagrees with the model")
    if fixed is not None and read_back_fixed(path, fixed) != records:
        sys.exit(f"reference_writes: {name}: the reference's own gather disagrees with the model")
    with Zrecord(path) as z:
        stats = z.stats()
    (out / "expected" / f"{name}.bin").write_bytes(b"".join(records))
    (out / "expected" / f"{name}.lens").write_text("".join(f"{len(r)}\n" for r in records))
    (out / "expected" / f"{name}.stats").write_text(
        f"records={stats['records']} live_bytes={stats['live_bytes']} chunk_bytes={stats['chunk_bytes']}\n")
    print(f"wrote {name:<22} {len(records):>5} records, {sum(map(len, records)):>8} logical bytes, "
          f"{stats['live_bytes']:>8} stored")


def main(out):
    out = Path(out)
    (out / "stores").mkdir(parents=True, exist_ok=True)
    (out / "expected").mkdir(parents=True, exist_ok=True)
    s = lambda name: out / "stores" / name

    # Fixed-size float32 records through write_dataset, one store per codec.
    data = smooth_f32(700, 64)
    data[::9] = rng.standard_normal(size=data[::9].shape).astype(np.float32)  # barely compressible
    for codec in ("zstd", "raw", "zstd_dict"):
        name = f"ref_fixed_{codec}"
        write_dataset(s(name), data, codec=codec)
        finish(out, name, [row.tobytes() for row in data], fixed=64 * 4)

    # A 1-D array: a dataset of scalars (4-byte records).
    labels = rng.integers(0, 10, size=300).astype(np.int32)
    write_dataset(s("ref_labels_zstd"), labels)
    finish(out, "ref_labels_zstd", [x.tobytes() for x in labels], fixed=4)

    # Ragged records through write_ragged: plain zstd, and with a dictionary
    # and a trailing row shape.
    seqs = token_seqs(400, 300)
    write_ragged(s("ref_ragged_zstd"), seqs)
    finish(out, "ref_ragged_zstd", [a.tobytes() for a in seqs])
    points = token_seqs(300, 40, rows=(3,))
    write_ragged(s("ref_ragged_zstd_dict"), points, codec="zstd_dict")
    finish(out, "ref_ragged_zstd_dict", [a.tobytes() for a in points])

    # Zrecord directly: several appends with different codecs in one store,
    # including records of the 1 MiB limit and incompressible ones.
    records = []
    with Zrecord(s("ref_direct_mixed")) as z:
        block = smooth_f32(50, 100)
        z.append(np.ascontiguousarray(block).view(np.uint8).reshape(-1), 50, 400, codec="raw")
        records += [r.tobytes() for r in block]
        block = smooth_f32(50, 100)
        z.append(np.ascontiguousarray(block).view(np.uint8).reshape(-1), 50, 400, codec="zstd")
        records += [r.tobytes() for r in block]
        var = [rng.integers(0, 256, size=int(rng.integers(1, 5000)), dtype=np.uint8) for _ in range(40)]
        var.append(smooth_f32(1, 1 << 18).view(np.uint8).reshape(-1))  # exactly 1 MiB
        lens = np.array([len(v) for v in var], dtype=np.uint32)
        offsets = np.zeros(len(var), dtype=np.uint64)
        offsets[1:] = np.cumsum(lens[:-1].astype(np.uint64))
        z.append_var(np.concatenate(var), offsets, lens, codec="zstd")
        records += [v.tobytes() for v in var]
        z.sync()
    finish(out, "ref_direct_mixed", records)

    # Delete (duplicates, the last index, index 0) + compact, then append
    # more after the compaction, then delete + compact again.
    seqs = token_seqs(500, 200)
    write_ragged(s("ref_deleted_ragged"), seqs)
    records = [a.tobytes() for a in seqs]
    doomed = [0, 5, 5, 499, 123, 498, 200, 0, 250, 251, 252]
    with Zrecord(s("ref_deleted_ragged")) as z:
        z.delete(np.array(doomed, dtype=np.uint64))
        records = delete_model(records, doomed)
        z.compact()
        more = token_seqs(40, 200)
        lens = np.array([a.nbytes for a in more], dtype=np.uint32)
        offsets = np.zeros(len(more), dtype=np.uint64)
        offsets[1:] = np.cumsum(lens[:-1].astype(np.uint64))
        z.append_var(np.concatenate([a.view(np.uint8).reshape(-1) for a in more]), offsets, lens, codec="zstd")
        records += [a.tobytes() for a in more]
        doomed = [len(records) - 1, 17, 17]
        z.delete(np.array(doomed, dtype=np.uint64))
        records = delete_model(records, doomed)
        z.compact()
        z.sync()
    finish(out, "ref_deleted_ragged", records)

    # The same on a fixed-size zstd_dict dataset.
    data = smooth_f32(600, 64)
    write_dataset(s("ref_deleted_fixed_dict"), data, codec="zstd_dict")
    records = [row.tobytes() for row in data]
    doomed = [599, 599, 1, 2, 3, 300, 598, 42]
    with Zrecord(s("ref_deleted_fixed_dict")) as z:
        z.delete(np.array(doomed, dtype=np.uint64))
        records = delete_model(records, doomed)
        z.compact()
    finish(out, "ref_deleted_fixed_dict", records, fixed=64 * 4)

    # A store that was created and never written.
    Zrecord(s("ref_empty")).close()
    finish(out, "ref_empty", [])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: reference_writes.py OUTDIR")
    main(sys.argv[1])
