#!/usr/bin/env bash
# The regression guard of the Python loader: two revisions' `loaderx_rs`
# side by side on the fresh-process loader of python/bench/loader.py (each
# measurement a new process that opens the datasets and builds its
# DataLoader first, as a user's script does), in alternating rounds; prints
# each revision's batches/s and NEW / OLD per round. Run it before a change
# to the loader, the store's read path or the binding lands
# (docs/benchmarks.md, "Python loader, fresh processes").
#
#   bash benches/compare/python_loader_revisions.sh OLD_REV [NEW_REV] [--rounds N] [--codecs raw,zstd]
#
# NEW_REV defaults to the working tree. Each revision's wheel is built in
# its own worktree and target directory under target/revisions/ (kept for
# reruns) and installed into its own venv there; maturin comes from PyPI
# into a build venv beside them.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
old="$1"; shift
new=""
extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds|--codecs) extra+=("$1" "$2"); shift ;;
        *) new="$1" ;;
    esac
    shift
done
python="${PYTHON:-python3}"
base="$root/target/revisions"
mkdir -p "$base"
if [ ! -x "$base/buildvenv/bin/maturin" ]; then
    "$python" -m venv "$base/buildvenv"
    "$base/buildvenv/bin/pip" install --quiet --disable-pip-version-check 'maturin>=1.9.4,<2'
fi

install() { # label, source directory, target directory -> prints the venv's python
    local label="$1" src="$2" target="$3" venv="$base/pyvenv-$1"
    rm -rf "$base/wheels-$label"
    (cd "$src" && CARGO_TARGET_DIR="$target" "$base/buildvenv/bin/maturin" build --release -q \
        -m python/Cargo.toml --out "$base/wheels-$label") >&2
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check numpy >&2
    fi
    "$venv/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps \
        "$base/wheels-$label"/loaderx_rs-*.whl >&2
    echo "$venv/bin/python"
}
worktree() { # rev -> prints its worktree
    local dir="$base/$1"
    if [ ! -d "$dir" ]; then git worktree add --detach -f "$dir" "$1" >/dev/null; fi
    echo "$dir"
}
old_py="$(install old "$(worktree "$old")" "$base/target-$old")"
if [ -n "$new" ]; then
    new_py="$(install new "$(worktree "$new")" "$base/target-$new")"
else
    new_py="$(install new "$root" "$root/target")"
fi
# The datasets are written by the new revision; both read the same stores.
"$new_py" python/bench/loader.py --sides "" --python "new=$new_py" --python "old=$old_py" --base new \
    --out target/bench/python_loader_revisions.md ${extra[@]+"${extra[@]}"}
