"""Mixture: several sources mixed by weights in one DataLoader. The
`source` attribute against the values returned (sources of disjoint value
ranges), proportions over every window of steps, purity, exact resume,
elastic resume from 8 hosts to 4, a change of weights at a step, cyclic
coverage per source, pickling, bad input."""

import collections
import pickle

import numpy as np
import pytest

from loaderx_rs import DataLoader, Dataset, Mixture, RaggedDataset, write_dataset, write_ragged

BASE = 1_000_000
LENS = (500, 37, 2000)


@pytest.fixture
def sources(tmp_path):
    """Source s's record i holds s * BASE + i ("v") and that value i % 5 times ("t")."""
    out = []
    for s, n in enumerate(LENS):
        values = s * BASE + np.arange(n, dtype=np.int64)
        write_dataset(tmp_path / f"v{s}", values)
        write_ragged(tmp_path / f"t{s}", [np.full(i % 5, v, dtype=np.int64) for i, v in enumerate(values)])
        out.append({"v": Dataset(tmp_path / f"v{s}"), "t": RaggedDataset(tmp_path / f"t{s}")})
    return out


def batches(mixture, n, batch_size=40, **kw):
    kw.setdefault("mode", 2)
    kw.setdefault("seed", 5)
    loader = DataLoader(mixture, num_workers=2, batch_size=batch_size, **kw)
    out = [next(loader) for _ in range(n)]
    loader.close()
    return out


def samples(batch):
    return list(zip(batch.source.tolist(), batch.indices.tolist()))


def test_the_source_attribute_names_the_dataset_each_value_came_from(sources):
    for shard_count in (1, 4):
        for shard_index in range(shard_count):
            got = batches(Mixture(sources, [3, 1, 2]), 20, batch_size=48,
                          shard_index=shard_index, shard_count=shard_count)
            for b in got:
                assert b.source.dtype == np.uint32 and len(b.source) == 48 // shard_count
                np.testing.assert_array_equal(b["v"], b.source.astype(np.int64) * BASE + b.indices.astype(np.int64))
                values, splits = b["t"]
                for k, (s, i) in enumerate(samples(b)):
                    np.testing.assert_array_equal(values[splits[k]:splits[k + 1]], [s * BASE + i] * (i % 5))


def test_every_window_of_steps_keeps_the_proportions(sources):
    weights, batch = [3, 1, 2], 40
    got = batches(Mixture(sources, weights), 150, batch_size=batch)
    counts = np.array([np.bincount(b.source, minlength=3) for b in got])
    prefix = np.vstack([np.zeros(3, dtype=np.int64), np.cumsum(counts, axis=0)])
    share = np.array(weights) / sum(weights)
    worst = 0.0
    for a in range(len(got)):
        window = prefix[a + 1:] - prefix[a]
        exact = np.arange(1, len(got) - a + 1)[:, None] * batch * share[None, :]
        worst = max(worst, float(np.abs(window - exact).max()))
    # Three sources: every window within 2 of its exact share (docs/loader.md).
    assert worst < 2.0, worst


def test_the_same_seed_step_and_weights_give_the_same_batches(sources):
    a = batches(Mixture(sources, [1, 2, 1]), 20)
    b = batches(Mixture(sources, [1, 2, 1]), 20)
    c = batches(Mixture(sources, [1, 2, 1]), 20, seed=6)
    for x, y, z in zip(a, b, c):
        assert samples(x) == samples(y)
        np.testing.assert_array_equal(x["v"], y["v"])
        np.testing.assert_array_equal(x.source, z.source)
    assert any(samples(x) != samples(z) for x, z in zip(a, c))


def test_a_loader_started_at_a_step_resumes_exactly(sources):
    full = batches(Mixture(sources, [3, 1, 2]), 60)
    for k in (1, 29, 59):
        resumed = batches(Mixture(sources, [3, 1, 2]), 60 - k, start_step=k)
        assert [samples(b) for b in resumed] == [samples(b) for b in full[k:]]
        assert [b.step for b in resumed] == list(range(k, 60))


def union(step_batches):
    out = collections.Counter()
    for b in step_batches:
        out.update(zip(b.source.tolist(), b.indices.tolist(), b["v"].tolist()))
    return out


def test_a_run_on_eight_hosts_resumes_on_four_with_the_same_samples(sources):
    batch, k, total = 64, 15, 30
    mixture = Mixture(sources, [3, 1, 2])
    whole = batches(mixture, total, batch_size=batch)
    eight = [batches(mixture, k, batch_size=batch, shard_index=h, shard_count=8) for h in range(8)]
    four = [batches(mixture, total - k, batch_size=batch, shard_index=h, shard_count=4, start_step=k)
            for h in range(4)]
    for step in range(total):
        hosts = [h[step] for h in eight] if step < k else [h[step - k] for h in four]
        assert union(hosts) == union([whole[step]]), step


def test_a_change_of_weights_at_a_step_keeps_the_batches_before_it(sources):
    k, batch = 30, 40
    before = batches(Mixture(sources, [3, 1, 2]), 90, batch_size=batch)
    after = batches(Mixture(sources, [3, 1, 2], schedule=[(k, [1, 1, 8])]), 90, batch_size=batch)
    assert [samples(b) for b in before[:k]] == [samples(b) for b in after[:k]]
    counts = np.array([np.bincount(b.source, minlength=3) for b in after[k:]])
    total = counts.sum(axis=0)
    np.testing.assert_allclose(total, 60 * batch * np.array([1, 1, 8]) / 10, atol=2)
    resumed = batches(Mixture(sources, [3, 1, 2], schedule=[(k, [1, 1, 8])]), 10, batch_size=batch, start_step=k)
    assert [samples(b) for b in resumed] == [samples(b) for b in after[k:k + 10]]


def test_each_cyclic_source_covers_its_records_once_a_cycle(sources):
    got = batches(Mixture(sources, [1, 1, 1]), 120, batch_size=30)
    for s in (0, 1):
        seen = [i for b in got for (src, i) in samples(b) if src == s]
        n = LENS[s]
        assert len(seen) >= 2 * n
        for c in range(len(seen) // n):
            assert sorted(seen[c * n:(c + 1) * n]) == list(range(n)), (s, c)


def test_a_source_may_sample_in_its_own_mode(sources):
    got = batches(Mixture([sources[0], sources[2]], [1, 1], modes=[0, None]), 10, batch_size=16, mode=1)
    seq = [i for b in got for (s, i) in samples(b) if s == 0]
    assert seq == list(range(len(seq))) and len(seq) == 80


def test_a_mixture_and_its_loader_pickle(sources):
    mixture = Mixture(sources, [3, 1, 2], schedule=[(7, [1, 1, 1])], modes=[None, 2, 1])
    mixture.sources[0]["w"] = sources[0]["v"]
    assert list(mixture.sources[0]) == ["v", "t"], "the sources are copies"
    back = pickle.loads(pickle.dumps(mixture))
    assert (back.weights, back.schedule, back.modes, len(back)) == ([3, 1, 2], [(7, [1, 1, 1])], [None, 2, 1], 3)
    loader = DataLoader(mixture, num_workers=1, batch_size=16, mode=2, seed=1)
    first = [next(loader) for _ in range(3)]
    clone = pickle.loads(pickle.dumps(loader))
    loader.close()
    assert clone.step == 3
    assert samples(next(clone)) == samples(batches(mixture, 4, batch_size=16, seed=1)[3])
    clone.close()
    assert first[0].source is not None


def test_a_plain_loader_has_no_source(sources):
    loader = DataLoader(sources[0], num_workers=1, batch_size=8)
    assert next(loader).source is None
    loader.close()


def test_bad_mixtures_are_refused(sources, tmp_path):
    write_dataset(tmp_path / "f32", np.zeros(500, dtype=np.float32))
    write_dataset(tmp_path / "pairs", np.zeros((500, 2), dtype=np.int64))
    f32, pairs = Dataset(tmp_path / "f32"), Dataset(tmp_path / "pairs")
    a = sources[0]
    with pytest.raises(ValueError, match="source 1's stream \"v\""):
        Mixture([{"v": a["v"]}, {"v": f32}], [1, 1])
    with pytest.raises(ValueError, match="source 1"):
        Mixture([{"v": a["v"]}, {"v": pairs}], [1, 1])
    with pytest.raises(ValueError, match="source 1"):
        Mixture([{"v": a["v"]}, {"v": a["t"]}], [1, 1])
    with pytest.raises(ValueError, match="source 1 has streams"):
        Mixture([{"v": a["v"]}, {"w": a["v"]}], [1, 1])
    with pytest.raises(ValueError, match="at least one source"):
        Mixture([], [])
    for w in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="finite and positive"):
            Mixture(sources, [1, w, 1])
    with pytest.raises(ValueError, match="2 weights for 3 sources"):
        Mixture(sources, [1, 1])
    with pytest.raises(ValueError, match="weights for 3 sources"):
        Mixture(sources, [1, 1, 1], schedule=[(5, [1, 1, 1, 1])])
    with pytest.raises(ValueError, match="not after"):
        Mixture(sources, [1, 1, 1], schedule=[(5, [1, 1, 1]), (5, [1, 2, 1])])
    with pytest.raises(ValueError, match="modes"):
        Mixture(sources, [1, 1, 1], modes=[None])
    with pytest.raises(ValueError, match="mode must be"):
        Mixture(sources, [1, 1, 1], modes=[None, 7, None])
    with pytest.raises(TypeError, match="list of stream dicts"):
        Mixture({"v": a["v"]}, [1])
    with pytest.raises(TypeError, match="not a loaderx_rs Dataset"):
        Mixture([{"v": np.zeros(3)}], [1])
    with pytest.raises(ValueError, match="do not divide"):
        DataLoader(Mixture(sources, [1, 1, 1]), batch_size=8, shard_count=3)
