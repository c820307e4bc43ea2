#!/usr/bin/env bash
# Two builds of the CLI importing the same source, side by side: fresh
# processes, alternating each round, each into a new table. Prints each
# side's median wall, user and system seconds and minor page faults
# (/usr/bin/time), and the median of the per-round wall ratios NEW / OLD.
#
#   bash benches/import/ab.sh OLD_CLI NEW_CLI SOURCE [ROUNDS=7]
#
# The CLIs are binaries already built (for an older commit, its worktree
# with its own CARGO_TARGET_DIR: `git worktree add /tmp/old REV && cd
# /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p
# loaderx-cli`). docs/benchmarks.md, "Ray Data", has a run on the Parquet
# files of python/bench/ray_read.py.
set -euo pipefail
old=$1 new=$2 source=$3 rounds=${4:-7}
work=$(mktemp -d "${TMPDIR:-/tmp}/loaderx-import-ab.XXXXXX")
trap 'rm -rf "$work"' EXIT
for ((r = 0; r < rounds; r++)); do
    sides=(old new)
    ((r % 2)) && sides=(new old)
    for side in "${sides[@]}"; do
        bin=$old
        [ "$side" = new ] && bin=$new
        /usr/bin/time -f "$side %e %U %S %R" -a -o "$work/times" "$bin" import "$source" "$work/t-$side" --json >/dev/null
        rm -rf "$work/t-$side"
    done
done
python3 - "$work/times" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.split() and line.split()[0] in ("old", "new")]
side = {s: [[float(v) for v in r[1:]] for r in rows if r[0] == s] for s in ("old", "new")}
for s in ("old", "new"):
    wall, user, system, faults = (statistics.median(x[k] for x in side[s]) for k in range(4))
    print(f"{s}: {wall:.3f} s wall, {user:.3f} s user, {system:.3f} s system, {faults:.0f} minor faults (medians)")
ratios = [o[0] / n[0] for o, n in zip(side["old"], side["new"])]
print(f"throughput new / old: median {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}), "
      f"{len(ratios)} rounds")
PY
