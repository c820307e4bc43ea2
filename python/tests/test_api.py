"""The drop-in promise, mechanically: every public name of the reference
package exists here, and each function and method takes the reference's
parameters, in its order, with its defaults (this module may add more after
them)."""

import inspect

import pytest

import loaderx_rs as ours

from conftest import REFERENCE_MISSING

reference = pytest.importorskip("loaderx", reason=REFERENCE_MISSING)

# Parameters whose default differs in spelling only: the reference's
# identity transform is a lambda, ours is None (the identity).
SAME_MEANING = {("DataLoader", "transform")}


def params(fn):
    return [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def check(name, ref_fn, our_fn):
    ref_params, our_params = params(ref_fn), params(our_fn)
    assert len(our_params) >= len(ref_params), name
    for r, o in zip(ref_params, our_params):
        assert r.name == o.name, f"{name}: {r.name} != {o.name}"
        if (name, r.name) in SAME_MEANING:
            continue
        assert r.default == o.default, f"{name}({r.name}): {r.default!r} != {o.default!r}"
    for extra in our_params[len(ref_params):]:
        assert extra.default is not inspect.Parameter.empty, f"{name}: added parameter {extra.name} needs a default"


def test_every_reference_name_exists():
    for name in ("Zrecord", "ZrecordError", "write_dataset", "write_ragged", "Dataset", "RaggedDataset", "pad",
                 "DataLoader"):
        assert hasattr(ours, name), name
    assert issubclass(ours.ZrecordError, RuntimeError)


def test_functions_take_the_references_parameters():
    for name in ("write_dataset", "write_ragged", "pad"):
        check(name, getattr(reference, name), getattr(ours, name))


def test_classes_take_the_references_parameters():
    check("Dataset", reference.Dataset.__init__, ours.Dataset)
    check("RaggedDataset", reference.RaggedDataset.__init__, ours.RaggedDataset)
    check("DataLoader", reference.DataLoader.__init__, ours.DataLoader)
    check("Zrecord", reference.Zrecord.__init__, ours.Zrecord)
    from loaderx._sampler import Sampler

    sampler = params(Sampler.__init__)
    assert [p.name for p in sampler] == [p.name for p in params(ours.Zsampler)][:4]
    assert (ours.Zsampler.SEQUENTIAL, ours.Zsampler.IID, ours.Zsampler.CYCLIC) == (
        Sampler.Mode.SEQUENTIAL, Sampler.Mode.IID, Sampler.Mode.CYCLIC)


def test_methods_take_the_references_parameters():
    pairs = {
        reference.Dataset: ours.Dataset,
        reference.RaggedDataset: ours.RaggedDataset,
        reference.Zrecord: ours.Zrecord,
        reference.DataLoader: ours.DataLoader,
    }
    for ref_cls, our_cls in pairs.items():
        for name, fn in vars(ref_cls).items():
            if name.startswith("_") and name not in ("__len__", "__getitem__", "__getitems__", "__enter__",
                                                     "__exit__", "__iter__", "__next__"):
                continue
            if not callable(fn):
                continue
            assert hasattr(our_cls, name), f"{ref_cls.__name__}.{name}"
            if name.startswith("__"):
                continue
            check(f"{ref_cls.__name__}.{name}", fn, getattr(our_cls, name))


def test_the_references_submodules_hold_its_names():
    """`from loaderx.dataset import pad` and the like: each public name of
    the reference's submodules is in ours (issue 18, finding 7)."""
    import importlib

    for sub in ("dataset", "dataloader", "_zrecord", "_sampler"):
        ref_module = importlib.import_module(f"loaderx.{sub}")
        our_module = importlib.import_module(f"loaderx_rs.{sub}")
        wanted = {n for n, v in vars(ref_module).items()
                  if not n.startswith("_") and (isinstance(v, type) or callable(v))
                  and getattr(v, "__module__", "").startswith("loaderx")}
        assert wanted, sub
        assert wanted - set(vars(our_module)) == set(), sub
