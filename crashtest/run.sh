#!/bin/bash
# The crash test on the real kernel (docs/crash-safety.md, "On the real kernel").
#
#   crashtest/run.sh --ci          every filesystem, a short workload of each kind,
#                                  every flush point and mark, 1 sampled state per
#                                  gap, and the mutant (about 10 minutes on 2 cores)
#   crashtest/run.sh --campaign [SEEDS]   the longer run: SEEDS seeds (default 4)
#                                  of each kind on each filesystem, more operations,
#                                  4 sampled states per gap
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

fs_bytes() { case "$1" in xfs) echo 320M ;; btrfs) echo 256M ;; *) echo 128M ;; esac; }
mkfs_for() { # FS IMAGE
    case "$1" in
        ext4) mkfs.ext4 -F -q "$2" ;;
        xfs) mkfs.xfs -f -q "$2" ;;
        btrfs) mkfs.btrfs -f -q "$2" >/dev/null ;;
    esac
}

# One guest run; prints its SUMMARY and VIOLATION lines; returns 0 when
# the run finished (violations or not), 1 when it did not.
run_one() { # FS KIND SEED OPS BETWEEN [mutant]
    local fs=$1 kind=$2 seed=$3 ops=$4 between=$5 mutant=0 name="$1-$2-$3-$4-$5"
    if [ "${6:-}" = mutant ]; then mutant=1 name="$name-mutant"; fi
    local dir="$out/runs/$name"
    rm -rf "$dir" && mkdir -p "$dir"
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
    timeout --kill-after=10 "$GUEST_TIMEOUT_S" "$qemu" "${qemu_share[@]}" -accel tcg -cpu max -m 1G -smp 1 \
        -nographic -no-reboot -kernel "$out/vmlinuz" -initrd "$out/initramfs.gz" \
        -append "console=ttyS0 quiet panic=-1 ct.fs=$fs ct.kind=$kind ct.seed=$seed ct.ops=$ops ct.between=$between ct.mutant=$mutant" \
        "${drives[@]}" </dev/null >"$dir/serial.log" 2>&1 || true
    grep -a 'crashtest: \(SUMMARY\|VIOLATION\|ERROR\)' "$dir/serial.log" | sed "s/^/[$name $((SECONDS - started))s] /" || true
    rm -f "$dir"/*.img
    grep -aq 'crashtest: SUMMARY' "$dir/serial.log"
}

[ -f "$out/initramfs.gz" ] && [ "${REBUILD:-1}" = 0 ] || bash "$root/crashtest/guest/build.sh" >/dev/null

case "${1:-}" in
    one) shift; run_one "$@" ;;
    *) echo "usage: $0 --ci | --campaign [SEEDS] | one FS KIND SEED OPS BETWEEN [mutant]" >&2; exit 2 ;;
esac
