#!/bin/bash
# the 6th candidate of bwdlayermokrace alone: exit status, host memory while it runs, kernel log
. scripts/device/env.sh
BIN=$DEV/bin/mok-bench
$MPIRUN -np 1 $BIN -w 0 -n 1 -o $OUT/plain .dev/mini/race6.json > $OUT/plain.log 2>&1; echo "plain rc=$?"
(while sleep 10; do echo "$(date +%T) $(free -m | sed -n 2p)"; done) > $OUT/mem.log 2>&1 &
MP=$!
$MPIRUN -np 1 compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 $BIN -w 0 -n 1 -o $OUT/race .dev/mini/race6.json > $OUT/race.log 2>&1; echo "racecheck rc=$?"
kill $MP
tail -12 $OUT/race.log | cut -c1-200
tail -4 $OUT/mem.log
dmesg 2>/dev/null | tail -5
