#!/bin/sh
# gpu: a peer that never publishes makes the waiting rank time out with a diagnostic (rank, block, phase, what it
# waited for, expected vs seen) and fail, instead of hanging.
set -u
BIN=$1
. "$(dirname "$0")/common.sh"
if ! have_gpu || [ "$(gpu_count)" -lt 2 ]; then echo "SKIP: needs 2 GPUs"; exit 77; fi
out=$(timeout 120 $MPIRUN -np 2 "$BIN" timeout 2>&1); rc=$?
echo "$out"
[ $rc -ne 124 ] || fail "the timeout test itself hung"
[ $rc -eq 0 ] || fail "exit $rc: rank 0 did not fail its wait as expected (or the run broke otherwise)"
echo "$out" | grep -q "TIMEOUT rank 0 block [0-9]* phase schedule: waited for published\[1\]" || fail "no diagnostic"
echo "gpu_lsa_timeout: passed"
