#!/usr/bin/env bash
# CI's bounded fuzz run (docs/fuzzing.md, "In CI"): every target from its
# committed corpus for a fixed number of inputs, about 10 s each here, two
# at a time on the 2 cores. A count and a seed, not a time, so that a slow
# machine runs as many inputs as a fast one (the inputs themselves are not
# bit-exact between runs: libFuzzer's choices here are not all fixed by its
# seed). No sanitizer (the campaigns run AddressSanitizer), the simulator
# without instruments (fuzz/uninstrumented.sh), the campaign's limits. A
# finding fails the run; its input is in fuzz/artifacts/TARGET/, and it
# replays with `cargo run --release -p loaderx-fuzz --bin TARGET -- FILE`.
#
#   bash fuzz/ci.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Inputs per target: about 10 s each at the rates of docs/fuzzing.md.
runs=(codec:300000 sampler:150000 schema:600000 dataset:30000 convert:4000 open:30000 ops:8000)

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked --version 0.13.2
RUSTC_WORKSPACE_WRAPPER="$PWD/fuzz/uninstrumented.sh" \
    cargo +nightly fuzz build -s none --target-dir fuzz/target/none
bin="fuzz/target/none/$(rustc +nightly -vV | sed -n 's/^host: //p')/release"
logs="$(mktemp -d "${TMPDIR:-/tmp}/loaderx-fuzz-ci.XXXXXX")"

run() { # TARGET RUNS
    local work="$logs/work-$1"
    mkdir -p "$work" "fuzz/artifacts/$1"
    if "$bin/$1" "$work" "fuzz/corpus/$1" -seed=1 -runs="$2" -max_len=8192 -timeout=60 \
        -rss_limit_mb=2048 -malloc_limit_mb=512 -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$1/" >"$logs/$1.log" 2>&1; then
        awk -v t="$1" '/DONE/ {cov = $4; ft = $6} /number_of_executed_units/ {n = $2}
            /average_exec_per_sec/ {r = $2} END {printf "%-8s %9d inputs, %6d exec/s, cov %s, ft %s: nothing found\n", t, n, r, cov, ft}' \
            "$logs/$1.log"
    else
        echo "$1: FOUND SOMETHING (input in fuzz/artifacts/$1/); the end of its log:"
        tail -40 "$logs/$1.log"
        return 1
    fi
}

failed=0
for ((i = 0; i < ${#runs[@]}; i += 2)); do
    pids=()
    for pair in "${runs[@]:i:2}"; do
        run "${pair%%:*}" "${pair##*:}" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do
        wait "$pid" || failed=1
    done
done
rm -rf "$logs"
exit "$failed"
