"""test_scripts_mok_report: scripts/mok_report.py on v1 reports (tests/data/sample-report.csv: layer and comm
problems; tests/data/sample-report.json: layer; the JSON gzipped) and on v2 reports made from them by the contract's renames (speedup_vs_nccl -> speedup + speedup_baseline,
power_capped -> power_capped_share, the new columns appended): the same rows under the v2 names either way, modes
told apart, the environment filled into JSON rows, bad files refused naming the file, and --kind.
  python3 tests/test_scripts_mok_report.py SRC SCRATCH"""
import csv
import gzip
import json
import math
import os
import shutil
import sys

SRC, SCRATCH = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "scripts"))
import mok_report  # noqa: E402

DATA = os.path.join(SRC, "tests", "data")
failures = []


def check(what, cond):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def v2_csv(src, dst, baseline):
    """The v1 CSV rewritten as v2: renamed columns, speedup_baseline and the new columns at the end."""
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    head = [{"speedup_vs_nccl": "speedup", "power_capped": "power_capped_share"}.get(c, c) for c in rows[0]]
    head += ["speedup_baseline", "exposed_comm_us", "mode", "capacity_factor", "warmup", "warmup_ms", "seed",
             "run_start"]
    with open(dst, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(head)
        for r in rows:
            vals = list(r.values())
            w.writerow(vals + [baseline if r["speedup_vs_nccl"] else "", "12.5", "layer", "2", "5", "", "1",
                               "2026-12-01T21:30:00Z"])


shutil.rmtree(SCRATCH, ignore_errors=True)
os.makedirs(SCRATCH)
v1_csv, v1_json = os.path.join(DATA, "sample-report.csv"), os.path.join(DATA, "sample-report.json")
gz = os.path.join(SCRATCH, "sample-report.json.gz")
with open(v1_json, "rb") as f, gzip.open(gz, "wb") as g:
    g.write(f.read())

a, b, c = mok_report.read(v1_csv), mok_report.read(v1_json), mok_report.read(gz)
check("v1 csv and json: rows", len(a) > 0 and len(b) > 0)
check("json.gz reads as the json", [r["time_med_us"] for r in b] == [r["time_med_us"] for r in c])
for name, rows, modes in (("csv", a, {"layer", "comm"}), ("json", b, {"layer"})):
    check(f"v1 {name}: speedup_vs_nccl renamed", all("speedup" in r and "speedup_vs_nccl" not in r for r in rows))
    check(f"v1 {name}: new columns read empty", all(r["exposed_comm_us"] == "" and r["run_start"] == "" for r in rows))
    got = {r["mode"] for r in rows}
    check(f"v1 {name}: modes {got}", got == modes)
    base = {(r["mode"], r["speedup_baseline"]) for r in rows if r["speedup"]}
    want = {(m, mok_report.BASELINE_V1[m]) for m in modes}
    check(f"v1 {name}: speedup_baseline per mode ({base})", base == want)
    check(f"v1 {name}: no baseline where no speedup", all(r["speedup_baseline"] == "" for r in rows if not r["speedup"]))
    check(f"v1 {name}: gpu and ranks in every row", all(r["gpu"] and r["ranks"] for r in rows))
check("json ints read without a decimal point", all(r["tokens_per_rank"].isdigit() for r in b))

# v1 power_capped -> power_capped_share (the sample predates the column: appended here)
lines = open(v1_csv).read().splitlines()
with open(os.path.join(SCRATCH, "power.csv"), "w") as f:
    f.write("\n".join([lines[0] + ",power_capped"] + [ln + ",0.25" for ln in lines[1:]]) + "\n")
m = mok_report.read(os.path.join(SCRATCH, "power.csv"))
check("v1 power_capped renamed", all(r["power_capped_share"] == "0.25" and "power_capped" not in r for r in m))

# v2 CSV: detected by its speedup column, values taken as they are
v2 = os.path.join(SCRATCH, "v2.csv")
v2_csv(v1_csv, v2, "nccl-overlap")
d = mok_report.read(v2)
check("v2 csv: rows", len(d) == len(a))
check("v2 csv: speedup_baseline as written", {r["speedup_baseline"] for r in d if r["speedup"]} == {"nccl-overlap"})
check("v2 csv: mode as written", {r["mode"] for r in d} == {"layer"})
check("v2 csv: exposed_comm_us", all(r["exposed_comm_us"] == "12.5" for r in d))

# v2 JSON: schema_version 2, rows under the v2 names
with open(v1_json) as f:
    doc = json.load(f)
doc["schema_version"] = 2
for r in doc["rows"]:
    r["speedup"] = r.pop("speedup_vs_nccl")
    r["speedup_baseline"] = "nccl" if r["speedup"] is not None else ""
    r["mode"], r["seed"], r["note"] = "layer", 7, None
with open(os.path.join(SCRATCH, "v2.json"), "w") as f:
    json.dump(doc, f)
e = mok_report.read(os.path.join(SCRATCH, "v2.json"))
check("v2 json: seed and mode as written", all(r["seed"] == "7" and r["mode"] == "layer" for r in e))
check("v2 json: null reads ''", all(r["note"] == "" for r in e))
check("v2 json: speedup", [r["speedup"] for r in e] == [r["speedup"] for r in b])

# refusals name the file
doc["schema_version"] = max(mok_report.SCHEMAS) + 1  # a newer schema than the reader knows
bad = {"newer.json": json.dumps(doc), "empty.csv": "", "header.csv": open(v1_csv).readline(),
       "cols.csv": "a,b\n1,2\n", "syntax.json": "{", "notreport.json": '{"impls": ["nccl"]}'}
for name, text in bad.items():
    path = os.path.join(SCRATCH, name)
    with open(path, "w") as f:
        f.write(text)
    try:
        mok_report.read(path)
        check(f"{name} refused", False)
    except mok_report.BadReport as err:
        check(f"{name}: the message names the file ({err})", str(err).startswith(path))
try:
    mok_report.read(os.path.join(SCRATCH, "missing.csv"))
    check("missing file refused", False)
except mok_report.BadReport as err:
    check("missing file: named", "missing.csv" in str(err))

check("ratio by zero is NaN", math.isnan(mok_report.ratio(1.0, 0.0)))
# a summary CSV (NAME.summary.csv, src/summary.c's columns) is its own kind, not a report
with open(os.path.join(SCRATCH, "s.summary.csv"), "w") as f:
    f.write("problem,model,tokens_per_rank,routing,inputs,dtype,pass,mode,impl,params,time_med_us,"
            "speedup_vs_baseline,speedup_baseline,tokens_per_s_per_gpu,ms_per_layer,moe_layers,ms_per_step,j_per_step\n"
            "0,m,128,uniform,uniform,bf16,fwd,layer,nccl,-,10.0,1.0,nccl,1,0.01,1,0.01,\n")
kinds = {n: mok_report.kind(os.path.join(SCRATCH, n))
         for n in ("v2.csv", "v2.json", "notreport.json", "cols.csv", "s.summary.csv")}
kinds["gz"] = mok_report.kind(gz)
check(f"kind ({kinds})", kinds == {"v2.csv": "report", "v2.json": "report", "notreport.json": "config",
                                   "cols.csv": "unknown", "s.summary.csv": "summary", "gz": "report"})
print("test_scripts_mok_report: " + ("all passed" if not failures else f"{len(failures)} failed"))
sys.exit(1 if failures else 0)
