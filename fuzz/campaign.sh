#!/usr/bin/env bash
# One campaign run of a fuzz target, with the limits and the row that
# docs/fuzzing.md, "Runs", records:
#
#   bash fuzz/campaign.sh TARGET SANITIZER RUNS [BINARY_DIR]
#
# SANITIZER is `address` or `none`. The binary is BINARY_DIR/TARGET when
# given (a copy, so that later builds cannot change it mid-run), else
# `cargo +nightly fuzz build` into fuzz/target/SANITIZER, with the crash
# simulator left out of the instruments (fuzz/uninstrumented.sh). The working
# corpus fuzz/work/TARGET is kept between runs and seeded by the committed
# fuzz/corpus/TARGET; crashes go to fuzz/artifacts/TARGET/; the log to
# fuzz/work/logs/TARGET-SANITIZER.log (with RUN=LABEL in the environment,
# TARGET-SANITIZER-LABEL.log: a second worker on the same working corpus,
# as libFuzzer's -jobs runs them, keeps its own log). The last line printed
# is the row.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cd "$here/.."
target="$1" sanitizer="$2" runs="$3" bindir="${4:-}"
case "$sanitizer" in address | none) ;; *) echo "SANITIZER is address or none" >&2; exit 2 ;; esac
if [ -z "$bindir" ]; then
    RUSTC_WORKSPACE_WRAPPER="$PWD/fuzz/uninstrumented.sh" \
        cargo +nightly fuzz build -s "$sanitizer" --target-dir "fuzz/target/$sanitizer" "$target"
    bindir="fuzz/target/$sanitizer/x86_64-unknown-linux-gnu/release"
fi
mkdir -p "fuzz/work/$target" "fuzz/work/logs" "fuzz/artifacts/$target"
log="fuzz/work/logs/$target-$sanitizer${RUN:+-$RUN}.log"
start=$(date +%s)
set +e
"$bindir/$target" "fuzz/work/$target" "fuzz/corpus/$target" -runs="$runs" -print_final_stats=1 \
    -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=60 -max_len=8192 \
    -artifact_prefix="fuzz/artifacts/$target/" >"$log" 2>&1
rc=$?
set -e
seconds=$(($(date +%s) - start))
python3 - "$log" "$target" "$sanitizer" "$seconds" "$rc" <<'PY'
import re, sys
log, target, sanitizer, seconds, rc = sys.argv[1:]
text = open(log, errors="replace").read()
def stat(name):
    m = re.search(rf"stat::{name}:\s+(\d+)", text)
    return int(m.group(1)) if m else None
def progress(tag):
    found = re.findall(rf"#\d+\s+{tag}\s+cov: (\d+) ft: (\d+)(?: corp: (\d+))?", text)
    return found[0] if tag == "INITED" and found else (found[-1] if found else ("?", "?", "?"))
start, end = progress("INITED"), progress("(?:DONE|NEW|REDUCE|pulse)")
execs, rate, rss = stat("number_of_executed_units"), stat("average_exec_per_sec"), stat("peak_rss_mb")
ended = {"0": "budget", "72": "stopped (SIGINT)"}.get(rc, f"exit {rc}: see {log}")
fmt = lambda v: f"{v:,}" if isinstance(v, int) else "?"
print(f"| `{target}` | {sanitizer} | {int(seconds):,} | {fmt(execs)} | {fmt(rate)} | "
      f"{start[0]} → {end[0]} | {start[1]} → {end[1]} | {end[2]} | {fmt(rss)} MB | {ended} |")
PY
exit "$rc"
