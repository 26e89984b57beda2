#!/bin/sh
# tune_check: scripts/tune_check.py's bookkeeping (budget, gaps, reuse from the database, verdict and exit code)
# against a stand-in for mok-bench (tests/data/fake_mok_bench.py), so it runs without a GPU.
set -u
SRC=$1; SCRATCH=$2
. "$SRC/tests/common.sh"
command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 77; }
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
cat > "$SCRATCH/config.json" <<'JSON'
{"impls": ["lsa", "nccl"], "tune": {"nccl": {"gemm": ["per_expert"]}}}
JSON
FAKE="$SRC/tests/data/fake_mok_bench.py"
python3 "$SRC/scripts/tune_check.py" --mpirun python3 --bin "$FAKE" --config "$SCRATCH/config.json" --impl lsa \
  --out "$SCRATCH/ok" > "$SCRATCH/ok.log" 2>&1 || { cat "$SCRATCH/ok.log"; fail "tune_check failed on a good tuner"; }
grep -q "all problems within tolerance" "$SCRATCH/ok.log" || fail "no verdict line"
python3 - "$SCRATCH/ok/tune-check.json" <<'PY' || fail "tune-check.json content"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ok"] and r["space"] == 9 and r["budget"] == 3, r
for p in r["problems"]:
    assert p["budgeted_gap"] == 0 and p["tuned_from_db"] and p["budgeted_measured"] == 3, p
PY
# a search over its budget must be reported: fraction 0.12 of 9 gives a budget of 1, the stand-in measures 3
python3 "$SRC/scripts/tune_check.py" --mpirun python3 --bin "$FAKE" --config "$SCRATCH/config.json" --impl lsa \
  --out "$SCRATCH/bad" --fraction 0.12 > "$SCRATCH/bad.log" 2>&1 && fail "tune_check passed a search over its budget"
grep -q "SOME PROBLEMS MISSED" "$SCRATCH/bad.log" || { cat "$SCRATCH/bad.log"; fail "no miss reported"; }
python3 "$SRC/scripts/tune_check.py" --mpirun python3 --bin "$FAKE" --config "$SCRATCH/config.json" --impl lsa \
  --out "$SCRATCH/ok" > /dev/null 2>&1 && fail "tune_check overwrote an existing --out"
echo "tune_check: all passed"
