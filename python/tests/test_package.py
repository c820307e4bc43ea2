"""The package's layout (maturin's mixed layout, python/pyproject.toml):
the extension module is `loaderx_rs.loaderx_rs`, re-exported by the
package's `__init__.py`, and importing the package imports no optional
dependency (Python-only submodules such as a Ray integration import theirs
on demand)."""

import subprocess
import sys

import loaderx_rs


def test_the_package_re_exports_the_extension_module():
    native = sys.modules["loaderx_rs.loaderx_rs"]
    assert native is not loaderx_rs
    assert loaderx_rs.__all__ == native.__all__
    for name in native.__all__:
        assert getattr(loaderx_rs, name) is getattr(native, name), name
    assert loaderx_rs.__doc__ == native.__doc__


def test_classes_name_the_package_for_pickling():
    for name in ("Zrecord", "Dataset", "RaggedDataset", "DataLoader", "Table"):
        assert getattr(loaderx_rs, name).__module__ == "loaderx_rs", name


def test_importing_the_package_imports_no_optional_dependency():
    code = "import sys, loaderx_rs; print(sorted(m for m in ('ray', 'pyarrow', 'torch', 'jax') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
