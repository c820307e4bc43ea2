#!/usr/bin/env bash
# The command-line tool as one static binary per Linux machine, for users
# without Python (issue 32): musl, linked static, with the remote feature
# (push, pull, s3:// URLs), so that it runs on any Linux kernel with no
# library installed.
#
#   bash tests/platforms/cli.sh [TARGET...]   # default: x86_64 and aarch64 musl
#
# Each binary, into target/cli/loaderx-TARGET:
#   1. built with zig as the C compiler and the linker (zig's own musl and
#      crt; rustc's self-contained ones left out);
#   2. checked to be static: no program interpreter, no DT_NEEDED;
#   3. run (natively, or under qemu-aarch64 with no library path: it needs
#      none): a JSON Lines file imported into a table, each column
#      verified, and its text read back.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/toolchains.sh"
cd "$platforms_root"

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl)
rustup target add "${targets[@]}" >/dev/null 2>&1
platforms_install_tools
out="$platforms_root/target/cli"
mkdir -p "$out"

build() { # TARGET
    local zig_target=${1%%-*}-linux-musl var
    platforms_zig_cc "cc-cli-$1" "$zig_target"
    var=$(tr 'a-z-' 'A-Z_' <<<"$1")
    env "CC_${1//-/_}=$platforms_work/cc-cli-$1" "CARGO_TARGET_${var}_LINKER=$platforms_work/cc-cli-$1" \
        RUSTFLAGS="-C link-self-contained=no -C target-feature=+crt-static" \
        cargo build --release -p loaderx-cli --features remote --target "$1" \
        >"$platforms_work/cli-$1.log" 2>&1 || {
        tail -30 "$platforms_work/cli-$1.log" >&2
        return 1
    }
    cp "${CARGO_TARGET_DIR:-target}/$1/release/loaderx" "$out/loaderx-$1"
}

static_only() { # BINARY
    local dynamic
    dynamic=$(readelf -ld "$1" | grep -E 'INTERP|NEEDED' || true)
    if [ -n "$dynamic" ]; then
        echo "$1 is not static:" >&2
        echo "$dynamic" >&2
        return 1
    fi
}

run() { # TARGET BINARY
    local run=() dir="$platforms_work/cli-run"
    [ "$1" = "$(rustc -vV | sed -n 's/^host: //p' | sed 's/-gnu$/-musl/')" ] || run=(qemu-aarch64)
    rm -rf "$dir" && mkdir -p "$dir"
    printf '{"text": "a line", "n": 1}\n{"text": "another", "n": 2}\n{"text": "the last", "n": 3}\n' >"$dir/in.jsonl"
    "${run[@]}" "$2" --version
    "${run[@]}" "$2" import "$dir/in.jsonl" "$dir/table" >/dev/null
    for column in "$dir"/table/col-*; do
        "${run[@]}" "$2" verify "$column" >/dev/null
    done
    local text got
    text=$(python3 -c 'import json, sys; t = json.load(open(sys.argv[1])); print(next(c["dir"] for c in t["columns"] if c["name"] == "text"))' \
        "$dir/table/table.json")
    got=$(for i in 0 1 2; do "${run[@]}" "$2" cat "$dir/table/$text" $i && echo; done | paste -sd'|')
    [ "$got" = 'a line|another|the last' ] || {
        echo "$1: the text column read back as '$got'" >&2
        return 1
    }
}

for target in "${targets[@]}"; do
    echo "-- $target"
    build "$target"
    static_only "$out/loaderx-$target"
    run "$target" "$out/loaderx-$target"
    echo "$out/loaderx-$target: static, $(stat -c %s "$out/loaderx-$target") bytes, ran"
done
