#!/usr/bin/env python3
"""order_compare.py REPORT REPORT... [--base NAME=VALUE,...] [--columns COL,...] [--markdown]: settings of one
binary compared inside one config run several times with its candidates in different orders (a candidate's place
among its problem's moves its time by a few percent: NOTES.md Measured bounds, Noise). Per problem and
implementation, each candidate's median time in each report, their geometric mean over the reports, and that mean
over the base candidate's (--base: the params it has, e.g. `stages=0,wgrad_stages=0`; by default the problem's
first candidate in the first report). --columns adds other per-row times (gemm1_us, gemm2_us, ...) as geometric
means over the base's. Only rows whose check passed (or did not run) count; a candidate missing from a report is
left out of its mean and marked. Params show only the names whose values differ between candidates of one
implementation (as scripts/ab_compare.py, whose problem key this shares). Every number comes from the reports.
Exit 2 when a report has no row that counts or --base names no candidate of a problem."""
import argparse
import math
import sys

import mok_report
from ab_compare import label, problem_of, short, varying
from mok_report import num


def rows_of(path):
    """{(problem, impl, params): row} of one report's rows that count, in the report's order (dicts keep it)"""
    out = {}
    for r in mok_report.read_all([path], "order_compare.py"):
        if mok_report.counts(r):
            out.setdefault((problem_of(r), r["impl"], r["params"]), r)
    return out


def geomean(values):
    vs = [v for v in values if not math.isnan(v) and v > 0]
    return math.exp(sum(math.log(v) for v in vs) / len(vs)) if vs else math.nan


def has_params(params, want):
    """whether the candidate's params include every NAME=VALUE of want"""
    have = set(params.split(","))
    return all(kv in have for kv in want)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", help="the runs' reports (.csv or .json), one per order")
    ap.add_argument("--base", default="", help="NAME=VALUE,... the base candidate's params (default: each "
                    "problem's first candidate in the first report)")
    ap.add_argument("--columns", default="", help="COL,... other per-row times to compare (e.g. gemm2_us)")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    a = ap.parse_args(argv)
    runs = []
    for p in a.reports:
        if mok_report.kind(p) == "summary":
            print(f"order_compare.py: {p}: a summary, not a report", file=sys.stderr)
            return 2
        rows = rows_of(p)  # a file that is no report ends the program with exit 2 (mok_report.read_all)
        if not rows:
            print(f"order_compare.py: {p}: no row that counts", file=sys.stderr)
            return 2
        runs.append(rows)
    want = [kv for kv in a.base.split(",") if kv]
    cols = ["time_med_us"] + [c for c in a.columns.split(",") if c]
    keys = list(dict.fromkeys(k for rows in runs for k in rows))  # first report's order, then the others' extra
    vary = varying(keys)
    groups = {}
    for k in keys:
        groups.setdefault((k[0], k[1]), []).append(k)
    sep = " | " if a.markdown else "  "
    line = (lambda cells: "| " + sep.join(cells) + " |") if a.markdown else (lambda cells: sep.join(cells))
    head = ["problem", "impl", "params", "ms per report", "geomean ms"] + [f"{c} / base" for c in cols]
    bases = {}
    for (prob, impl), ks in groups.items():  # every problem's base before any line is printed
        bases[(prob, impl)] = next((k for k in ks if has_params(k[2], want)), None) if want else ks[0]
        if bases[(prob, impl)] is None:
            print(f"order_compare.py: {label(prob)} {impl}: no candidate has {a.base}", file=sys.stderr)
            return 2
    print(line(head))
    if a.markdown:
        print("|" + "---|" * len(head))
    for (prob, impl), ks in groups.items():
        base = bases[(prob, impl)]
        mean = {k: [geomean(num(rows.get(k), c) for rows in runs) for c in cols] for k in ks}
        for k in ks:
            per = [f"{num(rows[k], 'time_med_us') / 1000:.3f}" if k in rows else "-" for rows in runs]
            cells = [label(prob), impl, short(k[2], vary[impl]) + (" (base)" if k == base else ""),
                     " / ".join(per), f"{mean[k][0] / 1000:.3f}"]
            cells += [f"{mok_report.ratio(mean[k][i], mean[base][i]):.3f}" for i in range(len(cols))]
            if any(k not in rows for rows in runs):
                cells[3] += " (not in every report)"
            print(line(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
