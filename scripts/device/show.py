#!/usr/bin/env python3
"""show.py DIR [--all]: the key columns of every mok-bench report under DIR (.csv, .json, .json.gz; schema v1 or
v2, read by scripts/mok_report.py), one line per candidate; not_supported rows only with --all."""
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mok_report  # noqa: E402 (scripts/, one level up)
from mok_report import num, ratio  # noqa: E402

PATTERNS = ("*.csv", "*.csv.gz", "*.json", "*.json.gz")


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        sys.exit(__doc__)
    root, show_all = argv[1], "--all" in argv[2:]
    paths = sorted({p for pat in PATTERNS for p in glob.glob(os.path.join(root, "**", pat), recursive=True)})
    reports = [p for p in paths if mok_report.kind(p) == "report"]
    if not reports:
        print(f"show.py: no mok-bench reports under {root}")
    for path in reports:
        print(path)
        for r in mok_report.read_all([path], "show.py"):
            if r["disposition"] == "not_supported" and not show_all:
                continue
            alone_gbps = ratio(num(r, "dispatch_bytes"), num(r, "dispatch_alone_us") * 1e-6) / 1e9
            print(f"{r['model'][:12]:12} {r['tokens_per_rank']:>5} {r['routing'][:12]:12} {r['impl'][:12]:12} "
                  f"{r['params']:70} {r['disposition'][:6]} t={num(r, 'time_med_us'):8.0f}us "
                  f"x{num(r, 'speedup'):.2f} disp={num(r, 'dispatch_us'):6.0f}us {num(r, 'dispatch_gbps'):5.1f}GB/s "
                  f"alone {alone_gbps:5.1f} a2a {num(r, 'a2a_ref_gbps'):5.1f} gemm={num(r, 'gemm_us'):6.0f} "
                  f"alone={num(r, 'gemm_alone_us'):6.0f} err={num(r, 'max_rel_err'):.2g}")


if __name__ == "__main__":
    main(sys.argv)
