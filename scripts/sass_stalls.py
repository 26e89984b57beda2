#!/usr/bin/env python3
"""sass_stalls.py SOURCE.csv[.gz] [TOP]: where a kernel's warps wait, from ncu's warp-stall sampling.

Input: `ncu --import R.ncu-rep --page source --csv --print-source sass` of a report collected with
`--section SourceCounters` (scripts/device/ncu_stalls.sh does both). Prints the TOP (default 25) SASS lines by
share of all warp samples, then the share of the samples that fall on each kind of wait:

  mbarrier wait   SYNCS.PHASECHK (try_wait) and the branch that loops on it: a ring slot not full (consumers) or
                  not empty (producer); in a GEMM's k loop this is operand data that has not arrived
  wgmma wait      WARPGROUP.DEPBAR: the tensor pipe still busy with the warpgroup's earlier wgmmas
  wgmma issue     HGMMA
  global memory   LDG / STG / LD / ST / ATOMG / RED (copies, counters, polling)

Samples are per warp: a block's roles weigh by their warp counts (the megakernel: 4 producer-side warps, of which
one issues, 8 consumer warps), so read a share as "of the warps' time", not of the SM's.
"""
import csv
import gzip
import re
import sys

KINDS = [
    ("mbarrier wait", re.compile(r"SYNCS\.PHASECHK")),
    ("wgmma wait", re.compile(r"WARPGROUP\.DEPBAR")),
    ("wgmma issue", re.compile(r"\bHGMMA\b")),
    ("global memory", re.compile(r"\b(LDG|STG|LD|ST|ATOMG|RED)\b")),
]


def number(text):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def read_lines(path):
    """[(source text, samples)] in address order, from the CSV's header row on."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    for i, row in enumerate(rows):
        if "Source" in row and "Warp Stall Sampling (All Samples)" in row:
            src, smp = row.index("Source"), row.index("Warp Stall Sampling (All Samples)")
            return [(r[src], number(r[smp])) for r in rows[i + 1:] if len(r) > max(src, smp)]
    raise SystemExit(f"sass_stalls: {path}: no 'Source' and 'Warp Stall Sampling (All Samples)' columns "
                     "(export with --page source --csv --print-source sass from a SourceCounters report)")


def kind_of(lines, i):
    """The wait kind of line i; a branch within 3 lines after a try_wait is the try_wait's loop (ptxas sometimes
    schedules a move between them: the gather kernel of results/h200x2/2026-11-30-gather-rows/ncu had 42% of its samples on
    such a branch)."""
    text = lines[i][0]
    for name, pattern in KINDS:
        if pattern.search(text):
            return name
    if re.search(r"\bBRA\b", text) and any(KINDS[0][1].search(lines[j][0]) for j in range(max(0, i - 3), i)):
        return KINDS[0][0]
    return None


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    top = int(argv[2]) if len(argv) > 2 else 25
    lines = read_lines(argv[1])
    total = sum(s for _, s in lines)
    if total <= 0:
        raise SystemExit(f"sass_stalls: {argv[1]}: no warp samples")
    print(f"{len(lines)} SASS lines, {total:.0f} warp samples")
    print("| share | line | SASS |\n|---|---|---|")
    for i in sorted(range(len(lines)), key=lambda i: -lines[i][1])[:top]:
        print(f"| {100 * lines[i][1] / total:.2f}% | {i} | `{lines[i][0].strip()[:90]}` |")
    shares = {}
    for i in range(len(lines)):
        k = kind_of(lines, i)
        if k:
            shares[k] = shares.get(k, 0.0) + lines[i][1]
    print("\n| wait kind | share of warp samples |\n|---|---|")
    for name, _ in KINDS:
        print(f"| {name} | {100 * shares.get(name, 0.0) / total:.1f}% |")


if __name__ == "__main__":
    main(sys.argv)
