#!/bin/sh
# test_scripts_device: scripts/device/node.sh, the GPU-node runner, without a GPU. Static: every config and test
# file a step names exists, every launch goes through $MPIRUN and $MPIRUN passes NCCL_NVLS_ENABLE=0, --list names
# every step. Run with stand-ins (nvidia-smi listing FAKE_GPUS GPUs, an mpirun that logs its arguments, a staged
# "binary" gzipped as stage.sh leaves it): NP defaults to the GPU count, one-rank steps stay one rank, NP= overrides,
# an unknown step fails the run (exit 1) after the others ran, reports are packed, no GPU exits 1.
set -u
SRC=$1; SCRATCH=$2
fail() { echo "FAIL: $*"; exit 1; }
command -v bash > /dev/null || { echo "SKIP: no bash"; exit 77; }
D="$SRC/scripts/device"
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH/fake" "$SCRATCH/dev/bin"

# every configs/*.json and tests/* file the device scripts name exists
for f in $(grep -ohE '(configs|tests)/[A-Za-z0-9_.-]+\.(json|sh)' "$D"/*.sh | sort -u); do
  [ -e "$SRC/$f" ] || fail "scripts/device names $f, which does not exist"
done
# launches: only through $MPIRUN, and $MPIRUN carries NCCL_NVLS_ENABLE=0
grep -q '^MPIRUN="mpirun .*-x NCCL_NVLS_ENABLE=0 ' "$D/env.sh" || fail "env.sh: MPIRUN without -x NCCL_NVLS_ENABLE=0"
grep -nE '(^|[ ;|&(])mpirun ' "$D"/*.sh | grep -vE '^[^:]*:[0-9]+: *#|MPIRUN="mpirun ' &&
  fail "an mpirun launch in scripts/device that bypasses \$MPIRUN"
# the step names in use before node.sh (h200x2.sh's), and the new ones
bash "$D/node.sh" --list > "$SCRATCH/list" || fail "--list"
for s in symmem small lsatest sanitize profile gemmtest layer gemm gemmcluster gemmbest commsmall libmok ncugemm \
  ncustalls inputs inputspower megaissue5 megaqwen3tune megaqwen4096 megasmall megaorder mega megareport megapower \
  megaownfirst megabreakdown megasanitize tunecheck tunemega graphsmall comm commbest commsmallbatch ab probe quick \
  deepseek qwen libs; do
  grep -q "^$s	" "$SCRATCH/list" || fail "--list lacks step $s"
done
# a step of several lines is described by the comment after its ";;" (ncu171's names the rows per expert)
grep -q "^ncu171	ncu at 171 rows" "$SCRATCH/list" || fail "--list lacks ncu171's description"

# stand-ins
cat > "$SCRATCH/fake/nvidia-smi" <<'EOF'
#!/bin/sh
i=0
while [ "$i" -lt "${FAKE_GPUS:-0}" ]; do echo "GPU $i: NVIDIA H200 (UUID: GPU-$i)"; i=$((i + 1)); done
EOF
cat > "$SCRATCH/fake/mpirun" <<'EOF'
#!/bin/sh
echo "NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-unset} $*" >> "$FAKE_LOG"
[ -z "${FAKE_SLEEP:-}" ] || sleep "$FAKE_SLEEP"
EOF
printf '#!/bin/sh\necho fake mok-bench "$@"\n' > "$SCRATCH/dev/bin/mok-bench"
chmod +x "$SCRATCH/fake"/* "$SCRATCH/dev/bin/mok-bench"
gzip "$SCRATCH/dev/bin/mok-bench"
echo 0123456789ab > "$SCRATCH/dev/commit"
export FAKE_LOG="$SCRATCH/mpirun.log" MOK_DEV="$SCRATCH/dev" PATH="$SCRATCH/fake:$PATH"
unset CUDA_VISIBLE_DEVICES NP STEPS

# two GPUs: -np 2 by default, gemm on one rank, an unknown step reported and the run's status 1
FAKE_GPUS=2 STEPS="probe gemm nosuchstep quick" bash "$D/node.sh" "$SCRATCH/out2" > "$SCRATCH/out2.log" 2>&1; rc=$?
[ $rc -eq 1 ] || { cat "$SCRATCH/out2.log"; fail "unknown step: exit $rc, not 1"; }
grep -q "no step 'nosuchstep'" "$SCRATCH/out2/log.txt" || fail "unknown step not named in log.txt"
grep -q "non-zero status: nosuchstep$" "$SCRATCH/out2/log.txt" || fail "the closing line does not name the failed step"
[ -x "$SCRATCH/dev/bin/mok-bench" ] || fail "the gzipped binary was not unpacked"
[ "$(wc -l < "$FAKE_LOG")" -eq 3 ] || { cat "$FAKE_LOG"; fail "not 3 launches (probe, gemm, quick)"; }
grep -c "NCCL_NVLS_ENABLE=0 .*-x NCCL_NVLS_ENABLE=0 " "$FAKE_LOG" | grep -qx 3 || { cat "$FAKE_LOG"; fail "a launch without NCCL_NVLS_ENABLE=0"; }
grep -q -- "-np 2 $SCRATCH/dev/bin/mok-bench --probe$" "$FAKE_LOG" || { cat "$FAKE_LOG"; fail "probe: not -np 2"; }
grep -q -- "-np 1 $SCRATCH/dev/bin/mok-bench --probe -o $SCRATCH/out2/reports configs/gemm-deepseek.json$" "$FAKE_LOG" ||
  { cat "$FAKE_LOG"; fail "gemm: not one rank with its config"; }
grep -q -- "-np 2 .*configs/quick.json$" "$FAKE_LOG" || fail "quick: not -np 2"
[ -s "$SCRATCH/out2/reports.tgz" ] && [ ! -e "$SCRATCH/out2/reports" ] || fail "reports not packed"
grep -q "commit 0123456789ab" "$SCRATCH/out2/log.txt" || fail "log.txt lacks the staged commit"

# NP=1 on the same node, reports left unpacked, OUT from the environment; status 0
rm -f "$FAKE_LOG"
FAKE_GPUS=2 NP=1 PACK=0 STEPS=quick OUT="$SCRATCH/out1" bash "$D/node.sh" > "$SCRATCH/out1.log" 2>&1 ||
  { cat "$SCRATCH/out1.log"; fail "NP=1 quick: exit $?"; }
grep -q -- "-np 1 .*configs/quick.json$" "$FAKE_LOG" || fail "NP=1: not -np 1"
[ -d "$SCRATCH/out1/reports" ] || fail "PACK=0: no reports directory"
# h200x2.sh is the same runner
rm -f "$FAKE_LOG"
FAKE_GPUS=2 STEPS=probe bash "$D/h200x2.sh" "$SCRATCH/outh" > /dev/null 2>&1 || fail "h200x2.sh: exit $?"
grep -q -- "-np 2 .*--probe$" "$FAKE_LOG" || fail "h200x2.sh: no probe on 2 ranks"

# no GPU: exit 1, said so, nothing launched
rm -f "$FAKE_LOG"
FAKE_GPUS=0 STEPS=quick bash "$D/node.sh" "$SCRATCH/out0" > "$SCRATCH/out0.log" 2>&1 && fail "no GPU: exit 0"
grep -q "no GPU here" "$SCRATCH/out0.log" || { cat "$SCRATCH/out0.log"; fail "no GPU: no message"; }
[ ! -e "$FAKE_LOG" ] || fail "no GPU: launched anyway"
# batch.sh: parts under their own limits, each folder one tarball; a part cut by its limit keeps its reports; a
# malformed part is refused and named, the others still run
rm -f "$FAKE_LOG"
FAKE_GPUS=1 bash "$D/batch.sh" "$SCRATCH/batch" "a:60:probe quick" "bad part" "b:3:quick" > "$SCRATCH/batch.log" 2>&1 &&
  fail "batch.sh: exit 0 with a malformed part"
grep -q "part 'bad part' is not label:seconds:steps" "$SCRATCH/batch.log" ||
  { cat "$SCRATCH/batch.log"; fail "batch.sh: the malformed part not named"; }
[ "$(wc -l < "$FAKE_LOG")" -eq 3 ] || { cat "$FAKE_LOG"; fail "batch.sh: not 3 launches (a: probe, quick; b: quick)"; }
for l in a b; do
  [ -s "$SCRATCH/batch/$l.tgz" ] && [ ! -e "$SCRATCH/batch/$l" ] || fail "batch.sh: part $l not packed into $l.tgz"
  tar -tzf "$SCRATCH/batch/$l.tgz" | grep -qx "$l/reports.tgz" || fail "batch.sh: $l.tgz lacks its reports.tgz"
  tar -tzf "$SCRATCH/batch/$l.tgz" | grep -qx "$l/console.txt" || fail "batch.sh: $l.tgz lacks its console"
done
rm -f "$FAKE_LOG"
FAKE_GPUS=1 FAKE_SLEEP=30 bash "$D/batch.sh" "$SCRATCH/batchcut" "c:3:quick" > "$SCRATCH/batchcut.log" 2>&1 &&
  fail "batch.sh: exit 0 for a part cut by its limit"
grep -q "part c cut at its 3 s" "$SCRATCH/batchcut.log" ||
  { cat "$SCRATCH/batchcut.log"; fail "batch.sh: the cut not said"; }
tar -tzf "$SCRATCH/batchcut/c.tgz" | grep -qx "c/reports.tgz" || fail "batch.sh: a cut part's reports not packed"
echo "test_scripts_device: all passed"
