#!/usr/bin/env bash
# Interop with the reference package loaderx 0.7.3 (PyPI), both ways:
#   1. the reference writes stores (reference_writes.py), this crate's CLI
#      reads every record back (`loaderx cat`) and its stats (`loaderx stats
#      --json`), compared byte for byte with the expected sidecar files;
#   2. this crate writes stores (example interop_write, write_stores.rs), the
#      reference reads every record back (reference_reads.py).
#   3. datasets (a store plus schema.json) both ways: the reference's
#      write_dataset / write_ragged output opened with this crate's Dataset /
#      RaggedDataset, and this crate's opened with the reference's, each
#      compared with the NumPy arrays it was written from
#      (reference_datasets.py, example interop_datasets, datasets.rs); and
#      .npy files NumPy writes (versions 1.0 to 3.0, files to refuse) read by
#      this crate's header parser as NumPy's reader reads them, and converted.
#   4. a hand-over (handover.py): the reference writes a store, this crate's
#      writer deletes from it, the reference reads it and appends, this crate
#      reads it.
# Expected bytes live in sidecar files beside (never inside) each store.
#
# Usage: tests/interop/run.sh        (from anywhere; needs python3.11 and network for pip)
# Environment: PYTHON (default python3.11); INTEROP_REUSE_VENV=1 keeps an
# existing tests/interop/.venv that already has loaderx 0.7.3 instead of
# recreating it.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

python="${PYTHON:-python3.11}"
venv="$here/.venv"
work="$(mktemp -d "${TMPDIR:-/tmp}/loaderx-interop.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# (a) A throwaway venv with the reference package.
if [[ "${INTEROP_REUSE_VENV:-0}" == 1 ]] \
    && "$venv/bin/python" -c 'import loaderx, numpy, sys; sys.exit(loaderx.__version__ != "0.7.3")' 2>/dev/null; then
    echo "interop: reusing $venv"
else
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'loaderx==0.7.3' numpy
fi
py="$venv/bin/python"
echo "interop: reference $("$py" -c 'import loaderx; print("loaderx", loaderx.__version__)')"

# Build once (compiler warnings show here), so the per-store `cargo run`
# calls below only run; their stderr (cargo replays the warnings on every
# run) is shown only when the command fails.
cargo build --quiet --release --bin loaderx --example interop_write --example interop_datasets
loaderx() {
    if ! cargo run --quiet --release --bin loaderx -- "$@" 2>"$work/stderr"; then
        cat "$work/stderr" >&2
        return 1
    fi
}

mismatches=0   # stores with at least one mismatch
stores=0

# (b) The reference writes.
"$py" "$here/reference_writes.py" "$work/ref"

# (c) This crate reads what the reference wrote. Prints `ok NAME`, or one
# `FAIL NAME: ...` line per problem and returns 1.
check_ref_store() {
    local name="$1" store="$work/ref/stores/$1" lens="$work/ref/expected/$1.lens"
    local want="$work/ref/expected/$1.bin" got="$work/got/$1" n ok=1
    n="$(wc -l < "$lens")"
    # Every record, in index order.
    if ! loaderx cat "$store" --range "0..$n" --out "$got.bin"; then
        echo "FAIL $name: loaderx cat --range 0..$n failed"
        return 1
    fi
    if ! cmp --quiet "$got.bin" "$want"; then
        echo "FAIL $name: loaderx cat --range 0..$n differs from the expected bytes"
        ok=0
    fi
    # Every record again, in descending index order through positional
    # indices to stdout, so a record boundary that is off cannot cancel out.
    if [[ "$n" -gt 0 ]]; then
        # shellcheck disable=SC2046
        if ! loaderx cat "$store" $(seq $((n - 1)) -1 0) > "$got.rev"; then
            echo "FAIL $name: loaderx cat INDEX... failed"
            ok=0
        elif ! "$py" "$here/compare.py" reversed "$want" "$lens" "$got.rev"; then
            echo "FAIL $name: loaderx cat in descending index order differs"
            ok=0
        fi
    fi
    # stats --json against the reference's own stats().
    if ! loaderx stats "$store" --json > "$got.json"; then
        echo "FAIL $name: loaderx stats failed"
        ok=0
    elif ! "$py" "$here/compare.py" stats "$got.json" "$work/ref/expected/$name.stats"; then
        echo "FAIL $name: loaderx stats disagrees with the reference's stats()"
        ok=0
    fi
    if [[ "$ok" == 1 ]]; then
        printf 'ok   %-22s %s records read by loaderx cat, bytes and stats agree\n' "$name" "$n"
        return 0
    fi
    return 1
}

mkdir -p "$work/got"
for lens in "$work/ref/expected/"*.lens; do
    stores=$((stores + 1))
    check_ref_store "$(basename "$lens" .lens)" || mismatches=$((mismatches + 1))
done

# (d) This crate writes.
cargo run --quiet --release --example interop_write -- "$work/ours"

# (e) The reference reads what this crate wrote.
set +e
"$py" "$here/reference_reads.py" "$work/ours" | tee "$work/reads.log"
reads_status="${PIPESTATUS[0]}"
set -e
ours="$(grep -c -E '^(ok|FAIL) ' "$work/reads.log" || true)"
failed="$(grep -c '^FAIL ' "$work/reads.log" || true)"
stores=$((stores + ours))
mismatches=$((mismatches + failed))
if [[ "$reads_status" != 0 && "$failed" == 0 ]]; then
    echo "FAIL reference_reads.py exited with status $reads_status"
    mismatches=$((mismatches + 1))
fi

# (f) Datasets both ways. Each side prints `ok NAME` / `FAIL NAME` per dataset.
count_datasets() {  # LOG STATUS WHAT
    local n failed
    n="$(grep -c -E '^(ok|FAIL) ' "$1" || true)"
    failed="$(grep -c '^FAIL ' "$1" || true)"
    stores=$((stores + n))
    mismatches=$((mismatches + failed))
    if [[ "$2" != 0 && "$failed" == 0 ]]; then
        echo "FAIL $3 exited with status $2"
        mismatches=$((mismatches + 1))
    fi
}
"$py" "$here/reference_datasets.py" write "$work/ref_datasets"
set +e
cargo run --quiet --release --example interop_datasets -- check "$work/ref_datasets" 2>"$work/stderr" \
    | tee "$work/datasets_check.log"
status="${PIPESTATUS[0]}"
set -e
[[ "$status" == 0 ]] || cat "$work/stderr" >&2
count_datasets "$work/datasets_check.log" "$status" "interop_datasets check"
cargo run --quiet --release --example interop_datasets -- write "$work/our_datasets" 2>"$work/stderr" \
    || { cat "$work/stderr" >&2; exit 1; }
set +e
"$py" "$here/reference_datasets.py" read "$work/our_datasets" | tee "$work/datasets_read.log"
status="${PIPESTATUS[0]}"
set -e
count_datasets "$work/datasets_read.log" "$status" "reference_datasets.py read"

# (g) A hand-over both ways in one store: the reference writes it, this
# crate's writer opens it (a delete; the reference's 4 GiB chunk file is
# trimmed to the frontier) and checksums it (`loaderx checksum`: the
# upgrade of a store without sums.zr), the reference reads every record
# and appends, this crate reads every record; `verify` counts the
# reference's five records as unchecked, not as errors, and `loaderx
# checksum` covers them.
stores=$((stores + 1))
"$py" "$here/handover.py" write "$work/handover"
loaderx delete "$work/handover/store" 3 > /dev/null
loaderx checksum "$work/handover/store" --json | grep -q '"created":true'
set +e
"$py" "$here/handover.py" check "$work/handover" | tee "$work/handover.log"
set -e
n="$(wc -l < "$work/handover/expected.lens")"
if ! grep -q '^ok ' "$work/handover.log"; then
    mismatches=$((mismatches + 1))
elif ! loaderx cat "$work/handover/store" --range "0..$n" --out "$work/handover/got.bin" \
    || ! cmp --quiet "$work/handover/got.bin" "$work/handover/expected.bin"; then
    echo "FAIL handover: loaderx cat after the reference's append differs from the expected bytes"
    mismatches=$((mismatches + 1))
elif ! loaderx verify "$work/handover/store" --json | grep -q '"ok":true,"records":'"$n"',"problems_total":0,"unchecked":5,' \
    || ! loaderx checksum "$work/handover/store" --json | grep -q '"summed":5,' \
    || ! loaderx verify "$work/handover/store" --json | grep -q '"unchecked":0,'; then
    echo "FAIL handover: verify after the reference's append does not count its 5 records unchecked, or checksum does not cover them"
    loaderx verify "$work/handover/store" --json
    mismatches=$((mismatches + 1))
else
    echo "ok   handover               $n records read back by loaderx cat after the reference's append; its 5 unchecked, then covered"
fi

echo "interop: $stores stores checked both ways, $mismatches mismatches"
[[ "$mismatches" == 0 ]]
