#!/bin/sh
# test_summarize: the markdown summaries on checked-in reports. summarize_megakernel.py on a slice of a measured
# report (tests/data/sample-megakernel.csv: DeepSeek-V3, 4096 tokens, uniform, from
# results/h200x2/2026-11-30-megakernel-v4) prints the best megakernel point with the ratios that row's baselines
# give; summarize.py and summarize_comm.py print a table for the sample report; no report: usage, exit non-zero.
set -u
SRC=$1
fail() { echo "FAIL: $*"; exit 1; }
DATA="$SRC/tests/data"
out=$(python3 "$SRC/scripts/summarize_megakernel.py" "$DATA/sample-megakernel.csv") || fail "summarize_megakernel exit $?"
# 8.03 ms nccl, 7.70 ms nccl-overlap, cuBLAS alone 6.23 ms, best megakernel 6.85 ms (compute alone 6.89 ms)
echo "$out" | grep -qF "| deepseek-v3 | 4096 | uniform | 6.85 (6.76-6.93) | 1.17 | 1.12 | 91% | 6.89 | -1% |" ||
  { echo "$out"; fail "summarize_megakernel: the DeepSeek-V3 4096 row"; }
[ "$(echo "$out" | grep -c '^| deepseek-v3')" -eq 1 ] || fail "summarize_megakernel: one row per problem"
python3 "$SRC/scripts/summarize_megakernel.py" > /dev/null 2>&1 && fail "summarize_megakernel without a report"
for s in summarize summarize_comm; do
  out=$(python3 "$SRC/scripts/$s.py" "$DATA/sample-report.csv") || fail "$s exit $?"
  [ "$(echo "$out" | grep -c '^| ')" -ge 3 ] || { echo "$out"; fail "$s: no table rows"; }
done
echo "test_summarize: all passed"
