#!/bin/sh
# test_plot: scripts/plot, run as the README says (`scripts/plot REPORT...`: it picks the python with matplotlib
# itself), on the checked-in sample reports (CSV, JSON, gzipped JSON): PNGs of every kind are written, --each gives
# one directory per report, and bad input (missing file, header-only CSV) is refused with exit 2 naming the file.
# Skips (77) when no python here has matplotlib.
set -u
SRC=$1; SCRATCH=$2
fail() { echo "FAIL: $*"; exit 1; }
has_mpl() { "$1" -c "import matplotlib" > /dev/null 2>&1; }
if ! has_mpl python3 && ! has_mpl /usr/bin/python3; then
  echo "SKIP: matplotlib not installed"
  exit 77
fi
PLOT="$SRC/scripts/plot"
DATA="$SRC/tests/data"
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"
gzip -c "$DATA/sample-report.json" > "$SCRATCH/sample-report.json.gz"

# is_png FILE: non-empty and starts with the 8-byte PNG signature
is_png() {
  [ -s "$1" ] && [ "$(dd if="$1" bs=8 count=1 2> /dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
}

for ext in csv json json.gz; do
  out="$SCRATCH/$ext"
  report="$DATA/sample-report.$ext"
  [ "$ext" = json.gz ] && report="$SCRATCH/sample-report.json.gz"
  $PLOT -o "$out" "$report" > "$SCRATCH/$ext.out" 2> "$SCRATCH/$ext.err"; rc=$?
  [ $rc -eq 0 ] || { cat "$SCRATCH/$ext.err"; fail "$ext: exit $rc"; }
  for kind in time-vs-tokens speedup-vs-tokens heatmap; do
    n=0
    for f in "$out/$kind"-*.png; do
      [ -e "$f" ] || continue
      is_png "$f" || fail "$ext: $f is empty or not a PNG"
      grep -qxF "$f" "$SCRATCH/$ext.out" || fail "$ext: $f not printed"
      n=$((n + 1))
    done
    [ "$n" -ge 1 ] || fail "$ext: no $kind PNG in $out"
  done
done

# the gzipped JSON draws what the JSON draws
[ "$(cd "$SCRATCH/json" && ls)" = "$(cd "$SCRATCH/json.gz" && ls)" ] || fail "json.gz: other PNGs than json's"

# --each: one directory per report, named after its path; without -o it is refused
$PLOT --each --dpi 40 -o "$SCRATCH/each" "$DATA/sample-report.csv" "$DATA/sample-megakernel.csv" > "$SCRATCH/each.out" \
  2> "$SCRATCH/each.err" || { cat "$SCRATCH/each.err"; fail "--each: exit $?"; }
[ "$(ls "$SCRATCH/each" | wc -l)" -eq 2 ] || fail "--each: not one directory per report"
ls "$SCRATCH/each"/*sample-megakernel*/heatmap-*.png > /dev/null 2>&1 || fail "--each: no heatmap for the megakernel"
$PLOT --each "$DATA/sample-report.csv" > /dev/null 2>&1 && fail "--each without -o accepted"

# a missing file: exit 2, the message names it
$PLOT -o "$SCRATCH/bad" "$SCRATCH/no-such-report.csv" > "$SCRATCH/missing.out" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "missing file: exit $rc, not 2"
grep -qF "$SCRATCH/no-such-report.csv" "$SCRATCH/missing.out" || fail "missing file: message lacks the path"

# a report with a header and no rows: exit 2, the message names it
head -n 1 "$DATA/sample-report.csv" > "$SCRATCH/empty.csv"
$PLOT -o "$SCRATCH/bad" "$SCRATCH/empty.csv" > "$SCRATCH/empty.out" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "header-only CSV: exit $rc, not 2"
grep -qF "$SCRATCH/empty.csv" "$SCRATCH/empty.out" || fail "header-only CSV: message lacks the path"

# a CSV without a required column: exit 2
cut -d, -f1-12 "$DATA/sample-report.csv" > "$SCRATCH/nocols.csv"
$PLOT -o "$SCRATCH/bad" "$SCRATCH/nocols.csv" > "$SCRATCH/nocols.out" 2>&1; rc=$?
[ $rc -eq 2 ] || fail "missing columns: exit $rc, not 2"
grep -q "time_med_us" "$SCRATCH/nocols.out" || fail "missing columns: message does not name time_med_us"

echo "test_plot: all passed"
