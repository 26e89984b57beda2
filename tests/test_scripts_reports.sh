#!/bin/sh
# test_scripts_reports: every committed report under results/ (.csv, .json, .csv.gz, .json.gz; schema v1) through
# scripts/plot and every script that summarizes reports (summarize.py, summarize_comm.py, summarize_megakernel.py,
# weak_scaling.py, device/show.py): each must exit 0 and print something for each report. The other .csv/.json files
# there (configs, tuning databases, tune-check results, nvidia-smi clock logs, ncu source pages and metric logs) are
# told apart by scripts/mok_report.py --kind; a file of no known kind fails the test, so a report the reader cannot
# recognize does not slip past as "not a report".
# scripts/plot runs as the README says, with --each (every report its own set, in one python per chunk: a python
# start and matplotlib import per report would take minutes) and --dpi 30 (the same figures, smaller files).
# Skips (77) after the summaries when no python here has matplotlib.
set -u
SRC=$1; SCRATCH=$2
fail() { echo "FAIL: $*"; exit 1; }
command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 77; }
PY=$(python3 -c "import sys; print(sys.executable)") # the interpreter itself: a pyenv shim costs ~0.2 s a call
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH/summary" "$SCRATCH/plot"
cd "$SRC" || fail "cd $SRC"
JOBS=$(nproc 2> /dev/null || echo 2)

find results -type f \( -name '*.csv' -o -name '*.json' -o -name '*.csv.gz' -o -name '*.json.gz' \) | sort \
  > "$SCRATCH/files"
[ -s "$SCRATCH/files" ] || fail "no .csv/.json files under $SRC/results"
tr '\n' '\0' < "$SCRATCH/files" | xargs -0 "$PY" scripts/mok_report.py --kind > "$SCRATCH/kinds" || fail "--kind"
if grep -q '^unknown' "$SCRATCH/kinds"; then
  grep '^unknown' "$SCRATCH/kinds"
  fail "files under results/ of no known kind (a report scripts/mok_report.py cannot read?)"
fi
sed -n 's/^report\t//p' "$SCRATCH/kinds" > "$SCRATCH/reports"
n=$(wc -l < "$SCRATCH/reports")
echo "results/: $(wc -l < "$SCRATCH/files") files, $n reports ($(cut -f1 "$SCRATCH/kinds" | sort | uniq -c |
  awk '{printf "%s%s %s", sep, $1, $2; sep=", "}'))"

# scripts/plot, chunks of the report list in parallel, started first: it takes the longest
has_mpl() { "$1" -c "import matplotlib" > /dev/null 2>&1; }
PLOT=0
if has_mpl python3 || has_mpl /usr/bin/python3; then
  PLOT=1
  # whole directories per chunk (a run's .csv and .json sit together, and plot draws such twins once), the largest
  # first to the chunk with the fewest bytes so far, so that the chunks take about as long
  "$PY" - "$SCRATCH/reports" "$SCRATCH/plot" "$JOBS" <<'EOF'
import os, sys
paths = open(sys.argv[1]).read().split()
dirs = {}
for p in paths:
    dirs.setdefault(os.path.dirname(p), []).append(p)
chunks = [[0, []] for _ in range(int(sys.argv[3]))]
for d in sorted(dirs, key=lambda d: -sum(os.path.getsize(p) for p in dirs[d])):
    c = min(chunks, key=lambda c: c[0])
    c[0] += sum(os.path.getsize(p) for p in dirs[d])
    c[1] += dirs[d]
for i, (_, ps) in enumerate(chunks):
    if ps:
        open(os.path.join(sys.argv[2], f"chunk-{i}"), "w").write("\n".join(ps) + "\n")
EOF
  for chunk in "$SCRATCH/plot"/chunk-*; do
    # shellcheck disable=SC2046 # one argument per line of the chunk; the paths under results/ have no spaces
    ( scripts/plot --each --dpi 30 -o "$chunk.d" $(cat "$chunk") > "$chunk.out" 2> "$chunk.err"; echo $? > "$chunk.rc" ) &
  done
fi

# every summary script on every report: exit 0 and some output, else a line in summary/failed
cat > "$SCRATCH/summarize-one.sh" <<'EOF'
py=$1; f=$3; out=$2/$(echo "$f" | tr '/' '_')
for s in summarize summarize_comm summarize_megakernel weak_scaling; do
  "$py" "scripts/$s.py" "$f" > "$out.$s" 2>&1; rc=$?
  [ $rc -eq 0 ] || echo "$s.py $f: exit $rc: $(tail -n 1 "$out.$s")"
  [ -s "$out.$s" ] || echo "$s.py $f: printed nothing"
done
EOF
tr '\n' '\0' < "$SCRATCH/reports" | xargs -0 -n 1 -P "$JOBS" sh "$SCRATCH/summarize-one.sh" "$PY" \
  "$SCRATCH/summary" > "$SCRATCH/summary-failed" 2>&1
[ -s "$SCRATCH/summary-failed" ] && { head -n 20 "$SCRATCH/summary-failed"; fail "summary scripts on committed reports"; }
echo "summaries: 4 scripts x $n reports, all exit 0 with output"

# device/show.py over results/: one heading line per report
"$PY" scripts/device/show.py results > "$SCRATCH/show.out" 2> "$SCRATCH/show.err" || { tail -n 5 "$SCRATCH/show.err"; fail "show.py: exit"; }
shown=$(grep -c '^results/' "$SCRATCH/show.out")
[ "$shown" -eq "$n" ] || fail "show.py: $shown reports shown, not $n"
echo "show.py: $n reports"

# ab_compare.py on a committed A/B (two reps a side): its 48 candidates and 24 problem x implementation bests, each
# with a ratio; a file that is no report is refused (exit 2)
ab=results/h200x1/2026-12-06-fp8-scatter-ab
"$PY" scripts/ab_compare.py --old $ab/ab-old-1.csv $ab/ab-old-2.csv --new $ab/ab-new-1.csv $ab/ab-new-2.csv \
  > "$SCRATCH/ab.out" 2>&1 || { tail -n 5 "$SCRATCH/ab.out"; fail "ab_compare.py: exit"; }
[ "$(grep -c ' [0-9]\.[0-9][0-9][0-9]$' "$SCRATCH/ab.out")" -eq 72 ] || fail "ab_compare.py: not 72 rows with a ratio"
grep -q 'one side only' "$SCRATCH/ab.out" && fail "ab_compare.py: a candidate on one side only"
"$PY" scripts/ab_compare.py --old $ab/ab-old-1.csv --new "$SCRATCH/ab.out" > /dev/null 2>&1
[ $? -eq 2 ] || fail "ab_compare.py: a file that is no report not refused with exit 2"
# one run's report given twice, and a summary beside it: each of its 8 candidates one rep a side
q=results/h100x1/2026-12-06-quant-encode
"$PY" scripts/ab_compare.py --old $q/ab2-mx-old-1.csv $q/ab2-mx-old-1.csv $q/small-groups-k6.summary.csv \
  --new $q/ab2-mx-new-1.csv > "$SCRATCH/ab1.out" 2> "$SCRATCH/ab1.err" ||
  fail "ab_compare.py: exit on a repeated report"
[ "$(grep -c ' (1)  [0-9.]* (1)  ' "$SCRATCH/ab1.out")" -eq 8 ] && ! grep -q ' (2) ' "$SCRATCH/ab1.out" ||
  fail "ab_compare.py: a report given twice counted twice (8 candidates, one rep a side)"
grep -q 'a summary, not a report: skipped' "$SCRATCH/ab1.err" || fail "ab_compare.py: the summary not skipped"
echo "ab_compare.py: 72 rows; a repeated report counted once"
# order_compare.py on a committed two-order run: 24 candidates with geometric means and ratios, one base per problem
# (8), --base picking another; a --base no candidate has, and a summary, refused (exit 2)
o=results/h100x1/2026-12-07-core-stages
"$PY" scripts/order_compare.py $o/core-stages-order-04.csv $o/core-stages-order-40.csv --columns gemm2_us \
  > "$SCRATCH/order.out" 2>&1 || { tail -n 5 "$SCRATCH/order.out"; fail "order_compare.py: exit"; }
with_ratios=' [0-9.]* / [0-9.]*  [0-9.]*  [0-9]\.[0-9][0-9][0-9]  [0-9]\.[0-9][0-9][0-9]$'
[ "$(grep -c "$with_ratios" "$SCRATCH/order.out")" -eq 24 ] ||
  fail "order_compare.py: not 24 candidates with two reports' times, a mean and two ratios"
[ "$(grep -c '(base)  .*  1\.000  1\.000$' "$SCRATCH/order.out")" -eq 8 ] ||
  fail "order_compare.py: not one base per problem"
"$PY" scripts/order_compare.py $o/core-stages-order-04.csv $o/core-stages-order-40.csv --base stages=4,wgrad_stages=4 \
  > "$SCRATCH/order4.out" 2>&1
[ $? -eq 2 ] && grep -q 'no candidate has stages=4,wgrad_stages=4' "$SCRATCH/order4.out" ||
  fail "order_compare.py: a --base that a problem lacks (fwd: wgrad_stages 4 refused) not refused with exit 2"
"$PY" scripts/order_compare.py $o/core-stages-order-04.csv $o/core-stages-order-40.csv --base stages=4 \
  > "$SCRATCH/order4.out" 2>&1 && [ "$(grep -c 'stages=4,wgrad_stages=0 (base)' "$SCRATCH/order4.out")" -eq 8 ] ||
  fail "order_compare.py: --base stages=4 not each problem's first candidate with stages 4"
"$PY" scripts/order_compare.py $o/core-stages-order-04.csv \
  results/h100x1/2026-12-07-warmup-ab/qwen-4096-long.summary.csv > /dev/null 2>&1
[ $? -eq 2 ] || fail "order_compare.py: a summary not refused with exit 2"
echo "order_compare.py: 24 candidates over two orders"
wait # the plot chunks

[ $PLOT = 1 ] || { echo "SKIP: plot: no python with matplotlib (summaries passed)"; exit 77; }
for chunk in "$SCRATCH/plot"/chunk-*; do
  case $chunk in *.out | *.err | *.rc | *.d) continue;; esac
  rc=$(cat "$chunk.rc")
  [ "$rc" = 0 ] || { tail -n 5 "$chunk.err"; fail "scripts/plot on $(wc -l < "$chunk") reports of $chunk: exit $rc"; }
done
# each report gave PNGs (printed, one directory each), a "nothing to plot from REPORT" line, or a "REPORT: the same
# rows as OTHER" line (the same run's .csv and .json are drawn once)
cat "$SCRATCH/plot"/chunk-*.out > "$SCRATCH/plot.out"
cat "$SCRATCH/plot"/chunk-*.err > "$SCRATCH/plot.err"
while read -r png; do
  [ -s "$png" ] || fail "plot printed $png, which is missing or empty"
done < "$SCRATCH/plot.out"
drawn=$(sed 's#/[^/]*$##' "$SCRATCH/plot.out" | sort -u | wc -l)
empty=$(grep -c '^plot: nothing to plot from ' "$SCRATCH/plot.err")
same=$(grep -c '^plot: .*: the same rows as ' "$SCRATCH/plot.err")
[ $((drawn + empty + same)) -eq "$n" ] ||
  fail "plot: $drawn reports drawn + $empty with nothing to plot + $same repeated != $n reports"
echo "plot: $(wc -l < "$SCRATCH/plot.out") PNGs from $drawn reports; $same reports repeat another's rows, $empty" \
  "have no passed candidates"
echo "test_scripts_reports: all passed"
