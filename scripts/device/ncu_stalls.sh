#!/bin/bash
# ncu_stalls.sh CONFIG KERNEL_REGEX NAME: where one launch of a kernel's warps wait, by SASS line. Runs CONFIG on one
# rank under ncu (clocks and caches left as they are; SourceCounters + WarpStateStats: several replay passes, so
# only kernels that do not wait on a peer: one rank), exports the source page as CSV into $R/NAME-sass.csv.gz and
# prints scripts/sass_stalls.py's summary; e.g. the 1-rank megakernel (configs/ncu-mega-1rank.json,
# results/h200x2/2026-11-30-megakernel-v6/ncu). node.sh's step "ncustalls"; run from the repository root.
set -u
. scripts/device/env.sh # MPIRUN, DEV and the library paths: node.sh's own sourcing does not reach this process
CFG=$1; KERNEL=$2; NAME=$3
R=${R:-${OUT:-.}}
REP=/tmp/$NAME
$MPIRUN -np 1 ncu --clock-control none --cache-control none --section SourceCounters --section WarpStateStats \
  -k "regex:$KERNEL" --launch-count 1 -f -o "$REP" "$DEV/bin/mok-bench" -w 0 -n 1 -o "${OUT:-.}/ncu-run" "$CFG" \
  > "$R/$NAME-ncu.log" 2>&1 || { tail -5 "$R/$NAME-ncu.log"; exit 1; }
ncu --import "$REP.ncu-rep" --page source --csv --print-source sass > "$R/$NAME-sass.csv" || exit 1
python3 scripts/sass_stalls.py "$R/$NAME-sass.csv" 25
gzip -f "$R/$NAME-sass.csv"
