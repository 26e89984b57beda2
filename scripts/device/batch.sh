#!/bin/bash
# batch.sh OUTDIR PART...: one device call's worth of node.sh runs, each under its own time limit, so that a step
# which outlives its share loses nothing run before it and the call returns within the device's command limit.
#   PART = label:seconds:steps, e.g. "a:240:bwdshunits bwdmegasan" (label: letters, digits, _ or -; steps as
#          node.sh's STEPS, space-separated)
# Each part runs `STEPS=steps timeout seconds node.sh OUTDIR/label` (NP, CLOCKS, AB_* and the rest come from the
# environment); its console goes to OUTDIR/label/console.txt. node.sh packs its reports only at its end, so a part
# cut by its limit has them packed here; then each part's folder becomes one file, OUTDIR/label.tgz (what comes back
# from a device call is limited in file count: keep a call to a few parts).
# Exit status: 0 when every part's node.sh returned 0; the last line names the parts that did not.
set -u
cd "$(dirname "$0")/../.." || exit 1
OUTDIR=${1:?usage: batch.sh OUTDIR label:seconds:steps ...}
shift
mkdir -p "$OUTDIR" || exit 1
failed=""
for part in "$@"; do
  label=${part%%:*}
  rest=${part#*:}
  secs=${rest%%:*}
  steps=${rest#*:}
  case "$label" in '' | *[!A-Za-z0-9_-]*) label=bad ;; esac
  case "$secs" in '' | *[!0-9]*) label=bad ;; esac
  if [ "$label" = bad ] || [ "$steps" = "$rest" ] || [ -z "$steps" ]; then
    echo "batch.sh: part '$part' is not label:seconds:steps (label of letters, digits, _ or -; seconds a number)"
    failed="$failed '$part'"
    continue
  fi
  d=$OUTDIR/$label
  mkdir -p "$d" || exit 1
  echo "== part $label ($(date -u +%T)): ${secs} s for: $steps"
  STEPS="$steps" timeout -k 10 "$secs" bash scripts/device/node.sh "$d" > "$d/console.txt" 2>&1
  rc=$?
  [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "== part $label cut at its ${secs} s"
  if [ ! -e "$d/reports.tgz" ] && [ -d "$d/reports" ]; then
    tar -C "$d" -czf "$d/reports.tgz" reports && rm -rf "$d/reports"
  fi
  tail -n 3 "$d/console.txt"
  tar -C "$OUTDIR" -czf "$OUTDIR/$label.tgz" "$label" && rm -rf "$d"
  [ $rc -eq 0 ] || failed="$failed $label"
done
echo "== batch done $(date -u +%T)${failed:+; parts with a non-zero status:$failed}"
[ -z "$failed" ]
