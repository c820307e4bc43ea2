"""loaderx_rs.pack: sequence packing of a ragged batch."""

import numpy as np
import pytest

import loaderx_rs
from loaderx_rs import DataLoader, RaggedDataset, pack, write_ragged


def segments(tokens, segment_ids, positions):
    """Each row's segments as arrays, checking ids and positions."""
    out = []
    for row in range(tokens.shape[0]):
        ids = segment_ids[row]
        used = int((ids != 0).sum())
        assert (ids[used:] == 0).all() and (tokens[row, used:] == 0).all()
        for seg in range(1, int(ids.max(initial=0)) + 1):
            where = np.flatnonzero(ids == seg)
            assert (np.diff(where) == 1).all(), "a segment is contiguous"
            np.testing.assert_array_equal(positions[row, where], np.arange(len(where)))
            out.append(tokens[row, where])
    return out


def test_every_token_once_in_order(rng):
    lens = rng.integers(10, 201, size=64)
    seqs = [np.arange(1, n + 1, dtype=np.int64) + 1000 * k for k, n in enumerate(lens)]
    values = np.concatenate(seqs)
    splits = np.concatenate([[0], np.cumsum(lens)])
    tokens, segment_ids, positions = pack(values, splits, 512)
    assert tokens.dtype == np.int64 and segment_ids.dtype == np.int32 and positions.dtype == np.int32
    assert tokens.shape == segment_ids.shape == positions.shape and tokens.shape[1] == 512
    got = sorted(segments(tokens, segment_ids, positions), key=lambda s: s[0])
    assert [s.tolist() for s in got] == [s.tolist() for s in seqs]
    assert (segment_ids != 0).mean() >= 0.85
    again = pack(values, splits, 512)
    for a, b in zip(again, (tokens, segment_ids, positions)):
        np.testing.assert_array_equal(a, b)


def test_long_sequences_split_or_truncated():
    values = np.arange(1, 1301, dtype=np.int32)
    tokens, segment_ids, _ = pack(values, [0, 1300], 512)
    assert sorted(np.concatenate(segments(tokens, segment_ids, _)).tolist()) == values.tolist()
    tokens, segment_ids, positions = pack(values, [0, 1300], 512, truncate=True)
    assert tokens.shape == (1, 512)
    np.testing.assert_array_equal(tokens[0], values[:512])
    with pytest.raises(ValueError):
        pack(values, [0, 1400], 512)
    with pytest.raises(ValueError):
        pack(values, [0, 1300], 0)


def test_pack_as_a_loader_transform(tmp_path):
    seqs = [np.arange(1, 10 + k % 50, dtype=np.int32) for k in range(300)]
    write_ragged(tmp_path / "tok", seqs)

    def collate(batch):
        values, splits = batch["tok"]
        tokens, segment_ids, positions = pack(values, splits, 128)
        return {"tokens": tokens, "segment_ids": segment_ids, "positions": positions}

    def loader(start):
        streams = {"tok": RaggedDataset(tmp_path / "tok")}
        return iter(DataLoader(streams, batch_size=32, num_workers=2, transform=collate, start_step=start))

    run = loader(0)
    batches = [next(run) for _ in range(3)]
    again = next(loader(2))
    for key in ("tokens", "segment_ids", "positions"):
        np.testing.assert_array_equal(batches[2][key], again[key])
    assert batches[0]["tokens"].shape[1] == 128
    assert loaderx_rs.pack is pack
