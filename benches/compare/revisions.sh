#!/usr/bin/env bash
# Warm gather and loader throughput of two revisions of this crate, side by
# side: `loaderx bench` of each revision's CLI on the same stores (a raw and
# a zstd store of 40,000 records of 3,072 bytes, written once by
# benches/compare/revisions_data.rs), in
# alternating rounds; prints the median MiB/s of each and their ratio.
#
#   bash benches/compare/revisions.sh OLD_REV [NEW_REV] [--rounds N]
#
# NEW_REV defaults to the working tree. Each revision builds in its own
# worktree and target directory under target/revisions/ (kept for reruns).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
old="$1"; shift
new=""
rounds=10
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift ;;
        *) new="$1" ;;
    esac
    shift
done
base="$root/target/revisions"
mkdir -p "$base"

build() { # rev -> prints the path of its loaderx binary
    local rev="$1" dir="$base/$1"
    if [ ! -d "$dir" ]; then git worktree add --detach -f "$dir" "$rev" >/dev/null; fi
    (cd "$dir" && CARGO_TARGET_DIR="$base/target-$rev" cargo build --release -q -p loaderx-cli) >&2
    echo "$base/target-$rev/release/loaderx"
}
old_bin="$(build "$old")"
if [ -n "$new" ]; then new_bin="$(build "$new")"; else
    cargo build --release -q -p loaderx-cli >&2
    new_bin="$root/target/release/loaderx"
fi

work="$base/data"
if [ ! -d "$work/raw.zr" ]; then
    mkdir -p "$work"
    cargo run --release -q --example revisions_data -- "$work" >&2
fi

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for _ in $(seq 1 "$rounds"); do
    for side in old new; do
        bin="$old_bin"; [ "$side" = new ] && bin="$new_bin"
        for store in raw zstd; do
            "$bin" bench "$work/$store.zr" --batches 2000 --seconds 3 --json |
                python3 -c "import json,sys; d=json.load(sys.stdin); print('$side', '$store', d['gather']['mib_per_s'], d['loader']['mib_per_s'])" >>"$out"
        done
    done
done
python3 - "$out" "$old" "${new:-working tree}" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    side, store, gather, loader = line.split()
    runs[side, store, "gather"].append(float(gather))
    runs[side, store, "loader"].append(float(loader))
print(f"{'store':6} {'workload':8} {sys.argv[2]:>14} {sys.argv[3]:>14} {'ratio':>7}   (median MiB/s)")
for store in ("raw", "zstd"):
    for workload in ("gather", "loader"):
        old = statistics.median(runs["old", store, workload])
        new = statistics.median(runs["new", store, workload])
        print(f"{store:6} {workload:8} {old:14.0f} {new:14.0f} {new / old:7.3f}")
PY
