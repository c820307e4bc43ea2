"""The reference README's examples, verbatim except the import line
(`from loaderx import` -> `from loaderx_rs import`), run against this module.

Each example is kept as the README prints it; the test supplies what the
README leaves to the reader (`np`, the `.npy` files, `images`, `labelset`)
and checks what the example computes against NumPy.
"""

import numpy as np

import loaderx_rs

QUICK_START = """\
from loaderx import DataLoader, Dataset, write_dataset

# Write (zrecord layer — one‑time conversion from NumPy)
write_dataset('train_data.zr', np.load('data.npy', mmap_mode='r'))
write_dataset('train_label.zr', np.load('label.npy', mmap_mode='r'))

# Read (loader layer — pure loader, no mutations)
loader = DataLoader({
    'data': Dataset('train_data.zr'),
    'label': Dataset('train_label.zr'),
})

for i, batch in enumerate(loader):
    if i >= 256:
        break

print(batch['data'].shape)
print(batch['label'].shape)
"""

CONVERTING = """\
import numpy as np
from loaderx import Dataset, write_dataset

write_dataset('train_data.zr', np.load('data.npy', mmap_mode='r'))
write_dataset('train_label.zr', np.load('label.npy', mmap_mode='r'))

# many small, similar records compress far better against a trained dictionary:
write_dataset('train_data.zr', images, codec='zstd_dict')
"""

OPEN_RESULT = """\
ds = Dataset('train_data.zr')
"""

VARIABLE_LENGTH = """\
import numpy as np
from loaderx import RaggedDataset, pad, write_ragged

seqs = [np.arange(L, dtype=np.int32) for L in (3, 1, 4, 1, 5)]
write_ragged('tokens.zr', seqs)               # dtype and per-row shape inferred
rds = RaggedDataset('tokens.zr')              # open for reading

values, row_splits = rds[[0, 2, 4]]            # packed: values is flat, row_splits marks edges
first = values[row_splits[0]:row_splits[1]]    # record 0's rows — the client slices

padded, lengths = pad(values, row_splits)      # dense (B, max_len, *tail) + row counts
padded, lengths = rds.getitems_padded([0, 2, 4])  # or fuse the gather and the pad in one pass
"""

COLLATE = """\
def collate(batch):
    values, row_splits = batch['tokens']
    padded, lengths = pad(values, row_splits)
    return {'input_ids': padded, 'lengths': lengths, 'label': batch['label']}

loader = DataLoader({'tokens': rds, 'label': labelset}, batch_size=32, transform=collate)
"""


def ported(source):
    """The example with only its import changed."""
    out = source.replace("from loaderx import", "from loaderx_rs import")
    assert out.count("loaderx_rs") == source.count("from loaderx import"), "exactly the import lines change"
    return out


def run(source, **names):
    scope = {"np": np, **names}
    exec(compile(ported(source), "<README example>", "exec"), scope)
    return scope


def make_npy(rng, n=3000):
    data = (rng.standard_normal((n, 48)) * 10).round().astype(np.float32)
    label = np.arange(n, dtype=np.int64)
    np.save("data.npy", data)
    np.save("label.npy", label)
    return data, label


def test_quick_start(workdir, rng, capsys):
    data, label = make_npy(rng)
    scope = run(QUICK_START)
    assert capsys.readouterr().out.split("\n")[:2] == ["(256, 48)", "(256,)"]
    batch, loader = scope["batch"], scope["loader"]
    assert scope["i"] == 256
    assert loader.step == 257
    # Every record lines up across the streams: the label is the record's index.
    np.testing.assert_array_equal(batch["data"], data[batch["label"]])
    loader.close()


def test_converting_a_numpy_tensor(workdir, rng):
    data, label = make_npy(rng, 500)
    images = (np.tile(np.linspace(0, 1, 48, dtype=np.float32), (200, 1)) * rng.integers(1, 4, (200, 1))).astype(
        np.float32
    )
    scope = run(CONVERTING, images=images)
    exec(OPEN_RESULT, scope)
    ds = scope["ds"]
    assert len(ds) == 700 and ds.shape == (48,) and ds.dtype == np.float32
    # The second write appended to the first dataset (which keeps its codec).
    np.testing.assert_array_equal(ds[np.arange(700)], np.concatenate([data, images]))
    assert ds.codec == "zstd"
    labels = loaderx_rs.Dataset("train_label.zr")
    assert labels.shape == () and labels.dtype == np.int64
    np.testing.assert_array_equal(labels[:], label)
    assert labels[7] == 7


def test_zstd_dict_dataset(workdir, rng):
    images = rng.integers(0, 4, size=(300, 16, 16), dtype=np.uint8) * 60
    assert loaderx_rs.write_dataset("tiles.zr", images, codec="zstd_dict") == 300
    store = loaderx_rs.Zrecord("tiles.zr", read_only=True)
    assert store.has_dict()
    assert store.stats()["codec_records"]["zstd_dict"] + store.stats()["codec_records"]["raw"] == 300
    store.close()
    ds = loaderx_rs.Dataset("tiles.zr")
    assert ds.codec == "zstd_dict"
    np.testing.assert_array_equal(ds[::-1], images[::-1])


def test_variable_length_records(workdir):
    scope = run(VARIABLE_LENGTH)
    seqs = scope["seqs"]
    values, row_splits = scope["values"], scope["row_splits"]
    np.testing.assert_array_equal(values, np.concatenate([seqs[0], seqs[2], seqs[4]]))
    np.testing.assert_array_equal(row_splits, [0, 3, 7, 12])
    assert row_splits.dtype == np.int64
    np.testing.assert_array_equal(scope["first"], seqs[0])
    padded, lengths = scope["padded"], scope["lengths"]
    np.testing.assert_array_equal(padded, [[0, 1, 2, 0, 0], [0, 1, 2, 3, 0], [0, 1, 2, 3, 4]])
    np.testing.assert_array_equal(lengths, [3, 4, 5])
    assert padded.dtype == np.int32


def test_collate_transform(workdir):
    scope = run(VARIABLE_LENGTH)
    loaderx_rs.write_dataset("labels.zr", np.arange(5, dtype=np.int64) * 10)
    labelset = loaderx_rs.Dataset("labels.zr")
    scope = run(COLLATE, rds=scope["rds"], labelset=labelset, pad=loaderx_rs.pad,
                DataLoader=loaderx_rs.DataLoader)
    loader = scope["loader"]
    seqs = [np.arange(n, dtype=np.int32) for n in (3, 1, 4, 1, 5)]
    for _ in range(5):
        batch = next(loader)
        assert set(batch) == {"input_ids", "lengths", "label"}
        # Five records and a batch of 32: every batch holds each record once.
        assert sorted(batch["label"].tolist()) == [0, 10, 20, 30, 40]
        for row, n, label in zip(batch["input_ids"], batch["lengths"], batch["label"]):
            np.testing.assert_array_equal(row[:n], seqs[label // 10])
            assert (row[n:] == 0).all()
    loader.close()
