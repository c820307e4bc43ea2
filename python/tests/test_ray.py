"""`loaderx_rs.ray` on a real two-node Ray cluster on loopback (docs/ray.md):
writes through the sink read back exactly, reads of datasets written by the
binding (one store, sharded, a table) with their values and column types,
projection, `map_batches`, a write whose task raises leaving nothing
committed and `gc` removing what a killed driver staged, a worker killed
mid-write and retried with every row once, appends; with an S3 server
(tests/remote/run.sh sets LOADERX_S3_TEST_BUCKET), a write across the
nodes to `s3://` read back exactly.

Sizes: LOADERX_RAY_TEST_ROWS rows (default 12,000, about 2.4 MB; 1,500,000
is about 300 MB) and LOADERX_RAY_TEST_STORE_MB of object store a node
(default 200):

    LOADERX_RAY_TEST_ROWS=1500000 LOADERX_RAY_TEST_STORE_MB=1024 \
        python -m pytest -q python/tests/test_ray.py -k "read_back_exactly"

The nodes are `ray start --block` processes of this module, stopped by
their pids (SIGTERM, then SIGKILL) and every process whose command line
names this cluster's temporary directory; each wait is bounded."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

# Ray 2.60 authenticates by token, reads the mode when imported, and a node
# takes ~/.ray/auth_token if there is one: unless the environment says
# otherwise, the cluster and this driver share a token of their own.
if "RAY_AUTH_MODE" not in os.environ:
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=os.urandom(16).hex())
    os.environ.pop("RAY_AUTH_TOKEN_PATH", None)

ray = pytest.importorskip("ray", reason="needs ray[data] (pip install 'ray[data]>=2.60,<2.61')")
pa = pytest.importorskip("pyarrow", reason="needs pyarrow")

import loaderx_rs  # noqa: E402
import loaderx_rs.ray as lray  # noqa: E402

START_SECONDS = 120
ROWS = int(os.environ.get("LOADERX_RAY_TEST_ROWS", 12_000))
STORE_BYTES = int(os.environ.get("LOADERX_RAY_TEST_STORE_MB", 200)) << 20
S3_BUCKET = os.environ.get("LOADERX_S3_TEST_BUCKET")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray_cli():
    return str(Path(sys.executable).with_name("ray"))


def wait_for_nodes(n):
    deadline = time.monotonic() + START_SECONDS
    while time.monotonic() < deadline:
        if sum(1 for node in ray.nodes() if node["Alive"]) >= n:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{n} Ray nodes not up within {START_SECONDS} s")


def stop(procs, temp_dir):
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=10)
    # What the nodes started and left behind, by pid: the processes whose
    # command line names this cluster's own temporary directory.
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if temp_dir.encode() in cmd:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    """A head node and a worker node on 127.0.0.1, one CPU each."""
    temp_dir = tempfile.mkdtemp(prefix="lxray-", dir="/tmp")
    port = free_port()
    # The workers import this module by name, for the functions the tests
    # hand to Ray (cloudpickle pickles a module's functions by reference).
    path = os.pathsep.join(p for p in [str(Path(__file__).parent), os.environ.get("PYTHONPATH")] if p)
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=path)
    env.pop("RAY_ADDRESS", None)
    common = ["--num-cpus", "1", "--object-store-memory", str(STORE_BYTES), "--block", "--disable-usage-stats"]
    head = [ray_cli(), "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
            "--include-dashboard=false", "--temp-dir", temp_dir, *common]
    procs = [subprocess.Popen(head, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + START_SECONDS
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if procs[0].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Ray head node did not start")
            time.sleep(0.5)
        worker = [ray_cli(), "start", "--address", address, "--node-ip-address", "127.0.0.1", *common]
        procs.append(subprocess.Popen(worker, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        wait_for_nodes(2)
        ctx = ray.data.DataContext.get_current()
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        stop(procs, temp_dir)


def node_of(batch):
    return {"node": [ray.get_runtime_context().get_node_id()] * len(batch["id"])}


def test_the_cluster_has_two_nodes_that_run_tasks(cluster):
    nodes = ray.data.range(64, override_num_blocks=16).map_batches(node_of, batch_size=4).unique("node")
    assert len(nodes) == 2, nodes


def make_batch(ids):
    """Rows `ids`: every column kind, values a function of the id."""
    ids = np.asarray(ids, dtype=np.int64)
    vec = (ids[:, None] * 16 + np.arange(16)[None, :]).astype(np.float32).reshape(-1, 4, 4)
    tokens = [np.arange(i % 37, dtype=np.int32) + int(i) for i in ids]
    blob = [bytes([(i * 7 + j) % 256 for j in range(i % 90)]) for i in ids]
    text = [f"row {i} " + "é" * (i % 5) for i in ids]
    return {"x": ids, "vec": vec, "tokens": tokens, "blob": blob, "text": text}


def source(rows=ROWS, blocks=max(6, ROWS // 250_000)):
    ds = ray.data.range(rows, override_num_blocks=blocks)
    return ds.map_batches(lambda b: make_batch(b["id"]), batch_format="numpy", batch_size=1000)


def check_rows(table: "pa.Table", ids):
    want = make_batch(ids)
    assert table.column("x").to_numpy().tolist() == want["x"].tolist()
    vec = table.column("vec").combine_chunks()
    assert isinstance(vec.type, pa.FixedShapeTensorType), vec.type
    np.testing.assert_array_equal(vec.to_numpy_ndarray(), want["vec"])
    assert table.schema.field("tokens").type == pa.large_list(pa.int32())
    got = table.column("tokens").to_pylist()
    assert got == [t.tolist() for t in want["tokens"]]
    assert table.schema.field("blob").type == pa.large_binary()
    assert table.column("blob").to_pylist() == want["blob"]
    assert table.schema.field("text").type == pa.large_string()
    assert table.column("text").to_pylist() == want["text"]


def test_write_then_read_back_exactly(cluster, tmp_path):
    dest = tmp_path / "t"
    sink = lray.write(source(), dest)
    assert sink.rows == ROWS
    table = loaderx_rs.Table(dest)
    assert table.rows == ROWS and table.columns == ["x", "vec", "tokens", "blob", "text"]
    assert table.kinds == {"x": "fixed", "vec": "fixed", "tokens": "ragged", "blob": "bytes", "text": "utf8"}
    assert not (dest / lray.STAGING_DIR).exists() or not any((dest / lray.STAGING_DIR).iterdir())
    ds = lray.read(dest)
    assert ds.count() == ROWS
    check_rows(pa.concat_tables(ray.get(ds.to_arrow_refs())), np.arange(ROWS))
    # The same rows through the binding: what Ray wrote is an ordinary table.
    check_rows(pa.table(loaderx_rs.to_arrow(dest)), np.arange(ROWS))


@pytest.mark.skipif(not S3_BUCKET, reason="needs an S3 server: tests/remote/run.sh starts one and runs this test")
def test_a_write_to_object_storage_across_the_nodes_reads_back_exactly(cluster):
    """Both nodes' tasks push their tables, the driver commits them by the
    table's manifest; read back through Ray and through the binding by URL."""
    url = f"s3://{S3_BUCKET}/ray-{os.getpid()}-{time.time_ns()}"
    sink = lray.write(source(), url)
    assert sink.rows == ROWS
    ds = lray.read(url)
    assert ds.count() == ROWS
    check_rows(pa.concat_tables(ray.get(ds.to_arrow_refs())), np.arange(ROWS))
    table = loaderx_rs.Table(url)
    assert table.rows == ROWS and table.kinds["blob"] == "bytes"
    ends = np.array([0, ROWS - 1])
    assert table.strings("text", ends) == make_batch(ends)["text"]
    assert lray.gc(url) == [], "the commit left no staging"


def test_reads_match_the_binding(cluster, tmp_path, rng):
    fixed = rng.standard_normal((5000, 3, 2)).astype(np.float32)
    loaderx_rs.write_dataset(str(tmp_path / "one"), fixed)
    loaderx_rs.write_dataset(str(tmp_path / "sharded"), fixed, shard_records=700)
    ragged = [rng.integers(0, 1000, size=int(n), dtype=np.int64) for n in rng.integers(0, 50, size=3000)]
    loaderx_rs.write_ragged(str(tmp_path / "ragged"), ragged, shard_records=1000)
    for name in ("one", "sharded"):
        ds = lray.read(tmp_path / name, override_num_blocks=4)
        assert ds.count() == len(fixed)
        t = pa.concat_tables(ray.get(ds.to_arrow_refs()))
        assert t.column_names == ["data"]
        np.testing.assert_array_equal(t.column("data").combine_chunks().to_numpy_ndarray(), fixed)
    ds = lray.read(tmp_path / "ragged", column_name="ids")
    t = pa.concat_tables(ray.get(ds.to_arrow_refs()))
    assert t.schema.field("ids").type == pa.large_list(pa.int64())
    assert t.column("ids").to_pylist() == [r.tolist() for r in ragged]
    # A table written by the binding, every column its type.
    loaderx_rs.write_table(str(tmp_path / "tbl"), make_batch(np.arange(500)))
    t = pa.concat_tables(ray.get(lray.read(tmp_path / "tbl").to_arrow_refs()))
    check_rows(t, np.arange(500))


def test_projection_and_map_batches(cluster, tmp_path):
    dest = tmp_path / "t"
    loaderx_rs.write_table(str(dest), make_batch(np.arange(3000)))
    t = pa.concat_tables(ray.get(lray.read(dest, columns=["text", "x"]).to_arrow_refs()))
    assert t.column_names == ["text", "x"]
    ds = lray.read(dest).select_columns(["x"])
    assert ds.columns() == ["x"]
    assert ds.sum("x") == sum(range(3000))
    doubled = lray.read(dest).map_batches(lambda b: {"y": b["x"] * 2, "n": np.array([len(s) for s in b["text"]])},
                                          batch_format="numpy")
    rows = doubled.take_all()
    assert [r["y"] for r in rows] == [2 * i for i in range(3000)]
    assert [r["n"] for r in rows] == [len(s) for s in make_batch(np.arange(3000))["text"]]


def raise_at(ids, bad):
    if bad in ids:
        raise RuntimeError(f"injected failure at row {bad}")
    return make_batch(ids)


class KilledDriverSink(lray.Sink):
    """A sink whose driver dies at the failure: it cleans nothing up, as a
    killed driver would not."""

    def on_write_failed(self, error):
        pass


def test_a_failed_write_commits_nothing_and_gc_removes_orphans(cluster, tmp_path):
    dest = tmp_path / "t"
    lray.write(source(2000, 2), dest)
    before = pa.table(loaderx_rs.to_arrow(dest))
    failing = ray.data.range(4000, override_num_blocks=4).map_batches(
        lambda b: raise_at(b["id"], 3500), batch_format="numpy", batch_size=500)
    with pytest.raises(Exception, match="injected failure"):
        lray.write(failing, dest)
    assert pa.table(loaderx_rs.to_arrow(dest)).equals(before)
    staging = dest / lray.STAGING_DIR
    assert not staging.exists() or [p for p in staging.iterdir() if p.is_dir()] == []
    sink = KilledDriverSink(dest)
    with pytest.raises(Exception, match="injected failure"):
        failing.write_datasink(sink)
    fd = lray._LOCKS.pop(sink.write_id, None)
    if fd is not None:
        os.close(fd)  # the killed driver's lock goes with its process
    assert Path(sink.staging).is_dir()
    assert pa.table(loaderx_rs.to_arrow(dest)).equals(before)
    assert lray.gc(dest) == [sink.staging]
    assert [p for p in staging.iterdir() if p.is_dir()] == []
    assert pa.table(loaderx_rs.to_arrow(dest)).equals(before)


def test_gc_leaves_a_running_write_alone(tmp_path):
    dest = tmp_path / "t"
    sink = lray.Sink(dest)
    sink.on_write_start()
    try:
        assert lray.gc(dest) == []
        assert Path(sink.staging).is_dir()
    finally:
        sink.on_write_failed(RuntimeError("done"))
    assert lray.gc(dest) == []


def test_append_adds_a_set_of_shards(cluster, tmp_path):
    dest = tmp_path / "t"
    lray.write(source(3000, 3), dest)
    reader = loaderx_rs.Table(dest)  # a reader of the previous version, open across the commit
    lray.write(ray.data.range(2000, override_num_blocks=2).map_batches(
        lambda b: make_batch(b["id"] + 3000), batch_format="numpy"), dest)
    assert reader.rows == 3000
    check_rows(pa.table(loaderx_rs.to_arrow(reader)), np.arange(3000))
    assert loaderx_rs.Table(dest).rows == 5000
    check_rows(pa.table(loaderx_rs.to_arrow(dest)), np.arange(5000))
    t = pa.concat_tables(ray.get(lray.read(dest).to_arrow_refs()))
    check_rows(t, np.arange(5000))


class ResourceNotingSink(lray.Sink):
    """`lray.Sink` whose tasks note the resources Ray assigned them, a file
    per task in the directory `notes`."""

    def __init__(self, dest, *, notes, **sink_args):
        super().__init__(dest, **sink_args)
        self.notes = notes

    def write(self, blocks, ctx):
        assigned = ray.get_runtime_context().get_assigned_resources()
        Path(self.notes, f"{ctx.task_idx}-{os.getpid()}").write_text(repr(sorted(assigned.items())))
        return super().write(blocks, ctx)


def test_write_passes_ray_remote_args_and_concurrency_to_the_tasks(cluster, tmp_path, monkeypatch):
    """`lray.write(..., ray_remote_args=, concurrency=)` go to Ray's write
    tasks (here: no CPU asked, and every task sees none assigned; with the
    default, each sees its CPU), the other arguments to the sink; the rows
    come back exactly."""
    with pytest.raises(TypeError, match="concurrency"):
        lray.Sink(tmp_path / "t", concurrency=2)  # Ray's arguments are write's, not the sink's
    monkeypatch.setattr(lray, "Sink", ResourceNotingSink)
    notes = {k: tmp_path / f"notes-{k}" for k in ("none", "default")}
    for path in notes.values():
        path.mkdir()
    dest = tmp_path / "t"
    sink = lray.write(source(3000, 4), dest, ray_remote_args={"num_cpus": 0}, concurrency=2, codec="zstd",
                      notes=str(notes["none"]))
    assert sink.rows == 3000
    seen = [p.read_text() for p in notes["none"].iterdir()]
    assert seen and all("CPU" not in text for text in seen), seen
    lray.write(source(1000, 2), tmp_path / "u", notes=str(notes["default"]))
    seen = [p.read_text() for p in notes["default"].iterdir()]
    assert seen and all("CPU" in text for text in seen), seen
    table = loaderx_rs.Table(dest)
    assert {table[c].codec for c in table.columns} == {"zstd"}
    check_rows(pa.table(loaderx_rs.to_arrow(dest)), np.arange(3000))


def test_a_sink_refuses_a_dataset(tmp_path):
    loaderx_rs.write_dataset(str(tmp_path / "d"), np.zeros((4, 2), dtype=np.float32))
    with pytest.raises(ValueError, match="not a table"):
        lray.Sink(tmp_path / "d")


def die_once(ids, marker):
    """Rows `ids`, but the worker process exits the first time it meets
    row 2600, after its task has staged the blocks before it."""
    if 2600 in ids and not os.path.exists(marker):
        Path(marker).touch()
        os._exit(1)
    return make_batch(ids)


def test_a_worker_killed_mid_write_is_retried_with_every_row_once(cluster, tmp_path):
    dest, marker = tmp_path / "t", str(tmp_path / "killed")
    ds = ray.data.range(4000, override_num_blocks=4).map_batches(
        lambda b: die_once(b["id"], marker), batch_format="numpy", batch_size=200)
    sink = lray.write(ds, dest)
    assert os.path.exists(marker), "no worker was killed"
    assert sink.rows == 4000
    check_rows(pa.table(loaderx_rs.to_arrow(dest)), np.arange(4000))
    assert lray.gc(dest) == []
    assert not (dest / lray.STAGING_DIR / sink.write_id).exists()


@pytest.mark.skipif(not S3_BUCKET, reason="needs an S3 server: tests/remote/run.sh starts one and runs this test")
def test_a_worker_killed_mid_write_to_object_storage_is_retried_with_every_row_once(cluster, tmp_path):
    """The killed task had staged part of its table on its node: the retry
    commits every row once, no object is left unlisted, and the killed
    task's directory on the node is removed by the tasks after it."""
    url, marker = f"s3://{S3_BUCKET}/ray-kill-{os.getpid()}-{time.time_ns()}", str(tmp_path / "killed")
    ds = ray.data.range(4000, override_num_blocks=4).map_batches(
        lambda b: die_once(b["id"], marker), batch_format="numpy", batch_size=200)
    sink = lray.write(ds, url)
    assert os.path.exists(marker), "no worker was killed"
    assert sink.rows == 4000
    check_rows(pa.concat_tables(ray.get(lray.read(url).to_arrow_refs())), np.arange(4000))
    assert lray.gc(url, keep_newer_than=0) == [], "an object no manifest lists"
    staging = Path(tempfile.gettempdir(), lray._NodeStaging.ROOT)
    assert sorted(p.name for p in staging.glob("task-*")) == [], "a task's directory left on the node"


def test_a_killed_tasks_node_staging_is_swept_and_a_live_ones_kept(tmp_path):
    """`_NodeStaging`: a process that dies inside it leaves its directory
    with its lock free; the next task's sweep removes exactly that one."""
    root = tmp_path / "stage"
    with lray._NodeStaging(str(root)) as live:
        Path(live, "part").write_bytes(b"live")
        child = ("import os, sys; from pathlib import Path; import loaderx_rs.ray as lray\n"
                 "path = lray._NodeStaging(sys.argv[1]).__enter__()\n"
                 "Path(path, 'part').write_bytes(b'dead'); print(path, flush=True); os._exit(0)")
        out = subprocess.run([sys.executable, "-c", child, str(root)], check=True, capture_output=True,
                             text=True, timeout=120)
        dead = Path(out.stdout.strip())
        assert dead.is_dir() and dead.parent == root
        with lray._NodeStaging(str(root)) as other:
            assert not dead.exists() and not Path(str(dead) + ".lock").exists()
            assert Path(live, "part").read_bytes() == b"live"
            assert lray._NodeStaging(str(root)).sweep() == [], "two live tasks' directories"
        assert not Path(other).exists()
    assert list(root.iterdir()) == []
