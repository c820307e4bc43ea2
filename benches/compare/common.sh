# Sourced by run.sh, loader.sh and all.sh: the arguments they share, the
# venv with the reference package, and the work directory.
#
#   rounds=N                 # the script's default, before sourcing
#   . "$(dirname "$0")/common.sh" "$@"
#
# sets: here, root (and cd there), rounds, quick, keep, venv, py, pip (an
# array: pip install, quiet); `compare_work PREFIX` sets work (the --keep
# directory, or a temporary one removed on exit).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

quick=0
keep=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=1 ;;
        --rounds) rounds="$2"; shift ;;
        --keep) keep="$2"; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

venv="$here/.venv"
py="$venv/bin/python"
pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
if ! "$py" -c 'import loaderx, numpy; assert loaderx.__version__ == "0.7.3"' 2>/dev/null; then
    echo "== venv: loaderx==0.7.3 numpy"
    python3 -m venv "$venv"
    "${pip[@]}" "loaderx==0.7.3" numpy
fi

compare_work() { # prefix
    if [ -n "$keep" ]; then
        work="$keep"
        mkdir -p "$work"
    else
        work="$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")"
        trap 'rm -rf "$work"' EXIT
    fi
}
