#!/usr/bin/env bash
# The library and the CLI compile for the platforms the reference ships
# wheels for, beyond this machine's Linux x86-64 (issue 32): Windows
# (x86_64-pc-windows-gnu), macOS (aarch64-apple-darwin), Linux arm64
# (aarch64-unknown-linux-gnu) and musl (x86_64-unknown-linux-musl), zstd's C
# compiled by zig cc (the `ziglang` package the wheels are built with).
# `cargo check` only: nothing here runs on those platforms yet
# (docs/crash-safety.md, "Platforms").
#
#   bash tests/platforms/check.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
work=target/platforms
mkdir -p "$work"

rustup target add x86_64-pc-windows-gnu aarch64-apple-darwin aarch64-unknown-linux-gnu x86_64-unknown-linux-musl >/dev/null
[ -x "$work/venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --disable-pip-version-check 'ziglang==0.17.1'
zig=$("$work/venv/bin/python" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')

# zig cc as each target's C compiler: cc-rs's -arch and --target are
# dropped (zig takes -target).
compiler() { # NAME ZIG_TARGET
    cat >"$work/$1" <<CC
#!/bin/sh
skip=0
for a in "\$@"; do
    shift
    if [ \$skip = 1 ]; then skip=0; continue; fi
    case "\$a" in -arch) skip=1; continue ;; --target=*) continue ;; esac
    set -- "\$@" "\$a"
done
exec "$zig" cc -target $2 "\$@"
CC
    chmod +x "$work/$1"
}
compiler cc-windows x86_64-windows-gnu
compiler cc-macos aarch64-macos
compiler cc-arm64 aarch64-linux-gnu.2.17
compiler cc-musl x86_64-linux-musl

for target in x86_64-pc-windows-gnu aarch64-apple-darwin aarch64-unknown-linux-gnu x86_64-unknown-linux-musl; do
    echo "-- $target"
    CC_x86_64_pc_windows_gnu="$PWD/$work/cc-windows" CC_aarch64_apple_darwin="$PWD/$work/cc-macos" \
        CC_aarch64_unknown_linux_gnu="$PWD/$work/cc-arm64" CC_x86_64_unknown_linux_musl="$PWD/$work/cc-musl" \
        RUSTFLAGS="-D warnings" cargo check --quiet -p loaderx -p loaderx-cli --lib --bins --target "$target"
done
echo "the library and the CLI compile for Windows, macOS, Linux arm64 and musl"
