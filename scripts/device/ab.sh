# ab.sh: an A/B of two mok-bench binaries on one config, alternating, on the GPU node: node.sh's step "ab", e.g.
#   STEPS="ab" AB_OLD=.dev/bin/mok-bench-old AB_CONFIG=configs/megakernel-spread.json AB_REPS=2 scripts/device/node.sh
# Alternating runs of the same config put both binaries under the same clocks and temperatures as far as one run
# can; every timed iteration goes to iters-<label>-<rep>.txt (MOK_ITER_LOG), the reports to <label>-<rep>/. Odd
# reps run old then new, even reps new then old: of two adjacent runs the second tends to be faster (README timing).
# Sourced by node.sh (steps.sh): DEV and MPIRUN from scripts/device/env.sh, NP and R from node.sh.
OLD=${AB_OLD:-$DEV/bin/mok-bench-old}
NEW=${AB_NEW:-$DEV/bin/mok-bench}
CONFIG=${AB_CONFIG:-configs/megakernel-spread.json}
REPS=${AB_REPS:-2}
DIR=$R/ab
mkdir -p "$DIR"
for rep in $(seq 1 "$REPS"); do
  pair="$OLD $NEW"
  [ $((rep % 2)) -eq 0 ] && pair="$NEW $OLD"
  for bin in $pair; do
    label=$(basename "$bin")
    MOK_ITER_LOG="$DIR/iters-$label-$rep.txt" $MPIRUN -np "$NP" -x MOK_ITER_LOG "$bin" -o "$DIR/$label-$rep" \
      "$CONFIG" > "$DIR/$label-$rep.log" 2>&1
    echo "ab: $label rep $rep rc=$?"
  done
done
