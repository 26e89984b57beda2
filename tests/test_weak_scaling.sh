#!/bin/sh
# weak_scaling: scripts/weak_scaling.py on three small reports (2, 4, 8 ranks): best passed candidate per
# implementation and rank count, efficiency T(2)/T(N), failures ignored, a bad report refused.
set -u
SRC=$1; SCRATCH=$2
. "$SRC/tests/common.sh"
command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 77; }
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
h="model,tokens_per_rank,routing,impl,params,disposition,time_med_us,ranks"
printf '%s\nds,4096,uniform,nccl,a,passed,10000,2\nds,4096,uniform,nccl,b,passed,9000,2\nds,4096,uniform,megakernel,x,passed,6000,2\n' "$h" > "$SCRATCH/r2.csv"
printf '%s\nds,4096,uniform,nccl,a,passed,10000,4\nds,4096,uniform,megakernel,x,passed,6400,4\nds,4096,uniform,megakernel,y,incorrect,1,4\n' "$h" > "$SCRATCH/r4.csv"
printf '%s\nds,4096,uniform,nccl,a,passed,12000,8\nds,4096,uniform,megakernel,x,passed,6000,8\n' "$h" > "$SCRATCH/r8.csv"
out=$(python3 "$SRC/scripts/weak_scaling.py" "$SCRATCH/r2.csv" "$SCRATCH/r4.csv" "$SCRATCH/r8.csv") || fail "exit $?"
echo "$out"
echo "$out" | grep -q "| ds | 4096 | uniform | megakernel | 6.00 | 6.40 | 6.00 | 0.94 | 1.00 |" || fail "megakernel row"
echo "$out" | grep -q "| ds | 4096 | uniform | nccl | 9.00 | 10.00 | 12.00 | 0.90 | 0.75 |" || fail "nccl row (best of two)"
printf 'a,b\n1,2\n' > "$SCRATCH/bad.csv"
python3 "$SRC/scripts/weak_scaling.py" "$SCRATCH/bad.csv" > /dev/null 2>&1 && fail "a non-report was accepted"
echo "weak_scaling: all passed"
