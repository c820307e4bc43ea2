"""write_table through the importer engine and to_arrow: every mapped Arrow
type from a pyarrow Table (structs flattened, dictionaries decoded, the
fixed-shape tensor), nulls refused then filled, the column options;
Parquet files by a glob, resumed after a failure without a duplicate; an
Arrow stream resumed by its fingerprint (a Python generator behind it,
which the engine reads with the GIL released); JSON Lines, WebDataset and
image folder files; to_arrow read by pyarrow (every column kind, a
tensor), then written back equal; a polars DataFrame in and out."""

import io
import json
import tarfile

import numpy as np
import pytest

from loaderx_rs import AppendWarning, ArrowStream, Table, open_table, to_arrow, write_table

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

N = 120

NUMBERS = {
    "i8": pa.int8(), "i16": pa.int16(), "i32": pa.int32(), "i64": pa.int64(),
    "u8": pa.uint8(), "u16": pa.uint16(), "u32": pa.uint32(), "u64": pa.uint64(),
    "f16": pa.float16(), "f32": pa.float32(), "f64": pa.float64(),
}


def every_type(n=N):
    """A pyarrow Table of every type the mapping takes; row i derives from i."""
    i = np.arange(n)
    cols = {name: pa.array((i % 100).astype(t.to_pandas_dtype())) for name, t in NUMBERS.items()}
    cols["flag"] = pa.array(i % 3 == 0)
    cols["pair"] = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(2 * n, dtype=np.int16)), 2)
    tensor_type = pa.fixed_shape_tensor(pa.float32(), (2, 3))
    storage = pa.FixedSizeListArray.from_arrays(pa.array(np.arange(6 * n, dtype=np.float32)), 6)
    cols["image"] = pa.ExtensionArray.from_storage(tensor_type, storage)
    cols["tokens"] = pa.array([list(range(k % 9)) for k in i], type=pa.list_(pa.int32()))
    cols["weights"] = pa.array([[k / 2] * (k % 4) for k in i], type=pa.large_list(pa.float32()))
    cols["blob"] = pa.array([bytes([k % 256]) * (k % 5) for k in i], type=pa.binary())
    cols["big_blob"] = pa.array([bytes([k % 7]) * 3 for k in i], type=pa.large_binary())
    cols["text"] = pa.array([f"row {k} \u00e9" * (k % 3) for k in i], type=pa.string())
    cols["big_text"] = pa.array([f"\u4e2d{k}" for k in i], type=pa.large_string())
    cols["cat"] = pa.array([f"c{k % 4}" for k in i]).dictionary_encode()
    cols["meta"] = pa.StructArray.from_arrays(
        [pa.array(i.astype(np.int32)), pa.array([f"m{k}" for k in i])], names=["id", "name"])
    return pa.table(cols)


def ragged_rows(dataset, n):
    values, splits = dataset[np.arange(n)]
    return [values[splits[k]:splits[k + 1]] for k in range(n)]


def check_every_type(path, source, n):
    """The table at path holds source's rows (a pyarrow Table of every_type)."""
    t = Table(path)
    flat = source.flatten()
    assert t.columns == [c.replace(".", ".") for c in flat.column_names]
    assert t.rows == n
    cols = t.datasets()
    idx = np.arange(n)
    for name in list(NUMBERS) + ["flag"]:
        want = source[name].to_numpy()
        np.testing.assert_array_equal(cols[name][idx], want)
        assert cols[name].dtype == want.dtype
    np.testing.assert_array_equal(cols["pair"][idx], np.arange(2 * n, dtype=np.int16).reshape(n, 2))
    assert cols["image"].shape == (2, 3) and cols["image"].dtype == np.float32
    np.testing.assert_array_equal(cols["image"][idx], np.arange(6 * n, dtype=np.float32).reshape(n, 2, 3))
    for name in ("tokens", "weights"):
        for got, want in zip(ragged_rows(cols[name], n), source[name].to_pylist()):
            np.testing.assert_array_equal(got, np.array(want, dtype=got.dtype))
    for name in ("blob", "big_blob"):
        assert t.values(name, idx) == source[name].to_pylist()
    for name in ("text", "big_text", "cat"):
        assert t.strings(name, idx) == source[name].to_pylist()
    assert t.kinds["meta.id"] == "fixed" and t.kinds["meta.name"] == "utf8"
    np.testing.assert_array_equal(cols["meta.id"][idx], np.arange(n, dtype=np.int32))
    assert t.strings("meta.name", idx) == [f"m{k}" for k in range(n)]


def test_every_mapped_type_from_a_pyarrow_table(tmp_path):
    source = every_type()
    done = write_table(tmp_path / "t", source)
    assert done["rows"] == done["table_rows"] == N and done["skipped"] == 0 and not done["already_done"]
    assert done["seconds"] >= 0 and done["bytes"] >= 0
    check_every_type(tmp_path / "t", source, N)
    kinds = Table(tmp_path / "t").kinds
    assert kinds["tokens"] == kinds["weights"] == "ragged" and kinds["blob"] == kinds["big_blob"] == "bytes"
    assert kinds["cat"] == "utf8" and kinds["image"] == "fixed"
    # The commit carries the import's mark.
    mark = json.loads(Table(tmp_path / "t").mark)
    assert mark["import"]["done"] is True and mark["import"]["base"] == 0


def test_nulls_are_refused_then_filled(tmp_path):
    table = pa.table({
        "a": pa.array([1, None, 3, 4], type=pa.int64()),
        "s": pa.array(["w", "x", None, "z"]),
        "l": pa.array([[1, 2], None, [3], []], type=pa.list_(pa.int32())),
        "b": pa.array([True, None, False, True]),
    })
    with pytest.raises(ValueError, match=r"column \"a\", row 1: a null.*fill_null"):
        write_table(tmp_path / "t", table)
    assert Table(tmp_path / "t").rows == 0
    with pytest.raises(ValueError, match=r"column \"s\", row 2: a null"):
        write_table(tmp_path / "u", table, fill_null={"a": -7})
    done = write_table(tmp_path / "v", table, fill_null={"a": -7, "s": "?", "l": [], "b": True})
    assert done["rows"] == 4
    t = Table(tmp_path / "v")
    np.testing.assert_array_equal(t["a"][np.arange(4)], [1, -7, 3, 4])
    assert t.strings("s", np.arange(4)) == ["w", "x", "?", "z"]
    assert [r.tolist() for r in ragged_rows(t["l"], 4)] == [[1, 2], [], [3], []]
    np.testing.assert_array_equal(t["b"][np.arange(4)], [True, True, False, True])
    write_table(tmp_path / "w", table.select(["l"]), fill_null={"l": [9, 8]})
    assert [r.tolist() for r in ragged_rows(Table(tmp_path / "w")["l"], 4)][1] == [9, 8]
    with pytest.raises(TypeError, match=r"fill_null\[\"a\"\] is a dict"):
        write_table(tmp_path / "x", table, fill_null={"a": {}})


def test_a_columns_codec_follows_its_kind_unless_codec_names_one(tmp_path):
    source = every_type(40)
    write_table(tmp_path / "t", source, columns=["text", "i64"])
    cols = Table(tmp_path / "t").datasets()
    assert (cols["text"].codec, cols["i64"].codec) == ("zstd", "raw")
    write_table(tmp_path / "u", source, columns=["text", "i64"], codec="zstd")
    cols = Table(tmp_path / "u").datasets()
    assert (cols["text"].codec, cols["i64"].codec) == ("zstd", "zstd")


def test_column_selection_renaming_and_codecs(tmp_path):
    source = every_type(40)
    write_table(tmp_path / "t", source, columns=["text", "i64", "meta.id"], rename={"meta.id": "id"},
                codec="raw", codecs={"text": "zstd_dict"})
    t = Table(tmp_path / "t")
    assert t.columns == ["text", "i64", "id"]
    cols = t.datasets()
    assert cols["text"].codec == "zstd_dict" and cols["i64"].codec == "raw"
    np.testing.assert_array_equal(cols["id"][np.arange(40)], np.arange(40))
    with pytest.raises(ValueError, match="nope"):
        write_table(tmp_path / "u", source, columns=["nope"])
    with pytest.raises(ValueError, match="is for an Arrow stream or files"):
        write_table(tmp_path / "v", {"x": np.arange(3)}, columns=["x"])


def write_parts(directory, sizes, start=0):
    """Parquet files part-K of `sizes` rows (two row groups each), rows numbered on from `start`."""
    directory.mkdir(exist_ok=True)
    tables = []
    for k, n in enumerate(sizes):
        ids = np.arange(start, start + n, dtype=np.int64)
        t = pa.table({"id": ids, "tokens": pa.array([list(range(i % 5)) for i in ids], type=pa.list_(pa.int32())),
                      "text": pa.array([f"t{i}" for i in ids])})
        pq.write_table(t, directory / f"part-{k}.parquet", row_group_size=max(1, n // 2))
        tables.append(t)
        start += n
    return tables


def test_parquet_files_by_a_glob(tmp_path):
    tables = write_parts(tmp_path / "in", [50, 70, 30])
    done = write_table(tmp_path / "t", str(tmp_path / "in" / "*.parquet"), commit_rows=40)
    assert done["rows"] == 150 and not done["already_done"]
    t = Table(tmp_path / "t")
    np.testing.assert_array_equal(t["id"][np.arange(150)], np.arange(150))
    assert t.strings("text", np.arange(150)) == sum((x["text"].to_pylist() for x in tables), [])
    # A rerun of the same files is a no-op, without an append warning.
    again = write_table(tmp_path / "t", str(tmp_path / "in" / "*.parquet"))
    assert again["already_done"] and again["rows"] == 0 and Table(tmp_path / "t").rows == 150
    # A list of paths, the format named.
    write_table(tmp_path / "u", [tmp_path / "in" / "part-2.parquet"], format="parquet")
    assert Table(tmp_path / "u").rows == 30
    with pytest.raises(ValueError, match="no file matches"):
        write_table(tmp_path / "v", str(tmp_path / "in" / "*.nothing"))


def test_a_parquet_import_resumes_after_a_failure_without_duplicates(tmp_path):
    write_parts(tmp_path / "in", [60, 60])
    # The second file has a null in its 11th row: the first file's rows are
    # committed (a commit every 20 rows), then the import stops there.
    bad = pa.table({"id": pa.array([60 + i if i != 10 else None for i in range(60)], type=pa.int64()),
                    "tokens": pa.array([list(range((60 + i) % 5)) for i in range(60)], type=pa.list_(pa.int32())),
                    "text": pa.array([f"t{60 + i}" for i in range(60)])})
    pq.write_table(bad, tmp_path / "in" / "part-1.parquet", row_group_size=30)
    glob = str(tmp_path / "in" / "part-*.parquet")
    with pytest.raises(ValueError, match=r"column \"id\", row 70: a null"):
        write_table(tmp_path / "t", glob, commit_rows=20)
    committed = Table(tmp_path / "t").rows
    assert committed >= 60 and committed % 20 == 0
    np.testing.assert_array_equal(Table(tmp_path / "t")["id"][np.arange(committed)], np.arange(committed))
    # The rerun, with a fill for the null, resumes after the committed rows.
    done = write_table(tmp_path / "t", glob, commit_rows=20, fill_null={"id": -1})
    assert done["skipped"] == committed and done["rows"] == 120 - committed and done["table_rows"] == 120
    want = np.arange(120)
    want[70] = -1
    np.testing.assert_array_equal(Table(tmp_path / "t")["id"][np.arange(120)], want)
    assert Table(tmp_path / "t").strings("text", np.arange(120)) == [f"t{i}" for i in range(120)]


def test_a_truncated_parquet_file_is_refused_naming_it(tmp_path):
    write_parts(tmp_path / "in", [40, 40])
    path = tmp_path / "in" / "part-1.parquet"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="part-1.parquet"):
        write_table(tmp_path / "t", str(tmp_path / "in" / "*.parquet"))
    assert not (tmp_path / "t" / "table.json").exists() or Table(tmp_path / "t").rows == 0


def test_an_arrow_stream_resumes_by_its_fingerprint(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("text", pa.string())])

    def batches(fail_at=None):
        # A Python generator behind the stream: its batches come from Python
        # code the engine's reader thread calls through the C stream, which
        # needs the GIL the engine released.
        for k in range(10):
            if k == fail_at:
                raise RuntimeError("the source broke")
            ids = np.arange(10 * k, 10 * k + 10)
            yield pa.record_batch([pa.array(ids), pa.array([f"r{i}" for i in ids])], schema=schema)

    def stream(fail_at=None):
        return pa.RecordBatchReader.from_batches(schema, batches(fail_at))

    with pytest.raises(ValueError, match="the source broke"):
        write_table(tmp_path / "t", stream(fail_at=6), fingerprint="run-1", commit_rows=20)
    committed = Table(tmp_path / "t").rows
    assert 20 <= committed <= 60 and committed % 20 == 0
    done = write_table(tmp_path / "t", stream(), fingerprint="run-1", commit_rows=20)
    assert done["skipped"] == committed and done["table_rows"] == 100
    np.testing.assert_array_equal(Table(tmp_path / "t")["id"][np.arange(100)], np.arange(100))
    assert write_table(tmp_path / "t", stream(), fingerprint="run-1")["already_done"]
    # Unnamed, a stream is a new input: appended whole, with a warning.
    with pytest.warns(AppendWarning, match="already holds 100 rows"):
        write_table(tmp_path / "t", stream())
    assert Table(tmp_path / "t").rows == 200
    with pytest.raises(ValueError, match="fingerprint= names an Arrow stream"):
        write_table(tmp_path / "u", str(tmp_path), fingerprint="x")


def test_jsonl_webdataset_and_image_folder_files(tmp_path):
    lines = [{"id": i, "text": f"line {i}", "tokens": list(range(i % 4))} for i in range(25)]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    write_table(tmp_path / "j", str(tmp_path / "a.jsonl"))
    t = Table(tmp_path / "j")
    np.testing.assert_array_equal(t["id"][np.arange(25)], np.arange(25))
    assert t.strings("text", np.arange(25)) == [x["text"] for x in lines]

    shard = tmp_path / "shard-000.tar"
    with tarfile.open(shard, "w") as tar:
        for i in range(12):
            for ext, data in (("jpg", bytes([i]) * (i + 1)), ("cls", str(i % 3).encode())):
                info = tarfile.TarInfo(f"sample{i:03d}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    write_table(tmp_path / "w", str(shard))
    t = Table(tmp_path / "w")
    assert t.rows == 12 and t.values("jpg", np.arange(12)) == [bytes([i]) * (i + 1) for i in range(12)]

    for c, name in enumerate(["cat", "dog"]):
        (tmp_path / "img" / name).mkdir(parents=True)
        for i in range(3):
            (tmp_path / "img" / name / f"{i}.jpg").write_bytes(bytes([c, i]))
    write_table(tmp_path / "f", tmp_path / "img", format="imagefolder")
    assert Table(tmp_path / "f").rows == 6
    assert json.loads((tmp_path / "f" / "classes.json").read_text()) == ["cat", "dog"]
    with pytest.raises(ValueError, match="cannot tell its format"):
        write_table(tmp_path / "x", tmp_path / "img")


def kinds_table(tmp_path, n=50):
    """A table of every column kind (a shaped fixed column among them)."""
    rng = np.random.default_rng(3)
    src = {
        "label": np.arange(n, dtype=np.int64),
        "score": rng.standard_normal(n).astype(np.float32),
        "image": rng.integers(0, 255, size=(n, 2, 3), dtype=np.uint8),
        "tokens": [np.arange(i % 6, dtype=np.int32) * i for i in range(n)],
        "blob": [bytes([i % 256]) * (i % 4) for i in range(n)],
        "text": [f"\u00e9{i}" * (i % 3) for i in range(n)],
    }
    write_table(tmp_path / "t", src)
    return src


def test_to_arrow_gives_every_column_kind_to_pyarrow(tmp_path):
    n = 50
    src = kinds_table(tmp_path, n)
    stream = to_arrow(tmp_path / "t", batch_rows=16)
    assert isinstance(stream, ArrowStream) and stream.rows == n
    assert stream.schema.names == list(src)
    reader = pa.RecordBatchReader.from_stream(stream)
    batches = list(reader)
    assert [b.num_rows for b in batches] == [16, 16, 16, 2]
    got = pa.Table.from_batches(batches)
    assert isinstance(got.schema.field("image").type, pa.FixedShapeTensorType)
    assert got.schema.field("image").type.shape == [2, 3]
    np.testing.assert_array_equal(got["image"].combine_chunks().to_numpy_ndarray(), src["image"])
    np.testing.assert_array_equal(got["label"].to_numpy(), src["label"])
    np.testing.assert_array_equal(got["score"].to_numpy(), src["score"])
    assert got["tokens"].to_pylist() == [t.tolist() for t in src["tokens"]]
    assert got["blob"].to_pylist() == src["blob"] and got["text"].to_pylist() == src["text"]
    # The values equal what open_table gives.
    cols = open_table(tmp_path / "t")
    for got_row, want in zip(got["tokens"].to_pylist(), ragged_rows(cols["tokens"], n)):
        assert got_row == want.tolist()
    # A stream is read once; a Table gives the rows it saw; a selection.
    with pytest.raises(ValueError, match="read already"):
        pa.table(stream)
    sel = pa.table(to_arrow(Table(tmp_path / "t"), columns=["text", "label"]))
    assert sel.column_names == ["text", "label"] and sel.num_rows == n
    assert to_arrow(tmp_path / "t").read_all().num_rows == n
    with pytest.raises(ValueError, match="no column"):
        to_arrow(tmp_path / "t", columns=["nope"])


def test_to_arrow_then_write_table_gives_equal_values(tmp_path):
    n = 50
    src = kinds_table(tmp_path, n)
    done = write_table(tmp_path / "back", to_arrow(tmp_path / "t", batch_rows=7))
    assert done["rows"] == n
    a, b = Table(tmp_path / "t"), Table(tmp_path / "back")
    assert a.columns == b.columns and a.kinds == b.kinds
    idx = np.arange(n)
    for name in ("label", "score", "image"):
        np.testing.assert_array_equal(a[name][idx], b[name][idx])
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape
    for x, y in zip(ragged_rows(a["tokens"], n), ragged_rows(b["tokens"], n)):
        np.testing.assert_array_equal(x, y)
    assert a.values("blob", idx) == b.values("blob", idx) == src["blob"]
    assert a.strings("text", idx) == b.strings("text", idx) == src["text"]


def test_a_polars_dataframe_in_and_out(tmp_path):
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"id": list(range(30)), "text": [f"p{i}" for i in range(30)],
                       "tokens": [list(range(i % 3)) for i in range(30)]})
    assert write_table(tmp_path / "t", df)["rows"] == 30
    t = Table(tmp_path / "t")
    np.testing.assert_array_equal(t["id"][np.arange(30)], np.arange(30))
    assert t.strings("text", np.arange(30)) == [f"p{i}" for i in range(30)]
    back = pl.DataFrame(to_arrow(tmp_path / "t"))
    assert back["id"].to_list() == list(range(30)) and back["text"].to_list() == df["text"].to_list()
    assert back["tokens"].to_list() == df["tokens"].to_list()
