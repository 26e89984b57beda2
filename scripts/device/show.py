#!/usr/bin/env python3
"""show.py DIR [--all]: the key columns of every mok-bench CSV report under DIR, one line per candidate."""
import csv
import glob
import sys


def num(row, key):
    return float(row[key]) if row.get(key) else float("nan")


def main():
    root = sys.argv[1]
    show_all = "--all" in sys.argv
    for path in sorted(glob.glob(root + "/**/*.csv", recursive=True)):
        print(path)
        for r in csv.DictReader(open(path)):
            if r["disposition"] == "not_supported" and not show_all:
                continue
            bytes_ = num(r, "dispatch_bytes")
            alone_gbps = bytes_ / (num(r, "dispatch_alone_us") * 1e-6) / 1e9
            print(f"{r['model'][:12]:12} {r['tokens_per_rank']:>5} {r['routing'][:12]:12} {r['impl'][:12]:12} "
                  f"{r['params']:70} {r['disposition'][:6]} t={num(r, 'time_med_us'):8.0f}us "
                  f"x{num(r, 'speedup_vs_nccl'):.2f} disp={num(r, 'dispatch_us'):6.0f}us {num(r, 'dispatch_gbps'):5.1f}GB/s "
                  f"alone {alone_gbps:5.1f} a2a {num(r, 'a2a_ref_gbps'):5.1f} gemm={num(r, 'gemm_us'):6.0f} "
                  f"alone={num(r, 'gemm_alone_us'):6.0f} err={num(r, 'max_rel_err'):.2g}")


if __name__ == "__main__":
    main()
