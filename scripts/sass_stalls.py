#!/usr/bin/env python3
"""sass_stalls.py SOURCE.csv[.gz] [TOP] [--lines A:B]: where a kernel's warps wait, from ncu's warp-stall sampling.

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

--lines A:B (SASS lines A to B - 1, as numbered in the table): the stall reasons of that range's samples (ncu's
stall_* columns, which the WarpStateStats section adds) as shares of them, and its executed warp instructions: one
role's code, e.g. mxfp8 scheme (b)'s producer warps (results/h100x1/2026-12-05-mx-expand).
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


SAMPLES = "Warp Stall Sampling (All Samples)"


def read_table(path):
    """(header, rows) in address order, from the CSV's header row on."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    for i, row in enumerate(rows):
        if "Source" in row and SAMPLES in row:
            return row, [r for r in rows[i + 1:] if len(r) == len(row)]
    raise SystemExit(f"sass_stalls: {path}: no 'Source' and 'Warp Stall Sampling (All Samples)' columns "
                     "(export with --page source --csv --print-source sass from a SourceCounters report)")


def lines_of(header, rows):
    """[(source text, samples)] in address order."""
    src, smp = header.index("Source"), header.index(SAMPLES)
    return [(r[src], number(r[smp])) for r in rows]


def print_range(path, header, rows, lo, hi, total):
    """The stall reasons of SASS lines [lo, hi) of read_table's header and rows."""
    cols = [i for i, c in enumerate(header) if c.startswith("stall_") and "Not Issued" not in c]
    if not cols:
        raise SystemExit(f"sass_stalls: {path}: no stall_* columns (collect with --section WarpStateStats)")
    if not 0 <= lo < hi <= len(rows):
        raise SystemExit(f"sass_stalls: --lines {lo}:{hi}: outside the {len(rows)} SASS lines")
    part = rows[lo:hi]
    samples = sum(number(r[header.index(SAMPLES)]) for r in part)
    executed = header.index("Instructions Executed") if "Instructions Executed" in header else None
    insts = sum(number(r[executed]) for r in part) if executed is not None else float("nan")
    print(f"\nlines {lo}..{hi - 1}: {samples:.0f} warp samples ({100 * samples / total:.1f}% of all), "
          f"{insts:.4g} warp instructions executed")
    print("| stall reason | share of these samples |\n|---|---|")
    shares = sorted(((sum(number(r[i]) for r in part), header[i][6:]) for i in cols), reverse=True)
    for value, name in shares:
        if value > 0:
            print(f"| {name} | {100 * value / max(samples, 1):.1f}% |")


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
    span = None
    if "--lines" in argv:
        i = argv.index("--lines")
        try:
            lo, hi = (int(x) for x in argv[i + 1].split(":"))
        except (IndexError, ValueError):
            raise SystemExit("sass_stalls: --lines A:B (two line numbers)")
        span, argv = (lo, hi), argv[:i] + argv[i + 2:]
    if len(argv) < 2:
        raise SystemExit(__doc__)
    top = int(argv[2]) if len(argv) > 2 else 25
    header, rows = read_table(argv[1])
    lines = lines_of(header, rows)
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
    if span:
        print_range(argv[1], header, rows, span[0], span[1], total)


if __name__ == "__main__":
    main(sys.argv)
