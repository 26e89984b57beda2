#!/bin/sh
# test_summarize: the markdown summaries on checked-in reports. summarize_megakernel.py on a slice of a measured
# report (tests/data/sample-megakernel.csv: DeepSeek-V3, 4096 tokens, uniform, from
# results/h200x2/2026-11-30-megakernel-v4) prints the best megakernel point with the ratios that row's baselines
# give; summarize.py and summarize_comm.py print a table for the sample report; no report: usage, exit non-zero;
# iter_states.py splits a MOK_ITER_LOG line into clock states; sass_stalls.py sums ncu's warp-stall samples by
# wait kind.
set -u
SRC=$1
fail() { echo "FAIL: $*"; exit 1; }
DATA="$SRC/tests/data"
out=$(python3 "$SRC/scripts/summarize_megakernel.py" "$DATA/sample-megakernel.csv") || fail "summarize_megakernel exit $?"
# 8.03 ms nccl, 7.70 ms nccl-overlap, cuBLAS alone 6.23 ms (bound 8.03 / 6.23 = 1.29x), best megakernel 6.85 ms
# (compute alone 6.89 ms); speedups to three decimals
echo "$out" | grep -qF "| deepseek-v3 | 4096 | uniform | 6.85 (6.76-6.93) | 1.173 | 1.124 | 91% | 1.29 | 6.89 | -1% |" ||
  { echo "$out"; fail "summarize_megakernel: the DeepSeek-V3 4096 row"; }
[ "$(echo "$out" | grep -c '^| deepseek-v3')" -eq 1 ] || fail "summarize_megakernel: one row per problem"
python3 "$SRC/scripts/summarize_megakernel.py" > /dev/null 2>&1 && fail "summarize_megakernel without a report"
for s in summarize summarize_comm; do
  out=$(python3 "$SRC/scripts/$s.py" "$DATA/sample-report.csv") || fail "$s exit $?"
  [ "$(echo "$out" | grep -c '^| ')" -ge 3 ] || { echo "$out"; fail "$s: no table rows"; }
done
# iter_states.py on two candidates' iterations (tests/data/sample-iters.txt: nccl, and the megakernel whose first 6
# iterations ran before the power cap held the clocks down; from results/h200x2/2026-11-30-megakernel-v5)
out=$(python3 "$SRC/scripts/iter_states.py" "$DATA/sample-iters.txt") || fail "iter_states exit $?"
echo "$out" | grep "uniform nccl" | grep -q "| one |$" || { echo "$out"; fail "iter_states: nccl is one state"; }
echo "$out" | grep "uniform megakernel" | grep -qF "two: 2.432 ms x 6 and 2.744 ms x 94 (+13%); the slow state from iteration 6" ||
  { echo "$out"; fail "iter_states: the megakernel's two states"; }
# sass_stalls.py on 14 SASS lines (tests/data/sample-sass.csv: 11 of the 1-rank megakernel's source page from
# results/h200x2/2026-11-30-megakernel-v6/ncu, and a made-up try_wait whose loop branch comes after a move, as in
# the gather kernel of results/h200x2/2026-11-30-gather-rows/ncu): 443364 samples; the try_waits and their loop
# branches 603 + 89924 + 100 + 20000
out=$(python3 "$SRC/scripts/sass_stalls.py" "$DATA/sample-sass.csv" 3) || fail "sass_stalls exit $?"
echo "$out" | grep -qF "| mbarrier wait | 25.0% |" || { echo "$out"; fail "sass_stalls: mbarrier wait share"; }
echo "$out" | grep -qF "| 48.08% | 12 | \`WARPGROUP.DEPBAR.LE gsb0, 0x1\` |" || { echo "$out"; fail "sass_stalls: top line"; }
python3 "$SRC/scripts/sass_stalls.py" "$DATA/sample-iters.txt" > /dev/null 2>&1 && fail "sass_stalls on a file without samples"
# --lines: the stall reasons of lines 1..2 of tests/data/sample-sass-stalls.csv (made up: 500 samples, 6000
# instructions; wait 150 + 90, selected 50 + 90, barrier 120); a range past the end and a CSV without stall columns
out=$(python3 "$SRC/scripts/sass_stalls.py" "$DATA/sample-sass-stalls.csv" 2 --lines 1:3) || fail "sass_stalls --lines exit $?"
echo "$out" | grep -qF "lines 1..2: 500 warp samples (50.0% of all), 6000 warp instructions executed" ||
  { echo "$out"; fail "sass_stalls --lines: the range's totals"; }
echo "$out" | grep -qF "| wait | 48.0% |" && echo "$out" | grep -qF "| selected | 28.0% |" &&
  echo "$out" | grep -qF "| barrier | 24.0% |" || { echo "$out"; fail "sass_stalls --lines: the shares"; }
python3 "$SRC/scripts/sass_stalls.py" "$DATA/sample-sass-stalls.csv" 2 --lines 3:9 > /dev/null 2>&1 &&
  fail "sass_stalls --lines past the end"
python3 "$SRC/scripts/sass_stalls.py" "$DATA/sample-sass.csv" 2 --lines 0:2 > /dev/null 2>&1 &&
  fail "sass_stalls --lines on a CSV without stall columns"
echo "test_summarize: all passed"
