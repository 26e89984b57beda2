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
# without a GPU (CI) a real run is the environment's error: exit 2, and the output folder it made is gone again
if ! have_gpu; then
  "$BIN" -o "$SCRATCH/nogpu" "$SRC/configs/quick.json" > "$SCRATCH/nogpu.out" 2>&1
  [ $? -eq 2 ] && grep -q "GPUs visible" "$SCRATCH/nogpu.out" || fail "no GPU: not exit 2 with the reason"
  [ ! -e "$SCRATCH/nogpu" ] || fail "no GPU: the output folder stayed"
fi
# --tuned is read before anything runs: a malformed database or a directory fails the run (exit 2, nothing written)
printf '{not json' > "$SCRATCH/bad-db.json"
"$BIN" --dry-run -t "$SCRATCH/bad-db.json" -o "$SCRATCH/dbout" "$SRC/configs/quick.json" > "$SCRATCH/db.out" 2>&1
[ $? -eq 2 ] && grep -q -- "--tuned: .*bad-db.json: malformed JSON" "$SCRATCH/db.out" || fail "bad --tuned file accepted"
"$BIN" --dry-run -t "$SCRATCH" "$SRC/configs/quick.json" > "$SCRATCH/db.out" 2>&1
[ $? -eq 2 ] && grep -q "a directory" "$SCRATCH/db.out" || fail "--tuned directory accepted"
[ ! -e "$SCRATCH/dbout" ] || fail "a bad --tuned wrote output"
for f in "$SRC"/configs/*.json; do
  "$BIN" --dry-run "$f" > /dev/null || fail "shipped config $f does not validate"
done
# the README's parameter table is the binary's own (one table in src/impl/params.h)
"$BIN" --list-params > "$SCRATCH/params.md" || fail "--list-params exit $?"
sed -n '/<!-- params:begin -->/,/<!-- params:end -->/p' "$SRC/README.md" | sed '1d;$d' > "$SCRATCH/readme-params.md"
cmp -s "$SCRATCH/params.md" "$SCRATCH/readme-params.md" ||
  fail "README's parameter table differs from mok-bench --list-params (regenerate it between the params markers)"

# small things a user meets first
MOK_POWER=yes "$BIN" --help > /dev/null 2>&1 || fail "MOK_POWER=yes --help: exit $? (help samples nothing)"
"$BIN" -V | grep -Eq "CUDA targets sm_[0-9]+[a-z]?(, sm_[0-9]+[a-z]?)*\)$" ||
  fail "--version does not name each CUDA target in full: $("$BIN" -V)"
"$BIN" --dry-run "$SRC/configs" > "$SCRATCH/dir.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "is a directory" "$SCRATCH/dir.out" || fail "directory as config: exit $rc, $(cat "$SCRATCH/dir.out")"
"$BIN" --dry-run --only lsa "$SRC/configs/quick.json" > "$SCRATCH/only.out" 2>&1
grep -q "the config has: " "$SCRATCH/only.out" || fail "--only with an impl not in the config does not list the config's"

# output.dir: unwritable is refused before anything runs (exit 2, named); the plan names the report paths
touch "$SCRATCH/a-file"
"$BIN" --dry-run -o "$SCRATCH/a-file/out" "$SRC/configs/quick.json" > "$SCRATCH/unwritable.out" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "output.dir = \"$SCRATCH/a-file/out\"" "$SCRATCH/unwritable.out" ||
  fail "unwritable output.dir: exit $rc, $(cat "$SCRATCH/unwritable.out")"
"$BIN" "$SRC/configs/quick.json" -o "$SCRATCH/a-file/out" > "$SCRATCH/unwritable-run.out" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "unwritable output.dir in a real run: exit $rc, not 2 before any GPU work"
grep -q "^# output: $SCRATCH/dry (would be created, writable): reports $SCRATCH/dry/quick.csv" "$SCRATCH/dry.out" ||
  fail "dry-run does not name the output directory and report paths"

# a plan above any GPU's memory is warned about at a dry-run (1000 GiB per rank)
cat > "$SCRATCH/huge.json" <<JSON
{"model": {"hidden": 65536, "intermediate": 65536, "experts": 64, "topk": 8}, "tokens_per_rank": 8192,
 "impls": ["nccl"], "tune": {"nccl": {"gemm": ["grouped", "per_expert"], "gemm_streams": [1, 4]}}}
JSON
"$BIN" --dry-run "$SCRATCH/huge.json" > "$SCRATCH/huge.out" 2>&1 || fail "huge plan dry-run exit $?"
grep -q "^# WARNING: the plan needs .* GiB per rank, more than an H200's 141 GiB" "$SCRATCH/huge.out" ||
  fail "a plan above 141 GiB per rank gets no warning: $(grep peak "$SCRATCH/huge.out")"
# candidates rejected without a GPU are listed as such and counted apart (grouped with 4 streams)
grep -q "gemm=grouped,gemm_streams=4,mx_scheme=0 *not supported: gemm=grouped is one call per GEMM" \
  "$SCRATCH/huge.out" ||
  fail "dry-run does not show the unsupported candidate"
grep -q "^# candidates: 3 may run, 1 not supported" "$SCRATCH/huge.out" || fail "unsupported candidates not counted apart"
echo "cli_binary: all passed"
