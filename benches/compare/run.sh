#!/usr/bin/env bash
# The store benchmark, this crate side by side with the reference package
# loaderx 0.7.3, on the same data, in one command:
#
#   bash benches/compare/run.sh [--quick] [--rounds N] [--keep DIR]
#
# 1. a venv in benches/compare/.venv with loaderx==0.7.3 and numpy (PyPI);
# 2. the two datasets and the gather batches as .npy in a temporary directory
#    (make_data.py: 20,000 records of 12,288 B each, float and image);
# 3. reference_store.py (the reference's Python API) and
#    `cargo bench --bench store` (this crate) on that data, alternately, N rounds
#    (default 1; each row keeps its side's best median over the rounds);
# 4. one table with the ratio crate / reference per row (combine.py), also
#    written to target/bench/store.md, with the JSON of each side beside it.
#
# --quick: fewer repetitions (a smoke test, not a measurement).
# --keep DIR: make the data in DIR and leave it there (reused if present).
# Environment: BENCH_ARGS adds arguments to both sides (e.g. "--datasets float").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

rounds=1
quick=0
keep=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --rounds) rounds="$2"; shift ;;
        --keep) keep="$2"; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

venv="$here/.venv"
py="$venv/bin/python"
if ! "$py" -c 'import loaderx, numpy; assert loaderx.__version__ == "0.7.3"' 2>/dev/null; then
    echo "== venv: loaderx==0.7.3 numpy"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "loaderx==0.7.3" numpy
fi

if [ -n "$keep" ]; then
    work="$keep"
    mkdir -p "$work"
else
    work="$(mktemp -d "${TMPDIR:-/tmp}/loaderx-bench.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
fi
data="$work/data"
if [ ! -f "$data/indices.npy" ]; then
    echo "== data"
    "$py" "$here/make_data.py" "$data"
fi

common=(--dict-subset 2000)
if [ "$quick" = 1 ]; then
    common+=(--reps 2 --batches 30 --warmup 5 --append-reps 1)
fi
# shellcheck disable=SC2206
common+=(${BENCH_ARGS:-})

echo "== build"
cargo bench -p loaderx --bench store --no-run

out="$root/target/bench"
mkdir -p "$out"
rm -f "$out"/store-crate-*.json "$out"/store-reference-*.json
for r in $(seq 1 "$rounds"); do
    echo "== round $r/$rounds: reference (loaderx 0.7.3, Python)"
    "$py" "$here/reference_store.py" --data "$data" --work "$work/reference-stores" \
        --json "$out/store-reference-$r.json" "${common[@]}"
    echo "== round $r/$rounds: this crate (cargo bench --bench store)"
    cargo bench -p loaderx --bench store -- --data "$data" --work "$work/crate-stores" \
        --json "$out/store-crate-$r.json" "${common[@]}"
done

echo "== combined (also in target/bench/store.md)"
"$py" "$here/combine.py" --crate "$out"/store-crate-*.json --reference "$out"/store-reference-*.json \
    --markdown "$out/store.md"
