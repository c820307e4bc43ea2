"""The import benchmark's two inputs (docs/benchmarks.md, "Import").

    python make_inputs.py DIR [--gb 1.0]

- DIR/tokens/part-{k:03}.parquet: a token corpus, `tokens` list<int32> of
  lengths uniform in 50..2,000 (ids below 50,257) and `label` int64, in
  files of about 66 MB on disk (134 MB of values: row groups of 4,096 rows,
  snappy and dictionary pages, as pyarrow writes by default);
- DIR/images/shard-{k:06}.tar: a WebDataset of `jpg` members of about
  100 KB (random bytes: encoded images do not compress) and `cls` labels,
  in shards of about 100 MB.

Each at least `--gb` GB on disk. Seeded: the same files every run. A file that
exists is kept, so a second run writes nothing.
"""

import argparse
import io
import os
import tarfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS_PER_FILE = 32_768  # about 134 MB of tokens a file
SAMPLES_PER_SHARD = 1_000  # about 100 MB a shard


def tokens(out: str, gb: float) -> None:
    os.makedirs(out, exist_ok=True)
    target, written, k = gb * 1e9, 0, 0
    while written < target:
        path = os.path.join(out, f"part-{k:03}.parquet")
        rng = np.random.default_rng(1000 + k)
        lengths = rng.integers(50, 2001, ROWS_PER_FILE)
        if not os.path.exists(path):
            values = rng.integers(0, 50_257, int(lengths.sum()), dtype=np.int32)
            offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
            np.cumsum(lengths, out=offsets[1:])
            table = pa.table(
                {
                    "tokens": pa.ListArray.from_arrays(pa.array(offsets), pa.array(values)),
                    "label": pa.array(rng.integers(0, 1000, len(lengths)), type=pa.int64()),
                }
            )
            pq.write_table(table, path + ".tmp", row_group_size=4096)
            os.rename(path + ".tmp", path)
        written += os.path.getsize(path)
        k += 1
    print(f"{out}: {k} files, {written / 1e9:.2f} GB on disk")


def images(out: str, gb: float) -> None:
    os.makedirs(out, exist_ok=True)
    target, written, k = gb * 1e9, 0, 0
    while written < target:
        path = os.path.join(out, f"shard-{k:06}.tar")
        rng = np.random.default_rng(2000 + k)
        sizes = rng.integers(80_000, 120_001, SAMPLES_PER_SHARD)
        if not os.path.exists(path):
            with tarfile.open(path + ".tmp", "w") as tar:
                for j, size in enumerate(sizes):
                    key = f"{k:06}{j:04}"
                    for ext, data in (
                        ("jpg", rng.bytes(int(size))),
                        ("cls", str(int(rng.integers(0, 1000))).encode()),
                    ):
                        info = tarfile.TarInfo(f"{key}.{ext}")
                        info.size = len(data)
                        tar.addfile(info, io.BytesIO(data))
            os.rename(path + ".tmp", path)
        written += int(sizes.sum())
        k += 1
    print(f"{out}: {k} shards, {written / 1e9:.2f} GB of images")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir")
    parser.add_argument("--gb", type=float, default=1.0)
    args = parser.parse_args()
    tokens(os.path.join(args.dir, "tokens"), args.gb)
    images(os.path.join(args.dir, "images"), args.gb)


if __name__ == "__main__":
    main()
