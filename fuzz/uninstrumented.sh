#!/usr/bin/env bash
# A rustc wrapper for `cargo fuzz` builds that leaves the crash simulator
# (the crate `loaderx-sim`: the simulated filesystem and the model checks)
# out of libFuzzer's instruments, so that its compares and edges cost no
# callback and count as no coverage: the simulator is the harness, not the
# code under test. Every other crate, and every other flag (a sanitizer,
# `--cfg fuzzing`, debug assertions), is compiled as cargo-fuzz asks.
#
#   RUSTC_WORKSPACE_WRAPPER="$PWD/fuzz/uninstrumented.sh" cargo +nightly fuzz build ...
#
# (docs/fuzzing.md, "Speed"; `fuzz/campaign.sh` and `fuzz/rates.sh` build so.)
set -euo pipefail
rustc="$1"
shift
case " $* " in
*" --crate-name loaderx_sim "*) ;;
*) exec "$rustc" "$@" ;;
esac
args=()
pending=""
for arg in "$@"; do
    if [ -n "$pending" ]; then # the value of a separate `-C`
        case "$arg" in
        passes=sancov-module | llvm-args=-sanitizer-coverage*) ;;
        *) args+=("$pending" "$arg") ;;
        esac
        pending=""
        continue
    fi
    case "$arg" in
    -C) pending="$arg" ;;
    -Cpasses=sancov-module | -Cllvm-args=-sanitizer-coverage*) ;;
    *) args+=("$arg") ;;
    esac
done
exec "$rustc" "${args[@]}"
