#!/usr/bin/env bash
# A wheel installed where nothing else is, then wheel_smoke.py against it
# (wheels.sh, step 5):
#
#   bash tests/platforms/wheel_run.sh native WHEEL   # a fresh venv of this machine's CPython
#   bash tests/platforms/wheel_run.sh arm64 WHEEL    # Debian's arm64 CPython under qemu-aarch64
#
# arm64: apt resolves python3.11-minimal and libpython3.11-stdlib for
# arm64 against an empty package database of its own (target/platforms/
# apt-arm64; the machine's apt state is untouched) and downloads them with
# every dependency down to libc6; dpkg -x unpacks them into a root that
# qemu-aarch64 -L takes as /. pip installs the wheel and numpy's
# manylinux aarch64 wheel for that interpreter into a directory on its
# PYTHONPATH.
set -euo pipefail
shopt -s inherit_errexit
source "$(dirname "$0")/toolchains.sh"
smoke="$platforms_root/tests/platforms/wheel_smoke.py"
[ $# = 2 ] || { echo "usage: wheel_run.sh native|arm64 WHEEL" >&2 && exit 2; }
wheel=$(realpath "$2")

native() {
    local venv="$platforms_work/wheel-native"
    rm -rf "$venv"
    "${PYTHON:-python3}" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check numpy "$wheel"
    (cd "$platforms_work" && "$venv/bin/python" "$smoke")
}

arm64_root() {
    local apt="$platforms_work/apt-arm64"
    if [ ! -x "$apt/root/usr/bin/python3.11" ]; then
        rm -rf "$apt"
        mkdir -p "$apt/state/lists/partial" "$apt/cache/archives/partial" "$apt/etc/preferences.d"
        touch "$apt/state/status"
        cat >"$apt/apt.conf" <<CONF
APT::Architecture "arm64";
APT::Architectures { "arm64"; };
APT::Install-Recommends "false";
Dir::State "$apt/state";
Dir::State::status "$apt/state/status";
Dir::Cache "$apt/cache";
Dir::Etc::Preferences "$apt/etc/preferences";
Dir::Etc::PreferencesParts "$apt/etc/preferences.d";
CONF
        APT_CONFIG="$apt/apt.conf" apt-get -qq update
        APT_CONFIG="$apt/apt.conf" apt-get -qq -y install --download-only python3.11-minimal libpython3.11-stdlib \
            >/dev/null
        mkdir -p "$apt/root"
        for deb in "$apt"/cache/archives/*.deb; do dpkg -x "$deb" "$apt/root"; done
    fi
    echo "$apt/root"
}

arm64() {
    command -v qemu-aarch64 >/dev/null || {
        echo "qemu-aarch64 is missing (Debian's qemu-user; tests/platforms/test.sh installs it)" >&2
        return 1
    }
    local root site="$platforms_work/wheel-arm64-site"
    root=$(arm64_root)
    rm -rf "$site"
    "$platforms_work/venv/bin/python" -m pip install --quiet --disable-pip-version-check --platform manylinux2014_aarch64 \
        --python-version 3.11 --implementation cp --only-binary=:all: --target "$site" numpy "$wheel"
    (cd "$platforms_work" && PYTHONPATH="$site" qemu-aarch64 -L "$root" "$root/usr/bin/python3.11" "$smoke")
}

case "$1" in
native) native ;;
arm64) arm64 ;;
*) echo "usage: wheel_run.sh native|arm64 WHEEL" >&2 && exit 2 ;;
esac
