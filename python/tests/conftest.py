"""Shared fixtures: a fresh working directory per test, and deterministic data."""

import numpy as np
import pytest

# Why the tests that run beside the reference package skip without it.
REFERENCE_MISSING = "needs the reference package: pip install loaderx==0.7.3"


@pytest.fixture
def rng():
    return np.random.default_rng(20261129)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """Run the test inside its own empty directory (the README examples use relative paths)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def smooth(rng, n, *shape):
    """Mildly compressible float32 records (a sine per record)."""
    x = np.linspace(0.0, 1.0, int(np.prod(shape)), dtype=np.float32)
    f = rng.integers(1, 9, size=(n, 1)).astype(np.float32)
    return (np.round(np.sin(x[None, :] * f * 6.283) * 64) / 64).astype(np.float32).reshape(n, *shape)
