#!/usr/bin/env python3
"""weak_scaling: the weak-scaling table of issue 7 from mok-bench reports of the same configs run on 2, 4 and 8
GPUs (tokens per rank fixed, so the work per GPU is the same at every size).

  scripts/weak_scaling.py results/h200x2/X/report.csv results/h200x4/Y/report.csv results/h200x8/Z/report.csv

Per (model, tokens per rank, routing, implementation): the best passed candidate's median layer time at each rank
count, and the efficiency T(smallest) / T(N). Reads .csv, .json and .json.gz reports of schema v1 or v2
(scripts/mok_report.py). Prints a markdown table (a line saying so when no report has passed rows); exits 2 when a
report cannot be read or is missing a column."""
import sys
from collections import defaultdict

import mok_report
from report_labels import routing_label

NEED = ("model", "tokens_per_rank", "routing", "impl", "disposition", "time_med_us", "ranks")


def main(paths):
    if not paths:
        sys.exit(__doc__)
    best = defaultdict(dict)  # (model, tokens, routing (+ inputs when not uniform), impl) -> {ranks: us}
    for r in mok_report.read_all(paths, "weak_scaling", NEED):
        if r["disposition"] != "passed" or not r["time_med_us"]:
            continue
        key = (r["model"], int(r["tokens_per_rank"]), routing_label(r), r["impl"])
        n, t = int(r["ranks"]), float(r["time_med_us"])
        if n not in best[key] or t < best[key][n]:
            best[key][n] = t
    if not best:
        print(f"(no passed rows in {', '.join(paths)})")
        return
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
