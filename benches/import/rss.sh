#!/usr/bin/env bash
# Peak memory of an import of a large source (docs/benchmarks.md, "Import"):
# the tokens directory named TIMES times (10: about 10 GB), imported by the
# CLI under /usr/bin/time (peak RSS), with /proc/PID/status sampled every
# 0.3 s for the largest anonymous and file-backed resident sizes.
#
#   benches/import/rss.sh DATA_DIR [TIMES] [CODEC]
set -euo pipefail
cd "$(dirname "$0")/../.."
tokens=$(realpath "$1")/tokens
times=${2:-10}
codec=${3:-raw}
dest=$(mktemp -d)/table
cargo build --release --bin loaderx
inputs=()
for _ in $(seq 1 "$times"); do inputs+=("$tokens"); done
peak=$(mktemp)
/usr/bin/time -f "%M" -o "$peak" target/release/loaderx import --codec "$codec" "${inputs[@]}" "$dest" > /dev/null &
sleep 0.2
pid=$(pgrep -n -f "loaderx import --codec $codec") || true
anon=0 file=0
while [ -n "$pid" ] && kill -0 "$pid" 2> /dev/null; do
    a=$(awk '/RssAnon/ {print $2}' "/proc/$pid/status" 2> /dev/null || echo 0)
    f=$(awk '/RssFile/ {print $2}' "/proc/$pid/status" 2> /dev/null || echo 0)
    [ "${a:-0}" -gt "$anon" ] && anon=$a
    [ "${f:-0}" -gt "$file" ] && file=$f
    sleep 0.3
done
wait
echo "$times x tokens, codec $codec: peak RSS $(cat "$peak") KB; largest RssAnon $anon KB, RssFile $file KB"
rm -rf "$(dirname "$dest")" "$peak"
