"""The reader half of the pyarrow export check (export_pyarrow.sh): reads
OUTDIR/t.parquet and OUTDIR/t.arrow (example export_tables) with pyarrow
and compares every value with the formulas in export_tables.rs; checks
the tensor column is a FixedShapeTensorType of shape (2, 3)."""

import sys

import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq

ROWS = 40


def expected():
    r = range(ROWS)
    return {
        "flag": [i % 3 == 0 for i in r],
        "half": [i / 4 for i in r],
        "be": [-1000 * i for i in r],
        "img": np.array([[(6 * i + j) % 256 for j in range(6)] for i in r], dtype=np.uint8).reshape(ROWS, 2, 3),
        "tokens": [[i * 10 + j for j in range(i % 5)] for i in r],
        "pts": [[[float(i), float(-i)]] * (i % 3) for i in r],
        "blob": [bytes([i]) * (i % 4) for i in r],
        "text": ["é" * (i % 3) for i in r],
    }


def check(table: pa.Table, what: str) -> None:
    exp = expected()
    assert table.column_names == list(exp), (what, table.column_names)
    types = {f.name: f.type for f in table.schema}
    assert types["flag"] == pa.bool_() and types["half"] == pa.float16() and types["be"] == pa.int32(), types
    assert types["tokens"] == pa.large_list(pa.int64()), types["tokens"]
    assert types["pts"] == pa.large_list(pa.list_(pa.float32(), 2)), types["pts"]
    assert types["blob"] == pa.large_binary() and types["text"] == pa.large_string(), types
    img = types["img"]
    assert isinstance(img, pa.FixedShapeTensorType), (what, img)
    assert list(img.shape) == [2, 3] and img.value_type == pa.uint8(), img
    tensor = table.column("img").combine_chunks().to_numpy_ndarray()
    assert tensor.shape == (ROWS, 2, 3) and (tensor == exp["img"]).all(), tensor
    for name in ["flag", "be", "tokens", "pts", "blob", "text"]:
        assert table.column(name).to_pylist() == exp[name], (what, name)
    half = table.column("half").combine_chunks().to_numpy(zero_copy_only=False)
    assert half.dtype == np.float16 and half.tolist() == exp["half"], half
    assert all(f.nullable is False for f in table.schema), table.schema
    print(f"{what}: {table.num_rows} rows, {table.num_columns} columns, every value as expected; img {img}")


def main() -> None:
    out = sys.argv[1]
    check(pq.read_table(f"{out}/t.parquet"), "parquet")
    with pa.memory_map(f"{out}/t.arrow") as source:
        check(pa.ipc.open_file(source).read_all(), "arrow ipc")
    print(f"pyarrow {pa.__version__}: ok")


if __name__ == "__main__":
    main()
