#!/usr/bin/env bash
# The reference README's three benchmark tables (sampler, store, loader),
# reproduced on this machine in one run: this crate against the reference
# package loaderx 0.7.3 (its Python API), a memory-mapped .npy, HDF5 (h5py),
# LMDB (py-lmdb), ArrayRecord (array_record) and, for the loader, Grain; with
# the physical bounds (memcpy, single-core zstd decompression x cores)
# measured in the same run.
#
#   bash benches/compare/all.sh [--quick] [--rounds N] [--keep DIR]
#
# 1. benches/compare/.venv: loaderx==0.7.3 and numpy (required), then lmdb,
#    h5py, array-record, grain, each on its own: one that does not install is
#    skipped, with a note printed and kept in the output;
# 2. the data (make_data.py: float, 20,000 x 12,288 B float32, zstd ~1.1x;
#    image, 20,000 x 64x64x3 uint8 smooth images, zstd ~7x; the gather
#    batches) in a temporary directory;
# 3. `cargo bench --bench store` and `--bench loader`, built once, their
#    executables run directly;
# 4. sampler: this crate's Sampler::fill (Rust) and, in Python, NumPy's two
#    random APIs and the reference's Sampler (sampler_peers.py);
# 5. store, N rounds: per dataset, per group (bounds, raw, zstd, zstd_dict)
#    this crate then the reference or the other way round (alternating by
#    round), then the other stores (peers_store.py);
# 6. loader, N rounds: this crate's DataLoader, the reference's, Grain over
#    ArrayRecord (grain_loader.py), the order rotating by round;
# 7. the three tables (all_combine.py) in target/bench/all.md, every JSON in
#    target/bench/all/, the machine (nproc, lscpu, the load average at each
#    phase) in target/bench/all/machine.txt.
#
# --quick: one round, few repetitions (a smoke test, not a measurement).
# --rounds N: rounds of the store and loader parts (default 2).
# --keep DIR: make the data in DIR and leave it there (reused if present).
rounds=2
. "$(dirname "$0")/common.sh" "$@"

out="$root/target/bench/all"
rm -rf "$out"
mkdir -p "$out"
notes="$out/notes.txt"
: > "$notes"
load() { # phase
    echo "$1: $(uptime)" >> "$out/loads.txt"
}

for spec in lmdb:lmdb h5py:h5py array-record:array_record.python.array_record_module grain:grain; do
    package="${spec%%:*}"
    module="${spec#*:}"
    if "$py" -c "import $module" 2>/dev/null; then
        continue
    fi
    echo "== venv: $package"
    if ! "${pip[@]}" "$package" > "$out/pip-$package.log" 2>&1 || ! "$py" -c "import $module" 2>/dev/null; then
        echo "note: $package could not be installed for $("$py" -V); its rows are skipped (see $out/pip-$package.log)" \
            | tee -a "$notes"
    fi
done

compare_work loaderx-all
data="$work/data"
if [ ! -f "$data/indices.npy" ]; then
    echo "== data"
    "$py" "$here/make_data.py" "$data"
fi

executable() { # bench name
    cargo bench -p loaderx --bench "$1" --no-run --message-format=json 2>/dev/null | "$py" -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == sys.argv[1] and m.get("executable"):
        print(m["executable"])' "$1"
}
echo "== build: cargo bench -p loaderx --bench store --bench loader --no-run"
cargo bench -p loaderx --bench store --bench loader --no-run
store_bench="$(executable store)"
loader_bench="$(executable loader)"

{
    echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "nproc: $(nproc)"
    lscpu | head -n 20
    grep MemTotal /proc/meminfo
    echo "python: $("$py" -V 2>&1); numpy $("$py" -c 'import numpy; print(numpy.__version__)')"
    "$py" -m pip list --disable-pip-version-check 2>/dev/null | grep -Ei '^(loaderx|lmdb|h5py|array.record|grain) ' || true
    rustc -V
} > "$out/machine.txt"

store_common=(--dict-subset 2000 --reps 3 --append-reps 3)
peers_common=(--reps 3 --append-reps 1)
loader_common=(--batches 1000 --warmup 100 --reps 3)
grain_common=(--batches 100 --warmup 20 --reps 3)
sampler_rounds=9
if [ "$quick" = 1 ]; then
    rounds=1
    store_common=(--dict-subset 2000 --reps 2 --batches 30 --warmup 5 --append-reps 1)
    peers_common=(--reps 2 --batches 30 --warmup 5 --append-reps 1 --budget 1)
    loader_common=(--batches 100 --warmup 10 --reps 1)
    grain_common=(--batches 10 --warmup 5 --reps 1)
    sampler_rounds=3
fi

# 1. The sampler.
echo "== sampler"
load sampler
"$loader_bench" --no-loader --sampler-lens 1000000 --sampler-batches 256,1024,8192 --json "$out/sampler-crate.json"
"$py" "$here/sampler_peers.py" --rounds "$sampler_rounds" --json "$out/sampler-python.json"

# 2. The store.
crate_store() { # round dataset group
    "$store_bench" --data "$data" --work "$work/crate-stores" --round "$1" --datasets "$2" --groups "$3" \
        --json "$out/store-crate-$1-$2-$3.json" "${store_common[@]}"
}
reference_store() { # round dataset group
    "$py" "$here/reference_store.py" --data "$data" --work "$work/reference-stores" --round "$1" \
        --datasets "$2" --groups "$3" --json "$out/store-reference-$1-$2-$3.json" "${store_common[@]}"
}
for r in $(seq 1 "$rounds"); do
    for d in float image; do
        load "store round $r $d"
        for g in bounds raw zstd zstd_dict; do
            echo "== store round $r/$rounds: $d $g"
            if [ $((r % 2)) = 1 ]; then
                reference_store "$r" "$d" "$g"
                crate_store "$r" "$d" "$g"
            else
                crate_store "$r" "$d" "$g"
                reference_store "$r" "$d" "$g"
            fi
        done
        echo "== store round $r/$rounds: $d, other stores"
        "$py" "$here/peers_store.py" --data "$data" --work "$work/peer-stores" --round "$r" --datasets "$d" \
            --json "$out/store-peers-$r-$d.json" "${peers_common[@]}" 2>&1 | grep -v '^WARNING:absl' || true
    done
done

# 3. The loader.
crate_loader() {
    "$loader_bench" --data "$data" --work "$work/crate-loader" --no-sampler \
        --json "$out/loader-crate-$r.json" "${loader_common[@]}"
}
reference_loader() {
    "$py" "$here/reference_loader.py" --data "$data" --work "$work/reference-loader" --no-sampler \
        --json "$out/loader-reference-$r.json" "${loader_common[@]}"
}
grain_loader() {
    if "$py" -c 'import grain, array_record' 2>/dev/null; then
        "$py" "$here/grain_loader.py" --data "$data" --work "$work/grain-loader" \
            --json "$out/loader-grain-$r.json" "${grain_common[@]}" 2>&1 | grep -v '^WARNING:absl' || true
    fi
}
for r in $(seq 1 "$rounds"); do
    load "loader round $r"
    echo "== loader round $r/$rounds"
    case $((r % 3)) in
        1) crate_loader; reference_loader; grain_loader ;;
        2) reference_loader; grain_loader; crate_loader ;;
        0) grain_loader; crate_loader; reference_loader ;;
    esac
done
load end

echo "== combined (also in target/bench/all.md)"
"$py" "$here/all_combine.py" --dir "$out" --markdown "$root/target/bench/all.md"
