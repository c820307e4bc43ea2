"""Hugging Face `datasets` in: a Dataset of several column types written by
`datasets` itself with `save_to_disk`, imported from its directory, and the
same Dataset's Arrow table imported as a stream; values compared exactly
with what `datasets` reads back. Skips where `datasets` is not installed."""

import numpy as np
import pytest

from loaderx_rs import Table, write_table

datasets = pytest.importorskip("datasets", reason="Hugging Face datasets is not installed")
pa = pytest.importorskip("pyarrow")

N = 300


def make_dataset():
    features = datasets.Features({
        "id": datasets.Value("int64"),
        "score": datasets.Value("float32"),
        "flag": datasets.Value("bool"),
        "text": datasets.Value("string"),
        "blob": datasets.Value("binary"),
        "tokens": datasets.Sequence(datasets.Value("int32")),
        "label": datasets.ClassLabel(names=["cat", "dog", "bird"]),
    })
    rows = {
        "id": list(range(N)),
        "score": [k / 4 for k in range(N)],
        "flag": [k % 3 == 0 for k in range(N)],
        "text": [f"row {k} \u00e9" * (k % 4) for k in range(N)],
        "blob": [bytes([k % 256]) * (k % 7) for k in range(N)],
        "tokens": [list(range(k % 11)) for k in range(N)],
        "label": [k % 3 for k in range(N)],
    }
    return datasets.Dataset.from_dict(rows, features=features)


def check(path, ds):
    """The table at `path` holds `ds`'s rows, column by column."""
    t = Table(path)
    assert t.rows == len(ds)
    assert sorted(t.columns) == sorted(ds.column_names)
    idx = np.arange(len(ds))
    cols = t.datasets()
    for name, dtype in (("id", np.int64), ("score", np.float32), ("flag", np.bool_), ("label", np.int64)):
        got = cols[name][idx]
        np.testing.assert_array_equal(got, np.array(ds[name], dtype=dtype))
    assert t.strings("text", idx) == ds["text"]
    assert t.values("blob", idx) == ds["blob"]
    values, splits = cols["tokens"][idx]
    for k, want in enumerate(ds["tokens"]):
        np.testing.assert_array_equal(values[splits[k]:splits[k + 1]], np.array(want, dtype=np.int32))


def test_a_save_to_disk_directory_written_by_datasets(tmp_path):
    ds = make_dataset()
    ds.save_to_disk(str(tmp_path / "hf"), max_shard_size="20KB")
    assert len(list((tmp_path / "hf").glob("data-*.arrow"))) > 1, "the fixture should span several Arrow files"
    back = datasets.load_from_disk(str(tmp_path / "hf"))
    summary = write_table(tmp_path / "t", str(tmp_path / "hf"))
    assert summary["rows"] == N
    check(tmp_path / "t", back)
    # A rerun of the finished import is a no-op.
    assert write_table(tmp_path / "t", str(tmp_path / "hf"))["rows"] == 0
    assert Table(tmp_path / "t").rows == N


def test_a_datasets_arrow_table_as_a_stream(tmp_path):
    ds = make_dataset()
    # datasets.Dataset has no __arrow_c_stream__ (datasets 5.0); its Arrow
    # table (ds.data.table, a pyarrow Table) has.
    source = ds if hasattr(ds, "__arrow_c_stream__") else ds.data.table
    assert write_table(tmp_path / "t", source)["rows"] == N
    check(tmp_path / "t", ds)
