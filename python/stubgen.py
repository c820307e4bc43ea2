"""Writes the stubs of the dataset classes into the package's type stubs
(python/python/loaderx_rs/__init__.pyi) from one block: the methods every
dataset class has (python/src/dataset.rs writes them once, in its
`dataset_class!` macro), and per class what differs (the shape getter's
name, what an index returns, the methods a kind adds).

`python stubgen.py` rewrites the block between the markers in place;
`python stubgen.py --check` fails if it is not what this writes
(python/tests/test_stubs.py runs the check)."""

import sys
from pathlib import Path

STUB = Path(__file__).parent / "python" / "loaderx_rs" / "__init__.pyi"
BEGIN = "# Dataset classes: written by python/stubgen.py from one block; do not edit.\n"
END = "# End of the dataset classes.\n"

SHARED = '''class {name}:
    def __init__(self, path: _Path, read_mode: _ReadMode = "auto", verify_reads: _VerifyReads = "device") -> None: ...
    @property
    def dtype(self) -> np.dtype[Any]: ...
    @property
    def {shape}(self) -> tuple[int, ...]: ...
    @property
    def codec(self) -> _Codec: ...
    @property
    def shards(self) -> int: ...
    @property
    def sharded(self) -> bool: ...
    @property
    def path(self) -> Union[Path, str]: ...
    @property
    def _store(self) -> Zrecord: ...
    def __len__(self) -> int: ...
    def __getitem__(self, idx: _Indices, /) -> {one}: ...
    def __getitems__(self, idxs: npt.ArrayLike) -> {batch}: ...
{extra}    def refresh(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> {name}: ...
    def __exit__(
        self, t: Optional[type[BaseException]], v: Optional[BaseException], tb: Optional[TracebackType]
    ) -> bool: ...
'''

GETITEMS_PADDED = '''    def getitems_padded(
        self, idxs: npt.ArrayLike, max_len: Optional[int] = None, pad_value: Any = 0, *, truncate: bool = False
    ) -> tuple[np.ndarray, npt.NDArray[np.int64]]: ...
'''

# Per class: the shape getter, what an index returns, what a batch is, and
# the methods the kind adds (as the macro's `$extra`).
CLASSES = [
    dict(name="Dataset", shape="shape", one="np.ndarray", batch="np.ndarray", extra=""),
    dict(name="RaggedDataset", shape="item_shape", one="Union[np.ndarray, _Packed]", batch="_Packed",
         extra=GETITEMS_PADDED),
]


def block():
    """The generated stubs, markers included."""
    return BEGIN + "\n".join(SHARED.format(**c) for c in CLASSES) + END


def current(text):
    """The block in `text`, markers included."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]


def main(argv):
    text = STUB.read_text()
    if argv[1:] == ["--check"]:
        if current(text) != block():
            sys.exit(f"{STUB.name}: the dataset classes differ from stubgen.py's; run python stubgen.py")
        return
    STUB.write_text(text.replace(current(text), block()))


if __name__ == "__main__":
    main(sys.argv)
