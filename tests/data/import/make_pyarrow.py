"""Writes pyarrow_types.parquet, every type of the import mapping as pyarrow
writes it, and pyarrow_types.json, what each column's rows must become in a
table, computed by pyarrow and NumPy: a fixed column's records back to back
(hex), a ragged, bytes or text column's rows (hex each).

Run: python make_pyarrow.py (pyarrow 26, numpy). tests/import_pyarrow.rs
checks an import of the file against the JSON.
"""

import json
import pathlib

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

N = 23
HERE = pathlib.Path(__file__).parent
r = list(range(N))

tensor_type = pa.fixed_shape_tensor(pa.float32(), [2, 3])
tensor_storage = pa.array([[float(i * 6 + j) for j in range(6)] for i in r], pa.list_(pa.float32(), 6))
columns = {
    "i8": pa.array([i - 11 for i in r], pa.int8()),
    "u16": pa.array([i * 2000 for i in r], pa.uint16()),
    "i32": pa.array([-(i**5) for i in r], pa.int32()),
    "i64": pa.array([i * -(10**15) for i in r], pa.int64()),
    "f16": pa.array(np.array([i / 8 for i in r], np.float16)),
    "f32": pa.array([i / 3 for i in r], pa.float32()),
    "f64": pa.array([i / 7 for i in r], pa.float64()),
    "flag": pa.array([i % 4 == 1 for i in r], pa.bool_()),
    "vec3": pa.array([[i, -i, 9] for i in r], pa.list_(pa.int16(), 3)),
    "mat": pa.array([[[i, j], [j, i], [i * j, 1]] for i in r for j in [i % 3]], pa.list_(pa.list_(pa.float64(), 2), 3)),
    "tensor": pa.ExtensionArray.from_storage(tensor_type, tensor_storage),
    "tokens": pa.array([list(range(i * 100, i * 100 + i % 6)) for i in r], pa.list_(pa.int32())),
    "pairs": pa.array([[[i, k] for k in range(i % 3)] for i in r], pa.large_list(pa.list_(pa.uint8(), 2))),
    "blob": pa.array([bytes([i]) * (i % 5) for i in r], pa.binary()),
    "large_blob": pa.array([bytes([255 - i]) * (i % 4) for i in r], pa.large_binary()),
    "fixed_blob": pa.array([bytes([i, i, 0, 7]) for i in r], pa.binary(4)),
    "text": pa.array([f"héllo {i}" * (i % 3) for i in r], pa.string()),
    "large_text": pa.array(["日本"[: i % 3] for i in r], pa.large_string()),
    "text_view": pa.array([f"view {i}" for i in r], pa.string_view()),
    "label": pa.array(["cat", "dog", "eel"] * 7 + ["cat", "dog"]).dictionary_encode(),
    "meta": pa.array([{"a": i, "b": {"c": f"c{i}"}} for i in r],
                     pa.struct([("a", pa.int32()), ("b", pa.struct([("c", pa.string())]))])),
}
table = pa.table(columns)
pq.write_table(table, HERE / "pyarrow_types.parquet", row_group_size=10)

back = pq.read_table(HERE / "pyarrow_types.parquet")
flat = back.flatten().flatten()


def fixed(name, arr, dtype):
    arr = arr.combine_chunks()
    if isinstance(arr.type, pa.FixedShapeTensorType):
        values = arr.to_numpy_ndarray()
    else:
        while pa.types.is_fixed_size_list(arr.type):
            arr = arr.flatten()
        values = arr.to_numpy(zero_copy_only=False)
    return {"kind": "fixed", "hex": np.ascontiguousarray(values).astype(dtype).tobytes().hex()}


def ragged(arr, dtype):
    rows = []
    for v in arr.to_pylist():
        rows.append(np.array(v, dtype=dtype).tobytes().hex())
    return {"kind": "ragged", "rows": rows}


def items(arr, kind):
    rows = [(v.encode() if isinstance(v, str) else v).hex() for v in arr.to_pylist()]
    return {"kind": kind, "rows": rows}


expected = {
    "i8": fixed("i8", flat["i8"], "|i1"),
    "u16": fixed("u16", flat["u16"], "<u2"),
    "i32": fixed("i32", flat["i32"], "<i4"),
    "i64": fixed("i64", flat["i64"], "<i8"),
    "f16": fixed("f16", flat["f16"], "<f2"),
    "f32": fixed("f32", flat["f32"], "<f4"),
    "f64": fixed("f64", flat["f64"], "<f8"),
    "flag": fixed("flag", flat["flag"], "|b1"),
    "vec3": fixed("vec3", flat["vec3"], "<i2"),
    "mat": fixed("mat", flat["mat"], "<f8"),
    "tensor": fixed("tensor", back["tensor"], "<f4"),
    "tokens": ragged(flat["tokens"], "<i4"),
    "pairs": ragged(flat["pairs"], "|u1"),
    "blob": items(flat["blob"], "bytes"),
    "large_blob": items(flat["large_blob"], "bytes"),
    "fixed_blob": items(flat["fixed_blob"], "bytes"),
    "text": items(flat["text"], "utf8"),
    "large_text": items(flat["large_text"], "utf8"),
    "text_view": items(flat["text_view"], "utf8"),
    "label": items(flat["label"].cast(pa.string()), "utf8"),
    "meta.a": fixed("meta.a", flat["meta.a"], "<i4"),
    "meta.b.c": items(flat["meta.b.c"], "utf8"),
}
assert list(expected) == flat.column_names, flat.column_names
(HERE / "pyarrow_types.json").write_text(json.dumps({"rows": N, "names": flat.column_names, "columns": expected}, indent=1) + "\n")
