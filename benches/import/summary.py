"""Summary of benches/import/run.sh's results.jsonl: per input, the median
wall time and peak RSS of each side, loaderx's ratio to the bound (the
slower of reading and writing alone) and to the fastest peer, and the time
to the first batch. Rates are of the input's bytes on disk.

    python summary.py RESULTS.jsonl DATA_DIR
"""

import json
import os
import statistics
import sys


def input_bytes(data, kind):
    d = os.path.join(data, kind)
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


def main():
    path, data = sys.argv[1:3]
    rows = [json.loads(line) for line in open(path)]
    for kind in sorted({r["kind"] for r in rows}):
        size = input_bytes(data, kind)
        med = {}
        for r in rows:
            if r["kind"] == kind and "wall_s" in r:
                med.setdefault((r["side"], r["what"]), []).append(r)
        failed = sorted({r["side"] for r in rows if r["kind"] == kind and r["what"] == "failed"})

        def m(side, what, key="wall_s"):
            got = [r[key] for r in med.get((side, what), [])]
            return statistics.median(got) if got else None

        print(f"\n{kind}: {size / 1e9:.2f} GB of input, {len(set(r['round'] for r in rows))} rounds")
        print(f"{'side':<10} {'import s':>9} {'MB/s':>8} {'peak RSS MB':>12} {'first batch s':>14}")
        bound = None
        if m("bound", "read") is not None:
            read, write = m("bound", "read"), m("bound", "write")
            bound = max(read, write)
            print(f"{'bound':<10} {bound:>9.2f} {size / bound / 1e6:>8.0f}   (read alone {read:.2f} s, write alone {write:.2f} s)")
        peers = {}
        for side in sorted({s for s, _ in med if s != "bound"}):
            t, rss, first = m(side, "import"), m(side, "import", "peak_rss_kb"), m(side, "first")
            if t is None:
                continue
            if not side.startswith("loaderx"):
                peers[side] = t
            first_s = f"{first:.2f}" if first is not None else "-"
            print(f"{side:<10} {t:>9.2f} {size / t / 1e6:>8.0f} {rss / 1024:>12.0f} {first_s:>14}")
        for side in ("loaderx", "loaderx_raw"):
            ours = m(side, "import")
            if ours is not None and bound is not None:
                print(f"{side} / bound (throughput): {bound / ours:.2f}")
            if ours is not None and peers:
                best = min(peers, key=peers.get)
                print(f"{side} / fastest peer ({best}): {peers[best] / ours:.2f}x")
        if failed:
            print(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
