"""The installed package ships type stubs (`__init__.pyi`, `py.typed`),
and they name what the module has, with its parameters (issue 18,
finding 2)."""

import ast
import inspect
from pathlib import Path

import loaderx_rs

PACKAGE = Path(loaderx_rs.__file__).parent


def stub():
    return ast.parse((PACKAGE / "__init__.pyi").read_text())


def stub_params(fn):
    args = fn.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    if args.vararg:
        names.append("*" + args.vararg.arg)
    return [n for n in names if n not in ("self", "cls")]


def runtime_params(obj):
    return [("*" + p.name if p.kind is p.VAR_POSITIONAL else p.name)
            for p in inspect.signature(obj).parameters.values() if p.name not in ("self", "cls")]


def test_the_package_ships_stubs_and_the_typed_marker():
    assert (PACKAGE / "py.typed").is_file()
    assert (PACKAGE / "__init__.pyi").is_file()


def test_every_public_name_has_a_stub_and_every_stub_a_name():
    tree = stub()
    stubbed = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    stubbed |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and n.target.id != "__all__"}
    public = {n for n in loaderx_rs.__all__ if not n.startswith("_")}
    assert public - stubbed == set()
    private_stubs = {"_Mode", "_restore", "_zrecord", "_sampler", "_table_column", "_adopt_tables", "_arrow_stream_rows",
                     "_WriteSummary"}
    assert {n for n in stubbed if not n.startswith("_")} - public == set()
    assert {n for n in stubbed if n.startswith("_") and n != "__version__"} == private_stubs


def test_stubbed_signatures_are_the_modules():
    for node in stub().body:
        if isinstance(node, ast.FunctionDef):
            assert stub_params(node) == runtime_params(getattr(loaderx_rs, node.name)), node.name
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            cls = getattr(loaderx_rs, node.name)
            for item in node.body:
                if not isinstance(item, ast.FunctionDef):
                    continue
                assert hasattr(cls, item.name), f"{node.name}.{item.name}"
                if item.name in ("__init__", "__new__") and not issubclass(cls, BaseException):
                    assert stub_params(item) == runtime_params(cls), node.name
                elif item.name in ("next", "seek", "batch", "gather", "append", "getitems_padded", "open", "delete",
                                   "compact", "compact_plan"):
                    assert stub_params(item) == runtime_params(getattr(cls, item.name)), f"{node.name}.{item.name}"


def test_the_batch_and_mixture_stubs_name_their_attributes():
    classes = {n.name: n for n in stub().body if isinstance(n, ast.ClassDef)}
    batch = {n.target.id for n in classes["Batch"].body if isinstance(n, ast.AnnAssign)}
    assert batch == set(loaderx_rs.Batch.__slots__) == {"indices", "step", "source", "skipped"}
    mixture = {n.name for n in classes["Mixture"].body if isinstance(n, ast.FunctionDef)}
    runtime = {n for n in dir(loaderx_rs.Mixture) if not n.startswith("_")}
    assert runtime <= mixture, runtime - mixture


def test_the_dataset_stubs_are_the_generators():
    """Dataset and RaggedDataset share one stub block (python/stubgen.py),
    as they share one `dataset_class!` in python/src/dataset.rs."""
    import importlib.util
    path = Path(__file__).parents[1] / "stubgen.py"
    spec = importlib.util.spec_from_file_location("stubgen", path)
    stubgen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stubgen)
    assert stubgen.current(stubgen.STUB.read_text()) == stubgen.block()
    assert stubgen.block() in (PACKAGE / "__init__.pyi").read_text()
