"""Prints the crate's and the reference's loader benchmark results as one
table with the ratio crate / reference, and checks the targets of issue 5.

    python loader_combine.py --crate crate.json [...] --reference ref.json [...]
        [--markdown OUT.md]

With several result files per side (loader.sh --rounds N), each row keeps its
side's best median over the rounds. "cpu ms/batch" is the process's CPU time
(all threads) per batch: on a shared machine it is the steadier measure of
the work a batch costs; batches/s is what a training loop sees.
"""

import argparse
import json
from pathlib import Path


def load(paths):
    loader, sampler, docs = {}, {}, []
    for p in paths:
        doc = json.loads(Path(p).read_text())
        docs.append(doc)
        for r in doc.get("loader", []):
            if r.get("reuse", True) is False or r["workers"] != 4:
                key = (r["codec"], r["workers"], r.get("reuse", True))
            else:
                key = (r["codec"], 4, True)
            if key not in loader or r["batches_s"] > loader[key]["batches_s"]:
                loader[key] = r
        for r in doc.get("sampler", []):
            key = (r["mode"], r["batch"])
            if key not in sampler or r["us_per_batch"] < sampler[key]["us_per_batch"]:
                sampler[key] = r
    return loader, sampler, docs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--crate", nargs="+", required=True)
    ap.add_argument("--reference", nargs="+", required=True)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    cl, cs, cdocs = load(args.crate)
    rl, rs, rdocs = load(args.reference)
    lines = []
    out = lines.append
    out(f"Rounds: {len(cdocs)} per side, best median kept. Reference: loaderx {rdocs[0].get('version', '?')} "
        "(Python API).")
    out("")
    out("| loader (2 streams, batch 256, IID) | this crate batches/s | cpu ms/batch | MiB/s "
        "| reference batches/s | cpu ms/batch | MiB/s | batches/s ratio | cpu ratio |")
    out("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    checks = []
    for (codec, workers, reuse), c in sorted(cl.items(), key=lambda kv: (kv[0][0] != "zstd", kv[0][1] != 4, not kv[0][2])):
        r = rl.get((codec, workers, reuse)) if reuse else None
        label = f"{codec}, {workers} workers" + ("" if reuse else ", no buffer reuse")
        if r:
            ratio = c["batches_s"] / r["batches_s"]
            cpu = r["cpu_ms"] / c["cpu_ms"]
            out(f"| {label} | {c['batches_s']:,.0f} | {c['cpu_ms']:.2f} | {c['mib_s']:,.0f} | {r['batches_s']:,.0f} "
                f"| {r['cpu_ms']:.2f} | {r['mib_s']:,.0f} | **{ratio:.2f}x** | {cpu:.2f}x |")
            checks.append((f"{codec}: loader batches/s >= 1.5x the reference's", f"{ratio:.2f}x",
                           "met" if ratio >= 1.5 else "NOT met"))
        else:
            out(f"| {label} | {c['batches_s']:,.0f} | {c['cpu_ms']:.2f} | {c['mib_s']:,.0f} | | | | | |")
    out("")
    out("| sampler (index space 2^20) | batch | this crate us/batch | ns/index | reference us/batch | ratio |")
    out("|---|---:|---:|---:|---:|---:|")
    for (mode, batch), c in sorted(cs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        r = rs.get((mode, batch))
        ratio = f"**{r['us_per_batch'] / c['us_per_batch']:.1f}x**" if r else ""
        ref = f"{r['us_per_batch']:.2f}" if r else ""
        out(f"| {mode} | {batch} | {c['us_per_batch']:.2f} | {c['us_per_batch'] * 1e3 / batch:.2f} | {ref} | {ratio} |")
    for batch in (256, 8192):
        iid, cyc = cs.get(("iid", batch)), cs.get(("cyclic", batch))
        if iid and cyc:
            q = cyc["us_per_batch"] / iid["us_per_batch"]
            checks.append((f"sampler batch {batch}: cyclic per-index cost within 2x of IID", f"{q:.2f}x",
                           "met" if q <= 2.0 else "NOT met"))
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
