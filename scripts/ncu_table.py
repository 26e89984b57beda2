#!/usr/bin/env python3
"""ncu_table.py LOG... [--ranges [--cycle N]] [--markdown]: the ncu metrics scripts/device/ncu_gemm.sh printed
(steps ncugemm, ncutails, ncu171, ncu171src, ...) as one row per profiled launch: the kernel (its name without the
namespace and the argument list), then each metric in the order first seen, bytes in GB and L2 sectors as GB (x 32
bytes, the figure scripts/tile_traffic.py's model compares with). --ranges: one row per run of consecutive launches
of the same kernel, each metric as min-max (how the results READMEs quote them); --cycle N splits each run into N
parts by launch order (gemm mode launches GEMM1, GEMM2, GEMM1, ...: --cycle 2). LOG may be gzipped (a results
folder's log-*.txt.gz); lines other than ncu's kernel and metric lines are skipped. Exit 2 when no launch is found."""
import argparse
import gzip
import re
import sys

import mok_report

# ncu_gemm.sh squeezes spaces and cuts a kernel line at its first CUtensorMap argument: " void ns::name<...>(args)
# (grid)x(block), Context ..." or " void ns::name<...>"; a metric line is " metric [unit] value"
METRIC = re.compile(r"^ ?(?P<metric>[a-z][a-z0-9_]*__[\w.]+) (?:(?P<unit>[A-Za-z%/]+) )?(?P<value>[\d,.]+)$")
SCALE = {"byte": 1e-9, "Kbyte": 1e-6, "Mbyte": 1e-3, "Gbyte": 1.0, "Tbyte": 1e3}


def kernel_name(line):
    """the kernel of a kernel line: its name and template arguments without the return type, the anonymous
    namespace's prefix (<unnamed>::), the argument list and spaces; None for any other line"""
    t = line.strip()
    if t.startswith("void "):
        t = t[5:]
    elif ")x(" not in t:
        return None
    depth, end = 0, len(t)
    for i, ch in enumerate(t):  # the argument list starts at the first "(" outside the template's brackets
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            end = i
            break
    name = t[:end].replace("<unnamed>::", "").replace(" ", "")
    return name if re.match(r"^[A-Za-z_][\w:]*(<.*>)?$", name) else None


def column(metric, unit):
    """(column name, factor): bytes to GB, sectors to GB, the rest as printed"""
    if unit in SCALE:
        return metric + " GB", SCALE[unit]
    if unit == "sector":
        return metric + " GB", 32e-9
    return metric + (f" {unit}" if unit else ""), 1.0


def parse(lines):
    """[(kernel, {column: value})] in launch order, and the columns in the order first seen"""
    launches, columns = [], []
    for line in lines:
        line = line.rstrip("\n")
        m = METRIC.match(line)
        name = None if m else kernel_name(line)
        if name:
            launches.append((name, {}))
            continue
        if m and launches:
            col, f = column(m.group("metric"), m.group("unit"))
            if col not in columns:
                columns.append(col)
            launches[-1][1][col] = float(m.group("value").replace(",", "")) * f
    return launches, columns


def ranges(launches, cycle=1):
    """runs of consecutive launches of one kernel: [(kernel, count, {column: (min, max)})]; cycle > 1: launch i of a
    run goes to the run's part i % cycle (a gemm-mode problem's GEMM1, GEMM2, GEMM1, ... launches)"""
    out, run, pos = [], -1, 0
    for name, vals in launches:
        if run < 0 or out[run][0] != name:
            run, pos = len(out), 0
        idx = run + pos % cycle
        if idx >= len(out):
            out.append([name, 0, {}])
        out[idx][1] += 1
        for c, v in vals.items():
            lo, hi = out[idx][2].get(c, (v, v))
            out[idx][2][c] = (min(lo, v), max(hi, v))
        pos += 1
    return out


def fmt(v):
    return f"{v:.4g}" if abs(v) < 1000 else f"{v:.1f}"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--ranges", action="store_true")
    ap.add_argument("--cycle", type=int, default=1)
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    lines = []
    for path in args.logs:
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rt", errors="replace") as f:
            lines.extend(f)
    launches, columns = parse(lines)
    if not launches:
        print("ncu_table: no ncu kernel line in " + " ".join(args.logs), file=sys.stderr)
        return 2
    head = ["kernel"] + (["launches"] if args.ranges else []) + columns
    if args.ranges:
        body = [[n, str(c)] + ["-" if col not in r else fmt(r[col][0]) if r[col][0] == r[col][1]
                                else f"{fmt(r[col][0])}-{fmt(r[col][1])}" for col in columns]
                for n, c, r in ranges(launches, max(1, args.cycle))]
    else:
        body = [[n] + [fmt(v[col]) if col in v else "-" for col in columns] for n, v in launches]
    mok_report.print_table(head, body, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
