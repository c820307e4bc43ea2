"""docs/python.md cannot drift from the module (issue 36, finding 4): its
tutorial's code blocks run, in order, in one namespace, and its API
reference names every public name the module exports."""

import re
from pathlib import Path

import loaderx_rs

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def tutorial_blocks():
    """The python blocks after each `<!-- tutorial -->` marker, in order."""
    pieces = DOC.read_text().split("<!-- tutorial -->")[1:]
    return [piece.split("```python\n", 1)[1].split("```", 1)[0] for piece in pieces]


def section(title):
    """The text of the `## title` section, up to the next `## `."""
    text = DOC.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def test_the_tutorial_runs_as_written(workdir):
    blocks = tutorial_blocks()
    assert len(blocks) >= 5
    scope = {"__name__": "tutorial"}
    for k, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name}: tutorial block {k}", "exec"), scope)
    # It ended with a padded training batch from the loader.
    assert scope["batch"]["input_ids"].shape == (32, scope["SEQ_LEN"])
    assert (workdir / "tokens.zr").is_dir()


def test_the_api_reference_names_every_public_name():
    reference = section("API reference")
    named = set(re.findall(r"`(?:loaderx_rs\.)?([A-Za-z_][A-Za-z0-9_]*)", reference))
    public = {n for n in loaderx_rs.__all__ if not n.startswith("_") or n == "__version__"}
    assert public - named == set()


def test_the_page_introduces_the_reference_and_never_defers_to_it():
    text = DOC.read_text()
    assert "loaderx 0.7.3" in text.split("\n## ", 1)[0] and "PyPI" in text.split("\n## ", 1)[0]
    assert "same as the reference" not in text
    assert not re.search(r"^\|[^|\n]*\| same", text, re.M)
