"""Prints the three tables of all.sh (sampler, store, loader) from the JSON
files of one run, with the ratios of this crate to each contender.

    python all_combine.py --dir target/bench/all [--markdown OUT.md]

The store and loader parts run in rounds, every contender once per round,
back to back: a contender's figure is its median over the rounds, and
"this crate / it" is the median of the per-round ratios (with their range
when there are several rounds), which a shared machine's changing load
disturbs far less than the absolute figures.
"""

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(x, spec=",.0f", suffix=""):
    return "" if x is None else format(x, spec) + suffix


def fmt_ratios(rs):
    if not rs:
        return ""
    s = f"**{med(rs):.2f}x**"
    if len(rs) > 1:
        s += f" ({min(rs):.2f}-{max(rs):.2f})"
    return s


def sampler_table(d, out):
    crate = json.loads((d / "sampler-crate.json").read_text()).get("sampler", [])
    py = json.loads((d / "sampler-python.json").read_text())
    rows = [(r["name"], r["mode"], r["batch"], r["us_per_batch"]) for r in py["sampler"]]
    rows += [("this crate", r["mode"], r["batch"], r["us_per_batch"]) for r in crate
             if r["mode"] in ("iid", "cyclic") and r["len"] == py["sampler"][0]["len"]]
    n = py["sampler"][0]["len"]
    out(f"Index space {n:,}; per batch the median run (this crate: `Sampler::fill` from Rust; the others "
        f"from Python, one call per batch; loaderx 0.7.3 through its cffi binding, numpy {py['numpy']}).")
    out("")
    out("| sampler | mode | batch | per batch | indices | vs default_rng | this crate / it (same mode) |")
    out("|---|---|---:|---:|---:|---:|---:|")
    by = {(name, mode, b): us for name, mode, b, us in rows}
    for b in sorted({r[2] for r in rows}):
        base = by.get(("numpy default_rng", "iid", b))
        for name, mode in [("numpy randint", "iid"), ("numpy default_rng", "iid"), ("loaderx 0.7.3", "iid"),
                           ("this crate", "iid"), ("loaderx 0.7.3", "cyclic"), ("this crate", "cyclic")]:
            us = by.get((name, mode, b))
            if us is None:
                continue
            ours = by.get(("this crate", mode, b))
            vs = f"{base / us:.2f}x" if base else ""
            mine = f"{us / ours:.2f}x" if ours and name != "this crate" else ""
            label = f"**{name}**" if name == "this crate" else name
            out(f"| {label} | {mode} | {b:,} | {us:,.2f} us | {b / us:,.0f} M/s | {vs} | {mine} |")
    out("")


def load_store(d):
    """{(dataset, contender, kind): {round: row}}, plus the peers' skipped notes."""
    rows, skipped, loads = defaultdict(dict), {}, []
    for p in sorted(d.glob("store-*.json")):
        doc = json.loads(p.read_text())
        side = doc["side"]
        rnd = doc["config"].get("round", 0)
        loads += [doc["machine"].get("load_start"), doc["machine"].get("load_end")]
        for s in doc.get("skipped", []):
            skipped[s["name"]] = s["reason"]
        for r in doc["results"]:
            if side == "crate":
                who = "this crate " + r["name"] if r["kind"] != "bound" else "Rust " + r["name"]
            elif side == "reference":
                who = "loaderx 0.7.3 " + r["name"] if r["kind"] != "bound" else r["name"]
            else:
                who = r["name"]
            rows[(r["dataset"], who, r["kind"])][rnd] = r
    return rows, skipped, [x for x in loads if x is not None]


# Which of this crate's rows a contender is compared with.
def counterpart(who):
    if who.startswith("loaderx 0.7.3 "):
        return "this crate " + who[len("loaderx 0.7.3 "):]
    if who in ("npy-mmap", "hdf5", "lmdb"):
        return "this crate raw"
    if who in ("hdf5-gzip", "lmdb-zlib", "arrayrecord"):
        return "this crate zstd"
    return None


def store_table(d, out):
    rows, skipped, loads = load_store(d)
    if not rows:
        return
    any_doc = json.loads(next(d.glob("store-crate-*.json")).read_text())
    batch = any_doc["config"]["batch"]
    datasets = []
    for (ds, _, _) in rows:
        if ds not in datasets:
            datasets.append(ds)
    rounds = sorted({r for v in rows.values() for r in v} - {0})

    def mib(ds, who, kind):
        return med([r["mib_s"] for r in rows.get((ds, who, kind), {}).values()])

    def ratio(ds, who):
        for kind in ("append", "gather"):
            for r in rows.get((ds, who, kind), {}).values():
                if r.get("ratio") is not None:
                    return r["ratio"]
        return None

    def paired(ds, a, b, kind):
        ra, rb = rows.get((ds, a, kind), {}), rows.get((ds, b, kind), {})
        return [ra[k]["mib_s"] / rb[k]["mib_s"] for k in sorted(set(ra) & set(rb)) if k != 0]

    out(f"Random batch gather of {batch} records of 12,288 bytes; {len(rounds)} round(s); 1-minute load "
        f"average during the store part {min(loads):.1f}..{max(loads):.1f}. \"write\": the whole dataset "
        f"in 64 MiB calls, durable at the end; \"gather\" and \"per batch\": the median run; \"ratio\": "
        f"logical bytes over stored bytes; the last two columns: this crate's figure (same codec; raw for "
        f"the uncompressed stores, zstd for the compressed ones) over the row's, per round, median and range.")
    out("")
    for ds in datasets:
        out(f"**{ds}**")
        out("")
        out("| store | records | write MiB/s | gather MiB/s | per batch | ratio | this crate / it: write "
            "| this crate / it: gather |")
        out("|---|---:|---:|---:|---:|---:|---:|---:|")
        order = ["this crate raw", "this crate zstd", "this crate zstd_dict", "loaderx 0.7.3 raw",
                 "loaderx 0.7.3 zstd", "loaderx 0.7.3 zstd_dict", "npy-mmap", "hdf5", "hdf5-gzip", "lmdb",
                 "lmdb-zlib", "arrayrecord"]
        for who in order:
            g = rows.get((ds, who, "gather"))
            if not g:
                continue
            any_row = next(iter(g.values()))
            gm, wm = mib(ds, who, "gather"), mib(ds, who, "append")
            per_batch = batch * 12288 / (1 << 20) / gm * 1e3 if gm else None
            rt = ratio(ds, who)
            mine = counterpart(who)
            rw = paired(ds, mine, who, "append") if mine else []
            rg = paired(ds, mine, who, "gather") if mine else []
            label = f"**{who}**" if who.startswith("this crate") else who
            out(f"| {label} | {any_row['records']:,} | {fmt(wm)} | {fmt(gm)} | {fmt(per_batch, '.2f', ' ms')} | "
                f"{fmt(rt, '.2f', 'x')} | {fmt_ratios(rw)} | {fmt_ratios(rg)} |")
        for name, reason in skipped.items():
            out(f"| {name} | | | | | | skipped: {reason} | |")
        out("")
        out("Physical bounds, same run (a batch of the same bytes); last column: this crate's raw gather over a "
            "copy bound, its zstd gather over a zstd bound, per round:")
        out("")
        out("| bound | MiB/s | per batch | this crate / it |")
        out("|---|---:|---:|---:|")
        for (dd, who, kind) in rows:
            if dd != ds or kind != "bound":
                continue
            m = mib(ds, who, "bound")
            per_batch = batch * 12288 / (1 << 20) / m * 1e3
            mine = "this crate zstd" if "zstd" in who else "this crate raw"
            out(f"| {who} | {fmt(m)} | {per_batch:.2f} ms | {fmt_bound(rows, ds, mine, who)} ({mine.split()[-1]}) |")
        out("")


def fmt_bound(rows, ds, mine, bound):
    """Per-round this crate's gather / a bound measured in the same round."""
    a, b = rows.get((ds, mine, "gather"), {}), rows.get((ds, bound, "bound"), {})
    return fmt_ratios([a[k]["mib_s"] / b[k]["mib_s"] for k in sorted(set(a) & set(b)) if k != 0])


def loader_table(d, out):
    per = defaultdict(dict)  # (who, codec) -> {round: row}
    for p in sorted(d.glob("loader-*.json")):
        m = re.match(r"loader-(\w+)-(\d+)\.json", p.name)
        side, rnd = m.group(1), int(m.group(2))
        doc = json.loads(p.read_text())
        for r in doc.get("loader", []):
            who = {"crate": "this crate", "reference": "loaderx 0.7.3", "grain": "grain"}[side]
            per[(who, r["codec"])][rnd] = r
    if not per:
        return
    out("Two streams (a 12,288-byte float32 record and an int64 label per sample, the float set: zstd ~1.1x), "
        "batch 256, 4 workers, random order; each batch dropped before the next is taken. \"cpu\": CPU time "
        "of all threads (Grain: and its worker processes) per batch. Last column: this crate's batches/s "
        "(same codec; zstd against Grain) over the row's, per round, median and range.")
    out("")
    out("| loader | reads from | batches/s | per batch | samples/s | MiB/s | cpu ms/batch | this crate / it |")
    out("|---|---|---:|---:|---:|---:|---:|---:|")
    order = [("this crate", "zstd", "Zrecord zstd"), ("this crate", "raw", "Zrecord raw"),
             ("loaderx 0.7.3", "zstd", "Zrecord zstd"), ("loaderx 0.7.3", "raw", "Zrecord raw"),
             ("grain", "arrayrecord (zstd)", "ArrayRecord (zstd)")]
    for who, codec, source in order:
        rr = per.get((who, codec))
        if not rr:
            continue
        bs = med([r["batches_s"] for r in rr.values()])
        mb = med([r["mib_s"] for r in rr.values()])
        cpu = med([r["cpu_ms"] for r in rr.values()])
        mine = per.get(("this crate", "zstd" if who == "grain" else codec), {})
        ratios = [mine[k]["batches_s"] / rr[k]["batches_s"] for k in sorted(set(mine) & set(rr))] \
            if who != "this crate" else []
        label = f"**{who}**" if who == "this crate" else who
        out(f"| {label} | {source} | {bs:,.1f} | {1e3 / bs:.2f} ms | {bs * 256:,.0f} | {mb:,.0f} | {cpu:.2f} | "
            f"{fmt_ratios(ratios)} |")
    out("")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", type=Path, required=True)
    ap.add_argument("--markdown", type=Path)
    args = ap.parse_args()
    lines = []
    out = lines.append
    notes = (args.dir / "notes.txt").read_text().strip() if (args.dir / "notes.txt").exists() else ""
    if notes:
        out(notes)
        out("")
    out("### 1. Sampler")
    out("")
    sampler_table(args.dir, out)
    out("### 2. Store")
    out("")
    store_table(args.dir, out)
    out("### 3. Loader")
    out("")
    loader_table(args.dir, out)
    if (args.dir / "loads.txt").exists():
        out("Load average at each phase (`uptime`):")
        out("")
        out("```")
        out((args.dir / "loads.txt").read_text().rstrip())
        out("```")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.write_text(text)


if __name__ == "__main__":
    main()
