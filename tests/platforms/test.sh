#!/usr/bin/env bash
# The crate's tests on the platforms whose binaries run here (issue 32):
# Windows under wine, Linux arm64 under qemu-aarch64 (user mode: no
# io_uring there, so the batched reads take the I/O thread pool, as they
# would on such a kernel), musl as static binaries, natively. macOS
# binaries cannot run here: check.sh compiles its tests.
#
#   bash tests/platforms/test.sh [all] [TARGET...]
#
# By default, the store's own tests (the library's unit tests, and the
# integration tests below: locks and readers in other processes, delete
# and compaction with readers open, reopening after simulated crashes and
# failed syncs, bad input, checksums, the model test; under qemu, not the
# three heaviest) and a dataset and a loader test; `all` runs every test
# of the library. Installs Debian's
# wine, gcc-mingw-w64-x86-64, qemu-user and libc6-arm64-cross if missing.
set -euo pipefail
source "$(dirname "$0")/toolchains.sh"
cd "$platforms_root"

tests=(--lib --test store_roundtrip --test store_readers --test store_processes --test store_fail_stop
    --test store_bad_input --test store_checksums --test dataset_fixed --test loader_order)
# Natively and under wine; under qemu's emulation these three take minutes.
heavy=(--test store_delete_compact --test store_model --test store_append_segments)
all=0
if [ "${1:-}" = all ]; then
    all=1
    shift
fi
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-pc-windows-gnu aarch64-unknown-linux-gnu x86_64-unknown-linux-musl)

platforms_install_tools

for target in "${targets[@]}"; do
    echo "-- $target"
    log="$platforms_work/test-$target.log"
    status=0
    # Child processes of the tests run through the emulator too.
    runner=""
    [ "$target" = aarch64-unknown-linux-gnu ] && runner="$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER"
    selected=("${tests[@]}")
    [ -n "$runner" ] || selected+=("${heavy[@]}")
    [ "$all" = 0 ] || selected=()
    LOADERX_TEST_RUNNER="$runner" RUSTFLAGS="-D warnings" \
        cargo test --release -p loaderx --target "$target" "${selected[@]}" >"$log" 2>&1 ||
        status=$?
    grep -E '^test result|FAILED|panicked' "$log" || true
    if [ "$status" != 0 ]; then
        echo "$target: tests failed (exit $status); the end of $log:" >&2
        tail -60 "$log" >&2
        exit 1
    fi
done
echo "the tests ran and passed on: ${targets[*]}"
