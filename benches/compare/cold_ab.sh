#!/usr/bin/env bash
# Cold-cache gather of two builds of the CLI side by side: `loaderx bench
# --cold` of each binary on the same stores, alternating within each
# round; prints the median MiB/s of each side and the median of the
# per-round ratios (B / A), per store and read mode.
#
#   bash benches/compare/cold_ab.sh BINARY_A BINARY_B [ROUNDS] [STORE...]
#
# A binary is `target/release/loaderx` of a revision (`cargo build
# --release -p loaderx-cli`; benches/compare/revisions.sh builds one per
# revision under target/revisions/). The stores default to the 4 and
# 12 KiB zstd stores `cargo bench -p loaderx --bench cold` leaves in
# target/cold. Each measurement evicts the store's pages first.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
a="$1" b="$2"; shift 2
rounds="${1:-6}"; [ $# -gt 0 ] && shift
stores=("$@")
[ ${#stores[@]} -gt 0 ] || stores=("$root/target/cold/4k-zstd-2048m" "$root/target/cold/12k-zstd-2048m")
out="$(mktemp)"
for r in $(seq 1 "$rounds"); do
    for store in "${stores[@]}"; do
        for mode in batched direct; do
            for side in A B; do
                bin="$a"; [ "$side" = B ] && bin="$b"
                sleep 1
                v=$("$bin" bench "$store" --cold --read-mode "$mode" --batches 30 --json |
                    python3 -c 'import json, sys; print(json.load(sys.stdin)["gather"]["mib_per_s"])')
                echo "$r $(basename "$store") $mode $side $v" | tee -a "$out"
            done
        done
    done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    r, store, mode, side, v = line.split()
    d[(store, mode, side)].append(float(v))
for store, mode in sorted({(k[0], k[1]) for k in d}):
    a, b = d[(store, mode, "A")], d[(store, mode, "B")]
    ratio = statistics.median(y / x for x, y in zip(a, b))
    print(f"{store} {mode}: A {statistics.median(a):.0f} MiB/s, B {statistics.median(b):.0f} MiB/s, B/A {ratio:.2f} (median of {len(a)} rounds)")
PY
rm -f "$out"
