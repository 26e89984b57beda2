#!/bin/sh
# gpu: small problems through every implementation of a config (default tests/gpu_small.json), check on; any
# incorrect row fails the test.
set -u
BIN=$1; SRC=$2; SCRATCH=$3; CONFIG=${4:-$SRC/tests/gpu_small.json}
. "$SRC/tests/common.sh"
if ! have_gpu; then echo "SKIP: no GPU on this machine (gpu suite needs one)"; exit 77; fi
n=$(gpu_count); [ "$n" -ge 2 ] && n=2
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
$MPIRUN -np "$n" "$BIN" -o "$SCRATCH" "$CONFIG"; rc=$?
[ $rc -eq 0 ] || fail "mok-bench exit $rc"
csv=$(ls "$SCRATCH"/*.csv | grep -v -e '\.journal\.csv$' -e '\.summary\.csv$') || fail "no CSV report"
[ "$(echo "$csv" | wc -l)" -eq 1 ] || fail "more than one report CSV: $csv"
[ -s "$SCRATCH/$(basename "$csv" .csv).journal.csv" ] || fail "no journal next to the report"
grep -q ",incorrect," "$csv" && fail "an implementation is incorrect"
grep -q ",passed," "$csv" || fail "no passed row"
echo "gpu_impls: all passed"
