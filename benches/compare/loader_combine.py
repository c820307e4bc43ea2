"""Prints the crate's and the reference's loader benchmark results as one
table with the ratios crate / reference, and checks the targets of issue 5.

    python loader_combine.py --crate crate-1.json [...] --reference ref-1.json [...]
        [--markdown OUT.md]

Rounds pair up in the order given (loader.sh writes loader-{crate,reference}-N.json
for round N). Each side's figure is its median over the rounds; "crate / ref"
is the median of the per-round ratios with their range, the number to read
on a shared machine. "cpu ms/batch" is the process's CPU time (all threads)
per batch: the work a batch costs, steadier than batches/s when other jobs
share the cores; batches/s is what a training loop sees.
"""

import argparse
import json
from pathlib import Path
from statistics import median


def key(r):
    return (r["codec"], r["workers"], r.get("reuse", True))


def load(paths):
    rounds = []
    for p in paths:
        doc = json.loads(Path(p).read_text())
        rounds.append(({key(r): r for r in doc.get("loader", [])},
                       {(r["mode"], r["batch"]): r for r in doc.get("sampler", [])}, doc))
    return rounds


def med(rounds, which, k, field):
    values = [rnd[which][k][field] for rnd in rounds if k in rnd[which]]
    return median(values) if values else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--crate", nargs="+", required=True)
    ap.add_argument("--reference", nargs="+", required=True)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    crate, ref = load(sorted(args.crate)), load(sorted(args.reference))
    lines = []
    out = lines.append
    out(f"Rounds: {len(crate)} per side, paired in order; each side's figure is its median over the rounds. "
        f"Reference: loaderx {ref[0][2].get('version', '?')} (Python API).")
    out("")
    out("| loader (2 streams, batch 256, IID) | this crate batches/s | cpu ms/batch | MiB/s "
        "| reference batches/s | cpu ms/batch | MiB/s | crate / ref batches/s | crate / ref work per batch |")
    out("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    checks = []
    keys = []
    for rnd in crate:
        for k in rnd[0]:
            if k not in keys:
                keys.append(k)
    for k in keys:
        codec, workers, reuse = k
        label = f"{codec}, {workers} workers" + ("" if reuse else ", no buffer reuse")
        c_bs, c_cpu, c_mib = (med(crate, 0, k, f) for f in ("batches_s", "cpu_ms", "mib_s"))
        pairs = [(c[0][k], r[0][k]) for c, r in zip(crate, ref) if k in c[0] and k in r[0]]
        if pairs:
            r_bs, r_cpu, r_mib = (med(ref, 0, k, f) for f in ("batches_s", "cpu_ms", "mib_s"))
            ratios = [c["batches_s"] / r["batches_s"] for c, r in pairs]
            works = [r["cpu_ms"] / c["cpu_ms"] for c, r in pairs]
            rng = f" ({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
            out(f"| {label} | {c_bs:,.0f} | {c_cpu:.2f} | {c_mib:,.0f} | {r_bs:,.0f} | {r_cpu:.2f} | {r_mib:,.0f} "
                f"| **{median(ratios):.2f}x**{rng} | {median(works):.2f}x |")
            checks.append((f"{codec}: loader batches/s >= 1.5x the reference's", f"{median(ratios):.2f}x{rng}",
                           "met" if median(ratios) >= 1.5 else "NOT met"))
        else:
            out(f"| {label} (crate only) | {c_bs:,.0f} | {c_cpu:.2f} | {c_mib:,.0f} | | | | | |")
    out("")
    out("| sampler (index space 2^20) | batch | this crate us/batch | ns/index | reference us/batch (Python API) | crate / ref |")
    out("|---|---:|---:|---:|---:|---:|")
    skeys = sorted({k for rnd in crate for k in rnd[1]}, key=lambda k: (k[1], k[0]))
    for k in skeys:
        c = med(crate, 1, k, "us_per_batch")
        r = med(ref, 1, k, "us_per_batch")
        ratio = f"**{r / c:.1f}x** faster" if r else ""
        out(f"| {k[0]} | {k[1]} | {c:.2f} | {c * 1e3 / k[1]:.2f} | {'' if r is None else f'{r:.2f}'} | {ratio} |")
    for batch in (256, 8192):
        i, c = med(crate, 1, ("iid", batch), "us_per_batch"), med(crate, 1, ("cyclic", batch), "us_per_batch")
        if i and c:
            checks.append((f"sampler batch {batch}: cyclic per-index cost within 2x of IID", f"{c / i:.2f}x",
                           "met" if c / i <= 2.0 else "NOT met"))
    out("")
    out("| target (issue 5) | measured | |")
    out("|---|---|---|")
    for what, val, verdict in checks:
        out(f"| {what} | {val} | {verdict} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
