"""Ray Data reads and writes of loaderx datasets and tables (docs/ray.md).

- `read(path, columns=None, ...)`: a `ray.data.Dataset` of a store, a
  sharded dataset or a table, read by `Datasource`'s read tasks, each over
  whole shards or an index range, through the batched gather.
- `Sink(dest, ...)` / `write(ds, dest, ...)`: each write task writes its
  blocks into a table of its own under `dest/.staging/<write id>/`; the
  driver adopts all of them as new shards of the table at `dest` and
  commits them in one replacement of its `table.json` (of its manifest,
  for an `s3://` destination).
- `gc(dest)`: removes the staging directories of writes no longer running.

Built against `ray[data]` >= 2.60, < 2.61 (`SUPPORTED_RAY`): `Datasource`
and `Datasink` are Ray's developer APIs and change between releases.
Importing this module imports ray and pyarrow.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa
import ray
from ray.data.block import BlockAccessor, BlockMetadata
from ray.data.datasource import Datasink, Datasource, ReadTask

import loaderx_rs

__all__ = ["read", "write", "Sink", "LoaderxDatasource", "gc", "SUPPORTED_RAY", "STAGING_DIR"]

#: The Ray versions this module is built and tested against.
SUPPORTED_RAY = ">=2.60,<2.61"
#: The directory, inside a write's destination, of the tables its tasks stage.
STAGING_DIR = ".staging"
#: Rows of one block a read task yields, at most (and `BLOCK_BYTES` of values).
BLOCK_ROWS = 65536
BLOCK_BYTES = 64 << 20
#: Bytes of values a read task reads at least, by default: Ray asks for 200
#: tasks whatever the size, and a task costs milliseconds to schedule.
TASK_BYTES_MIN = 64 << 20
#: The column name a single dataset (not a table) reads as.
DATA_COLUMN = "data"


def _check_version() -> None:
    major, minor = (int(p) for p in ray.__version__.split(".")[:2])
    if (major, minor) != (2, 60):
        import warnings

        warnings.warn(f"loaderx_rs.ray is built against ray {SUPPORTED_RAY}; this is ray {ray.__version__}",
                      stacklevel=3)


_check_version()


# ---------------------------------------------------------------- reading


def _is_url(path: str) -> bool:
    return "://" in path


def _is_table(path: str) -> bool:
    """Whether `path` holds a table: its `table.json`, or for a URL the
    manifest of a pushed table."""
    if _is_url(path):
        return loaderx_rs._published(path) == "table"
    return (Path(path) / "table.json").is_file()


def _open_dataset(path: str):
    """A single or sharded dataset at `path`, fixed or ragged."""
    try:
        return loaderx_rs.Dataset(path)
    except loaderx_rs.DatasetError as e:
        if "ragged" not in str(e):
            raise
        return loaderx_rs.RaggedDataset(path)


def _shard_starts(path: str, rows: int) -> List[int]:
    """The first global index of every shard of the dataset at `path` (one
    store: [0]), from its `shards.json`, reading no record."""
    table = Path(path) / "shards.json"
    if _is_url(path) or not table.is_file():
        return [0]
    starts, at = [], 0
    for shard in json.loads(table.read_text())["shards"]:
        starts.append(at)
        at += shard.get("records", 0)
    return [s for s in starts if s < rows] or [0]


class _Column:
    """One column as a read task sees it: its name, kind and row layout."""

    def __init__(self, name: str, kind: str, dtype: np.dtype, shape: Tuple[int, ...], row_bytes: float):
        self.name, self.kind, self.dtype, self.shape, self.row_bytes = name, kind, dtype, shape, row_bytes


def _ragged_row_bytes(ds) -> float:
    """A ragged dataset's mean decoded record size, from its store's
    statistics (its first shard for a sharded one): no record read."""
    try:
        store = ds._store
    except loaderx_rs.DatasetError:
        store = loaderx_rs.Zrecord(str(ds.path), read_only=True)
    stats = store.stats()
    return stats["logical_bytes"] / max(stats["records"], 1)


def _describe(name: str, kind: str, ds) -> _Column:
    if kind == "fixed":
        shape = tuple(ds.shape)
        return _Column(name, kind, np.dtype(ds.dtype), shape, np.dtype(ds.dtype).itemsize * int(np.prod(shape)))
    return _Column(name, kind, np.dtype(ds.dtype), tuple(ds.item_shape), _ragged_row_bytes(ds))


def _numbers(values: np.ndarray) -> pa.Array:
    if values.dtype.kind in "SV":
        return pa.array(list(values.tobytes()[i:i + values.itemsize]
                             for i in range(0, values.nbytes, values.itemsize)), type=pa.binary(values.itemsize))
    if values.dtype.byteorder == ">":
        values = values.astype(values.dtype.newbyteorder("<"))
    return pa.array(values)


def _fixed_array(values: np.ndarray) -> pa.Array:
    if values.ndim == 1:
        return _numbers(values)
    if values.dtype.byteorder == ">":
        values = values.astype(values.dtype.newbyteorder("<"))
    return pa.FixedShapeTensorArray.from_numpy_ndarray(np.ascontiguousarray(values))


def _ragged_array(col: _Column, values: np.ndarray, splits: np.ndarray) -> pa.Array:
    offsets = pa.array(splits.astype(np.int64, copy=False))
    if col.kind in ("bytes", "utf8"):
        typ = pa.large_binary() if col.kind == "bytes" else pa.large_string()
        raw = np.ascontiguousarray(values).view(np.uint8)
        return pa.Array.from_buffers(typ, len(splits) - 1, [None, offsets.buffers()[1], pa.py_buffer(raw)])
    inner = _numbers(np.ascontiguousarray(values).reshape(-1))
    for d in reversed(col.shape):
        inner = pa.FixedSizeListArray.from_arrays(inner, d)
    return pa.LargeListArray.from_arrays(offsets, inner)


def _read_column(col: _Column, ds, idx: np.ndarray) -> pa.Array:
    if col.kind == "fixed":
        return _fixed_array(ds[idx])
    values, splits = ds[idx]
    return _ragged_array(col, values, splits)


def _read_range(path: str, is_table: bool, columns: List[_Column], lo: int, hi: int, step: int):
    """A read task's body: rows `lo..hi` as Arrow tables of `step` rows."""
    if is_table:
        table = loaderx_rs.Table(path)
        datasets = {c.name: table[c.name] for c in columns}
    else:
        datasets = {columns[0].name: _open_dataset(path)}
    for a in range(lo, hi, step):
        idx = np.arange(a, min(a + step, hi), dtype=np.uint64)
        arrays = [_read_column(c, datasets[c.name], idx) for c in columns]
        yield pa.Table.from_arrays(arrays, names=[c.name for c in columns])


def _ranges(starts: List[int], rows: int, parallelism: int) -> List[Tuple[int, int]]:
    """Cuts `0..rows` into about `parallelism` ranges: whole shards grouped
    when there are as many shards as tasks, else each shard cut evenly."""
    bounds = starts + [rows]
    shards = [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    parallelism = max(1, parallelism)
    if len(shards) >= parallelism:
        per = -(-len(shards) // parallelism)
        return [(shards[i][0], shards[min(i + per, len(shards)) - 1][1]) for i in range(0, len(shards), per)]
    out = []
    for a, b in shards:
        parts = max(1, round(parallelism * (b - a) / rows))
        cuts = [a + (b - a) * j // parts for j in range(parts + 1)]
        out.extend((x, y) for x, y in zip(cuts, cuts[1:]) if y > x)
    return out


class LoaderxDatasource(Datasource):
    """A Ray `Datasource` over a store, a sharded dataset or a table.

    `columns` selects and orders a table's columns (Ray's projection
    pushdown narrows it further); a single dataset is one column named
    `column_name`. Read tasks cover whole shards where there are enough,
    index ranges otherwise, each at least `task_bytes_min` bytes of values
    (fewer tasks than Ray asks for on small data), and read `BLOCK_ROWS`
    rows per gather."""

    def __init__(self, path: Any, columns: Optional[Sequence[str]] = None, *, column_name: str = DATA_COLUMN,
                 task_bytes_min: int = TASK_BYTES_MIN):
        super().__init__()
        self._projection_map = None
        self._task_bytes_min = task_bytes_min
        self._path = os.fspath(path)
        self._is_table = _is_table(self._path)
        if self._is_table:
            table = loaderx_rs.Table(self._path)
            names = list(columns) if columns is not None else table.columns
            missing = [n for n in names if n not in table.columns]
            if missing:
                raise KeyError(f"{missing} not in the table's columns {table.columns}")
            self._rows = table.rows
            self._columns = [_describe(n, table.kinds[n], table[n]) for n in names]
            self._starts = [0]
        else:
            ds = _open_dataset(self._path)
            if columns is not None and list(columns) != [column_name]:
                raise KeyError(f"a dataset reads as the one column {column_name!r}, not {list(columns)}")
            kind = "ragged" if isinstance(ds, loaderx_rs.RaggedDataset) else "fixed"
            self._rows = len(ds)
            self._columns = [_describe(column_name, kind, ds)]
            self._starts = _shard_starts(self._path, self._rows)

    def supports_projection_pushdown(self) -> bool:
        return True

    def get_name(self) -> str:
        return "Loaderx"

    def _selected(self) -> List[_Column]:
        keep = self._get_data_columns()
        return self._columns if keep is None else [c for c in self._columns if c.name in keep]

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return int(self._rows * sum(c.row_bytes for c in self._selected()))

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context=None) -> List[ReadTask]:
        columns = self._selected()
        row_bytes = max(sum(c.row_bytes for c in columns), 1.0)
        step = int(max(1, min(BLOCK_ROWS, BLOCK_BYTES // row_bytes)))
        if self._task_bytes_min > 0:
            parallelism = min(parallelism, max(1, int(self._rows * row_bytes // self._task_bytes_min)))
        tasks = []
        for lo, hi in _ranges(self._starts, self._rows, parallelism):
            meta = BlockMetadata(num_rows=hi - lo, size_bytes=int((hi - lo) * row_bytes), input_files=[self._path],
                                 exec_stats=None)
            path, is_table = self._path, self._is_table
            fn = (lambda lo=lo, hi=hi: _read_range(path, is_table, columns, lo, hi, step))
            tasks.append(ReadTask(fn, meta, per_task_row_limit=per_task_row_limit))
        return tasks


def read(path: Any, columns: Optional[Sequence[str]] = None, *, column_name: str = DATA_COLUMN,
         override_num_blocks: Optional[int] = None, **ray_args) -> "ray.data.Dataset":
    """The dataset or table at `path` (or published to `s3://` by a
    push) as a `ray.data.Dataset`; `columns` selects a table's columns.
    `override_num_blocks` sets the read tasks' number (by default each task
    reads at least `TASK_BYTES_MIN`). Other keyword arguments go to
    `ray.data.read_datasource`."""
    source = LoaderxDatasource(path, columns, column_name=column_name, task_bytes_min=0)
    if override_num_blocks is None:
        # Ray splits the blocks of fewer tasks than it asked for (200) into
        # slices, and a slice of a list column is copied to be stored: ask
        # for the tasks this read makes, each of at least TASK_BYTES_MIN.
        asked = ray.data.DataContext.get_current().read_op_min_num_blocks
        override_num_blocks = max(1, min(asked, source.estimate_inmemory_data_size() // TASK_BYTES_MIN))
        override_num_blocks = max(1, len(source.get_read_tasks(override_num_blocks)))
    return ray.data.read_datasource(source, override_num_blocks=override_num_blocks, **ray_args)


# ---------------------------------------------------------------- writing

# The staging locks of this process's writes in flight, by write id: held
# while the write runs, so that `gc` leaves its staging alone.
_LOCKS: Dict[str, int] = {}


def _to_storable(table: pa.Table) -> pa.Table:
    """A block's Arrow table with Ray's own tensor columns as Arrow's
    fixed-shape tensors (a variable-shaped one as a large list), which
    `write_table` imports."""
    from ray.data._internal.tensor_extensions.arrow import (
        get_arrow_extension_fixed_shape_tensor_types,
        get_arrow_extension_variable_shape_tensor_types,
    )

    fixed, variable = get_arrow_extension_fixed_shape_tensor_types(), get_arrow_extension_variable_shape_tensor_types()
    for k, field in enumerate(table.schema):
        column = table.column(k)
        if isinstance(field.type, pa.FixedShapeTensorType):
            continue
        if isinstance(field.type, fixed):
            arr = column.combine_chunks().to_numpy()
            table = table.set_column(k, field.name, pa.FixedShapeTensorArray.from_numpy_ndarray(arr))
        elif isinstance(field.type, variable):
            rows = column.combine_chunks().to_numpy()
            if any(np.asarray(r).ndim != 1 for r in rows):
                raise TypeError(f"column {field.name!r}: tensors of varying shape other than 1-d lists")
            table = table.set_column(k, field.name, pa.array([np.asarray(r) for r in rows],
                                                             type=pa.large_list(pa.from_numpy_dtype(rows[0].dtype))))
    return table


class _NodeStaging:
    """A write task's directory on its node, for the table it stages before
    pushing it to object storage: `<tmp>/loaderx-ray/task-<id>`, held by an
    exclusive `flock` on `task-<id>.lock` while the task lives, removed
    with its lock when the task ends. A task whose process was killed
    leaves both behind, its lock free: each task entering removes those
    first (`sweep`), so a node keeps no more than its running tasks'."""

    ROOT = "loaderx-ray"

    def __init__(self, root: Optional[str] = None):
        self.root = root or os.path.join(tempfile.gettempdir(), self.ROOT)

    def __enter__(self) -> str:
        os.makedirs(self.root, exist_ok=True)
        self.sweep()
        while True:
            name = f"task-{uuid.uuid4().hex}"
            lock = os.path.join(self.root, name + ".lock")
            fd = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
            # A sweep may have taken the lock file between its creation and
            # the flock, and removed it: then the lock held is no one's.
            if _same_file(lock, fd):
                break
            os.close(fd)
        self.fd, self.lock, self.path = fd, lock, os.path.join(self.root, name)
        try:
            os.mkdir(self.path)
        except BaseException:
            self.__exit__()
            raise
        return self.path

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        _unlink_quietly(self.lock)
        os.close(self.fd)

    def sweep(self) -> List[str]:
        """Removes the directories of tasks whose lock is free (their
        process died); returns them."""
        removed = []
        for entry in os.listdir(self.root):
            if not (entry.startswith("task-") and entry.endswith(".lock")):
                continue
            lock = os.path.join(self.root, entry)
            try:
                fd = os.open(lock, os.O_RDWR)
            except FileNotFoundError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live task's
                if not _same_file(lock, fd):
                    continue  # removed and maybe made again meanwhile
                path = lock[: -len(".lock")]
                shutil.rmtree(path, ignore_errors=True)
                _unlink_quietly(lock)
                removed.append(path)
            finally:
                os.close(fd)
        return removed


def _same_file(path: str, fd: int) -> bool:
    """True when `path` names the file open as `fd`."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    ft = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (ft.st_dev, ft.st_ino)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


class Sink(Datasink):
    """A Ray `Datasink` writing into the table at `dest` (created by the
    first write): `ds.write_datasink(Sink(dest))`.

    Each write task writes its blocks into a table of its own, staged in
    `dest/.staging/<write id>/<task>-<attempt>`; `on_write_complete`, on the
    driver, adopts them all (in task order) as new shards of `dest`'s
    columns and commits them in one replacement of `dest/table.json`. A
    failed or retried task's table is never adopted; a failed write's
    staging is removed, and `gc` removes what a killed driver left.
    `codec` / `codecs` are a new table's codecs (`write_table`'s); an
    existing table's columns keep theirs.

    `dest` may be an `s3://` URL: each task then writes its table in a
    directory of its node (`<tmp>/loaderx-ray/task-<id>`, removed when the
    task ends, or by a later task if its process was killed) and pushes it
    under the staging prefix, and the driver's commit copies the staged
    objects into the table's shards, server-side, and replaces the table's
    manifest last (`loaderx::publish::adopt_published`). One write at a time per URL:
    object storage gives no lock here."""

    def __init__(self, dest: Any, *, codec: Optional[str] = None, codecs: Optional[Dict[str, str]] = None):
        dest = os.fspath(dest)
        self.remote = _is_url(dest)
        self.dest = dest.rstrip("/") if self.remote else os.path.abspath(dest)
        self.codec, self.codecs = codec, dict(codecs or {})
        self.write_id = uuid.uuid4().hex
        self.rows = None
        # Read here, not in on_write_start: the tasks get this object as it
        # is when the write is planned.
        if self.remote:
            kind = loaderx_rs._published(self.dest)
        elif (Path(self.dest) / "table.json").is_file():
            kind = "table"
        elif any((Path(self.dest) / f).exists() for f in ("schema.json", "shards.json", "meta.zr")):
            kind = "store"
        else:
            kind = None
        if kind == "table":
            table = loaderx_rs.Table(self.dest)
            self.codecs = {name: table[name].codec for name in table.columns}
        elif kind is not None:
            raise ValueError(f"{self.dest} holds a dataset, not a table: a Ray write goes to a table")

    @property
    def staging(self) -> str:
        if self.remote:
            return f"{self.dest}/{STAGING_DIR}/{self.write_id}"
        return os.path.join(self.dest, STAGING_DIR, self.write_id)

    def on_write_start(self, schema=None) -> None:
        if self.remote:
            # One write at a time per URL: a second would number its shards
            # from the same place (docs/ray.md, "Writing to object storage").
            taken, unenforced, held = loaderx_rs._lock_writes(self.dest, self.write_id)
            if not taken:
                raise RuntimeError(
                    f"{self.dest}: another write holds {STAGING_DIR}/write.lock (write and since when, in "
                    f"seconds since the epoch: {held!r}); if its driver died, gc(url, keep_newer_than=...) "
                    "removes the lock once it is older than that")
            if unenforced:
                warnings.warn(f"{self.dest}: the server ignores conditional PUTs (If-None-Match), so the "
                              "write lock excludes no other write: run one write at a time to this URL")
            return
        os.makedirs(self.staging, exist_ok=True)
        fd = os.open(self.staging + ".lock", os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        _LOCKS[self.write_id] = fd

    def _write_blocks(self, path: str, blocks: Iterable[Any]) -> int:
        rows = 0
        for block in blocks:
            table = _to_storable(BlockAccessor.for_block(block).to_arrow())
            if table.num_rows == 0 and rows == 0 and table.num_columns == 0:
                continue
            codecs = {k: v for k, v in self.codecs.items() if k in table.column_names} or None
            loaderx_rs.write_table(path, table, codec=self.codec, codecs=codecs, mode="append")
            rows += table.num_rows
        return rows

    def write(self, blocks: Iterable[Any], ctx) -> Optional[Dict[str, Any]]:
        name = f"{ctx.task_idx:08d}-{uuid.uuid4().hex[:12]}"
        if not self.remote:
            path = os.path.join(self.staging, name)
            rows = self._write_blocks(path, blocks)
        else:
            # Staged on this node, then pushed: the commit reads it by URL.
            with _NodeStaging() as tmp:
                rows = self._write_blocks(os.path.join(tmp, "table"), blocks)
                if rows:
                    loaderx_rs._push(os.path.join(tmp, "table"), f"{self.staging}/{name}")
            path = f"{STAGING_DIR}/{self.write_id}/{name}"
        return {"path": path, "rows": rows, "task": ctx.task_idx} if rows else None

    def on_write_complete(self, write_result) -> None:
        returns = [r for r in write_result.write_returns if r]
        staged = [r["path"] for r in sorted(returns, key=lambda r: r["task"])]
        if not staged:
            self.rows = None
        elif self.remote:
            self.rows = loaderx_rs._adopt_published(self.dest, staged)
        else:
            self.rows = loaderx_rs._adopt_tables(self.dest, staged)
        self._cleanup()

    def on_write_failed(self, error: Exception) -> None:
        self._cleanup()

    def _cleanup(self) -> None:
        if self.remote:
            # A failed or retried task's pushed table, never adopted.
            loaderx_rs._remove_published(self.staging)
            loaderx_rs._unlock_writes(self.dest, self.write_id)
            return
        shutil.rmtree(self.staging, ignore_errors=True)
        try:
            os.unlink(self.staging + ".lock")
        except FileNotFoundError:
            pass
        fd = _LOCKS.pop(self.write_id, None)
        if fd is not None:
            os.close(fd)


def write(ds: "ray.data.Dataset", dest: Any, *, ray_remote_args: Optional[Dict[str, Any]] = None,
          concurrency: Optional[int] = None, **sink_args) -> Sink:
    """`ds.write_datasink(Sink(dest, **sink_args), ray_remote_args=...,
    concurrency=...)`; returns the sink (`sink.rows`: the table's rows
    after the commit). `ray_remote_args` and `concurrency` are Ray's, for
    the write tasks (docs/ray.md, "Short writes")."""
    sink = Sink(dest, **sink_args)
    ds.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency)
    return sink


def gc(dest: Any, keep_newer_than: float = 3600.0) -> List[str]:
    """Removes the staging directories under `dest/.staging` of writes
    no longer running (their driver's lock is free: it failed or was
    killed before its cleanup), and, when no writer holds the table, the
    shard directories a commit that crashed left unlisted in its columns.
    Returns the removed paths. `.staging` itself stays: a write starting
    now may be creating its directory in it. The CLI's `loaderx gc DEST`
    does the same.

    For an `s3://` URL, removes the objects that no published manifest
    lists (a failed write's staged tables, a failed commit's copies, the
    commit files a killed driver left replaced) and that were written more
    than `keep_newer_than` seconds ago. Object storage gives no lock to
    tell a running write from a dead one: the bound keeps the objects of a
    write under way for that long. Where nothing is published yet, only
    staged objects are removed, and a failed first write's copies (by the
    mark `.staging/first-commit` that its commit would have removed).
    Returns the removed objects' URLs."""
    dest = os.fspath(dest)
    if _is_url(dest):
        return loaderx_rs._remove_unlisted(dest, float(keep_newer_than))
    return [str(p) for p in loaderx_rs._gc(dest)]
