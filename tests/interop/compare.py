"""Comparisons run.sh needs beyond `cmp` (standard library only).

  compare.py reversed EXPECTED.bin EXPECTED.lens GOT
      GOT must be the records of EXPECTED.bin in descending index order.
  compare.py stats GOT.json EXPECTED.stats
      every `key=value` of EXPECTED.stats must equal GOT.json[key].

Exits 0 on a match, 1 (with a line on stdout) on a mismatch.
"""

import json
import sys


def reversed_records(want_path, lens_path, got_path):
    want = open(want_path, "rb").read()
    lens = [int(l) for l in open(lens_path).read().split()]
    got = open(got_path, "rb").read()
    starts = [0]
    for l in lens:
        starts.append(starts[-1] + l)
    rev = b"".join(want[starts[i]:starts[i + 1]] for i in reversed(range(len(lens))))
    if got != rev:
        print(f"  got {len(got)} bytes, expected {len(rev)} (records in descending order)")
        return 1
    return 0


def stats(got_path, want_path):
    got = json.load(open(got_path))
    want = dict(kv.split("=", 1) for kv in open(want_path).read().split())
    bad = {k: (got.get(k), int(v)) for k, v in want.items() if got.get(k) != int(v)}
    if bad:
        print("  (this crate, reference):", bad)
        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "reversed":
        sys.exit(reversed_records(*sys.argv[2:]))
    if len(sys.argv) == 4 and sys.argv[1] == "stats":
        sys.exit(stats(*sys.argv[2:]))
    sys.exit(__doc__)
