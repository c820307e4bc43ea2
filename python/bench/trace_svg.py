"""Draws a loader trace (DataLoader(..., trace_path=...)) as an SVG
timeline: one row per track (the consumer, each worker, the Python
transform), a box per span coloured by stage, and the tuner's decisions
as marks on the consumer's row. The standard library only.

    python python/bench/trace_svg.py TRACE.json OUT.svg [--from-ms A] [--to-ms B] [--width 1100]

`python python/bench/trace_svg.py --demo OUT.svg` runs a small loader
(two workers, a transform whose cost changes mid-run, tuning on) and
draws its trace: the picture in docs/loader.md.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from xml.sax.saxutils import escape

COLOURS = {
    "wait": "#d62728",
    "sample": "#9467bd",
    "gather": "#1f77b4",
    "transform": "#2ca02c",
    "python_transform": "#ff7f0e",
}
ROW, GAP, LEFT, TOP = 22, 6, 130, 34


def tracks(trace):
    """(tid -> name, tid -> [span], [decision marks]) from a trace's events."""
    names, spans, marks = {}, {}, []
    for e in trace["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[e["tid"]] = e["args"]["name"]
        elif e.get("ph") == "X":
            spans.setdefault(e["tid"], []).append(e)
        elif e.get("ph") == "i" and e.get("name") == "tune":
            marks.append(e)
    return names, spans, marks


def draw(trace, out, from_ms=None, to_ms=None, width=1100):
    names, spans, marks = tracks(trace)
    every = [s for row in spans.values() for s in row]
    if not every:
        raise SystemExit("the trace has no spans")
    t0 = from_ms * 1000 if from_ms is not None else min(s["ts"] for s in every)
    t1 = to_ms * 1000 if to_ms is not None else max(s["ts"] + s["dur"] for s in every)
    scale = (width - LEFT - 10) / max(t1 - t0, 1e-9)
    rows = sorted(names)
    height = TOP + len(rows) * (ROW + GAP) + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{width}" height="{height}" fill="white"/>',
             f'<text x="{LEFT}" y="16">{escape(f"{(t1 - t0) / 1000:.1f} ms of a loader trace")}</text>']
    for r, tid in enumerate(rows):
        y = TOP + r * (ROW + GAP)
        parts.append(f'<text x="6" y="{y + 15}">{escape(names[tid])}</text>')
        parts.append(f'<rect x="{LEFT}" y="{y}" width="{width - LEFT - 10}" height="{ROW}" fill="#f4f4f4"/>')
        for s in spans.get(tid, []):
            a, b = max(s["ts"], t0), min(s["ts"] + s["dur"], t1)
            if b <= a:
                continue
            x, w = LEFT + (a - t0) * scale, max((b - a) * scale, 0.5)
            colour = COLOURS.get(s["name"], "#7f7f7f")
            title = escape(f'{s["name"]} step {s["args"].get("step")} {s["dur"]:.0f} us')
            parts.append(f'<rect x="{x:.2f}" y="{y + 2}" width="{w:.2f}" height="{ROW - 4}" fill="{colour}">'
                         f'<title>{title}</title></rect>')
    consumer = rows.index(0) if 0 in rows else 0
    for m in marks:
        if not t0 <= m["ts"] <= t1:
            continue
        x, y = LEFT + (m["ts"] - t0) * scale, TOP + consumer * (ROW + GAP)
        parts.append(f'<path d="M{x:.1f},{y - 2} l-5,-8 h10 z" fill="black"><title>'
                     f'{escape(m["args"]["reason"])}</title></path>')
    legend_y = height - 14
    x = LEFT
    for name, colour in COLOURS.items():
        parts.append(f'<rect x="{x}" y="{legend_y - 10}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{x + 16}" y="{legend_y}">{name}</text>')
        x += 30 + 8 * len(name)
    parts.append(f'<path d="M{x + 6},{legend_y - 10} l-5,-8 h10 z" transform="translate(0,10)" fill="black"/>')
    parts.append(f'<text x="{x + 16}" y="{legend_y}">a tuning decision</text>')
    parts.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(parts) + "\n")


def demo(out):
    """A run whose trace shows the stages, the waits and the tuner."""
    import numpy as np
    from loaderx_rs import DataLoader, Dataset, write_dataset

    with tempfile.TemporaryDirectory() as d:
        write_dataset(os.path.join(d, "x"), np.random.default_rng(0).standard_normal((20000, 256)).astype(np.float32))
        trace = os.path.join(d, "trace.json")

        def transform(batch):
            # Cheap, then 4 ms a batch from step 40 on: the consumer waits.
            if batch.step >= 40:
                time.sleep(0.004)
            return batch

        with DataLoader({"x": Dataset(os.path.join(d, "x"))}, num_workers="auto", batch_size=256,
                        transform=transform, trace_path=trace) as loader:
            for _ in range(80):
                next(loader)
                time.sleep(0.002)  # the training step
        with open(trace) as f:
            data = json.load(f)
    draw(data, out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", nargs="?")
    p.add_argument("out")
    p.add_argument("--from-ms", type=float)
    p.add_argument("--to-ms", type=float)
    p.add_argument("--width", type=int, default=1100)
    p.add_argument("--demo", action="store_true")
    a = p.parse_args()
    if a.demo:
        return demo(a.out)
    if a.trace is None:
        sys.exit("give a trace, or --demo")
    with open(a.trace) as f:
        draw(json.load(f), a.out, a.from_ms, a.to_ms, a.width)


if __name__ == "__main__":
    main()
