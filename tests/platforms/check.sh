#!/usr/bin/env bash
# Everything compiles for the platforms the reference ships wheels for,
# beyond this machine's Linux x86-64 (issue 32): the library, the CLI and
# every test, with warnings as errors, for Windows (x86_64-pc-windows-gnu),
# macOS (aarch64-apple-darwin and x86_64-apple-darwin), Linux arm64
# (aarch64-unknown-linux-gnu) and musl (x86_64-unknown-linux-musl).
# `cargo check` only; test.sh runs the tests where they can run here
# (docs/crash-safety.md, "Platforms"; README, "Platforms").
#
#   bash tests/platforms/check.sh [TARGET...]     (all five by default)
#
# CI checks the macOS targets here; test.sh builds the others' tests (with
# warnings as errors too) and runs them.
set -euo pipefail
source "$(dirname "$0")/toolchains.sh"
cd "$platforms_root"

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin
    aarch64-unknown-linux-gnu x86_64-unknown-linux-musl)
for target in "${targets[@]}"; do
    echo "-- $target"
    RUSTFLAGS="-D warnings" cargo check --quiet -p loaderx -p loaderx-cli --lib --bins --tests --target "$target"
done
echo "the library, the CLI and their tests compile for: ${targets[*]}"
