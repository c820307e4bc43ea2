#!/bin/bash
# The crash test on the real kernel (docs/crash-safety.md, "On the real kernel").
#
#   crashtest/run.sh --ci          every filesystem, a short workload of each kind
#                                  (6 operations; a table's 3, on ext4 only), every flush
#                                  point and mark, 1 sampled state per gap, and the mutant on ext4
#   crashtest/run.sh --campaign [SEEDS [OPS [BETWEEN]]]   the longer run: SEEDS
#                                  seeds (default 2) of each kind on each filesystem,
#                                  OPS operations (20; a table's TABLE_OPS, 8),
#                                  BETWEEN sampled states per
#                                  gap (4), and the mutant on each filesystem
#   JOBS=N (default 2): guests at a time; KINDS="K..." (default all): the workloads;
#   TABLE_FS="FS..." (default every filesystem; ext4 in --ci): where the table runs
#   STALL_S=N (default 300): how long one step in the guest may last
#   crashtest/run.sh one FS KIND SEED OPS BETWEEN [mutant]   one guest run
#
# Each run boots a QEMU guest (TCG) from guest/build.sh's kernel and
# initramfs with four raw virtio disks: data (a fresh filesystem), log,
# replay (the same image as data) and cow (the snapshot's changes). Its
# serial output is target/crashtest/runs/NAME/serial.log; the lines
# `crashtest: SUMMARY` and `crashtest: VIOLATION` are what it found.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/target/crashtest"
qemu=$(command -v qemu-system-x86_64 || echo "$out/qemu/usr/bin/qemu-system-x86_64")
qemu_share=()
[ -d "$out/qemu/usr/share/qemu" ] && qemu_share=(-L "$out/qemu/usr/share/qemu" -L "$out/qemu/usr/share/seabios")
# Seconds a guest may run before it is killed.
GUEST_TIMEOUT_S=${GUEST_TIMEOUT_S:-900}
# Seconds one step of a guest's run may last before its watchdog reports
# it and powers the guest off (crashtest/src/watchdog.rs).
STALL_S=${STALL_S:-300}

fs_bytes() { case "$1" in xfs) echo 320M ;; btrfs) echo 256M ;; *) echo 128M ;; esac; }
mkfs_for() { # FS IMAGE
    case "$1" in
        ext4) mkfs.ext4 -F -q "$2" ;;
        xfs) mkfs.xfs -f -q "$2" ;;
        btrfs) mkfs.btrfs -f -q "$2" >/dev/null ;;
    esac
}

# One guest run; prints its SUMMARY and VIOLATION lines; returns 0 when
# the run finished (violations or not), 1 when it did not. A run that does
# not finish (its guest's watchdog found a step stalled, or the timeout
# killed it) is booted once more with the same settings, which replay the
# same workload: a run that found a violation is never run again, and the
# stalled attempt's report stays in the output and in serial-1.log.
run_one() { # FS KIND SEED OPS BETWEEN [mutant]
    local name="$1-$2-$3-$4-$5"
    [ "${6:-}" = mutant ] && name="$name-mutant"
    rm -rf "$out/runs/$name"
    boot "$@" && return 0
    mv "$out/runs/$name/serial.log" "$out/runs/$name/serial-1.log"
    echo "[$name] booted again after the stall above"
    boot "$@"
}

# One boot of a guest for run_one.
boot() { # FS KIND SEED OPS BETWEEN [mutant]
    local fs=$1 kind=$2 seed=$3 ops=$4 between=$5 mutant=0 name="$1-$2-$3-$4-$5"
    if [ "${6:-}" = mutant ]; then mutant=1 name="$name-mutant"; fi
    local dir="$out/runs/$name"
    mkdir -p "$dir"
    truncate -s "$(fs_bytes "$fs")" "$dir/data.img"
    mkfs_for "$fs" "$dir/data.img"
    cp --sparse=always "$dir/data.img" "$dir/replay.img"
    truncate -s 2G "$dir/log.img"
    truncate -s 512M "$dir/cow.img"
    local drives=()
    for disk in data log replay cow; do
        # cache=unsafe: the host's own durability is not under test (the
        # log records the guest's order); see docs/crash-safety.md.
        drives+=(-drive "file=$dir/$disk.img,format=raw,if=virtio,cache=unsafe")
    done
    local started=$SECONDS
    timeout --kill-after=10 "$GUEST_TIMEOUT_S" nice -n 19 "$qemu" "${qemu_share[@]}" -accel tcg -cpu max -m 1G -smp 1 \
        -nographic -no-reboot -kernel "$out/vmlinuz" -initrd "$out/initramfs.gz" \
        -append "console=ttyS0 quiet panic=-1 ct.fs=$fs ct.kind=$kind ct.seed=$seed ct.ops=$ops ct.between=$between ct.mutant=$mutant ct.stall=$STALL_S" \
        "${drives[@]}" </dev/null >"$dir/serial.log" 2>&1 || true
    local prefix="[$name $((SECONDS - started))s]"
    # The first violations in full (a lost record stays lost in every
    # later state), then the summary; serial.log has them all.
    grep -a 'crashtest: \(VIOLATION\|ERROR\)' "$dir/serial.log" | head -n 3 | cut -c1-400 | sed "s/^/$prefix /" || true
    grep -a 'crashtest: SUMMARY' "$dir/serial.log" | sed "s/^/$prefix /" | tee -a "$results" || true
    rm -f "$dir"/*.img
    grep -aq 'crashtest: SUMMARY' "$dir/serial.log" && return 0
    # Unfinished: where it stopped (the guest's watchdog prints the step,
    # the stacks and the blocked tasks; crashtest/src/watchdog.rs).
    echo "$prefix unfinished; its serial log from the watchdog's report (or its end):"
    { grep -aq 'crashtest: STALLED' "$dir/serial.log" && sed -n '/crashtest: STALLED/,$p' "$dir/serial.log" ||
        tail -n 30 "$dir/serial.log"; } | head -n 120 | tr -cd '\11\12\40-\176' | cut -c1-300 | sed "s/^/$prefix   /"
    return 1
}

# The table of docs/crash-safety.md from the SUMMARY lines of $results.
table() {
    echo "| filesystem | workload | runs | operations | flush points and marks replayed | random reorderings | violations |"
    echo "|---|---|---|---|---|---|---|"
    sed 's/.*SUMMARY //' "$results" | awk '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        key = v["fs"] " | " v["kind"] (v["mutant"] == 1 ? " (mutant)" : "")
        if (!(key in runs)) order[++n] = key
        runs[key]++; ops[key] += v["ops"]; prefix[key] += v["flush"] + v["mark"]
        between[key] += v["between"]; bad[key] += v["violations"]
    } END {
        for (k = 1; k <= n; k++) { key = order[k]
            printf "| %s | %d | %d | %d | %d | %d |\n", key, runs[key], ops[key], prefix[key], between[key], bad[key] }
    }'
}

# Starts run_one in the background, keeping at most $JOBS guests running;
# a run that does not finish marks $failures.
declare -a running=()
start() { # run_one's arguments
    while [ ${#running[@]} -ge "$JOBS" ]; do reap; done
    run_one "$@" &
    running+=($!)
}
reap() { # waits for the oldest running guest
    wait "${running[0]}" || echo unfinished >>"$failures"
    running=("${running[@]:1}")
}

# Runs every (FS, KIND) pair for SEEDS seeds with OPS operations and
# BETWEEN sampled states per gap, then the mutant (6 operations) on each
# MUTANT_FS; fails when a run does not finish, a run of the store finds a
# violation, or the mutant goes unnoticed.
campaign() { # SEEDS OPS BETWEEN MUTANT_FS...
    local seeds=$1 ops=$2 between=$3 failed=0 fs kind seed n
    shift 3
    : >"$results" && : >"$failures"
    for fs in ext4 xfs btrfs; do
        for kind in ${KINDS:-append delete compact rollover table}; do
            # A table's operations each write every column: TABLE_OPS bounds them.
            n=$ops
            if [ "$kind" = table ]; then
                # The longest workload (4 to 7 minutes a run in CI): TABLE_FS bounds where.
                [[ " ${TABLE_FS:-$fs} " == *" $fs "* ]] || continue
                n=${TABLE_OPS:-$ops}
            fi
            for seed in $(seq 1 "$seeds"); do start "$fs" "$kind" "$seed" "$n" "$between"; done
        done
    done
    for fs in "$@"; do start "$fs" append 1 6 1 mutant; done
    while [ ${#running[@]} -gt 0 ]; do reap; done
    [ -s "$failures" ] && failed=1
    grep 'mutant=0' "$results" | grep -q 'violations=[1-9]' && failed=1
    for fs in "$@"; do
        if ! grep "fs=$fs " "$results" | grep 'mutant=1' | grep -q 'violations=[1-9]'; then
            echo "crashtest: the mutant (SYNC A1 removed) went unnoticed on $fs"
            failed=1
        fi
    done
    table
    echo "crashtest: $([ $failed = 0 ] && echo PASSED || echo FAILED) in $SECONDS s ($JOBS guests at a time)"
    return $failed
}

mkdir -p "$out/runs"
if [ ! -f "$out/initramfs.gz" ] || [ "${REBUILD:-1}" != 0 ]; then
    bash "$root/crashtest/guest/build.sh" >"$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
fi

results="$out/runs/results.txt"
failures="$out/runs/failures.txt"
# Guests at a time (each one TCG thread), run at the lowest priority.
JOBS=${JOBS:-2}
case "${1:-}" in
    --ci) TABLE_OPS=3 TABLE_FS=ext4 campaign 1 6 1 ext4 ;;
    --campaign) TABLE_OPS=${TABLE_OPS:-8} campaign "${2:-2}" "${3:-20}" "${4:-4}" ext4 xfs btrfs ;;
    one) shift; : >"$results"; run_one "$@" ;;
    *) echo "usage: $0 --ci | --campaign [SEEDS] | one FS KIND SEED OPS BETWEEN [mutant]" >&2; exit 2 ;;
esac
