#!/bin/bash
# node.sh [OUTDIR]: runs named steps on a GPU node that has the repository tree and the staged binaries
# (scripts/device/stage.sh) but no build tools: environment facts first, then each step of STEPS in order, every
# report and log under OUTDIR (default $OUT, else ./node-out), packed into OUTDIR/reports.tgz at the end.
#   STEPS="symmem small quick"  the steps, by name (default below; node.sh --list names them all: steps.sh)
#   NP=N                        ranks of the multi-rank steps (default: the node's GPUs, one rank each)
#   CLOCKS=1                    sample every GPU's SM clock, power and temperature every 200 ms into clocks.csv
#   PACK=0                      leave the reports as files instead of one tarball
#   MOK_DEV=DIR                 the staged binaries and libraries (default .dev)
# Exit status: 0 when every step's status was 0; 1 otherwise (the log says which) or without a GPU.
set -u
cd "$(dirname "$0")/../.." || exit 1
. scripts/device/steps.sh
if [ "${1:-}" = --list ]; then
  # a step's comment follows its name, or the ";;" that ends a step of several lines
  awk 'function show() { if (name != "") print name "\t" text }
    /^    [a-z0-9]+\)/ { show(); name = substr($1, 1, length($1) - 1); text = "" }
    name != "" && text == "" && (c = index($0, " # ")) { text = substr($0, c + 3) }
    END { show() }' scripts/device/steps.sh
  exit 0
fi
OUT=${1:-${OUT:-node-out}}
R=$OUT/reports
export OUT R # for the step scripts run as their own processes (ncu_*.sh)
mkdir -p "$R" || exit 1
LOG=$OUT/log.txt
exec > >(tee "$LOG") 2>&1
TEE_PID=$!
# whoever reads the output or the log after the script returns sees all of it: close our end, wait for tee
trap 'exec >&- 2>&-; wait "$TEE_PID" 2> /dev/null' EXIT
. scripts/device/env.sh
echo "== $(date -u) commit $(tr '\n' ' ' < "$DEV/commit" 2> /dev/null || echo '(no $DEV/commit: not staged?)')"
gpus() {
  if [ -n "${CUDA_VISIBLE_DEVICES+set}" ]; then
    echo "$CUDA_VISIBLE_DEVICES" | tr ',' '\n' | grep -c '[^[:space:]]'
  else
    nvidia-smi -L 2> /dev/null | grep -c '^GPU [0-9]'
  fi
}
NGPU=$(gpus)
export NP=${NP:-$NGPU}
if [ "$NGPU" -lt 1 ]; then
  echo "node.sh: no GPU here (nvidia-smi -L lists none, or CUDA_VISIBLE_DEVICES names none)"
  exit 1
fi
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.draw --format=csv
nvidia-smi topo -m | head -n $((NGPU + 1))
echo "GPUs: $NGPU, ranks of the multi-rank steps: $NP; NCCL: ${NCCL_LIB:-system default}"
ldd "$DEV/bin/mok-bench" 2>&1 | grep -E "not found|nccl|cjson|mpi|cublas|cudart"
STEPS=${STEPS:-"symmem small quick deepseek qwen"}
CLOCK_PID=
if [ "${CLOCKS:-0}" = 1 ]; then # read-only queries: nothing here sets clocks or limits
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 200 > "$R/clocks.csv" 2>&1 &
  CLOCK_PID=$!
fi
failed=""
for step in $STEPS; do
  echo "== step $step $(date -u +%T)"
  mok_step "$step"
  rc=$?
  echo "== step $step rc=$rc"
  [ $rc -eq 0 ] || failed="$failed $step"
done
[ -n "$CLOCK_PID" ] && kill "$CLOCK_PID" 2> /dev/null
if [ "${PACK:-1}" = 1 ]; then # one file instead of many: what comes back from a node may be limited in count
  tar -C "$OUT" -czf "$OUT/reports.tgz" reports && rm -rf "$R"
fi
echo "== done $(date -u +%T)${failed:+; steps with a non-zero status:$failed}"
[ -z "$failed" ]
