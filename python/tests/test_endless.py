"""The endless loader explained (issue 36, finding 3): modes by name and
as module constants, `steps_per_epoch`, `epochs=` for a finite run, the
`len()` message, and the warning for a batch larger than the dataset."""

import pickle
import warnings

import numpy as np
import pytest

import loaderx_rs
from loaderx_rs import DataLoader, Dataset, Mixture, Zsampler, write_dataset


@pytest.fixture
def ten(tmp_path):
    write_dataset(tmp_path / "x", np.arange(10, dtype=np.int64))
    return Dataset(tmp_path / "x")


def indices(loader, n):
    return [next(loader).indices.tolist() for _ in range(n)]


def test_modes_by_name_constant_and_number_are_the_same(ten):
    assert (loaderx_rs.SEQUENTIAL, loaderx_rs.IID, loaderx_rs.CYCLIC) == (0, 1, 2)
    assert (Zsampler.SEQUENTIAL, Zsampler.IID, Zsampler.CYCLIC) == (0, 1, 2)
    for number, name in enumerate(["sequential", "iid", "cyclic"]):
        runs = []
        for mode in (number, name, name.upper(), getattr(loaderx_rs, name.upper())):
            with DataLoader({"x": ten}, num_workers=1, batch_size=4, mode=mode, seed=3) as loader:
                runs.append(indices(loader, 5))
            assert Zsampler(10, 4, mode=mode, seed=3).mode == number
        assert all(run == runs[0] for run in runs), name
    with DataLoader({"x": ten}, num_workers=1, batch_size=4, mode="sequential") as loader:
        assert indices(loader, 3) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]


def test_a_bad_mode_says_what_is_accepted(ten):
    with pytest.raises(ValueError, match='"sequential", "iid" or "cyclic"'):
        DataLoader({"x": ten}, mode="shuffle")
    with pytest.raises(ValueError, match="sequential"):
        DataLoader({"x": ten}, mode=3)
    with pytest.raises(TypeError, match="str"):
        DataLoader({"x": ten}, mode=1.5)
    with pytest.raises(ValueError, match="sequential"):
        Zsampler(10, 4, mode="random")


@pytest.mark.parametrize("mode,records,batch,steps", [
    ("cyclic", 10, 4, 2), ("cyclic", 12, 4, 3), ("sequential", 10, 4, 3), ("iid", 10, 4, 3),
    ("iid", 8, 4, 2), ("cyclic", 10, 10, 1), ("sequential", 10, 1, 10),
])
def test_steps_per_epoch(tmp_path, mode, records, batch, steps):
    write_dataset(tmp_path / "x", np.arange(records))
    with DataLoader({"x": Dataset(tmp_path / "x")}, num_workers=1, batch_size=batch, mode=mode) as loader:
        assert loader.steps_per_epoch == steps


def test_a_cyclic_epoch_sees_each_record_at_most_once_and_a_sequential_one_all(ten):
    with DataLoader({"x": ten}, num_workers=1, batch_size=3, mode="cyclic", seed=5) as loader:
        seen = sum(indices(loader, loader.steps_per_epoch), [])
    assert len(seen) == len(set(seen)) == 9
    with DataLoader({"x": ten}, num_workers=1, batch_size=3, mode="sequential") as loader:
        seen = sum(indices(loader, loader.steps_per_epoch), [])
    assert set(seen) == set(range(10))


def test_epochs_makes_a_finite_iterator_with_a_length(ten):
    with DataLoader({"x": ten}, num_workers=2, batch_size=4, mode="cyclic", epochs=3) as loader:
        assert len(loader) == 3 * loader.steps_per_epoch == 6
        steps = [batch.step for batch in loader]
    assert steps == list(range(6))
    # The same batches as the endless loader's first six.
    with DataLoader({"x": ten}, num_workers=2, batch_size=4, mode="cyclic") as endless:
        expected = indices(endless, 6)
    with DataLoader({"x": ten}, num_workers=2, batch_size=4, mode="cyclic", epochs=3) as loader:
        assert [b.indices.tolist() for b in loader] == expected
        with pytest.raises(StopIteration):
            next(loader)


def test_epochs_with_a_transform_and_a_resume(ten):
    with DataLoader({"x": ten}, batch_size=5, mode="cyclic", epochs=2, transform=lambda b: b.step) as loader:
        assert list(loader) == [0, 1, 2, 3]
    loader = DataLoader({"x": ten}, batch_size=5, mode="cyclic", epochs=2, start_step=3)
    assert len(loader) == 1
    assert [b.step for b in loader] == [3]
    # Pickling keeps epochs (and the step reached).
    loader = DataLoader({"x": ten}, num_workers=1, batch_size=5, mode="cyclic", epochs=2)
    next(loader)
    again = pickle.loads(pickle.dumps(loader))
    loader.close()
    assert (again.step, len(again)) == (1, 3)
    assert [b.step for b in again] == [1, 2, 3]


def test_len_of_an_endless_loader_says_how_to_count(ten):
    with DataLoader({"x": ten}, num_workers=1, batch_size=4) as loader:
        with pytest.raises(TypeError, match="endless") as e:
            len(loader)
    assert "steps_per_epoch" in str(e.value) and "epochs=" in str(e.value)


def test_a_mixture_has_no_epoch(ten):
    mixture = Mixture([{"x": ten}, {"x": ten}], [0.5, 0.5])
    with DataLoader(mixture, num_workers=1, batch_size=4) as loader:
        with pytest.raises(TypeError, match="Mixture"):
            loader.steps_per_epoch
    with pytest.raises(ValueError, match="Mixture"):
        DataLoader(mixture, batch_size=4, epochs=1)


def test_a_batch_larger_than_the_dataset_warns(ten):
    with pytest.warns(UserWarning, match="batch_size=256 is larger than the dataset's 10 records") as caught:
        loader = DataLoader({"x": ten}, num_workers=1)
    assert caught[0].filename == __file__
    with loader:
        assert len(next(loader)["x"]) == 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DataLoader({"x": ten}, num_workers=1, batch_size=10).close()


def test_a_mixture_takes_mode_names_too(ten):
    named = Mixture([{"x": ten}, {"x": ten}], [1, 1], modes=["cyclic", None])
    assert named.modes == Mixture([{"x": ten}, {"x": ten}], [1, 1], modes=[2, None]).modes == [2, None]
    with pytest.raises(ValueError, match="sequential"):
        Mixture([{"x": ten}], [1], modes=["shuffled"])
