#!/usr/bin/env python3
"""summarize_comm.py REPORT.csv: markdown table for comm-mode reports: per problem, nccl-p2p, the best lsa
candidate with at most 16 SMs and the best lsa candidate overall, with the figures issue 3 is judged by."""
import csv
import sys


def num(row, key):
    return float(row[key]) if row.get(key) else float("nan")


def main():
    rows = [r for r in csv.DictReader(open(sys.argv[1])) if r["disposition"] == "passed"]
    problems = sorted({(int(r["problem"]), r["tokens_per_rank"], r["routing"]) for r in rows})
    print("| tokens/rank | routing | what | params | median us (p10-p90) | dispatch / combine us | vs nccl-p2p "
          "| GB/s out of each GPU | of peer ceiling | ncclAlltoAll there and back us |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for prob, tokens, routing in problems:
        mine = [r for r in rows if int(r["problem"]) == prob]
        picks = [("nccl-p2p", [r for r in mine if r["impl"] == "nccl-p2p"])]
        lsa = [r for r in mine if r["impl"] == "lsa"]
        picks.append(("lsa, <= 16 SMs", [r for r in lsa if num(r, "comm_sms") <= 16]))
        picks.append(("lsa, best", lsa))
        for label, cands in picks:
            if not cands:
                continue
            r = min(cands, key=lambda c: num(c, "time_med_us"))
            print(f"| {tokens} | {routing} | {label} | {r['params'] or '-'} | {num(r, 'time_med_us'):.1f} "
                  f"({num(r, 'time_p10_us'):.1f}-{num(r, 'time_p90_us'):.1f}) | {num(r, 'dispatch_us'):.1f} / "
                  f"{num(r, 'combine_us'):.1f} | {num(r, 'speedup_vs_nccl'):.2f} | {num(r, 'comm_gbps'):.0f} | "
                  f"{num(r, 'peer_frac'):.2f} | {num(r, 'a2a_ref_us'):.1f} |")


if __name__ == "__main__":
    main()
