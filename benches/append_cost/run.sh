#!/usr/bin/env bash
# What the per-record checksum costs an append: the same probe
# (benches/append_cost/probe.rs) built against BASE (default: d51a5c2, the
# commit before checksums) and against the working tree, run side by side in
# fresh processes, alternating, on raw 64 KiB, raw 4 KiB and zstd 16 KiB
# records. Prints each side's median MB/s and the median and range of the
# per-round ratios HEAD / BASE. With ALSO=REV, a third side built at REV
# (say, main before a change) runs in the same rounds, and the ratios
# HEAD / ALSO are printed too.
#
#   bash benches/append_cost/run.sh [BASE] [ROUNDS=7] [MIB=256]
#   ALSO=main bash benches/append_cost/run.sh d51a5c2 11 128
set -euo pipefail
cd "$(dirname "$0")/../.."
base=${1:-d51a5c2}
rounds=${2:-7}
mib=${3:-256}
work=target/append-cost
rm -rf "$work/stores"
mkdir -p "$work/stores" "$work/bin"

# Each side's probe is built as an example of a worktree of its commit.
build() { # NAME TREE
    mkdir -p "$2/examples"
    cp benches/append_cost/probe.rs "$2/examples/append_cost_probe.rs"
    (cd "$2" && CARGO_TARGET_DIR="$PWD/../target-append-cost" cargo build --quiet --release --example append_cost_probe)
    cp "$2/../target-append-cost/release/examples/append_cost_probe" "$work/bin/$1"
}
trees=$work/trees
rm -rf "$trees"
mkdir -p "$trees"
git worktree add --quiet --detach "$trees/base" "$base"
git worktree add --quiet --detach "$trees/head" HEAD
# The working tree's uncommitted changes count as HEAD's.
git diff HEAD | (cd "$trees/head" && git apply --allow-empty)
sides="base head"
if [ -n "${ALSO:-}" ]; then
    git worktree add --quiet --detach "$trees/also" "$ALSO"
    sides="base head also"
fi
trap 'for s in $sides; do git worktree remove --force "$trees/$s"; done' EXIT
for s in $sides; do build "$s" "$trees/$s"; done

python3 - "$work" "$rounds" "$mib" $sides <<'PY'
import statistics, subprocess, sys, shutil, os
work, rounds, mib, sides = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
kinds = [("raw-64k", 65536, "raw"), ("raw-4k", 4096, "raw"), ("zstd-16k", 16384, "zstd")]
print(f"{rounds} rounds, {mib} MiB per append run, calls of 256 records, a fresh process per run")
for name, size, codec in kinds:
    rates = {side: [] for side in sides}
    for r in range(rounds):
        for side in sides[r % len(sides):] + sides[:r % len(sides)]:
            store = os.path.join(work, "stores", side)
            shutil.rmtree(store, ignore_errors=True)
            out = subprocess.run([os.path.join(work, "bin", side), store, str(mib), str(size), codec],
                                 check=True, capture_output=True, text=True).stdout
            rates[side].append(float(out))
            shutil.rmtree(store, ignore_errors=True)
    line = f"{name:9}" + "".join(f" {side} {statistics.median(rates[side]):8.1f} MB/s" for side in sides)
    for other in sides:
        if other != "head":
            ratios = [h / b for h, b in zip(rates["head"], rates[other])]
            line += f"  head/{other} median {statistics.median(ratios):.3f} (range {min(ratios):.3f}..{max(ratios):.3f})"
    print(line)
PY
