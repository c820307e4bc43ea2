"""The dataset half of the interop test, on the reference package's side.

    python reference_datasets.py write OUTDIR
        writes datasets with the reference's write_dataset / write_ragged into
        OUTDIR/datasets/NAME and the NumPy arrays they were written from into
        OUTDIR/expected/ (NAME.npy for a fixed-shape dataset; NAME.values.npy
        and NAME.splits.npy, int64, for a ragged one), for
        `cargo run --release --example interop_datasets -- check OUTDIR`;
        and .npy files NumPy itself writes into OUTDIR/npy/ (format versions
        1.0, 2.0 and 3.0, the dtypes and shapes a header can name, and files
        a reader must refuse), with what each header says in
        OUTDIR/npy/expect.json, for this crate's own header parser.
    python reference_datasets.py read OUTDIR
        opens every dataset this crate wrote (`interop_datasets write`) with
        the reference's Dataset / RaggedDataset and compares it with the
        arrays in OUTDIR/expected/: dtype, shape, every record (a full
        gather, a shuffled fancy index, single records), packed values and
        row_splits, getitems_padded against pad; and that schema.json is
        byte for byte json.dumps(schema, indent=2) + "\\n".

Prints `ok NAME ...` or `FAIL NAME: reason` per dataset; exits 1 on a mismatch.
"""

import json
import sys
import traceback
from pathlib import Path

import numpy as np

import loaderx
from loaderx import Dataset, RaggedDataset, pad, write_dataset, write_ragged

assert loaderx.__version__ == "0.7.3", loaderx.__version__

rng = np.random.default_rng(20260502)


def smooth(n, *shape):
    x = np.linspace(0.0, 1.0, int(np.prod(shape)), dtype=np.float32)
    f = rng.integers(1, 9, size=(n, 1)).astype(np.float32)
    p = rng.uniform(0, 10, size=(n, 1)).astype(np.float32)
    return (np.round(np.sin(x[None, :] * f * 6.283 + p) * 64) / 64).astype(np.float32).reshape(n, *shape)


def ragged(n, max_rows, rows=()):
    return [rng.integers(0, 50, size=(int(rng.integers(1, max_rows + 1)), *rows)).astype(np.int32) for _ in range(n)]


def save_ragged(exp, name, seqs):
    np.save(exp / f"{name}.values.npy", np.concatenate(seqs))
    splits = np.zeros(len(seqs) + 1, dtype=np.int64)
    splits[1:] = np.cumsum([len(s) for s in seqs])
    np.save(exp / f"{name}.splits.npy", splits)


def write(out):
    ds, exp = out / "datasets", out / "expected"
    ds.mkdir(parents=True, exist_ok=True)
    exp.mkdir(parents=True, exist_ok=True)
    data = smooth(700, 4, 3)
    data[::9] = rng.standard_normal(size=data[::9].shape).astype(np.float32)
    for codec in ("zstd", "raw", "zstd_dict"):
        write_dataset(ds / f"ref_f32_{codec}", data, codec=codec)
        np.save(exp / f"ref_f32_{codec}.npy", data)
    labels = rng.integers(-5, 10, size=500).astype(np.int64)
    write_dataset(ds / "ref_labels_i8", labels)
    np.save(exp / "ref_labels_i8.npy", labels)
    img = rng.integers(0, 256, size=(60, 8, 8, 3), dtype=np.uint8)
    write_dataset(ds / "ref_u1_img", img, codec="raw")
    np.save(exp / "ref_u1_img.npy", img)
    big_endian = rng.standard_normal(size=(40, 3)).astype(">f8")
    write_dataset(ds / "ref_f8_big_endian", big_endian)
    np.save(exp / "ref_f8_big_endian.npy", big_endian)
    a, b = smooth(300, 16), smooth(200, 16)
    write_dataset(ds / "ref_f32_appended", a)
    write_dataset(ds / "ref_f32_appended", b)
    np.save(exp / "ref_f32_appended.npy", np.concatenate([a, b]))
    seqs = ragged(400, 300)
    write_ragged(ds / "ref_ragged_i4", seqs)
    save_ragged(exp, "ref_ragged_i4", seqs)
    points = ragged(300, 40, rows=(3,))
    write_ragged(ds / "ref_ragged_i4x3_dict", points, codec="zstd_dict")
    save_ragged(exp, "ref_ragged_i4x3_dict", points)
    print(f"reference_datasets: {len(list(ds.iterdir()))} datasets written to {ds}")
    write_npy_headers(out / "npy")


def write_npy_headers(out):
    """NumPy's own .npy files in every format version, and what their
    headers say: descr, shape and where the data starts (np.lib.format's
    reader); files this crate must refuse, with a word of the reason."""
    out.mkdir(parents=True, exist_ok=True)
    readable = {
        "f4_2d": rng.standard_normal((5, 3)).astype("<f4"),
        "u1_1d": np.arange(7, dtype=np.uint8),
        "f2_4d": np.ones((2, 3, 4, 1), dtype="<f2"),
        "c8": (np.arange(4) * 1j).astype(np.complex64),
        "b1": np.array([True, False, True]),
        "S3": np.array([b"ab", b"cde"]),
        "U5": np.array(["x", "hello"]),
        "i4_big_endian": np.arange(6, dtype=">i4").reshape(3, 2),
        "no_rows": np.zeros((0, 4), dtype="<i8"),
        "empty_records": np.zeros((3, 0), dtype="<f8"),
    }
    refused = {
        "fortran": (np.asfortranarray(np.ones((3, 2), "<f4")), "Fortran-order"),
        "structured": (np.zeros(3, dtype=[("a", "<f4"), ("b", "<i8", (2,))]), "structured dtype"),
        "scalar": (np.array(1.5, dtype=np.float32), "0-dimensional"),
        "object": (np.array([1, "a"], dtype=object), "dtype \"|O\""),
    }
    expect = {}
    for version in [(1, 0), (2, 0), (3, 0)]:
        for name, array in [*readable.items(), *((k, a) for k, (a, _) in refused.items())]:
            file = f"{name}-v{version[0]}.npy"
            with open(out / file, "wb") as f:
                np.lib.format.write_array(f, array, version=version)
            with open(out / file, "rb") as f:
                assert np.lib.format.read_magic(f) == version
                # The 2.0 reader reads 3.0's 32-bit field too (the texts here are ASCII).
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, fortran, dtype = read(f)
                offset = f.tell()
            if name in refused:
                expect[file] = {"refused": refused[name][1]}
            else:
                assert not fortran and dtype == array.dtype and shape == array.shape
                expect[file] = {"descr": dtype.str, "shape": list(shape), "offset": offset}
    (out / "expect.json").write_text(json.dumps(expect, indent=1))
    print(f"reference_datasets: {len(expect)} .npy files NumPy wrote into {out}")


def check_schema(path):
    text = (path / "schema.json").read_text()
    schema = json.loads(text)
    assert text == json.dumps(schema, indent=2) + "\n", f"schema.json is not formatted as the reference writes it:\n{text}"
    return schema


def check(out, name):
    path, exp = out / "datasets" / name, out / "expected"
    schema = check_schema(path)
    if not schema.get("ragged"):
        want = np.load(exp / f"{name}.npy")
        with Dataset(path) as ds:
            assert ds.dtype == want.dtype and ds.shape == want.shape[1:] and len(ds) == len(want), \
                f"opened as {ds.dtype}{ds.shape} x {len(ds)}, expected {want.dtype}{want.shape}"
            assert np.array_equal(ds[np.arange(len(want))], want), "a full gather differs"
            perm = rng.permutation(len(want))
            assert np.array_equal(ds[perm], want[perm]), "a shuffled gather differs"
            assert np.array_equal(ds[len(want) - 1], want[-1]) and np.array_equal(ds[0], want[0]), "single records differ"
            return f"{len(want)} records {ds.dtype.str}{ds.shape}, {schema['codec']}, schema formatted as the reference's"
    values = np.load(exp / f"{name}.values.npy")
    splits = np.load(exp / f"{name}.splits.npy")
    n = len(splits) - 1
    with RaggedDataset(path) as rds:
        assert len(rds) == n and rds.item_shape == values.shape[1:] and rds.dtype == values.dtype, \
            f"opened as {len(rds)} x {rds.dtype}{rds.item_shape}"
        got, got_splits = rds[np.arange(n)]
        assert np.array_equal(got, values) and np.array_equal(got_splits, splits), "packed gather differs"
        perm = rng.permutation(n)[:50]
        got, got_splits = rds[perm]
        want = np.concatenate([values[splits[i]:splits[i + 1]] for i in perm])
        assert np.array_equal(got, want), "a shuffled packed gather differs"
        padded, lengths = rds.getitems_padded(perm, pad_value=-1)
        ref_padded, ref_lengths = pad(got, got_splits, pad_value=-1)
        assert np.array_equal(padded, ref_padded) and np.array_equal(lengths, ref_lengths), "getitems_padded differs"
        zero = int((np.diff(splits) == 0).sum())
        extra = f", {zero} zero-length" if zero else ""
        return f"{n} ragged records {rds.dtype.str}{rds.item_shape}{extra}, {schema['codec']}, schema formatted as the reference's"


def read(out):
    names = sorted(p.name for p in (out / "datasets").iterdir() if p.is_dir())
    if not names:
        sys.exit(f"reference_datasets: no datasets under {out / 'datasets'}")
    failed = 0
    for name in names:
        try:
            print(f"ok   {name:<22} {check(out, name)}")
        except Exception as e:
            failed += 1
            kind = "" if isinstance(e, AssertionError) else f"{type(e).__name__}: "
            print(f"FAIL {name:<22} {kind}{e}")
            if not isinstance(e, AssertionError):
                traceback.print_exc(file=sys.stderr)
    print(f"reference_datasets: {len(names)} datasets read by loaderx {loaderx.__version__}, {failed} mismatches")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "read"):
        sys.exit("usage: reference_datasets.py write|read OUTDIR")
    (write if sys.argv[1] == "write" else read)(Path(sys.argv[2]))
