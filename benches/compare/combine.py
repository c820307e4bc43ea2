"""Prints the crate's and the reference's store benchmark results as one
table, with the ratio crate / reference per row, and checks the targets of
issue 2.

    python combine.py --crate crate.json [crate2.json ...] --reference ref.json [...]
        [--markdown OUT.md]

With several result files per side (run.sh --rounds N), each row takes the best
median over the rounds of its side.
"""

import argparse
import json
from pathlib import Path


def load(paths):
    rows, docs = {}, []
    for p in paths:
        doc = json.loads(Path(p).read_text())
        docs.append(doc)
        for r in doc["results"]:
            key = (r["dataset"], r["kind"], r["name"])
            if key not in rows or r["mib_s"] > rows[key]["mib_s"]:
                rows[key] = r
    return rows, docs


def fmt_mib(r):
    return "" if r is None else f"{r['mib_s']:,.0f}"


def fmt_ratio(r):
    return "" if r is None or r.get("ratio") is None else f"{r['ratio']:.2f}x"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--crate", nargs="+", required=True)
    ap.add_argument("--reference", nargs="+", required=True)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    crate, crate_docs = load(args.crate)
    ref, ref_docs = load(args.reference)
    datasets = []
    for (d, _, _) in list(crate) + list(ref):
        if d not in datasets:
            datasets.append(d)

    lines = []
    out = lines.append
    m = crate_docs[0]["machine"]
    c = crate_docs[0]["config"]
    out(f"Machine: {m['nproc']} cores, {m['cpu']}; rayon threads {m.get('threads', '?')}. "
        f"Reference: loaderx {ref_docs[0].get('version', '?')} (Python API). "
        f"Gather: batch {c['batch']}, median of {c['reps']} runs of {c['batches']} batches "
        f"after {c['warmup']} warm-up; append: median of {c['append_reps']} runs. "
        f"Rounds: {len(crate_docs)} per side, best median kept.")
    out("")
    out("| dataset | op | codec / method | records | this crate MiB/s | ratio | reference MiB/s | ratio | crate / ref |")
    out("|---|---|---|---:|---:|---:|---:|---:|---:|")

    def line(dataset, op, name, rc, rr):
        records = (rc or rr)["records"]
        x = f"**{rc['mib_s'] / rr['mib_s']:.2f}x**" if rc and rr else ""
        out(f"| {dataset} | {op} | {name} | {records:,} | {fmt_mib(rc)} | {fmt_ratio(rc)} | "
            f"{fmt_mib(rr)} | {fmt_ratio(rr)} | {x} |")

    for d in datasets:
        for kind in ["append", "gather"]:
            shared = [n for (dd, k, n) in ref if dd == d and k == kind]
            for name in shared:
                line(d, kind, name, crate.get((d, kind, name)), ref.get((d, kind, name)))
            for (dd, k, n), r in crate.items():
                if dd == d and k == kind and n not in shared:
                    line(d, kind, n + " (crate only)", r, None)
        for (dd, k, n), r in crate.items():
            if dd == d and k == "bound":
                line(d, "bound", "Rust " + n, r, None)
        for (dd, k, n), r in ref.items():
            if dd == d and k == "bound":
                line(d, "bound", n, None, r)

    # The targets of issue 2.
    def g(side, d, k, n):
        r = side.get((d, k, n))
        return r and r["mib_s"]

    checks = []

    def check(what, value, bound, ok_if_ge=True):
        if value is None or bound is None:
            checks.append((what, "n/a", "missing"))
            return
        ok = value >= bound if ok_if_ge else value <= bound
        checks.append((what, f"{value:,.2f} vs {bound:,.2f}", "met" if ok else "NOT met"))

    for d in datasets:
        raw = g(crate, d, "gather", "raw")
        check(f"{d}: raw gather >= numpy mmap .npy fancy-index (MiB/s)", raw,
              g(ref, d, "bound", "numpy mmap fancy-index"))
        check(f"{d}: raw gather >= Rust mmap .npy, one thread (MiB/s)", raw, g(crate, d, "bound", "mmap .npy 1T"))
        check(f"{d}: raw gather >= Rust mmap .npy, rayon (MiB/s)", raw, g(crate, d, "bound", "mmap .npy rayon"))
    fz, rz = g(crate, "float", "gather", "zstd"), g(ref, "float", "gather", "zstd")
    check("float: zstd gather >= reference's (MiB/s)", fz, rz)
    iz, irz = g(crate, "image", "gather", "zstd"), g(ref, "image", "gather", "zstd")
    check("image: zstd gather >= 1.2x reference's (MiB/s)", iz, irz and 1.2 * irz)
    for d in datasets:
        a, b = g(crate, d, "append", "zstd"), g(ref, d, "append", "zstd")
        check(f"{d}: zstd append >= 1.8x reference's (MiB/s)", a, b and 1.8 * b)
        a, b = g(crate, d, "append", "zstd_dict"), g(ref, d, "append", "zstd_dict")
        check(f"{d}: zstd_dict append >= 5x reference's (MiB/s)", a, b and 5 * b)
        rc, rr = crate.get((d, "append", "zstd_dict")), ref.get((d, "append", "zstd_dict"))
        check(f"{d}: zstd_dict ratio >= reference's", rc and rc["ratio"], rr and rr["ratio"])
    out("")
    out("| target (issue 2) | measured | |")
    out("|---|---|---|")
    for what, val, verdict in checks:
        out(f"| {what} | {val} | {verdict} |")

    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
