"""This repository's README, section "Python": its code blocks run as
printed, in an empty directory, so that the README cannot drift from the
module. The block that makes `data.npy` and `label.npy` runs first (the
quick start reads them and says nothing else about them), then the quick
start itself.
"""

import re
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks():
    """The README's ```python blocks, in order."""
    return re.findall(r"^```python\n(.*?)^```$", README.read_text(encoding="utf-8"), flags=re.S | re.M)


def block_with(needle):
    found = [b for b in python_blocks() if needle in b]
    assert len(found) == 1, f"the README has {len(found)} python blocks with {needle!r}, expected one"
    return found[0]


def test_the_readme_quick_start_runs_on_the_files_it_says_to_make(workdir, capsys):
    make = block_with("np.save('data.npy'")
    quick_start = block_with("from loaderx_rs import DataLoader, Dataset, write_dataset")
    assert list(workdir.iterdir()) == [], "starts from an empty directory"
    exec(compile(make, "<README: make the inputs>", "exec"), {})
    data, label = np.load("data.npy"), np.load("label.npy")
    scope = {}
    exec(compile(quick_start, "<README: Python quick start>", "exec"), scope)
    printed = capsys.readouterr().out.splitlines()
    batch = scope["batch"]
    assert printed == [str(batch["data"].shape), str(batch["label"].shape)]
    assert batch["data"].shape[1:] == data.shape[1:] and batch["label"].shape == batch["data"].shape[:1]
    assert scope["i"] == 256
    # The datasets hold the files' records, once each (a first run appends to nothing).
    ds = scope["Dataset"]("train_data.zr")
    assert len(ds) == len(data)
    np.testing.assert_array_equal(ds[np.arange(len(data))], data)
    np.testing.assert_array_equal(scope["Dataset"]("train_label.zr")[np.arange(len(label))], label)
    scope["loader"].close()
