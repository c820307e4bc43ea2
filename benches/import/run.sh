#!/usr/bin/env bash
# The import benchmark (docs/benchmarks.md, "Import"): loaderx's import
# beside the bound and the peers, on the same input, alternating rounds,
# each side a fresh process under /usr/bin/time (wall time, peak RSS), then
# the time to the first batch of what it wrote, in another fresh process.
# loaderx imports twice: with --codec zstd and with --codec raw (the default
# for numbers and bytes;
# (the peers write their records uncompressed by default).
#
#   benches/import/run.sh DATA_DIR [ROUNDS] [KINDS] [PEERS]
#
# DATA_DIR holds the inputs (made by make_inputs.py if missing: DATA_DIR/
# tokens/*.parquet, DATA_DIR/images/*.tar, 1 GB each); outputs go under
# DATA_DIR/out and are removed after each side. ROUNDS defaults to 3, KINDS
# to "tokens images", PEERS to "litdata mds wds hf". PY is the Python with
# the peers and loaderx_rs installed (default /work/venv-bench/bin/python).
# Results: one JSON line per measurement in DATA_DIR/results.jsonl, and the
# summary (medians, ratios) printed at the end by summary.py.
set -euo pipefail
cd "$(dirname "$0")/../.."
data=$(realpath "$1")
rounds=${2:-3}
kinds=${3:-tokens images}
peers=${4:-litdata mds wds hf}
py=${PY:-/work/venv-bench/bin/python}
out=$data/out
results=$data/results.jsonl

"$py" benches/import/make_inputs.py "$data"
cargo build --release --bin loaderx
cargo bench --features arrow --bench import_bound --no-run
bound=$(ls -t target/release/deps/import_bound-* | grep -v '\.d$' | head -1)
loaderx=target/release/loaderx
: > "$results"

# Input pages in memory for every side alike.
warm() { cat "$data/$1"/* > /dev/null; }

# record KIND SIDE WHAT -- CMD...: runs CMD under /usr/bin/time, appends a JSON line.
record() {
    local kind=$1 side=$2 what=$3
    shift 4
    local t
    t=$(mktemp)
    /usr/bin/time -f '%e %M' -o "$t" "$@" > "$t.out"
    read -r wall rss < "$t"
    echo "{\"round\": $round, \"kind\": \"$kind\", \"side\": \"$side\", \"what\": \"$what\", \"wall_s\": $wall, \"peak_rss_kb\": $rss, \"out\": $(tail -1 "$t.out" | "$py" -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))')}" >> "$results"
    rm -f "$t" "$t.out"
}

side() {
    local kind=$1 side=$2
    local dest=$out/$side-$kind
    rm -rf "$dest" "$dest.cache"
    case $side in
        bound)
            local read=read-parquet
            [ "$kind" = images ] && read=read-tar
            record "$kind" bound read -- "$bound" "$read" "$data/$kind"
            local bytes
            bytes=$(tail -1 "$results" | "$py" -c 'import json,sys; print(json.loads(json.loads(sys.stdin.read())["out"])["bytes"])')
            record "$kind" bound write -- "$bound" write "$bytes" "$dest"
            ;;
        loaderx)
            record "$kind" loaderx import -- "$loaderx" import --codec zstd "$data/$kind" "$dest"
            record "$kind" loaderx first -- "$py" benches/import/peers.py first loaderx "$kind" "$dest"
            ;;
        loaderx_raw)
            record "$kind" loaderx_raw import -- "$loaderx" import --codec raw "$data/$kind" "$dest"
            record "$kind" loaderx_raw first -- "$py" benches/import/peers.py first loaderx "$kind" "$dest"
            ;;
        *)
            record "$kind" "$side" import -- "$py" benches/import/peers.py import "$side" "$kind" "$data/$kind" "$dest"
            record "$kind" "$side" first -- "$py" benches/import/peers.py first "$side" "$kind" "$dest"
            ;;
    esac
    rm -rf "$dest" "$dest.cache"
}

sides=(bound loaderx loaderx_raw $peers)
for round in $(seq 1 "$rounds"); do
    for kind in $kinds; do
        warm "$kind"
        # Rotate the order every round: no side always runs first or last.
        n=${#sides[@]}
        for j in $(seq 0 $((n - 1))); do
            s=${sides[$(((j + round) % n))]}
            echo "round $round, $kind: $s" >&2
            side "$kind" "$s" || echo "{\"round\": $round, \"kind\": \"$kind\", \"side\": \"$s\", \"what\": \"failed\"}" >> "$results"
        done
    done
done
"$py" benches/import/summary.py "$results" "$data"
