#!/bin/bash
# racecheck of the FP8 layers (tests/gpu_fp8_layer_sanitize.json): the megakernel first (the changed expansion)
. scripts/device/env.sh
timeout 250 $MPIRUN -np 1 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $DEV/bin/mok-bench \
  -w 0 -n 1 --only megakernel,nccl -o $OUT/race tests/gpu_fp8_layer_sanitize.json > $OUT/fp8-layer-racecheck.log 2>&1
echo "racecheck rc=$?"; grep -cE " passed | failed " $OUT/fp8-layer-racecheck.log; grep -E "RACECHECK SUMMARY|hazard" $OUT/fp8-layer-racecheck.log | sort | uniq -c | head
