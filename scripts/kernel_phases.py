#!/usr/bin/env python3
"""kernel_phases.py TRACE.csv[.gz] [--anchor REGEX] [--min N]: what the GPU runs around each launch of a fused kernel,
from node.sh's step `tracecfg`: ncu's per-kernel durations (`--metrics gpu__time_duration.sum --csv`; kernels
serialized, no starts, so no idle time either), or an nsys CUDA trace (`nsys stats -r cuda_gpu_trace -f csv`: starts
and durations; read by the same code, tried on a made-up trace only: the GPU nodes have no nsys).

The trace is cut into windows, one per launch of the anchor kernel (default: the fused forward or backward): a window
runs from one anchor's start to the next one's, so it holds the anchor, the kernels after it (the owner's sum) and
the next iteration's prologue (memsets, the schedule, FP8's push kernel). Consecutive launches of one anchor instance
(the same template arguments) spaced less than --gap ms apart form a run: one candidate's warm-up and timed
iterations. Per run it prints the median window, the median time no kernel runs in it, the median time outside the
anchor (the other kernels and the idle time: at one GPU, about what the layer exposes), and per kernel name its
launches per window, median duration and median start after the anchor's end (the anchor's own: minus its duration;
the next iteration's prologue comes last, near the window's end). A window's idle time is what the CUDA
events of mok-bench's timing see beyond the kernels: launch gaps and host work between iterations."""
import argparse
import csv
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mok_report import open_text  # noqa: E402


def load(path):
    """[(start ns, duration ns, name)] by start, and whether the starts are measured: nsys's cuda_gpu_trace CSV has
    them; ncu's (--csv, metric gpu__time_duration.sum) has durations alone, in launch order, laid end to end here."""
    with open_text(path) as f:
        lines = [l for l in f if not l.startswith("==")]
    rows, timed = [], True
    reader = csv.DictReader(lines)
    for r in reader:
        if "Start (ns)" in r:
            try:
                rows.append((int(r["Start (ns)"]), int(r["Duration (ns)"]), r.get("Name", "?")))
            except ValueError:
                continue
        elif r.get("Metric Name") == "gpu__time_duration.sum":
            timed = False
            try:
                d = float(r["Metric Value"].replace(",", ""))
            except ValueError:
                continue
            d *= {"ms": 1e6, "us": 1e3, "usecond": 1e3, "msecond": 1e6}.get(r.get("Metric Unit", "ns"), 1.0)
            rows.append((None, int(d), r.get("Kernel Name") or r.get("Function Name", "?")))
    if not timed:
        t, laid = 0, []
        for _, d, n in rows:
            laid.append((t, d, n))
            t += d
        rows = laid
    rows.sort()
    return rows, timed


def short(name):
    """The kernel's name without its parameter list; template arguments kept (they tell the instances apart)."""
    name = re.sub(r"\(anonymous namespace\)::", "", name.strip())
    name = re.sub(r"\(.*\)$", "", name)
    name = re.sub(r"^void ", "", name)
    return name if len(name) <= 90 else name[:87] + "..."


def runs_of(rows, anchor, gap_ns):
    """[(anchor name, [row index of each launch])]: consecutive launches of one instance, each within gap_ns"""
    runs, cur = [], None
    for i, (start, _, name) in enumerate(rows):
        if not anchor.search(name):
            continue
        if cur and cur[0] == name and start - rows[cur[1][-1]][0] <= gap_ns:
            cur[1].append(i)
        else:
            cur = (name, [i])
            runs.append(cur)
    return runs


def report(rows, name, idx, skip, out):
    windows = []
    for a, b in zip(idx[skip:], idx[skip + 1:]):
        t0, t1 = rows[a][0], rows[b][0]
        busy_end, idle = t0, 0
        items = []
        for j in range(a, b):
            s, d, n = rows[j]
            idle += max(0, s - busy_end)
            busy_end = max(busy_end, s + d)
            items.append((short(n), d, s - (t0 + rows[a][1])))
        idle += max(0, t1 - busy_end)  # after the last kernel, until the next anchor starts
        windows.append((t1 - t0, idle, items))
    if not windows:
        return
    period = statistics.median(w[0] for w in windows)
    idle = statistics.median(w[1] for w in windows)
    outside = statistics.median(w[0] - w[2][0][1] for w in windows)  # the window less the anchor's own duration
    print(f"\n{short(name)}: {len(idx)} launches, {len(windows)} windows after {skip} skipped; "
          f"median window {period / 1e3:.1f} us, no kernel running {idle / 1e3:.1f} us; outside the anchor "
          f"{outside / 1e3:.1f} us ({100.0 * outside / period:.1f}% of the window)", file=out)
    per = {}
    for _, _, items in windows:
        seen = {}
        for n, d, off in items:
            seen.setdefault(n, []).append((d, off))
        for n, v in seen.items():
            per.setdefault(n, []).append(v)
    order = sorted(per, key=lambda n: statistics.median(v[0][1] for v in per[n]))
    print(f"  {'kernel':<92} {'per window':>10} {'median us':>10} {'starts after the anchor ends, us':>34}", file=out)
    for n in order:
        v = per[n]
        count = statistics.median(len(x) for x in v)
        dur = statistics.median(sum(d for d, _ in x) for x in v)
        off = statistics.median(x[0][1] for x in v)
        print(f"  {n:<92} {count:>10.0f} {dur / 1e3:>10.1f} {off / 1e3:>34.1f}", file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace")
    ap.add_argument("--anchor", default=r"megakernel_(fwd|bwd)_kernel")
    ap.add_argument("--gap", type=float, default=50.0, help="ms between launches of one run (default 50)")
    ap.add_argument("--min", type=int, default=10, help="launches a run needs to be shown (default 10)")
    ap.add_argument("--skip", type=int, default=5, help="first windows of a run left out (warm-up; default 5)")
    a = ap.parse_args()
    rows, timed = load(a.trace)
    if not timed:
        print("(ncu durations, kernels laid end to end: the windows hold no idle time, and the gaps are not measured)")
    if not rows:
        sys.exit(f"kernel_phases.py: {a.trace}: no kernel rows (an nsys cuda_gpu_trace CSV?)")
    anchor = re.compile(a.anchor)
    shown = 0
    for name, idx in runs_of(rows, anchor, a.gap * 1e6):
        if len(idx) >= a.min:
            report(rows, name, idx, min(a.skip, len(idx) - 2), sys.stdout)
            shown += 1
    if not shown:
        sys.exit(f"kernel_phases.py: no run of >= {a.min} launches of /{a.anchor}/ in {a.trace}")


if __name__ == "__main__":
    main()
