# Sourced by check.sh, test.sh, wheels.sh and cli.sh: the targets' standard libraries, zig cc
# as each target's C compiler (zstd's C; the `ziglang` package the wheels
# are built with) and, for the targets whose binaries run here, a linker
# and a runner:
#   Windows  x86_64-pc-windows-gnu      MinGW's gcc links, wine runs
#   arm64    aarch64-unknown-linux-gnu  zig links (glibc 2.17), qemu-aarch64 runs
#   musl     x86_64-unknown-linux-musl  rustc links it static (its own musl), runs natively
#   macOS    aarch64-apple-darwin, x86_64-apple-darwin: compiled only
# Exports the CC_*, CARGO_TARGET_*_LINKER and _RUNNER variables cargo reads.
# Needs python3 and, for test.sh, wheels.sh and cli.sh, Debian's
# gcc-mingw-w64-x86-64, wine, qemu-user and libc6-arm64-cross
# (platforms_install_tools installs them).

platforms_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
platforms_work="$platforms_root/target/platforms"
mkdir -p "$platforms_work"

rustup target add x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin \
    aarch64-unknown-linux-gnu x86_64-unknown-linux-musl >/dev/null
[ -x "$platforms_work/venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$platforms_work/venv"
"$platforms_work/venv/bin/python" -m pip install --quiet --disable-pip-version-check 'ziglang==0.17.1'
platforms_zig=$("$platforms_work/venv/bin/python" -c \
    'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')

# zig cc for one target: cc-rs's and rustc's -arch and --target are dropped
# (zig takes -target).
platforms_zig_cc() { # NAME ZIG_TARGET
    cat >"$platforms_work/$1" <<CC
#!/bin/sh
skip=0
for a in "\$@"; do
    shift
    if [ \$skip = 1 ]; then skip=0; continue; fi
    case "\$a" in -arch) skip=1; continue ;; --target=*) continue ;; esac
    set -- "\$@" "\$a"
done
exec "$platforms_zig" cc -target $2 "\$@"
CC
    chmod +x "$platforms_work/$1"
}
platforms_zig_cc cc-windows x86_64-windows-gnu
platforms_zig_cc cc-macos aarch64-macos
platforms_zig_cc cc-macos-x86 x86_64-macos
platforms_zig_cc cc-arm64 aarch64-linux-gnu.2.17
platforms_zig_cc cc-musl x86_64-linux-musl

# PLATFORMS_UNOPTIMIZED=1: the release builds of wheels.sh and cli.sh
# without optimization (Rust and C alike), faster to build:
# the same sources, linkers, libraries and checks, for CI; what ships is
# built without it. Their artifacts go to a target directory of their own,
# so that neither build undoes the other's.
if [ "${PLATFORMS_UNOPTIMIZED:-0}" = 1 ]; then
    export CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=false
    export CARGO_TARGET_DIR="$platforms_root/target/unoptimized"
fi

export CC_x86_64_pc_windows_gnu="$platforms_work/cc-windows"
export CC_aarch64_apple_darwin="$platforms_work/cc-macos"
export CC_x86_64_apple_darwin="$platforms_work/cc-macos-x86"
export CC_aarch64_unknown_linux_gnu="$platforms_work/cc-arm64"
export CC_x86_64_unknown_linux_musl="$platforms_work/cc-musl"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER="$platforms_work/cc-arm64"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER="$platforms_work/wine-run"

# The Windows runner: wine, in a prefix of its own, with the ProcessPrng
# shim (bcryptprimitives.c) beside the binary it runs.
cat >"$platforms_work/wine-run" <<RUN
#!/bin/sh
dll="$platforms_work/bcryptprimitives.dll"
[ -f "\$dll" ] || x86_64-w64-mingw32-gcc -O2 -shared -o "\$dll" "$platforms_root/tests/platforms/bcryptprimitives.c" \\
    -Wl,--export-all-symbols -ladvapi32 || exit 1
cp -f "\$dll" "\$(dirname "\$1")/" || exit 1
WINEPREFIX="$platforms_work/wineprefix" WINEDEBUG=-all exec /usr/lib/wine/wine64 "\$@"
RUN
chmod +x "$platforms_work/wine-run"

# Debian's wine, MinGW, qemu-user and the arm64 C library, where missing
# (test.sh runs with them; wheels.sh links with MinGW and runs qemu).
platforms_install_tools() {
    local need=() sudo=()
    command -v /usr/lib/wine/wine64 >/dev/null || need+=(wine wine64)
    command -v x86_64-w64-mingw32-gcc >/dev/null || need+=(gcc-mingw-w64-x86-64)
    command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
    [ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ] || need+=(libc6-arm64-cross libgcc-s1-arm64-cross)
    [ ${#need[@]} -gt 0 ] || return 0
    [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
}
