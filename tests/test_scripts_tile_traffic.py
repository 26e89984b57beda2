"""test_scripts_tile_traffic: scripts/tile_traffic.py's model on rows whose bytes are counted here by hand (one
expert, one route per token, so its row count is fixed), both ways of reading A (gather 0 / 1; split_half and
swap_tail load as gather 0), gemm mode's tiles and cluster pairs, the binomial's mass and mean, the rows it skips,
and the command on a committed report and on one with no row.
  python3 tests/test_scripts_tile_traffic.py SRC SCRATCH"""
import csv
import os
import subprocess
import sys

SRC, SCRATCH = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "scripts"))
import tile_traffic  # noqa: E402

failures = []


def check(what, cond):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def row(tokens, params="gather=0", **over):
    r = {"problem": "0", "model": "m", "hidden": "256", "intermediate": "128", "experts": "1", "topk": "1",
         "shared_experts": "0", "tokens_per_rank": str(tokens), "routing": "uniform", "dtype": "bf16", "pass": "fwd",
         "mode": "layer", "impl": "megakernel", "params": params, "disposition": "passed", "time_med_us": "1",
         "roofline_mem_us": "1", "ranks": "1"}
    r.update(over)
    return r


def total_bytes(r):
    m = tile_traffic.model(r, 128, 256, ["megakernel", "mok-gemm"])
    return None if m is None else round(m["tbps"] * 1e6)  # bytes: time is 1 us


H, I = 256, 128
tile = lambda rows: rows * (H * 2 * (2 * I) // 256 + I * 2 * H // 256)  # A bytes, each row once per column tile
weights = (2 * I * H + H * I) * 2


def other(x, gather):  # stores (h, GEMM2's rows), the owner's sum, the slot copies
    return x * (I + H) * 2 + x * H * 2 + x * H * 2 + (0 if gather else 2 * x * H * 2)


# 128 rows: one full block
check("128 rows, gather 0", total_bytes(row(128)) == weights + tile(128) + other(128, False))
check("128 rows, gather 1", total_bytes(row(128, "gather=1")) == weights + tile(128) + other(128, True))
# 129 rows: two blocks, a tail of 1
check("129 rows, gather 0: two weight reads, padded A",
      total_bytes(row(129)) == 2 * weights + tile(256) + other(129, False))
check("129 rows, gather 1: real A rows",
      total_bytes(row(129, "gather=1")) == 2 * weights + tile(129) + other(129, True))
check("129 rows, split_half and swap_tail: the padded block's loads",
      total_bytes(row(129, "gather=0,split_half=1")) == total_bytes(row(129, "gather=0,swap_tail=1")) ==
      total_bytes(row(129)))
# a shared expert: one more dense MLP on the rank's own tokens (layer mode only)
check("shared expert", total_bytes(row(128, shared_experts="1")) ==
      total_bytes(row(128)) + weights + tile(128) + 128 * (I + H) * 2)
# gemm mode (mok-gemm, the GEMMs alone): vertical pairs read each weight tile once per two row blocks and both
# blocks' rows (one block: its pair's second reads rows past the expert), horizontal pairs each A tile once
gem = dict(mode="gemm", impl="mok-gemm")
stores = lambda x: x * (I + H) * 2
check("gemm mode, 129 rows",
      total_bytes(row(129, "tile_m=128,tile_n=256", **gem)) == 2 * weights + tile(256) + stores(129))
check("gemm mode, 129 rows, cluster 2",
      total_bytes(row(129, "tile_m=128,tile_n=256,cluster=2", **gem)) == weights + tile(256) + stores(129))
check("gemm mode, 128 rows, cluster 2: the pair's second block",
      total_bytes(row(128, "tile_m=128,tile_n=256,cluster=2", **gem)) == weights + tile(256) + stores(128))
check("gemm mode, 128 rows, cluster_n 2: A halved",
      total_bytes(row(128, "tile_m=128,tile_n=256,cluster_n=2", **gem)) == weights + tile(128) // 2 + stores(128))
check("gemm mode: no shared expert", total_bytes(row(128, "tile_m=128,tile_n=256", shared_experts="1", **gem)) ==
      weights + tile(128) + stores(128))
check("gemm mode, tile_m 256 x tile_n 128: one block, A per 128 columns",
      total_bytes(row(129, "tile_m=256,tile_n=128", **gem)) == weights + 2 * tile(256) + stores(129))
# the binomial: mass 1, mean n p, and 128 rows per expert on average runs ~1.48 row blocks
pmf = tile_traffic.binomial_pmf(8192, 6 / 384)
check("pmf mass", abs(sum(p for _, p in pmf) - 1) < 1e-9)
check("pmf mean", abs(sum(x * p for x, p in pmf) - 128) < 1e-6)
m = tile_traffic.model(row(8192, experts="384", topk="6", hidden="7168", intermediate="3072"), 128, 256,
                       ["megakernel"])
check(f"blocks at 128 rows per expert ({m and m['blocks']})", m is not None and 1.45 < m["blocks"] < 1.52)
# rows it skips
for what, r in (("fp8", row(128, dtype="fp8_block")), ("zipf", row(128, routing="zipf")),
                ("bwd", row(128, **{"pass": "bwd"})), ("failed", row(128, disposition="failed")),
                ("other impl", row(128, impl="nccl")), ("no shape", row(128, hidden=""))):
    check(f"skips {what}", tile_traffic.model(r, 128, 256, ["megakernel"]) is None)

# the command: a committed report prints a table; a report with no such row exits 2
script = os.path.join(SRC, "scripts", "tile_traffic.py")
rep = os.path.join(SRC, "results", "h100x1", "2026-12-07-gather-ab", "ab-gather.csv")
p = subprocess.run([sys.executable, script, "--markdown", rep], capture_output=True, text=True)
check(f"committed report: exit {p.returncode} {p.stderr[-200:]}", p.returncode == 0)
check("markdown table", p.stdout.startswith("| model |") and "| deepseek-v3 | 4096 |" in p.stdout)
os.makedirs(SCRATCH, exist_ok=True)
empty = os.path.join(SCRATCH, "fp8-only.csv")
with open(empty, "w", newline="") as f:
    r = row(128, dtype="fp8_block")
    w = csv.DictWriter(f, fieldnames=list(r) + ["speedup"])
    w.writeheader()
    w.writerow(r)
p = subprocess.run([sys.executable, script, empty], capture_output=True, text=True)
check(f"no row: exit {p.returncode}", p.returncode == 2 and "no bf16 forward row" in p.stderr)

print("tile_traffic: " + ("FAILED " + ", ".join(failures) if failures else "all passed"))
sys.exit(1 if failures else 0)
