#!/bin/sh
# cli_binary: the real binary's help, version, exit codes, dry-run, and that bad input writes nothing.
set -u
BIN=$1; SRC=$2; SCRATCH=$3
. "$SRC/tests/common.sh"
# Under AddressSanitizer the binary runs with the leak checker on and test.sh's suppressions (Open MPI, NCCL
# and the CUDA runtime keep allocations until exit): a leak of our own code fails this test.
export LSAN_OPTIONS="suppressions=$SRC/tests/lsan.supp:fast_unwind_on_malloc=0"
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"

"$BIN" --help > "$SCRATCH/help.txt" || fail "--help exit $?"
for flag in "-h, --help" "-V, --version" "-d, --dry-run" "-o, --output DIR" "--only IMPL[,IMPL]" \
            "-w, --warmup N" "-n, --iters N" "--no-check" "--probe" "-t, --tuned FILE" "-r, --resume"; do
  grep -qF -- "$flag" "$SCRATCH/help.txt" || fail "--help lacks '$flag'"
  grep -qF -- "$flag" "$SRC/README.md" || fail "README's flag table lacks '$flag'"
done
"$BIN" -V | grep -q "^mok-bench [0-9]" || fail "--version output"

"$BIN" > /dev/null 2>&1; [ $? -eq 2 ] || fail "no config: exit code not 2"
MOK_POWER=yes "$BIN" --dry-run "$SRC/configs/quick.json" > "$SCRATCH/env.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q 'MOK_POWER = "yes"' "$SCRATCH/env.out" || fail "MOK_POWER=yes: exit $rc, not 2 with a message"
"$BIN" --bogus x.json > /dev/null 2>&1; [ $? -eq 2 ] || fail "unknown flag: exit code not 2"

# bad configs: exit 2, the message names path and value, and no report is created
cat > "$SCRATCH/bad.json" <<JSON
{"model": {"hidden": 7000, "intermediate": 2048, "experts": 8, "topk": 9},
 "tokens_per_rank": [128, -1], "output": {"dir": "$SCRATCH/out", "name": "bad"}}
JSON
"$BIN" "$SCRATCH/bad.json" > "$SCRATCH/bad.out" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "bad config: exit $rc, not 2"
grep -q "model.hidden = 7000" "$SCRATCH/bad.out" || fail "bad config: no model.hidden message"
grep -q "model.topk = 9" "$SCRATCH/bad.out" || fail "bad config: no model.topk message (all errors listed)"
grep -q "tokens_per_rank\[1\] = -1" "$SCRATCH/bad.out" || fail "bad config: no tokens message"
[ ! -e "$SCRATCH/out" ] || fail "bad config created the output directory"
"$BIN" "$SCRATCH/missing.json" > "$SCRATCH/missing.out" 2>&1; [ $? -eq 2 ] || fail "missing file: exit not 2"
grep -q "missing.json: cannot read" "$SCRATCH/missing.out" || fail "missing file message"
printf '{"model": {"hidden": 64,\n  "intermediate": 64 "experts": 2}}' > "$SCRATCH/malformed.json"
"$BIN" "$SCRATCH/malformed.json" > "$SCRATCH/malformed.out" 2>&1; [ $? -eq 2 ] || fail "malformed: exit not 2"
grep -q "malformed.json:2:" "$SCRATCH/malformed.out" || fail "malformed JSON: no line number"

# dry run: no GPU needed, prints the plan, writes nothing
"$BIN" --dry-run -o "$SCRATCH/dry" "$SRC/configs/quick.json" > "$SCRATCH/dry.out" 2>&1 || fail "dry-run exit $?"
grep -q "^# plan:" "$SCRATCH/dry.out" || fail "dry-run: no plan"
grep -q "peak device memory per rank" "$SCRATCH/dry.out" || fail "dry-run: no memory"
[ ! -e "$SCRATCH/dry" ] || fail "dry-run wrote output"
"$BIN" --dry-run --only nccl "$SRC/configs/quick.json" | grep -q "nccl-overlap" && fail "--only not applied"
for f in "$SRC"/configs/*.json; do
  "$BIN" --dry-run "$f" > /dev/null || fail "shipped config $f does not validate"
done
echo "cli_binary: all passed"
