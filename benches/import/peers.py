"""One side of the import benchmark, in its own process (run.sh starts it
under /usr/bin/time for the wall time and the peak RSS).

    python peers.py import PEER INPUT_KIND INPUT_DIR OUT_DIR
    python peers.py first PEER INPUT_KIND OUT_DIR

PEER: litdata (`optimize`, 2 workers), mds (MosaicML's `MDSWriter`), wds
(webdataset's `ShardWriter`), hf (Hugging Face `datasets`, `save_to_disk`),
loaderx (`loaderx_rs.write_table`, for the first batch: `open_table`).
INPUT_KIND: tokens (the Parquet corpus) or images (the WebDataset tars).

`import` converts the input into the peer's format and prints one JSON line
(rows). `first` opens what `import` wrote, as a training script does, and
times the first shuffled batch of 32 from the start of the process.
"""

import glob
import io
import json
import os
import sys
import tarfile
import time

START = time.perf_counter()
BATCH = 32
WORKERS = 2


def parquet_files(d):
    return sorted(glob.glob(os.path.join(d, "*.parquet")))


def tar_files(d):
    return sorted(glob.glob(os.path.join(d, "*.tar")))


def token_rows(path):
    """(tokens: int32 array, label: int) of one Parquet file, batch by batch."""
    import pyarrow.parquet as pq

    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
        tokens, labels = batch.column("tokens"), batch.column("label").to_numpy()
        offsets, values = tokens.offsets.to_numpy(), tokens.values.to_numpy()
        for i in range(len(batch)):
            yield values[offsets[i] : offsets[i + 1]], int(labels[i])


def image_rows(path):
    """(key, jpg bytes, label) of one WebDataset tar, sample by sample."""
    sample = {}
    with tarfile.open(path) as tar:
        for member in tar:
            key, ext = member.name.split(".", 1)
            if sample and sample["key"] != key:
                yield sample["key"], sample["jpg"], int(sample["cls"])
                sample = {}
            sample["key"] = key
            sample[ext] = tar.extractfile(member).read()
    if sample:
        yield sample["key"], sample["jpg"], int(sample["cls"])


def rows(kind, path):
    if kind == "tokens":
        for tokens, label in token_rows(path):
            yield {"tokens": tokens, "label": label}
    else:
        for _key, jpg, label in image_rows(path):
            yield {"jpg": jpg, "label": label}


def inputs(kind, d):
    return parquet_files(d) if kind == "tokens" else tar_files(d)


def _litdata_rows(arg):
    kind, path = arg
    yield from rows(kind, path)


def import_litdata(kind, src, out):
    from litdata import optimize

    optimize(
        fn=_litdata_rows,
        inputs=[(kind, p) for p in inputs(kind, src)],
        output_dir=out,
        chunk_bytes="64MB",
        num_workers=WORKERS,
        mode="overwrite",
    )


def import_mds(kind, src, out):
    from streaming import MDSWriter

    columns = {"tokens": "ndarray:int32", "label": "int64"} if kind == "tokens" else {"jpg": "bytes", "label": "int64"}
    with MDSWriter(out=out, columns=columns, size_limit=1 << 26) as writer:
        for path in inputs(kind, src):
            for row in rows(kind, path):
                writer.write(row)


def import_wds(kind, src, out):
    import webdataset as wds

    os.makedirs(out, exist_ok=True)
    n = 0
    with wds.ShardWriter(os.path.join(out, "shard-%06d.tar"), maxsize=1 << 27, verbose=0) as sink:
        for path in inputs(kind, src):
            for row in rows(kind, path):
                if kind == "tokens":
                    sample = {"__key__": f"{n:09}", "tokens.npy": row["tokens"], "cls": row["label"]}
                else:
                    sample = {"__key__": f"{n:09}", "jpg": row["jpg"], "cls": row["label"]}
                sink.write(sample)
                n += 1


def import_hf(kind, src, out):
    import datasets

    cache = out + ".cache"
    if kind == "tokens":
        ds = datasets.Dataset.from_parquet(parquet_files(src), cache_dir=cache)
    else:
        ds = datasets.load_dataset("webdataset", data_files={"train": tar_files(src)}, split="train", cache_dir=cache)
    ds.save_to_disk(out)


def import_loaderx(kind, src, out):
    import loaderx_rs

    loaderx_rs.write_table(out, inputs(kind, src))


def first_loaderx(kind, out):
    import loaderx_rs

    streams = loaderx_rs.open_table(out)
    loader = loaderx_rs.DataLoader(streams, num_workers=WORKERS, batch_size=BATCH, mode="iid", seed=0)
    return next(iter(loader))


def first_litdata(kind, out):
    from litdata import StreamingDataLoader, StreamingDataset

    ds = StreamingDataset(out, shuffle=True, seed=0)
    return next(iter(StreamingDataLoader(ds, batch_size=BATCH, num_workers=WORKERS, collate_fn=list)))


def first_mds(kind, out):
    import torch.utils.data
    from streaming import StreamingDataset

    ds = StreamingDataset(local=out, shuffle=True, shuffle_seed=0, batch_size=BATCH)
    return next(iter(torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=WORKERS, collate_fn=list)))


def first_wds(kind, out):
    import webdataset as wds

    ds = wds.WebDataset(tar_files(out), shardshuffle=100, seed=0).shuffle(1000).batched(BATCH, collation_fn=list)
    return next(iter(ds))


def first_hf(kind, out):
    import datasets

    ds = datasets.load_from_disk(out)
    if kind == "images":
        # The bytes as stored, as every other side gives them (no decode).
        ds = ds.cast_column("jpg", datasets.Image(decode=False))
    return ds.shuffle(seed=0)[:BATCH]


def main():
    what, peer, kind = sys.argv[1:4]
    if what == "import":
        src, out = sys.argv[4:6]
        globals()[f"import_{peer}"](kind, src, out)
        print(json.dumps({"peer": peer, "kind": kind, "seconds": time.perf_counter() - START}))
    else:
        out = sys.argv[4]
        globals()[f"first_{peer}"](kind, out)
        print(json.dumps({"peer": peer, "kind": kind, "first_batch_s": time.perf_counter() - START}))


if __name__ == "__main__":
    main()
