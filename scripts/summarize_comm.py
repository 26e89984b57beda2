#!/usr/bin/env python3
"""summarize_comm.py REPORT [...]: markdown table for comm-mode reports: per problem, nccl-p2p, the best lsa
candidate with at most 16 SMs and the best lsa candidate overall, with the figures issue 3 is judged by. Reads
.csv, .json and .json.gz reports of schema v1 or v2 (scripts/mok_report.py); rows of other modes are left out."""
import sys

import mok_report
from mok_report import num


def main(paths):
    if not paths:
        sys.exit(__doc__)
    rows = [r for r in mok_report.read_all(paths, "summarize_comm.py")
            if r["disposition"] == "passed" and r["mode"] == "comm"]
    problems = sorted({(r["_file"], int(num(r, "problem")), r["tokens_per_rank"], r["routing"]) for r in rows})
    print("| tokens/rank | routing | what | params | median us (p10-p90) | dispatch / combine us | speedup (over) "
          "| GB/s out of each GPU | of peer ceiling | ncclAlltoAll there and back us |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path, prob, tokens, routing in problems:
        mine = [r for r in rows if r["_file"] == path and int(num(r, "problem")) == prob]
        picks = [("nccl-p2p", [r for r in mine if r["impl"] == "nccl-p2p"])]
        lsa = [r for r in mine if r["impl"] == "lsa"]
        picks.append(("lsa, <= 16 SMs", [r for r in lsa if num(r, "comm_sms") <= 16]))
        picks.append(("lsa, best", lsa))
        for label, cands in picks:
            if not cands:
                continue
            r = min(cands, key=lambda c: num(c, "time_med_us"))
            over = f" ({r['speedup_baseline']})" if r["speedup_baseline"] else ""
            print(f"| {tokens} | {routing} | {label} | {r['params'] or '-'} | {num(r, 'time_med_us'):.1f} "
                  f"({num(r, 'time_p10_us'):.1f}-{num(r, 'time_p90_us'):.1f}) | {num(r, 'dispatch_us'):.1f} / "
                  f"{num(r, 'combine_us'):.1f} | {num(r, 'speedup'):.2f}{over} | {num(r, 'comm_gbps'):.0f} | "
                  f"{num(r, 'peer_frac'):.2f} | {num(r, 'a2a_ref_us'):.1f} |")
    if not problems:
        print(f"(no passed comm-mode rows in {', '.join(paths)})")


if __name__ == "__main__":
    main(sys.argv[1:])
