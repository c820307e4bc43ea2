#!/usr/bin/env bash
# The store benchmark, this crate side by side with the reference package
# loaderx 0.7.3, on the same data, in one command:
#
#   bash benches/compare/run.sh [--quick] [--rounds N] [--keep DIR]
#
# 1. a venv in benches/compare/.venv with loaderx==0.7.3 and numpy (PyPI);
# 2. the two datasets and the gather batches as .npy in a temporary directory
#    (make_data.py: 20,000 records of 12,288 B each, float and image);
# 3. `cargo bench --bench store` (this crate; built once with --no-run, then its
#    executable run directly) and reference_store.py (the reference through its
#    Python API) on that data, in pairs: for each round, dataset and group
#    (bounds, raw, zstd, zstd_dict) one side then the other, the first side
#    alternating by round, so that both sides of a pair see the same load of a
#    shared machine; then the crate-only extras once;
# 4. one table (combine.py): per row the median over rounds of each side and the
#    median of the per-round ratios crate / reference, and the targets of issue
#    2; also written to target/bench/store.md, with every JSON beside it in
#    target/bench/store/.
#
# --quick: one round, fewer repetitions (a smoke test, not a measurement).
# --rounds N: pairing rounds (default 3).
# --keep DIR: make the data in DIR and leave it there (reused if present).
# Environment: BENCH_ARGS adds arguments to both sides (e.g. "--batches 50").
rounds=3
. "$(dirname "$0")/common.sh" "$@"


compare_work loaderx-bench
data="$work/data"
if [ ! -f "$data/indices.npy" ]; then
    echo "== data"
    "$py" "$here/make_data.py" "$data"
fi

common=(--dict-subset 2000 --reps 3 --append-reps 3)
if [ "$quick" = 1 ]; then
    rounds=1
    common=(--dict-subset 2000 --reps 2 --batches 30 --warmup 5 --append-reps 1)
fi
# shellcheck disable=SC2206
common+=(${BENCH_ARGS:-})

echo "== build: cargo bench -p loaderx --bench store --no-run"
bench="$(cargo bench -p loaderx --bench store --no-run --message-format=json 2>/dev/null \
    | "$py" -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "store" and m.get("executable"):
        print(m["executable"])')"
if [ -z "$bench" ]; then
    cargo bench -p loaderx --bench store --no-run # show the error
    exit 1
fi

out="$root/target/bench/store"
rm -rf "$out"
mkdir -p "$out"
crate() { # round dataset group
    "$bench" --data "$data" --work "$work/crate-stores" --round "$1" --datasets "$2" --groups "$3" \
        --json "$out/crate-$1-$2-$3.json" "${common[@]}"
}
reference() { # round dataset group
    "$py" "$here/reference_store.py" --data "$data" --work "$work/reference-stores" --round "$1" \
        --datasets "$2" --groups "$3" --json "$out/reference-$1-$2-$3.json" "${common[@]}"
}
for r in $(seq 1 "$rounds"); do
    for d in float image; do
        for g in bounds raw zstd zstd_dict; do
            echo "== round $r/$rounds: $d $g"
            if [ $((r % 2)) = 1 ]; then
                reference "$r" "$d" "$g"
                crate "$r" "$d" "$g"
            else
                crate "$r" "$d" "$g"
                reference "$r" "$d" "$g"
            fi
        done
    done
done
echo "== crate-only extras"
for d in float image; do
    crate 0 "$d" extra
done

echo "== combined (also in target/bench/store.md)"
"$py" "$here/combine.py" --crate "$out"/crate-*.json --reference "$out"/reference-*.json \
    --markdown "$root/target/bench/store.md"
