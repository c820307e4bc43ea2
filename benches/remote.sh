#!/usr/bin/env bash
# The remote gather benchmark (benches/remote.rs) against SeaweedFS on
# loopback: starts the server as tests/remote/run.sh does, runs the bench
# (twice: as it is, and with LOADERX_BENCH_DELAY_MS of added latency per
# response through a loopback proxy, default 20), stops the server.
# Figures: docs/benchmarks.md, "Remote gathers".
#
# Usage: benches/remote.sh   (LOADERX_BENCH_* variables: see benches/remote.rs)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=tests/remote/server.sh
source "$root/tests/remote/server.sh"
start_server
cargo bench -p loaderx --features remote --bench remote
LOADERX_BENCH_DELAY_MS="${LOADERX_BENCH_DELAY_MS:-20}" cargo bench -p loaderx --features remote --bench remote
