"""Prints the crate's and the reference's store benchmark results as one
table, and checks the targets of issue 2.

    python combine.py --crate crate-*.json --reference reference-*.json [--markdown OUT.md]

Every JSON file holds one run of one side (benches/store.rs or
reference_store.py) tagged with its pairing round (config.round). run.sh runs
the two sides of a round back to back, so their ratio is measured under the
same load of a shared machine: per row, the table gives the median over rounds
of each side's MiB/s and the median over rounds of the per-round ratio
crate / reference (with its range when there are several rounds). Crate-only
rows (round 0) have no pair.
"""

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path


def load(paths):
    """{(dataset, kind, name): {round: row}}, and the documents."""
    rows, docs = defaultdict(dict), []
    for p in paths:
        doc = json.loads(Path(p).read_text())
        docs.append(doc)
        rnd = doc["config"].get("round", 0)
        for r in doc["results"]:
            rows[(r["dataset"], r["kind"], r["name"])][rnd] = r
    return rows, docs


def med(values):
    return statistics.median(values) if values else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--crate", nargs="+", required=True)
    ap.add_argument("--reference", nargs="+", required=True)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    crate, crate_docs = load(args.crate)
    ref, ref_docs = load(args.reference)

    def mib(side, key):
        return med([r["mib_s"] for r in side.get(key, {}).values()])

    def ratio_of(side, key):
        rs = [r["ratio"] for r in side.get(key, {}).values() if r.get("ratio") is not None]
        return rs[0] if rs else None

    def paired(key_a, key_b, side_a=crate, side_b=ref, scale=1.0):
        """Per-round ratios side_a[key_a] / (scale * side_b[key_b])."""
        a, b = side_a.get(key_a, {}), side_b.get(key_b, {})
        return [a[r]["mib_s"] / (scale * b[r]["mib_s"]) for r in sorted(set(a) & set(b)) if r != 0]

    lines = []
    out = lines.append
    m = crate_docs[0]["machine"]
    c = crate_docs[0]["config"]
    rounds = sorted({d["config"].get("round", 0) for d in crate_docs + ref_docs} - {0})
    loads = [x for d in crate_docs + ref_docs for x in (d["machine"].get("load_start"), d["machine"].get("load_end"))
             if x is not None]
    out(f"Machine: {m['nproc']} cores, {m['cpu']}; rayon threads {m.get('threads', '?')}. "
        f"Reference: loaderx {ref_docs[0].get('version', '?')} through its Python API. "
        f"Gather: batch {c['batch']}, {c['reps']} runs of {c['batches']} batches after {c['warmup']} warm-up "
        f"per measurement; append: {c['append_reps']} runs per measurement; each side's figure is the median "
        f"of its runs. {len(rounds)} paired round(s); 1-minute load average during the runs "
        f"{min(loads, default=float('nan')):.1f}..{max(loads, default=float('nan')):.1f} on {m['nproc']} cores.")
    out("")
    out("| dataset | op | codec / method | records | this crate MiB/s | ratio | reference MiB/s | ratio "
        "| crate / ref (paired) |")
    out("|---|---|---|---:|---:|---:|---:|---:|---:|")

    def fmt(x, spec=",.0f"):
        return "" if x is None else format(x, spec)

    def fmt_pair(ps):
        if not ps:
            return ""
        s = f"**{med(ps):.2f}x**"
        if len(ps) > 1:
            s += f" ({min(ps):.2f}-{max(ps):.2f})"
        return s

    def line(dataset, op, label, key_c, key_r):
        rc, rr = crate.get(key_c, {}) if key_c else {}, ref.get(key_r, {}) if key_r else {}
        any_row = next(iter((rc or rr).values()))
        rat_c, rat_r = ratio_of(crate, key_c), ratio_of(ref, key_r)
        out(f"| {dataset} | {op} | {label} | {any_row['records']:,} | {fmt(mib(crate, key_c))} | "
            f"{fmt(rat_c, '.3f')}{'x' if rat_c else ''} | {fmt(mib(ref, key_r))} | "
            f"{fmt(rat_r, '.3f')}{'x' if rat_r else ''} | {fmt_pair(paired(key_c, key_r) if rc and rr else [])} |")

    datasets = []
    for (d, _, _) in list(crate) + list(ref):
        if d not in datasets:
            datasets.append(d)
    for d in datasets:
        for kind in ["append", "gather"]:
            shared = [n for (dd, k, n) in ref if dd == d and k == kind]
            for name in shared:
                line(d, kind, name, (d, kind, name), (d, kind, name))
            for (dd, k, n) in crate:
                if dd == d and k == kind and n not in shared:
                    line(d, kind, n + " (crate only)", (d, k, n), None)
        for (dd, k, n) in crate:
            if dd == d and k == "bound":
                line(d, "bound", "Rust " + n, (d, k, n), None)
        for (dd, k, n) in ref:
            if dd == d and k == "bound":
                line(d, "bound", n, None, (d, k, n))

    # The targets of issue 2, each on per-round paired ratios.
    checks = []

    def check(what, ps, bound):
        if not ps:
            checks.append((what, "missing", "n/a"))
            return
        x = med(ps)
        rng = f" ({min(ps):.2f}-{max(ps):.2f})" if len(ps) > 1 else ""
        checks.append((what, f"{x:.2f}x{rng}", "met" if x >= bound else "NOT met"))

    for d in datasets:
        raw = (d, "gather", "raw")
        check(f"{d}: raw gather / numpy mmap .npy fancy-index >= 1",
              paired(raw, (d, "bound", "numpy mmap fancy-index")), 1.0)
        check(f"{d}: raw gather / Rust mmap .npy, one thread >= 1",
              paired(raw, (d, "bound", "mmap .npy 1T"), crate, crate), 1.0)
        check(f"{d}: raw gather / Rust mmap .npy, rayon >= 1",
              paired(raw, (d, "bound", "mmap .npy rayon"), crate, crate), 1.0)
    check("float: zstd gather / reference's >= 1", paired(("float", "gather", "zstd"), ("float", "gather", "zstd")), 1.0)
    check("image: zstd gather / reference's >= 1.2",
          paired(("image", "gather", "zstd"), ("image", "gather", "zstd")), 1.2)
    for d in datasets:
        check(f"{d}: zstd append / reference's >= 1.8", paired((d, "append", "zstd"), (d, "append", "zstd")), 1.8)
        check(f"{d}: zstd_dict append / reference's >= 5",
              paired((d, "append", "zstd_dict"), (d, "append", "zstd_dict")), 5.0)
        rc, rr = ratio_of(crate, (d, "append", "zstd_dict")), ratio_of(ref, (d, "append", "zstd_dict"))
        if rc is None or rr is None:
            checks.append((f"{d}: zstd_dict compression ratio >= reference's", "missing", "n/a"))
        else:
            checks.append((f"{d}: zstd_dict compression ratio >= reference's", f"{rc:.4f} vs {rr:.4f}",
                           "met" if rc >= rr else "NOT met"))
    out("")
    out("| target (issue 2) | measured (median of paired rounds, range) | |")
    out("|---|---|---|")
    for what, val, verdict in checks:
        out(f"| {what} | {val} | {verdict} |")

    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
