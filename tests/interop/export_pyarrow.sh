#!/usr/bin/env bash
# Export read by pyarrow: a table of every column kind exported as Parquet
# and Arrow IPC (example export_tables, export_tables.rs), read back with
# pyarrow and compared with the values it was written from
# (export_pyarrow.py), the tensor column a FixedShapeTensorType.
#
# Usage: tests/interop/export_pyarrow.sh   (needs python3.11 and network for pip)
# Environment: PYTHON (default python3.11); EXPORT_VENV, a venv that already
# has pyarrow and numpy (default: a throwaway one in tests/interop/.venv-export).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

work="$(mktemp -d "${TMPDIR:-/tmp}/loaderx-export.XXXXXX")"
trap 'rm -rf "$work"' EXIT
venv="${EXPORT_VENV:-$here/.venv-export}"
if ! "$venv/bin/python" -c 'import pyarrow, numpy' 2>/dev/null; then
    "${PYTHON:-python3.11}" -m venv "$venv"
    "$venv/bin/pip" install -q pyarrow numpy
fi
cargo run --quiet --release --features arrow --example export_tables -- "$work"
"$venv/bin/python" "$here/export_pyarrow.py" "$work"
