#!/usr/bin/env python3
"""tile_traffic.py REPORT... [--impl megakernel,mok-gemm] [--tile-m 128] [--tile-n 256] [--markdown]: a model of the
bytes the fused bf16 forward's GEMM tiles (or gemm mode's mok-gemm) read through the L2, beside each row's measured
time, for rows whose DRAM roofline they miss.

Every GEMM tile (tile_m rows x tile_n columns, K whole) reads its A rows and its B (weight) rows once: an expert
of X rows runs ceil(X / tile_m) row blocks, and each row block reads the expert's whole weights (GEMM1's 2I x H,
GEMM2's H x I), while each row block's A rows are read once per column tile (2I / tile_n for GEMM1, H / tile_n for
GEMM2). The weights come from DRAM once (the roofline's bytes) but through the L2 once per row block: at 128 rows
per expert under uniform routing about half the experts run two row blocks. Under uniform routing an expert's
row count is Binomial(tokens x ranks, topk / experts); the model takes its expectation over that distribution
(ranks > 1: the local experts of one rank). Shared experts run as one dense MLP (intermediate S x I) on the rank's
own tokens. Besides the tiles it counts the h rows GEMM1 stores, the rows GEMM2 sends, the slots' copies
(`gather` 0: each route's row read and written once more) and the owner's sum (k rows read per token, y written).

How the tile's A rows are read, from the row's params: with `gather` 0 (the scatter's slots, loaded by TMA) whole
padded row blocks, padding rows read like the others; with `gather` 1 (rows read where they landed) the real rows
only (padding rows zero-filled, not read). `swap_tail` and `split_half` change the tensor work of an expert's last
row block, not its loads (the producer loads the unit's slots as for any unit: kernels/megakernel/swap_tail.cuh,
compute.cuh split_half_unit), so they read what the padded block reads. gemm mode's mok-gemm rows: its own
tile_m / tile_n, `cluster` 2 (each weight tile read once per pair of row blocks, both blocks' rows read) and
`cluster_n` 2 (each A tile once per pair of column tiles); the GEMMs alone (no slot copies or sum).

Printed per row (bf16 fwd, uniform routing; other rows are skipped): rows per local expert (mean) and row blocks
(expected), the measured median, the DRAM roofline (the report's roofline_mem_us), the modeled bytes through the
L2 (weights' share beside), and their rate over the measured time: what the L2 would have to serve for the tiles
to read what the model says. A model, not a measurement: ncu's lts__t_sectors_op_read (x 32 bytes; step ncutails)
gives the measured figure. On one H100 (results/h100x1/2026-12-07-tails-ncu, DeepSeek-V3 at 64 / 128 rows per
expert) ncu counted 16.5 / 18.8 GB more than the model, while the model's differences between padded, swap_tail and
gather held within 1.3 GB; at 171 rows per expert (results/h100x1/2026-12-08-l2-source) mok-gemm's two GEMMs read
0.95x their model, the fused forward 1.29x its own.
Exit 2 when no row qualifies."""
import argparse
import math
import sys

import mok_report
from mok_report import num

def binomial_pmf(n, p):
    """[(x, P(X = x))] of Binomial(n, p), the mass above 1e-15 (log-space terms: n up to millions)"""
    if p >= 1.0:
        return [(n, 1.0)]
    mean, sd = n * p, math.sqrt(n * p * (1 - p))
    lo, hi = max(0, int(mean - 12 * sd - 2)), min(n, int(mean + 12 * sd + 2))
    lp, lq, lgn = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    out = []
    for x in range(lo, hi + 1):
        w = math.exp(lgn - math.lgamma(x + 1) - math.lgamma(n - x + 1) + x * lp + (n - x) * lq)
        if w > 1e-15:
            out.append((x, w))
    return out


def expert_bytes(x, hidden, inter, gather, tile_m, tile_n, pair_b=False, pair_a=False):
    """(weights' bytes, A rows' bytes, stores) through the L2 for one expert of x rows, bf16. pair_b: vertical
    cluster pairs share each weight tile (mok-gemm `cluster` 2: the row blocks in pairs, an odd count's last pair
    reading its second block's rows past the expert); pair_a: horizontal pairs share each A tile (`cluster_n` 2)."""
    if x == 0:
        return 0.0, 0.0, 0.0
    blocks = -(-x // tile_m)
    n1, n2 = 2 * inter, hidden  # output columns of GEMM1 (gate and up) and GEMM2
    reads = -(-blocks // 2) if pair_b else blocks  # each weight tile's reads per column tile
    weights = reads * (n1 * hidden + n2 * inter) * 2
    a_rows = 2 * reads * tile_m if pair_b else x if gather else tile_m * blocks
    a = a_rows * (hidden * 2 * n1 / tile_n + inter * 2 * n2 / tile_n)  # once per column tile
    stores = x * (inter + hidden) * 2  # h rows, GEMM2's rows to their owners
    return float(weights), float(a / 2 if pair_a else a), float(stores)


def params_of(row):
    return dict(kv.split("=", 1) for kv in row.get("params", "").split(",") if "=" in kv)


def model(row, tile_m, tile_n, impls):
    """dict of the row's modeled figures, or None where the model does not apply"""
    if row.get("impl") not in impls:
        return None
    if row.get("dtype") != "bf16" or row.get("pass") != "fwd" or row.get("routing") != "uniform":
        return None
    mode = row.get("mode", "layer")
    if mode not in ("layer", "gemm") or not mok_report.counts(row):
        return None
    if any(math.isnan(num(row, c)) for c in ("hidden", "intermediate", "experts", "topk", "time_med_us")):
        return None  # a summary's row, or a report without the shape
    h, i = int(num(row, "hidden")), int(num(row, "intermediate"))
    e, k, t = int(num(row, "experts")), int(num(row, "topk")), int(num(row, "tokens_per_rank"))
    ranks = int(num(row, "ranks")) if not math.isnan(num(row, "ranks")) else 1
    shared = int(num(row, "shared_experts")) if not math.isnan(num(row, "shared_experts")) else 0
    if e % ranks:
        return None
    params = params_of(row)
    gather = params.get("gather") == "1"
    tile_m, tile_n = int(params.get("tile_m", tile_m)), int(params.get("tile_n", tile_n))  # mok-gemm's own
    pairs = (params.get("cluster") == "2", params.get("cluster_n") == "2")
    pmf = binomial_pmf(t * ranks, k / e)
    local = e // ranks
    w = a = s = blocks = 0.0
    for x, p in pmf:
        ew, ea, es = expert_bytes(x, h, i, gather, tile_m, tile_n, *pairs)
        w, a, s, blocks = w + p * ew, a + p * ea, s + p * es, blocks + p * -(-x // tile_m)
    w, a, s = local * w, local * a, local * s
    if shared and mode == "layer":  # gemm mode runs the routed experts only
        sw, sa, ss = expert_bytes(t, h, shared * i, False, tile_m, tile_n)
        w, a, s = w + sw, a + sa, s + ss
    other = 0.0  # gemm mode: the expert GEMMs alone, on rows already expert-major
    if mode == "layer":
        other = t * k * h * 2 + t * h * 2  # the owner's sum: k rows read per own token, y written
        if not gather:
            other += 2 * (local * t * ranks * k / e) * h * 2  # each landed route's row copied into its slot
    total = w + a + s + other
    time_us = num(row, "time_med_us")
    return {
        "rows": t * ranks * k / e, "blocks": blocks, "time_ms": time_us / 1e3,
        "dram_ms": num(row, "roofline_mem_us") / 1e3, "gb": total / 1e9, "weights_share": w / total,
        "tbps": total / (time_us * 1e-6) / 1e12,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--tile-m", type=int, default=128)
    ap.add_argument("--tile-n", type=int, default=256)
    ap.add_argument("--impl", default="megakernel,mok-gemm", help="implementations whose rows to model, "
                    "comma-separated: megakernel (the fused forward's slot copies and sum counted), mok-gemm (the "
                    "GEMMs alone)")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    rows = []
    for r in mok_report.read_all(args.reports, "tile_traffic.py"):
        m = model(r, args.tile_m, args.tile_n, args.impl.split(","))
        if m:
            rows.append((r, m))
    if not rows:
        print("tile_traffic.py: no bf16 forward row with uniform routing and a passed check", file=sys.stderr)
        return 2
    head = ["model", "tokens", "impl", "params", "rows/expert", "blocks", "ms", "DRAM ms", "x DRAM", "L2 GB",
            "weights", "L2 TB/s"]
    lines = []
    for r, m in rows:
        p = params_of(r)
        shown = ",".join(f"{n}={p[n]}" for n in ("gather", "swap_tail", "split_half", "gemm", "tile_m", "tile_n",
                                                  "raster", "cluster", "cluster_n") if n in p)
        lines.append([r["model"], r["tokens_per_rank"], r["impl"], shown, f"{m['rows']:.0f}", f"{m['blocks']:.2f}",
                      f"{m['time_ms']:.3f}", f"{m['dram_ms']:.3f}", f"{m['time_ms'] / m['dram_ms']:.3f}",
                      f"{m['gb']:.1f}", f"{m['weights_share']:.2f}", f"{m['tbps']:.2f}"])
    mok_report.print_table(head, lines, args.markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
