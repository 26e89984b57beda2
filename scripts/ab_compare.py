#!/usr/bin/env python3
"""ab_compare.py --old REPORT [...] --new REPORT [...]: an A/B of two binaries run on one config (scripts/device/ab.sh
alternates them, one report per binary per rep). Per candidate (the problem's fields, the implementation, its
params) it prints the median over each side's reports of the row's median time and new / old; then, per problem and
implementation, each side's best candidate and their ratio. Only rows whose check passed (or did not run) count, a
run's rows once however many of its files are given (report, .json, journal); a candidate measured on one side only is
marked so. Params show only the names whose values differ between candidates of one implementation. Every number
comes from the reports; --markdown prints tables."""
import argparse
import statistics
import sys

import mok_report
from mok_report import num, ratio
from report_labels import routing_label

# the fields that make two rows the same problem (the `problem` index is the config's order, not the problem)
PROBLEM = ("mode", "model", "hidden", "intermediate", "experts", "topk", "shared_experts", "tokens_per_rank",
           "routing", "inputs", "dtype", "pass", "wgrad")


def problem_of(row):
    return tuple(row.get(k, "") for k in PROBLEM)


def label(prob):
    f = dict(zip(PROBLEM, prob))
    parts = [f["model"], f["tokens_per_rank"], routing_label(f), f["dtype"], f["pass"]]
    if f["wgrad"]:
        parts.append(f["wgrad"])
    return " ".join(p for p in parts if p)


def medians(paths):
    """{(problem, impl, params): [each run's median time, us]} of the rows that count. A run's row read twice (its
    .csv and .json, or its journal, passed beside the report) counts once: rows are one run's when their run_start,
    problem index, implementation and params agree (a row without run_start counts per file)."""
    out, seen = {}, set()
    summaries = [p for p in paths if mok_report.kind(p) == "summary"]
    for p in summaries:  # NAME.summary.csv beside its report (a directory's *.csv): its rows are the report's best
        print(f"ab_compare.py: {p}: a summary, not a report: skipped", file=sys.stderr)
    for r in mok_report.read_all([p for p in paths if p not in summaries], "ab_compare.py"):
        run = (r.get("run_start") or r["_file"], r.get("problem", ""), r["impl"], r["params"])
        if not mok_report.counts(r) or run in seen:
            continue
        seen.add(run)
        out.setdefault((problem_of(r), r["impl"], r["params"]), []).append(num(r, "time_med_us"))
    return out


def varying(keys):
    """{impl: the param names whose values differ among that implementation's candidates}"""
    seen = {}
    for _, impl, params in keys:
        for kv in params.split(","):
            name, _, value = kv.partition("=")
            seen.setdefault(impl, {}).setdefault(name, set()).add(value)
    return {impl: {n for n, vs in names.items() if len(vs) > 1} for impl, names in seen.items()}


def short(params, names):
    return ",".join(kv for kv in params.split(",") if kv.partition("=")[0] in names) or "(one set for all)"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", nargs="+", required=True, help="the old binary's reports (.csv or .json)")
    ap.add_argument("--new", nargs="+", required=True, help="the new binary's reports")
    ap.add_argument("--markdown", action="store_true", help="Markdown tables")
    a = ap.parse_args(argv)
    old, new = medians(a.old), medians(a.new)
    if not old or not new:
        print(f"ab_compare.py: no passed rows on the {'old' if not old else 'new'} side", file=sys.stderr)
        return 2
    sep = " | " if a.markdown else "  "
    row = (lambda cells: "| " + sep.join(cells) + " |") if a.markdown else (lambda cells: sep.join(cells))
    print(row(["problem", "impl", "params", "old us (reps)", "new us (reps)", "new / old"]))
    if a.markdown:
        print("|---|---|---|---|---|---|")
    keys = set(old) | set(new)
    vary = varying(keys)
    for key in sorted(keys, key=lambda k: (label(k[0]), k[1], k[2])):
        o, n = old.get(key), new.get(key)
        mo = statistics.median(o) if o else float("nan")
        mn = statistics.median(n) if n else float("nan")
        cells = [label(key[0]), key[1], short(key[2], vary[key[1]]), f"{mo:.1f} ({len(o)})" if o else "-",
                 f"{mn:.1f} ({len(n)})" if n else "-", f"{ratio(mn, mo):.3f}" if o and n else "one side only"]
        print(row(cells))
    print()
    print(row(["problem", "impl", "old best us", "new best us", "new / old"]))
    if a.markdown:
        print("|---|---|---|---|---|")
    best = {}
    for side, table in (("old", old), ("new", new)):
        for (prob, impl, _), times in table.items():
            b = best.setdefault((prob, impl), {})
            b[side] = min(b.get(side, float("inf")), statistics.median(times))
    for (prob, impl), b in sorted(best.items(), key=lambda kv: (label(kv[0][0]), kv[0][1])):
        o, n = b.get("old", float("nan")), b.get("new", float("nan"))
        print(row([label(prob), impl, f"{o:.1f}", f"{n:.1f}", f"{ratio(n, o):.3f}"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
