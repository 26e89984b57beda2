#!/bin/sh
# mpi: two ranks on the CPU read, broadcast and check the same config and agree on the plan.
set -u
BIN=$1; SRC=$2
. "$SRC/tests/common.sh"
command -v mpirun > /dev/null || fail "mpirun not found"
out=$($MPIRUN -np 2 "$BIN" --dry-run "$SRC/configs/quick.json" 2>&1); rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "mpirun dry-run exit $rc"
echo "$out" | grep -q "identical across 2 ranks" || fail "ranks did not agree"
echo "$out" | grep -q "2 ranks" || fail "plan not for 2 ranks"
# the training pass of every layer implementation at 2 ranks (issue 23's config): the ranks agree on the plan, and
# every implementation keeps candidates
out=$($MPIRUN -np 2 "$BIN" --dry-run "$SRC/configs/h200x2-bwd-layer.json" 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "$out"; fail "2-rank training-pass dry-run exit $rc"; }
echo "$out" | grep -q "identical across 2 ranks" || { echo "$out"; fail "2 ranks did not agree on the training pass"; }
for impl in nccl nccl-overlap lsa-layer megakernel; do
  echo "$out" | grep -E "^  $impl +" | grep -qv "not supported" || { echo "$out"; fail "$impl: no candidate at 2 ranks"; }
done
# issue 23's FP8 config at 2 ranks: the ranks agree, and the NCCL baselines, lsa-layer and the megakernel keep FP8
# candidates (fp8_block and mxfp8 rows that are not refused)
out=$($MPIRUN -np 2 "$BIN" --dry-run "$SRC/configs/h200x2-fp8-layer.json" 2>&1); rc=$?
[ $rc -eq 0 ] || { echo "$out"; fail "2-rank FP8 dry-run exit $rc"; }
echo "$out" | grep -q "identical across 2 ranks" || { echo "$out"; fail "2 ranks did not agree on the FP8 plan"; }
for impl in nccl lsa-layer megakernel; do
  for d in fp8_block mxfp8; do
    echo "$out" | awk -v d="$d" -v i="$impl" '/^problem/ { p = ($0 ~ " " d " fwd") } p && $1 == i && !/not supported/' |
      grep -q . || { echo "$out"; fail "$d: no $impl candidate at 2 ranks"; }
  done
done
# the scale-out shapes (issue 7): 4 and 8 ranks read and broadcast the same config and agree on the plan
for n in 4 8; do
  out=$($MPIRUN -np $n "$BIN" --dry-run "$SRC/configs/deepseek-v3.json" 2>&1); rc=$?
  [ $rc -eq 0 ] || { echo "$out"; fail "$n-rank dry-run exit $rc"; }
  echo "$out" | grep -q "identical across $n ranks" || { echo "$out"; fail "$n ranks did not agree"; }
done
# experts not divisible by 3 ranks: all ranks stop with exit 2 and the message names the field
tmp=$(mktemp -d)
printf '{"model": {"hidden": 64, "intermediate": 64, "experts": 4, "topk": 2}, "tokens_per_rank": 16}' > "$tmp/c.json"
$MPIRUN -np 3 "$BIN" --dry-run "$tmp/c.json" > "$tmp/out" 2>&1; rc=$?
cat "$tmp/out"
[ $rc -eq 2 ] || fail "experts % ranks: exit $rc, not 2"
# every rank parsed the same bytes: the error is printed once (rank 0), not once per rank
n=$(grep -c "must be divisible by the number of ranks" "$tmp/out")
[ "$n" -eq 1 ] || fail "the config error was printed $n times under 3 ranks, not once"
# an unwritable output.dir is refused once, before any GPU work, on every rank
touch "$tmp/file"
$MPIRUN -np 2 "$BIN" --dry-run -o "$tmp/file/out" "$SRC/configs/quick.json" > "$tmp/out2" 2>&1; rc=$?
[ $rc -eq 2 ] && [ "$(grep -c "output.dir" "$tmp/out2")" -eq 1 ] || { cat "$tmp/out2"; fail "unwritable output.dir under 2 ranks: exit $rc"; }
rm -rf "$tmp"
echo "mpi_dry_run: all passed"
