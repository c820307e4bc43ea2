#!/usr/bin/env bash
# The loader benchmark, this crate side by side with the reference package
# loaderx 0.7.3's DataLoader, on the same data, in one command:
#
#   bash benches/compare/loader.sh [--quick] [--rounds N] [--keep DIR]
#
# 1. a venv in benches/compare/.venv with loaderx==0.7.3 and numpy (PyPI);
# 2. make_data.py's float.npy (20,000 x 12,288 B float32, mildly compressible)
#    in a temporary directory;
# 3. reference_loader.py (the reference's write_dataset and DataLoader: 2
#    streams, 4 workers, batch 256, IID, zstd and raw) and
#    `cargo bench --bench loader` (this crate, the same; built once, its
#    executable run per round), N rounds (default 1), who goes first
#    alternating; each side also times its sampler; this crate also runs a
#    zstd dataset written with Options::min_saving = 0.1 (records zstd shrinks
#    by less than 10% stored raw; a row of its own, no reference counterpart);
# 4. one table with the ratios (loader_combine.py), also written to
#    target/bench/loader.md, with the JSON of each side beside it.
#
# --quick: fewer batches (a smoke test, not a measurement).
# --keep DIR: make the data and the datasets in DIR and leave them (reused).
rounds=1
. "$(dirname "$0")/common.sh" "$@"


compare_work loaderx-loader-bench
data="$work/data"
if [ ! -f "$data/float.npy" ]; then
    echo "== data"
    "$py" "$here/make_data.py" "$data" --batches 10
fi

common=()
if [ "$quick" = 1 ]; then
    common+=(--batches 50 --warmup 10 --reps 1)
fi

echo "== build"
cargo bench -p loaderx --bench loader --no-run
# The executable cargo just built (wherever CARGO_TARGET_DIR puts it).
bench="$(cargo bench -p loaderx --bench loader --no-run --message-format=json 2>/dev/null | "$py" -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "loader" and m.get("executable"):
        print(m["executable"])')"

out="$root/target/bench"
mkdir -p "$out"
rm -f "$out"/loader-crate-*.json "$out"/loader-reference-*.json
reference() {
    echo "== round $r/$rounds: reference (loaderx 0.7.3, Python)"
    "$py" "$here/reference_loader.py" --data "$data" --work "$work/reference" \
        --json "$out/loader-reference-$r.json" ${common[@]+"${common[@]}"}
}
# The crate's datasets are written once, here, so that no measured process
# writes: each codec's loader then runs in a fresh process that opens the
# datasets and builds its loader first, as a user's program does (the
# sampler part runs in the first), and the JSON of a round joins them.
echo "== the crate's datasets"
"$bench" --data "$data" --work "$work/crate" --min-saving 0.1 --no-sampler --batches 1 --warmup 0 --reps 1 >/dev/null
crate() {
    echo "== round $r/$rounds: this crate (cargo bench --bench loader, a process per codec)"
    local parts=() codec sampler=()
    for codec in zstd raw min-saving; do
        local args=(--codecs "$codec")
        [ "$codec" = min-saving ] && args=(--codecs "" --min-saving 0.1)
        [ "$codec" = zstd ] || sampler=(--no-sampler)
        "$bench" --data "$data" --work "$work/crate" "${args[@]}" ${sampler[@]+"${sampler[@]}"} \
            --json "$out/loader-crate-$r-$codec.json" ${common[@]+"${common[@]}"}
        parts+=("$out/loader-crate-$r-$codec.json")
    done
    "$py" - "$out/loader-crate-$r.json" "${parts[@]}" <<'PY'
import json, sys
joined = {"side": "crate", "loader": [], "sampler": []}
for part in sys.argv[2:]:
    d = json.load(open(part))
    joined["loader"] += d["loader"]
    joined["sampler"] += d["sampler"]
json.dump(joined, open(sys.argv[1], "w"))
PY
    rm -f "${parts[@]}"
}
# Who goes first alternates from round to round.
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then reference; crate; else crate; reference; fi
done

echo "== combined (also in target/bench/loader.md)"
"$py" "$here/loader_combine.py" --crate "$out"/loader-crate-*.json --reference "$out"/loader-reference-*.json \
    --markdown "$out/loader.md"
