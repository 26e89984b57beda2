#!/bin/sh
# test_plot: scripts/plot on the checked-in sample reports (CSV and JSON): PNGs of every kind are written, and bad
# input (missing file, header-only CSV) is refused with exit 2 naming the file. Skips (77) without matplotlib.
set -u
SRC=$1; SCRATCH=$2
fail() { echo "FAIL: $*"; exit 1; }
# python3 on PATH may be a pyenv/venv one without matplotlib while Debian's python3-matplotlib is installed.
PY=python3
python3 -c "import matplotlib" > /dev/null 2>&1 || PY=/usr/bin/python3
if ! "$PY" -c "import matplotlib" > /dev/null 2>&1; then
  echo "SKIP: matplotlib not installed"
  exit 77
fi
PLOT="$PY $SRC/scripts/plot"
DATA="$SRC/tests/data"
rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"

# is_png FILE: non-empty and starts with the 8-byte PNG signature
is_png() {
  [ -s "$1" ] && [ "$(dd if="$1" bs=8 count=1 2> /dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
}

for ext in csv json; do
  out="$SCRATCH/$ext"
  $PLOT -o "$out" "$DATA/sample-report.$ext" > "$SCRATCH/$ext.out" 2> "$SCRATCH/$ext.err"; rc=$?
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
