#!/usr/bin/env python3
"""tune_check: measures what the autotuner promises, on the machine at hand (issue 6's figures).

For one implementation of a config, three runs of mok-bench in a row:
  A. exhaustive: every candidate of the tune space (the ground truth);
  B. budgeted: the chosen strategy with max_measurements = a fraction of the space, writing a tuning database;
  C. the same config with --tuned on that database: known problems run their stored best, no search.
Then per problem: B's best within TOL of A's best, B measured <= the fraction of A's candidates, C ran one
candidate per problem (from the database) and its time is within TOL of B's best. Prints a table, writes
tune-check.json next to the three reports, exits 1 if any problem misses.

  scripts/tune_check.py --mpirun "mpirun -np 2 --allow-run-as-root -x NCCL_NVLS_ENABLE=0" \\
      --bin build/mok-bench --config configs/deepseek-v3.json --impl nccl-overlap --out results/local/tune
"""
import argparse
import json
import math
import os
import shlex
import subprocess
import sys

import mok_report

MEASURED = ("passed", "incorrect", "not_verified", "failed")  # rows that cost a launch; not_supported does not


def run(cmd, log):
    print("+ " + " ".join(shlex.quote(c) for c in cmd), flush=True)
    with open(log, "w") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT)
    if rc != 0:
        sys.exit(f"tune_check: exit {rc} from the run above; its output is in {log}")


def report_rows(out_dir):
    csvs = [f for f in os.listdir(out_dir) if f.endswith(".csv") and not f.endswith(".journal.csv")]
    if len(csvs) != 1:
        sys.exit(f"tune_check: expected one report in {out_dir}, found {csvs}")
    return mok_report.read_all([os.path.join(out_dir, csvs[0])], "tune_check",
                               ("problem", "model", "tokens_per_rank", "routing", "impl", "params", "disposition",
                                "time_med_us", "note"))


def by_problem(rows, impl):
    """problem index -> (candidates measured, best passed time in us, its params, notes of measured rows)."""
    out = {}
    for r in rows:
        if r["impl"] != impl:
            continue
        p = out.setdefault(int(r["problem"]), {"measured": 0, "best": math.inf, "params": None, "notes": [],
                                               "label": f'{r["model"]} T={r["tokens_per_rank"]} {r["routing"]}'})
        if r["disposition"] in MEASURED:
            p["measured"] += 1
            p["notes"].append(r["note"])
        if r["disposition"] == "passed" and r["time_med_us"] and float(r["time_med_us"]) < p["best"]:
            p["best"], p["params"] = float(r["time_med_us"]), r["params"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpirun", required=True, help="launcher prefix, e.g. 'mpirun -np 2 -x NCCL_NVLS_ENABLE=0'")
    ap.add_argument("--bin", required=True, help="the mok-bench binary")
    ap.add_argument("--config", required=True)
    ap.add_argument("--impl", required=True, help="the implementation whose tune space is searched")
    ap.add_argument("--out", required=True, help="directory for the three reports and tune-check.json (new)")
    ap.add_argument("--strategy", default="coordinate", choices=["coordinate", "halving"])
    ap.add_argument("--fraction", type=float, default=1 / 3, help="measurement budget over the space (default 1/3)")
    ap.add_argument("--tol", type=float, default=0.03, help="allowed excess over the best (default 0.03)")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if os.path.exists(args.out):
        sys.exit(f"tune_check: --out {args.out} exists; give a new directory (nothing is overwritten)")
    os.makedirs(args.out)
    with open(args.config) as f:
        base = json.load(f)
    if args.impl not in (base["impls"] if isinstance(base["impls"], list) else [base["impls"]]):
        sys.exit(f"tune_check: --impl {args.impl} is not in the config's impls {base['impls']}")
    base["impls"] = [args.impl]
    if isinstance(base.get("tune"), dict):  # mok-bench refuses tune entries of implementations not in impls
        base["tune"] = {k: v for k, v in base["tune"].items() if k == args.impl}
    base.pop("search", None)
    launcher = shlex.split(args.mpirun)

    def config_for(name, search):
        cfg = json.loads(json.dumps(base))
        cfg["output"] = {"dir": os.path.join(args.out, name), "name": name}
        if search:
            cfg["search"] = search
        path = os.path.join(args.out, name + ".json")
        with open(path, "w") as f:
            json.dump(cfg, f, indent=2)
        return path

    a_cfg = config_for("exhaustive", {"strategy": "exhaustive"})
    run(launcher + [args.bin, a_cfg], os.path.join(args.out, "exhaustive.log"))
    a = by_problem(report_rows(os.path.join(args.out, "exhaustive")), args.impl)
    space = max(p["measured"] for p in a.values())
    budget = max(1, int(space * args.fraction))
    search = {"strategy": args.strategy, "max_measurements": budget, "seed": args.seed}
    db = os.path.join(args.out, "tuned.json")
    b_cfg = config_for("budgeted", search)
    run(launcher + [args.bin, "--tuned", db, b_cfg], os.path.join(args.out, "budgeted.log"))
    b = by_problem(report_rows(os.path.join(args.out, "budgeted")), args.impl)
    c_cfg = config_for("reuse", search)
    run(launcher + [args.bin, "--tuned", db, c_cfg], os.path.join(args.out, "reuse.log"))
    c = by_problem(report_rows(os.path.join(args.out, "reuse")), args.impl)

    results, ok_all = [], True
    print(f"\n{args.impl}: space {space} candidates, budget {budget} ({args.strategy}), tolerance {args.tol:.0%}")
    print(f"{'problem':<40} {'exhaustive':>11} {'budgeted':>11} {'gap':>7} {'meas':>9} {'tuned':>11} {'gap':>7}  ok")
    for k in sorted(a):
        pa, pb, pc = a[k], b.get(k), c.get(k)
        if pb is None or pc is None or not math.isfinite(pa["best"]):
            ok_all = False
            print(f"{pa['label']:<40} missing from a run or no passed candidate")
            continue
        gap_b = pb["best"] / pa["best"] - 1
        gap_c = pc["best"] / pb["best"] - 1 if math.isfinite(pb["best"]) else math.inf
        from_db = pc["measured"] == 1 and all("tuned" in n for n in pc["notes"])
        ok = gap_b <= args.tol and pb["measured"] <= budget and from_db and abs(gap_c) <= args.tol
        ok_all &= ok
        print(f"{pa['label']:<40} {pa['best']:>11.1f} {pb['best']:>11.1f} {gap_b:>+7.1%} "
              f"{pb['measured']:>4}/{pa['measured']:<4} {pc['best']:>11.1f} {gap_c:>+7.1%}  {'yes' if ok else 'NO'}")
        results.append({"problem": k, "label": pa["label"], "exhaustive_us": pa["best"], "exhaustive_params":
                        pa["params"], "exhaustive_measured": pa["measured"], "budgeted_us": pb["best"],
                        "budgeted_params": pb["params"], "budgeted_measured": pb["measured"], "tuned_us": pc["best"],
                        "tuned_from_db": from_db, "budgeted_gap": gap_b, "tuned_gap": gap_c, "ok": ok})
    with open(os.path.join(args.out, "tune-check.json"), "w") as f:
        json.dump({"impl": args.impl, "config": args.config, "strategy": args.strategy, "space": space,
                   "budget": budget, "tol": args.tol, "problems": results, "ok": ok_all}, f, indent=2)
    print("tune_check: " + ("all problems within tolerance" if ok_all else "SOME PROBLEMS MISSED"))
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
