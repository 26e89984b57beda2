#!/bin/bash
# scheme (b) diagnostics: the current binary and two broken ones (S: no shared stores; A: no conversion), alternating
. scripts/device/env.sh
mkdir -p $OUT/diag
for rep in 1 2; do
  for b in mok-bench mok-bench-diagS mok-bench-diagA; do
    $MPIRUN -np 1 $DEV/bin/$b -o $OUT/diag/$b-$rep configs/ab-mx-expand.json > $OUT/diag/$b-$rep.log 2>&1
    echo "$b rep $rep rc=$?"
  done
done
