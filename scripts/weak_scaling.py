#!/usr/bin/env python3
"""weak_scaling: the weak-scaling table of issue 7 from mok-bench reports of the same configs run on 2, 4 and 8
GPUs (tokens per rank fixed, so the work per GPU is the same at every size).

  scripts/weak_scaling.py results/h200x2/X/report.csv results/h200x4/Y/report.csv results/h200x8/Z/report.csv

Per (model, tokens per rank, routing, implementation): the best passed candidate's median layer time at each rank
count, and the efficiency T(smallest) / T(N). Prints a markdown table; exits 2 when a report is missing a column
or has no passed rows."""
import csv
import sys
from collections import defaultdict

from report_labels import routing_label


def load(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    need = {"model", "tokens_per_rank", "routing", "impl", "disposition", "time_med_us", "ranks"}
    if not rows or not need <= set(rows[0]):
        sys.exit(f"weak_scaling: {path}: not a mok-bench report with {sorted(need)}")
    return rows


def main(paths):
    if not paths:
        sys.exit(__doc__)
    best = defaultdict(dict)  # (model, tokens, routing (+ inputs when not uniform), impl) -> {ranks: us}
    for path in paths:
        for r in load(path):
            if r["disposition"] != "passed" or not r["time_med_us"]:
                continue
            key = (r["model"], int(r["tokens_per_rank"]), routing_label(r), r["impl"])
            n, t = int(r["ranks"]), float(r["time_med_us"])
            if n not in best[key] or t < best[key][n]:
                best[key][n] = t
    if not best:
        sys.exit("weak_scaling: no passed rows")
    sizes = sorted({n for v in best.values() for n in v})
    head = ["model", "tokens/rank", "routing", "impl"] + [f"{n} GPUs ms" for n in sizes] + \
           [f"T({sizes[0]})/T({n})" for n in sizes[1:]]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for key in sorted(best):
        t = best[key]
        cells = [key[0], str(key[1]), key[2], key[3]]
        cells += [f"{t[n] / 1e3:.2f}" if n in t else "-" for n in sizes]
        base = t.get(sizes[0])
        cells += [f"{base / t[n]:.2f}" if base and n in t else "-" for n in sizes[1:]]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
