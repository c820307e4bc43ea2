"""Tables: write_table from a dict of every column kind and from an Arrow
stream, read back equal through open_table and Table; a table in a
DataLoader, alone and in a Mixture of two, with resume; appends; a
reader sees only committed rows; errors; pickling of a table's datasets."""

import pickle

import numpy as np
import pytest

from loaderx_rs import (
    AppendWarning,
    DataLoader,
    Dataset,
    DatasetExistsError,
    DatasetNotFoundError,
    Mixture,
    RaggedDataset,
    Table,
    open_table,
    write_table,
)
from loaderx_rs import _arrow_stream_rows

N = 300


def source(n=N, base=0):
    """A dict of every kind; row i's values all derive from base + i."""
    ids = base + np.arange(n, dtype=np.int64)
    return {
        "label": ids,
        "image": (ids[:, None, None] + np.arange(6, dtype=np.float32).reshape(2, 3)).astype(np.float32),
        "tokens": [np.arange(i % 7, dtype=np.int32) + int(i) for i in ids],
        "blob": [bytes([int(i) % 256]) * (int(i) % 5) for i in ids],
        "text": [f"row {i} \u00e9\u4e2d" * (int(i) % 3) for i in ids],
    }


def check_rows(table_path, src, rows):
    """The table at table_path holds src's rows `rows` (row k of the table is src's rows[k])."""
    cols = open_table(table_path)
    assert list(cols) == list(src)
    idx = np.arange(len(rows))
    np.testing.assert_array_equal(cols["label"][idx], src["label"][rows])
    np.testing.assert_array_equal(cols["image"][idx], src["image"][rows])
    values, splits = cols["tokens"][idx]
    for k, r in enumerate(rows):
        np.testing.assert_array_equal(values[splits[k]:splits[k + 1]], src["tokens"][r])
    table = Table(table_path)
    assert table.values("blob", idx) == [src["blob"][r] for r in rows]
    assert table.strings("text", idx) == [src["text"][r] for r in rows]
    assert table.values("text", idx) == [src["text"][r].encode() for r in rows]


def test_every_kind_reads_back_equal(tmp_path):
    src = source()
    done = write_table(tmp_path / "t", src)
    assert done["rows"] == done["table_rows"] == N and done["skipped"] == 0 and not done["already_done"]
    check_rows(tmp_path / "t", src, list(range(N)))
    cols = open_table(tmp_path / "t")
    assert isinstance(cols["label"], Dataset) and isinstance(cols["image"], Dataset)
    assert all(isinstance(cols[k], RaggedDataset) for k in ("tokens", "blob", "text"))
    assert cols["image"].shape == (2, 3) and cols["image"].dtype == np.float32
    assert cols["tokens"].dtype == np.int32 and cols["tokens"].item_shape == ()
    assert all(len(c) == N for c in cols.values())
    # A bytes column's dataset gives values and offsets.
    values, splits = cols["blob"][[3, 4, 9]]
    assert values.dtype == np.uint8
    assert [values[splits[k]:splits[k + 1]].tobytes() for k in range(3)] == [src["blob"][i] for i in (3, 4, 9)]
    table = Table(tmp_path / "t")
    assert table.rows == len(table) == N and table.columns == list(src) and table.mark is None
    assert table.kinds == {"label": "fixed", "image": "fixed", "tokens": "ragged", "blob": "bytes", "text": "utf8"}
    assert isinstance(table["tokens"], RaggedDataset)


def test_each_numeric_column_opens_in_the_reference(tmp_path):
    loaderx = pytest.importorskip("loaderx")
    src = source(50)
    write_table(tmp_path / "t", src)
    table = Table(tmp_path / "t")
    for k, name in enumerate(table.columns[:3]):
        col = tmp_path / "t" / f"col-{k:04d}"
        ref = (loaderx.RaggedDataset if name == "tokens" else loaderx.Dataset)(col)
        mine = table[name]
        assert len(ref) == 50
        if name == "tokens":
            for a, b in zip(ref[[0, 8, 13]], mine[[0, 8, 13]]):
                np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_array_equal(ref[[0, 8, 13]], mine[[0, 8, 13]])


def test_append_and_the_modes(tmp_path):
    first, second = source(100), source(40, base=100)
    write_table(tmp_path / "t", first)
    with pytest.warns(AppendWarning, match="already holds 100 rows"):
        write_table(tmp_path / "t", second)
    both = {k: (np.concatenate([first[k], second[k]]) if isinstance(first[k], np.ndarray) else first[k] + second[k])
            for k in first}
    check_rows(tmp_path / "t", both, list(range(140)))
    write_table(tmp_path / "t", source(10, base=140), mode="append")
    assert Table(tmp_path / "t").rows == 150
    with pytest.raises(DatasetExistsError, match="already there"):
        write_table(tmp_path / "t", source(10), mode="error")
    with pytest.raises(ValueError, match="overwrite"):
        write_table(tmp_path / "t", source(10), mode="overwrite")
    other = source(10)
    other["label"] = other["label"].astype(np.int32)
    with pytest.raises(ValueError, match=r"\"label\": fixed <i8 \[\].*\"label\": fixed <i4 \[\]"):
        write_table(tmp_path / "t", other, mode="append")
    assert Table(tmp_path / "t").rows == 150


def test_a_columns_codec_follows_its_kind_by_default(tmp_path):
    write_table(tmp_path / "t", source(50))
    cols = open_table(tmp_path / "t")
    want = {"label": "raw", "image": "raw", "tokens": "raw", "blob": "raw", "text": "zstd"}
    assert {name: cols[name].codec for name in want} == want


def test_per_column_codecs(tmp_path):
    write_table(tmp_path / "t", source(50), codec="raw", codecs={"text": "zstd_dict", "label": "zstd"})
    cols = open_table(tmp_path / "t")
    assert cols["image"].codec == "raw" and cols["label"].codec == "zstd" and cols["text"].codec == "zstd_dict"
    with pytest.raises(ValueError, match="'nope'|\"nope\""):
        write_table(tmp_path / "u", source(5), codecs={"nope": "zstd"})


def test_errors_are_python_exceptions_with_clear_messages(tmp_path):
    src = source(10)
    src["label"] = src["label"][:9]
    with pytest.raises(ValueError, match=r"unequal lengths.*\"label\" has 9.*\"image\" has 10"):
        write_table(tmp_path / "a", src)
    with pytest.raises(TypeError, match=r"column \"x\" is a dict"):
        write_table(tmp_path / "b", {"x": {"a": 1}})
    with pytest.raises(TypeError, match=r"column \"x\", row 2: a str in a column of bytes"):
        write_table(tmp_path / "c", {"x": [b"a", b"b", "c"]})
    with pytest.raises(TypeError, match=r"column \"x\", row 1: a bytes in a column of str"):
        write_table(tmp_path / "d", {"x": ["a", b"b"]})
    with pytest.raises(TypeError, match=r"column \"x\": the array is an array of Python objects"):
        write_table(tmp_path / "e", {"x": np.array([object(), object()])})
    with pytest.raises(ValueError, match="empty list"):
        write_table(tmp_path / "f", {"x": []})
    with pytest.raises(ValueError, match=r"column \"x\", row 1: an array of row shape \[3\], not the first row's \[2\]"):
        write_table(tmp_path / "g", {"x": [np.zeros((2, 2)), np.zeros((2, 3))]})
    with pytest.raises(TypeError, match="a dict of columns, an object with __arrow_c_stream__"):
        write_table(tmp_path / "h", [1, 2, 3])
    with pytest.raises(UnicodeEncodeError):
        write_table(tmp_path / "i", {"x": ["ok", "\ud800"]})
    with pytest.raises(DatasetNotFoundError, match="not a table"):
        open_table(tmp_path / "nowhere")
    write_table(tmp_path / "j", source(3))
    with pytest.raises(KeyError, match="no column"):
        Table(tmp_path / "j")["missing"]
    with pytest.raises(ValueError, match="no bytes or text column \"label\""):
        Table(tmp_path / "j").values("label", [0])
    # None of the failed writes left a table behind.
    for name in "abcdefgi":
        assert not (tmp_path / name / "table.json").exists()


def test_a_failed_append_leaves_the_committed_rows(tmp_path):
    src = source(20)
    # An Arrow stream whose second batch has a null: the import gathers
    # its first batch, then fails before appending or committing it.
    pa = pytest.importorskip("pyarrow")
    more = source(6, base=20)
    good = pa.record_batch({"label": pa.array(more["label"][:3])})
    bad = pa.record_batch({"label": pa.array([23, None, 25], type=pa.int64())})
    reader = pa.RecordBatchReader.from_batches(good.schema, [good, bad])
    write_table(tmp_path / "u", {"label": src["label"]})
    with pytest.raises(ValueError, match=r"column \"label\", row 4: a null"):
        write_table(tmp_path / "u", reader, mode="append")
    cols = open_table(tmp_path / "u")
    assert len(cols["label"]) == 20
    np.testing.assert_array_equal(cols["label"][np.arange(20)], src["label"])
    # Nothing was left past the commit, so the next write goes in while a
    # reader holds the columns open (which only a tail to trim would wait for).
    write_table(tmp_path / "u", {"label": more["label"]}, mode="append")
    assert len(cols["label"]) == 20
    del cols
    np.testing.assert_array_equal(open_table(tmp_path / "u")["label"][np.arange(26)], np.arange(26))


def test_the_documented_example_runs(workdir):
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    block = doc.split("#### `open_table(path)`", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    scope = {}
    exec(compile(block, "python.md: open_table", "exec"), scope)
    values, splits = scope["batch"]["text"]
    texts = [values[splits[k]:splits[k + 1]].tobytes().decode() for k in range(2)]
    assert texts == [["a", "bc", "def", "\u00e9"][i] for i in scope["batch"].indices]


def loader_batches(streams, n, start_step=0, **kw):
    with DataLoader(streams, batch_size=16, num_workers=2, mode=2, seed=7, start_step=start_step, **kw) as loader:
        return [next(loader) for _ in range(n)]


def test_a_table_in_a_data_loader_with_resume(tmp_path):
    src = source()
    write_table(tmp_path / "t", src)
    got = loader_batches(open_table(tmp_path / "t"), 30)
    for b in got:
        rows = b.indices.astype(np.int64)
        np.testing.assert_array_equal(b["label"], src["label"][rows])
        np.testing.assert_array_equal(b["image"], src["image"][rows])
        values, splits = b["blob"]
        assert [values[splits[k]:splits[k + 1]].tobytes() for k in range(len(rows))] == [src["blob"][r] for r in rows]
        values, splits = b["text"]
        assert [values[splits[k]:splits[k + 1]].tobytes().decode() for k in range(len(rows))] == \
            [src["text"][r] for r in rows]
    again = loader_batches(open_table(tmp_path / "t"), 12, start_step=18)
    for a, b in zip(got[18:], again):
        np.testing.assert_array_equal(a.indices, b.indices)
        np.testing.assert_array_equal(a["label"], b["label"])
        for k in ("tokens", "blob", "text"):
            np.testing.assert_array_equal(a[k][0], b[k][0])
            np.testing.assert_array_equal(a[k][1], b[k][1])


def test_two_tables_in_a_mixture_with_resume(tmp_path):
    a, b = source(200), source(77, base=10_000)
    write_table(tmp_path / "a", a)
    write_table(tmp_path / "b", b)

    def mixture():
        return Mixture([open_table(tmp_path / "a"), open_table(tmp_path / "b")], [2, 1])

    got = loader_batches(mixture(), 40)
    seen = set()
    for batch in got:
        for k, (s, i) in enumerate(zip(batch.source.tolist(), batch.indices.tolist())):
            want = (a, b)[s]
            assert batch["label"][k] == want["label"][i]
            assert batch["text"][0][batch["text"][1][k]:batch["text"][1][k + 1]].tobytes().decode() == want["text"][i]
            seen.add(s)
    assert seen == {0, 1}
    again = loader_batches(mixture(), 15, start_step=25)
    for x, y in zip(got[25:], again):
        np.testing.assert_array_equal(x.source, y.source)
        np.testing.assert_array_equal(x.indices, y.indices)
        np.testing.assert_array_equal(x["label"], y["label"])


def test_pickling_a_tables_datasets(tmp_path):
    src = source(60)
    write_table(tmp_path / "t", src)
    cols = open_table(tmp_path / "t")
    back = pickle.loads(pickle.dumps(cols))
    assert list(back) == list(cols)
    np.testing.assert_array_equal(back["label"][np.arange(60)], src["label"])
    assert back["text"].path == cols["text"].path
    table = pickle.loads(pickle.dumps(Table(tmp_path / "t")))
    assert table.rows == 60 and table.strings("text", [5]) == [src["text"][5]]
    loader = DataLoader(back, batch_size=8, num_workers=1)
    assert len(next(loader)["label"]) == 8
    loader.close()


pa = pytest.importorskip("pyarrow")


def arrow_table(n=N):
    src = source(n)
    return src, pa.table({
        "label": pa.array(src["label"]),
        "image": pa.FixedSizeListArray.from_arrays(pa.array(src["image"].reshape(-1)), 6),
        "tokens": pa.array([t.tolist() for t in src["tokens"]], type=pa.list_(pa.int32())),
        "blob": pa.array(src["blob"], type=pa.binary()),
        "text": pa.array(src["text"], type=pa.large_string()),
        "flag": pa.array(src["label"] % 3 == 0),
        "cat": pa.array([f"c{i % 4}" for i in range(n)]).dictionary_encode(),
        "view": pa.array(src["text"], type=pa.string_view()),
        "bview": pa.array(src["blob"], type=pa.binary_view()),
        "long": pa.array([t.tolist() for t in src["tokens"]], type=pa.large_list(pa.int32())),
    })


def test_write_table_from_an_arrow_stream(tmp_path):
    src, table = arrow_table()
    reader = pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=70))
    assert write_table(tmp_path / "t", reader)["rows"] == N
    t = Table(tmp_path / "t")
    assert t.kinds == {"label": "fixed", "image": "fixed", "tokens": "ragged", "blob": "bytes", "text": "utf8",
                       "flag": "fixed", "cat": "utf8", "view": "utf8", "bview": "bytes", "long": "ragged"}
    cols = t.datasets()
    idx = np.arange(N)
    np.testing.assert_array_equal(cols["label"][idx], src["label"])
    np.testing.assert_array_equal(cols["image"][idx], src["image"].reshape(N, 6))
    np.testing.assert_array_equal(cols["flag"][idx], src["label"] % 3 == 0)
    values, splits = cols["tokens"][idx]
    for k in range(N):
        np.testing.assert_array_equal(values[splits[k]:splits[k + 1]], src["tokens"][k])
    assert t.values("blob", idx) == src["blob"]
    assert t.strings("text", idx) == src["text"]
    assert t.strings("cat", idx) == [f"c{i % 4}" for i in range(N)]
    assert t.strings("view", idx) == src["text"] and t.values("bview", idx) == src["blob"]
    long_values, long_splits = cols["long"][idx]
    np.testing.assert_array_equal(long_values, values)
    np.testing.assert_array_equal(long_splits, splits)
    # A sliced table (offsets into its buffers) reads back the same rows.
    assert write_table(tmp_path / "s", table.slice(33, 100))["rows"] == 100
    s = Table(tmp_path / "s")
    np.testing.assert_array_equal(s["label"][np.arange(100)], src["label"][33:133])
    np.testing.assert_array_equal(s["image"][np.arange(100)], src["image"][33:133].reshape(100, 6))
    assert s.strings("text", np.arange(100)) == src["text"][33:133]
    values, splits = s["tokens"][np.arange(100)]
    for k in range(100):
        np.testing.assert_array_equal(values[splits[k]:splits[k + 1]], src["tokens"][33 + k])


def test_an_arrow_null_is_refused_naming_column_and_row(tmp_path):
    table = pa.table({"a": pa.array([1, 2, None, 4]), "b": pa.array(["w", "x", "y", "z"])})
    with pytest.raises(ValueError, match=r"column \"a\", row 2: a null"):
        write_table(tmp_path / "t", pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=2)))
    # The first batch was appended, but nothing was committed.
    assert Table(tmp_path / "t").rows == 0
    # A list of strings has no column kind: refused, naming the column.
    with pytest.raises(TypeError, match=r"column \"s\""):
        write_table(tmp_path / "u", pa.table({"s": pa.array([["x"]])}))


def test_the_arrow_stream_source_skips_within_a_batch(tmp_path):
    _, table = arrow_table(100)
    reader = lambda: pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=30))
    fingerprint, rows = _arrow_stream_rows(reader(), 0, "corpus")
    assert rows == [30, 30, 30, 10] and "corpus" in fingerprint and "label" in fingerprint
    assert _arrow_stream_rows(reader(), 45, "corpus") == (fingerprint, [15, 30, 10])
    # Unnamed, every stream is a new input.
    assert _arrow_stream_rows(reader())[0] != _arrow_stream_rows(reader())[0]
    assert _arrow_stream_rows(reader(), 60)[1] == [30, 10]
    with pytest.raises(ValueError, match="ended 20 rows before"):
        _arrow_stream_rows(reader(), 120)
