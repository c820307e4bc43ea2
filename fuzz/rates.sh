#!/usr/bin/env bash
# The issue's rate measure of the fuzz targets: each target from its
# committed corpus (fuzz/corpus/TARGET, into an empty working directory),
# 20 s, libFuzzer's `-print_final_stats=1`, with the campaign's limits; two
# runs at a time on the 2 cores, `ops` alone; seeds 1 to 3 (docs/fuzzing.md,
# "Third campaign"):
#
#   bash fuzz/rates.sh BINARY_DIR [SECONDS] [TARGET...]
#
# BINARY_DIR holds the built targets (for example a copy of
# fuzz/target/none/x86_64-unknown-linux-gnu/release after
# `RUSTC_WORKSPACE_WRAPPER="$PWD/fuzz/uninstrumented.sh" cargo +nightly fuzz
# build -s none --target-dir fuzz/target/none`: the crash simulator left out
# of the instruments, see fuzz/uninstrumented.sh).
# Prints `TARGET seed S: EXEC_PER_SECOND` per run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/.."
bindir="$1" seconds="${2:-20}"
shift $(($# < 2 ? $# : 2))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(codec sampler schema open ops)
work="$(mktemp -d "${TMPDIR:-/tmp}/loaderx-rates.XXXXXX")"
trap 'rm -rf "$work"' EXIT

run() {  # TARGET SEED
    mkdir -p "$work/$1-$2"
    local rate
    rate=$("$bindir/$1" "$work/$1-$2" "fuzz/corpus/$1" -seed="$2" -max_total_time="$seconds" -max_len=8192 \
        -timeout=60 -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 2>&1 |
        awk '/stat::average_exec_per_sec/ {print $2}')
    echo "$1 seed $2: ${rate:-failed}"
}

for seed in 1 2 3; do
    pending=()
    for t in "${targets[@]}"; do
        if [ "$t" = ops ]; then
            run ops "$seed"
            continue
        fi
        pending+=("$t")
        if [ ${#pending[@]} -eq 2 ]; then
            run "${pending[0]}" "$seed" &
            run "${pending[1]}" "$seed"
            wait
            pending=()
        fi
    done
    [ ${#pending[@]} -eq 0 ] || run "${pending[0]}" "$seed"
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
