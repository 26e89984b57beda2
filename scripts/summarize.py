#!/usr/bin/env python3
"""summarize.py REPORT [...]: markdown table of the best passed candidate of each implementation per problem, with
the figures the baselines are judged by (speedup over the baseline the row names, TFLOP/s, dispatch bandwidth in
the layer and alone against ncclAlltoAll moving the same bytes, GEMM phase against the same GEMMs alone). Reads
.csv, .json and .json.gz reports of schema v1 or v2 (scripts/mok_report.py). Every number comes from the reports;
nothing is typed in by hand."""
import sys

import mok_report
from mok_report import num, ratio
from report_labels import routing_label


def main(paths):
    if not paths:
        sys.exit(__doc__)
    best = {}
    for r in mok_report.read_all(paths, "summarize.py"):
        if not mok_report.counts(r):
            continue
        key = (r["_file"], r["problem"], r["impl"])
        if key not in best or num(r, "time_med_us") < num(best[key], "time_med_us"):
            best[key] = r
    print("| model | tokens/rank | routing | impl | best params | median ms (p10-p90) | TFLOP/s | speedup (over) "
          "| dispatch GB/s in layer / alone / a2a ref | GEMM in layer / alone ms | max err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(best, key=lambda k: (k[0], int(num(best[k], "problem")), k[2])):
        r = best[key]
        gb = num(r, "dispatch_bytes") / 1e9
        over = f" ({r['speedup_baseline']})" if r["speedup_baseline"] else ""
        print(f"| {r['model']} | {r['tokens_per_rank']} | {routing_label(r)} | {r['impl']} | {r['params']} | "
              f"{num(r, 'time_med_us') / 1e3:.2f} ({num(r, 'time_p10_us') / 1e3:.2f}-{num(r, 'time_p90_us') / 1e3:.2f}) | "
              f"{num(r, 'tflops'):.0f} | {num(r, 'speedup'):.2f}{over} | "
              f"{num(r, 'dispatch_gbps'):.0f} / {ratio(gb, num(r, 'dispatch_alone_us') * 1e-6):.0f} / "
              f"{num(r, 'a2a_ref_gbps'):.0f} | {num(r, 'gemm_us') / 1e3:.2f} / {num(r, 'gemm_alone_us') / 1e3:.2f} | "
              f"{num(r, 'max_rel_err'):.1e} |")
    if not best:
        print(f"(no passed candidates in {', '.join(paths)})")


if __name__ == "__main__":
    main(sys.argv[1:])
