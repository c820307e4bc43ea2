#!/bin/bash
# Builds the crash test's guest: target/crashtest/guest/{vmlinuz,initramfs.gz}.
# The kernel and its modules are Debian's (linux-image-amd64), with busybox
# (busybox-static), dmsetup and its libraries, and the workload binary built
# static with musl, twice: as is, and with loaderx's `crash-mutant` feature
# (SYNC A1 removed). QEMU is Debian's qemu-system-x86; where apt cannot
# install it beside this machine's qemu-utils, its packages are unpacked
# into target/crashtest/qemu instead.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="$root/target/crashtest"
mkdir -p "$out"
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need=()
for pkg in linux-image-amd64 busybox-static dmsetup musl-tools e2fsprogs xfsprogs btrfs-progs; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
    as_root apt-get update -q && as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-remove "${need[@]}"
fi
if ! command -v qemu-system-x86_64 >/dev/null && [ ! -x "$out/qemu/usr/bin/qemu-system-x86_64" ]; then
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-remove qemu-system-x86; then
        echo "build.sh: qemu-system-x86 conflicts with installed packages; unpacking it into $out/qemu"
        debs="$out/qemu-debs" && mkdir -p "$debs" && (cd "$debs" && apt-get download qemu-system-x86 \
            qemu-system-common qemu-system-data seabios ipxe-qemu)
        for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$out/qemu"; done
        # Its shared libraries: the library packages it depends on.
        libs=$(apt-cache depends qemu-system-x86 qemu-system-common | awk '$1 == "Depends:" && $2 ~ /^lib/ { print $2 }' | sort -u)
        # shellcheck disable=SC2086 # one word per package
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-remove $libs
        if ldd "$out/qemu/usr/bin/qemu-system-x86_64" | grep 'not found'; then
            echo "build.sh: the unpacked QEMU misses the libraries above" >&2
            exit 1
        fi
    fi
fi

# The workload binary, as is and as the mutant.
export CC_x86_64_unknown_linux_musl=musl-gcc
rustup target add x86_64-unknown-linux-musl >/dev/null 2>&1 || true
musl="$root/target/x86_64-unknown-linux-musl/release/loaderx-crashtest"
(cd "$root" && cargo build --release --target x86_64-unknown-linux-musl -p loaderx-crashtest)
cp "$musl" "$out/loaderx-crashtest"
(cd "$root" && cargo build --release --target x86_64-unknown-linux-musl -p loaderx-crashtest --features mutant)
cp "$musl" "$out/loaderx-crashtest-mutant"

kernel=$(ls /boot/vmlinuz-* | sort -V | tail -1)
version=${kernel#/boot/vmlinuz-}
cp "$kernel" "$out/vmlinuz"
tree="$out/initramfs"
rm -rf "$tree" && mkdir -p "$tree"/{bin,sbin,lib,lib64,proc,sys,dev,tmp,mnt,etc}
cp /bin/busybox "$tree/bin/busybox"
for applet in $("$tree/bin/busybox" --list); do [ "$applet" = busybox ] || ln -sf busybox "$tree/bin/$applet"; done
cp "$root/crashtest/guest/init" "$tree/init" && chmod +x "$tree/init"
cp "$out/loaderx-crashtest" "$out/loaderx-crashtest-mutant" "$tree/bin/"

# dmsetup and its libraries (ldd's list).
dmsetup=$(command -v dmsetup)
cp "$dmsetup" "$tree/sbin/dmsetup"
for lib in $(ldd "$dmsetup" | grep -o '/[^ ]*'); do
    mkdir -p "$tree$(dirname "$lib")" && cp -L "$lib" "$tree$lib"
done

# The modules and what modules.dep says they need.
mods=/lib/modules/$version
wanted="virtio_pci virtio_blk crc32c_generic crc32c-intel xxhash_generic sha256_generic blake2b_generic
    dm-mod dm-log-writes dm-snapshot ext4 xfs btrfs"
declare -A seen=()
add_module() { # FILE (relative to $mods)
    [ -n "${seen[$1]:-}" ] && return
    seen[$1]=1
    mkdir -p "$tree/$mods/$(dirname "$1")" && cp "$mods/$1" "$tree/$mods/$1"
    local dep
    for dep in $(grep "^$1:" "$mods/modules.dep" | cut -d: -f2); do add_module "$dep"; done
}
for m in $wanted; do
    file=$(modinfo -k "$version" -n "$m" 2>/dev/null || true)
    case "$file" in "$mods"/*) add_module "${file#"$mods"/}" ;; *) echo "build.sh: $m is built in or missing" ;; esac
done
cp "$mods"/modules.{dep,alias,softdep,builtin,order} "$tree/$mods/" 2>/dev/null || true
(cd "$tree" && find . | cpio -o -H newc --quiet | gzip -1) >"$out/initramfs.gz"
echo "build.sh: $out/vmlinuz, $out/initramfs.gz ($(du -h "$out/initramfs.gz" | cut -f1))"
