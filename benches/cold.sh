#!/usr/bin/env bash
# The cold-cache benchmark in one command:
#
#   bash benches/cold.sh [--rounds N] [--batches N]      # about 12 minutes
#
# 1. `cargo bench -p loaderx --bench cold`: the crate's read modes, the
#    loader, single-record `get` latency under 64 callers, device bytes, and
#    the bound (fio, io_uring, direct, QD 1 to 128), on raw and zstd stores
#    of 4, 12 and 128 KiB records (kept in target/cold).
# 2. python/bench/cold.py on each raw store: the Python binding, the
#    reference package (loaderx 0.7.3), a memory-mapped .npy, the crate
#    without Python and fio at QD 32 and 128, alternating in each round.
#
# A venv in target/coldvenv holds numpy, the reference package and this
# binding (built from ./python). Every measurement evicts its files with
# posix_fadvise(DONTNEED) first; nothing else of the page cache is touched.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
rounds=4
batches=20
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds="$2"; shift ;;
        --batches) batches="$2"; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
command -v fio >/dev/null || { echo "fio is missing: apt-get install fio" >&2; exit 2; }

venv="$root/target/coldvenv"
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
if ! "$venv/bin/python" -c 'import loaderx, numpy; assert loaderx.__version__ == "0.7.3"' 2>/dev/null; then
    python3 -m venv "$venv"
    "${pip[@]}" "loaderx==0.7.3" numpy
fi
"${pip[@]}" ./python

echo "== the crate: cargo bench -p loaderx --bench cold -- --rounds $rounds --batches $batches"
cargo bench -p loaderx --bench cold -- --rounds "$rounds" --batches "$batches"
cargo build --release -q -p loaderx-cli
for kib in 4 12 128; do
    echo "== the Python sides: ${kib} KiB raw"
    "$venv/bin/python" python/bench/cold.py --store "target/cold/${kib}k-raw-2048m" \
        --record-bytes $((kib * 1024)) --rounds "$rounds" --batches "$batches"
done
