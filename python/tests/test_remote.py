"""Datasets and stores published on S3-compatible object storage, opened by
URL: Dataset(url), RaggedDataset(url), Zrecord(url, read_only=True), in a
DataLoader, pickled, and in a fork child (as PyTorch's DataLoader workers
read); write_table of Parquet files in the bucket, by prefix and by glob.
Needs a live server: tests/remote/run.sh starts SeaweedFS on
loopback and runs this file with LOADERX_S3_TEST_BUCKET, the AWS_*
variables and LOADERX_CLI (the `loaderx` binary, which pushes) set."""

import os
import pickle
import signal
import subprocess
import sys

import numpy as np
import pytest

from loaderx_rs import DataLoader, Dataset, RaggedDataset, Zrecord, Zsampler, write_dataset, write_ragged

BUCKET = os.environ.get("LOADERX_S3_TEST_BUCKET")
CLI = os.environ.get("LOADERX_CLI")
pytestmark = pytest.mark.skipif(
    not (BUCKET and CLI), reason="needs an S3 server: tests/remote/run.sh starts one and runs this file"
)


def push(local, name):
    url = f"s3://{BUCKET}/python-{os.getpid()}-{name}"
    subprocess.run([CLI, "push", str(local), url], check=True, stdout=subprocess.DEVNULL)
    return url


@pytest.fixture
def fixed(tmp_path, rng):
    data = rng.standard_normal((3000, 16)).astype(np.float32)
    write_dataset(tmp_path / "fixed", data)
    return push(tmp_path / "fixed", "fixed"), data


def test_a_dataset_by_url_reads_as_the_local_one(fixed, rng):
    url, data = fixed
    ds = Dataset(url)
    assert len(ds) == 3000 and ds.shape == (16,) and ds.dtype == np.float32
    assert ds.path == url, "the URL is kept whole (a pathlib.Path would fold its //)"
    idx = rng.permutation(3000)[:500]
    np.testing.assert_array_equal(ds[idx], data[idx])
    again = pickle.loads(pickle.dumps(ds))
    np.testing.assert_array_equal(again[idx], data[idx])


def test_a_ragged_dataset_and_a_store_by_url(tmp_path):
    seqs = [np.arange(n, dtype=np.int32) for n in range(1, 200)]
    write_ragged(tmp_path / "ragged", seqs)
    url = push(tmp_path / "ragged", "ragged")
    rds = RaggedDataset(url)
    values, splits = rds[np.array([198, 0, 50])]
    np.testing.assert_array_equal(values[splits[0]:splits[1]], seqs[198])
    np.testing.assert_array_equal(values[splits[2]:splits[3]], seqs[50])
    store = Zrecord(url, read_only=True)
    assert len(store) == 199 and store.read_only
    idx = np.array([3, 198], dtype=np.uint64)
    lens = store.lengths(idx)
    assert lens.tolist() == [16, 199 * 4]
    dst = np.zeros(int(lens.sum()), dtype=np.uint8)
    store.gather_var(idx, dst, np.array([0, 16], dtype=np.uint64))
    assert dst.tobytes() == seqs[3].tobytes() + seqs[198].tobytes()
    with pytest.raises(ValueError, match="read-only"):
        Zrecord(url)


def test_a_sharded_dataset_by_url_reads_every_shard(tmp_path, rng):
    data = rng.standard_normal((1000, 4)).astype(np.float32)
    write_dataset(tmp_path / "sharded", data, shard_records=300)
    url = push(tmp_path / "sharded", "sharded")
    ds = Dataset(url)
    assert len(ds) == 1000 and ds.sharded and ds.shards == 4
    idx = rng.permutation(1000)
    np.testing.assert_array_equal(ds[idx], data[idx])


def test_a_missing_store_is_an_error_naming_it():
    url = f"s3://{BUCKET}/python-nothing-here"
    with pytest.raises(OSError, match="python-nothing-here/manifest.json"):
        Dataset(url)


def test_a_loader_and_a_fork_child_read_by_url(fixed):
    url, data = fixed
    ds = Dataset(url)
    sampler = Zsampler(3000, 128, 2, seed=3)
    with DataLoader({"x": ds}, batch_size=128, num_workers=2, mode=2, seed=3) as loader:
        for _ in range(5):
            np.testing.assert_array_equal(next(loader)["x"], data[sampler.next().astype(np.int64)])
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            signal.alarm(60)  # a hang ends the child, and the test fails
            idx = np.arange(2999, -1, -7)
            np.testing.assert_array_equal(ds[idx], data[idx])  # the parent's handle
            np.testing.assert_array_equal(Dataset(url)[idx], data[idx])
            status = 0
        except BaseException as e:  # noqa: BLE001 - reported, then the status says it
            print(f"child failed: {e!r}", file=sys.stderr)
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert status == 0
    np.testing.assert_array_equal(ds[:10], data[:10])


def test_write_table_imports_parquet_files_from_the_bucket(tmp_path):
    # The files tests/remote/s3.rs (run first by run.sh) leaves there.
    src = f"s3://{BUCKET}/import-fixture/tokens"
    from loaderx_rs import Table, write_table
    done = write_table(tmp_path / "t", src)
    assert done["table_rows"] == 30000
    assert Table(tmp_path / "t").strings("text", np.array([0, 29999])) == ["row 0", "row 29999"]
    assert write_table(tmp_path / "g", f"{src}/*-1.parquet")["table_rows"] == 10000
    assert write_table(tmp_path / "t", src)["already_done"]


def test_ray_reads_a_sharded_dataset_by_url(tmp_path, rng):
    """`loaderx_rs.ray.read(url)` (docs/ray.md): a local Ray of one CPU whose
    workers open the dataset by its URL (the AWS_* environment inherited)."""
    ray = pytest.importorskip("ray", reason="needs ray[data] (the CI's Ray stage installs it)")
    pa = pytest.importorskip("pyarrow")
    import loaderx_rs.ray as lray

    data = rng.standard_normal((2000, 3)).astype(np.float32)
    write_dataset(tmp_path / "sharded", data, shard_records=700)
    url = push(tmp_path / "sharded", "ray-sharded")
    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        ds = lray.read(url, override_num_blocks=3)
        assert ds.count() == 2000
        t = pa.concat_tables(ray.get(ds.to_arrow_refs()))
        got = np.concatenate([b.to_numpy_ndarray() for b in t.column("data").chunks])
        np.testing.assert_array_equal(got, data)
    finally:
        ray.shutdown()


def _table_fixture(tmp_path):
    """A table of a fixed, a ragged and a text column, committed in four
    steps."""
    pa = pytest.importorskip("pyarrow")
    from loaderx_rs import write_table
    n = 900
    rows = pa.table({
        "x": pa.FixedShapeTensorArray.from_numpy_ndarray(np.arange(n * 4, dtype=np.float32).reshape(n, 4)),
        "ids": pa.array([list(range(i % 7)) for i in range(n)], type=pa.large_list(pa.int32())),
        "text": pa.array([f"row {i} é" * (i % 3) for i in range(n)]),
    })
    write_table(tmp_path / "t", rows, codecs={"text": "zstd"}, commit_rows=250)
    return rows


def test_a_table_by_url_reads_its_committed_rows(tmp_path, rng):
    from loaderx_rs import Table, open_table
    rows = _table_fixture(tmp_path)
    url = push(tmp_path / "t", "table")
    table = Table(url)
    assert table.rows == 900 and table.columns == ["x", "ids", "text"]
    assert str(table.path) == url
    idx = rng.permutation(900)[:300]
    np.testing.assert_array_equal(table["x"][idx], rows.column("x").combine_chunks().to_numpy_ndarray()[idx])
    assert table.strings("text", idx) == [rows.column("text")[int(i)].as_py() for i in idx]
    values, splits = open_table(url)["ids"][idx]
    assert [values[splits[k]:splits[k + 1]].tolist() for k in range(len(idx))] == [list(range(i % 7)) for i in idx]
    with pytest.raises(OSError, match="a table is published here"):
        Dataset(url)
    pulled = tmp_path / "pulled"
    subprocess.run([CLI, "pull", url, str(pulled)], check=True, stdout=subprocess.DEVNULL)
    assert Table(pulled).strings("text", idx) == table.strings("text", idx)


def test_ray_reads_a_table_by_url(tmp_path):
    """`loaderx_rs.ray.read(url)` of a pushed table: every column's values
    and Arrow types, its rows in order."""
    ray = pytest.importorskip("ray", reason="needs ray[data] (the CI's Ray stage installs it)")
    pa = pytest.importorskip("pyarrow")
    import loaderx_rs.ray as lray

    rows = _table_fixture(tmp_path)
    url = push(tmp_path / "t", "ray-table")
    ray.init(num_cpus=1, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        ds = lray.read(url, override_num_blocks=3)
        got = pa.concat_tables(ray.get(ds.to_arrow_refs()))
        assert got.num_rows == 900 and got.column_names == ["x", "ids", "text"]
        assert got.column("text").to_pylist() == rows.column("text").to_pylist()
        assert got.column("ids").to_pylist() == rows.column("ids").to_pylist()
        np.testing.assert_array_equal(got.column("x").combine_chunks().to_numpy_ndarray(),
                                      rows.column("x").combine_chunks().to_numpy_ndarray())
    finally:
        ray.shutdown()


def test_ray_writes_a_table_to_a_url(tmp_path):
    """`loaderx_rs.ray.write(ds, url)` (docs/ray.md, "Writing to object
    storage"): tasks push their tables under the staging prefix, the
    driver's commit adopts them; a second write appends; a write whose task
    fails commits nothing and leaves no staging; a URL holding a dataset is
    refused."""
    ray = pytest.importorskip("ray", reason="needs ray[data] (the CI's Ray stage installs it)")
    pa = pytest.importorskip("pyarrow")
    import loaderx_rs.ray as lray
    from loaderx_rs import Table

    rows = _table_fixture(tmp_path)
    url = f"s3://{BUCKET}/python-{os.getpid()}-ray-write"
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    try:
        ray.data.DataContext.get_current().execution_options.preserve_order = True
        ds = ray.data.from_arrow(rows).repartition(3)
        assert lray.write(ds, url).rows == 900
        assert lray.write(ds, url).rows == 1800
        table = Table(url)
        assert table.rows == 1800
        assert table.strings("text", np.arange(1800)) == rows.column("text").to_pylist() * 2
        values, splits = table["ids"][np.arange(900, 1800)]
        assert [values[splits[k]:splits[k + 1]].tolist() for k in range(900)] == rows.column("ids").to_pylist()

        def fail(batch):
            first = batch.column("x").combine_chunks().storage.flatten()[0].as_py()
            if first >= 1200:  # rows 300 on: the second and third tasks
                raise RuntimeError("a task fails")
            return batch

        with pytest.raises(Exception, match="a task fails"):
            lray.write(ds.map_batches(fail, batch_format="pyarrow"), url)
        assert Table(url).rows == 1800, "a failed write commits nothing"
        assert lray.gc(url) == [], "and leaves no staging"
        # What a killed driver leaves (a task's table pushed under the
        # staging prefix): kept while young, then removed by the URL.
        staged = push(tmp_path / "t", "ray-write/.staging/w9/t0")
        assert lray.gc(url) == [], "younger than an hour: a write may be under way"
        removed = lray.gc(url, keep_newer_than=0)
        assert removed and all(u.startswith(staged + "/") for u in removed), removed
        assert lray.gc(url, keep_newer_than=0) == [] and Table(url).rows == 1800
        with pytest.raises(ValueError, match="keep_newer_than"):
            lray.gc(url, keep_newer_than=-1)
        # One write at a time: while another holds the lock, a write fails
        # before it stages anything, and leaves the other's lock alone.
        import loaderx_rs
        assert loaderx_rs._lock_writes(url, "other")[:2] == (True, False), "SeaweedFS enforces If-None-Match"
        with pytest.raises(Exception, match="another write holds"):
            lray.write(ds, url)
        assert loaderx_rs._lock_writes(url, "third")[0] is False, "the refused write left the lock held"
        assert loaderx_rs._unlock_writes(url, "other")
        assert lray.write(ds, url).rows == 2700 and Table(url).rows == 2700
        with pytest.raises(ValueError, match="holds a dataset, not a table"):
            lray.Sink(push(_dataset(tmp_path), "ray-not-a-table"))
    finally:
        ray.shutdown()


def _dataset(tmp_path):
    write_dataset(tmp_path / "plain", np.zeros((10, 2), dtype=np.float32))
    return tmp_path / "plain"
