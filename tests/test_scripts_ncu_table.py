"""test_scripts_ncu_table: scripts/ncu_table.py on lines as scripts/device/ncu_gemm.sh prints them (kernel lines
with and without their argument list, metrics with and without a unit, thousands separators, bytes and sectors to
GB), its ranges over runs and cycles, and the command on a committed log and on one with no kernel line.
  python3 tests/test_scripts_ncu_table.py SRC SCRATCH"""
import gzip
import os
import subprocess
import sys

SRC, SCRATCH = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "scripts"))
import ncu_table  # noqa: E402

failures = []


def check(what, cond):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


LOG = """== step ncu171 01:19:58
 void <unnamed>::megakernel_fwd_kernel<1, 0, 1>(<unnamed>::Maps, mok_mega_args, mok_sm90_diag *) (132, 1, 1)x(384, 1, 1), Context 1, Stream 13, Device 0, CC 9.0
 dram__bytes_read.sum Gbyte 40.80
 dram__bytes_write.sum Mbyte 270.08
 gpu__time_duration.sum ms 15.24
 lts__t_sectors_op_read.sum sector 1,000,000,000
 lts__t_sector_hit_rate.pct % 56.04
 void <unnamed>::gemm_sm90_kernel<128, 256, 0>
 dram__bytes_read.sum Gbyte 24.74
 lts__t_sectors_op_read.sum sector 2,000,000,000
 void <unnamed>::gemm_sm90_kernel<128, 256, 0>
 dram__bytes_read.sum Gbyte 11.73
 lts__t_sectors_op_read.sum sector 1,000,000,000
 void <unnamed>::gemm_sm90_kernel<128, 256, 0>
 dram__bytes_read.sum Gbyte 24.50
 lts__t_sectors_op_read.sum sector 2,100,000,000
 void <unnamed>::gemm_sm90_kernel<128, 256, 0>
 dram__bytes_read.sum Gbyte 11.70
 lts__t_sectors_op_read.sum sector 1,100,000,000
 some__metric.sum 7
== step ncu171 rc=0
"""

launches, columns = ncu_table.parse(LOG.splitlines(True))
check("five launches", len(launches) == 5)
names = [n for n, _ in launches]
check("kernel names", names == ["megakernel_fwd_kernel<1,0,1>"] + ["gemm_sm90_kernel<128,256,0>"] * 4)
mega = launches[0][1]
check("Gbyte as GB", abs(mega["dram__bytes_read.sum GB"] - 40.80) < 1e-9)
check("Mbyte as GB", abs(mega["dram__bytes_write.sum GB"] - 0.27008) < 1e-9)
check("sectors as GB (x 32 bytes)", abs(mega["lts__t_sectors_op_read.sum GB"] - 32.0) < 1e-9)
check("a percentage kept", mega["lts__t_sector_hit_rate.pct %"] == 56.04)
check("a metric without a unit", launches[4][1].get("some__metric.sum") == 7.0)
check("columns in the order first seen", columns[:3] == ["dram__bytes_read.sum GB", "dram__bytes_write.sum GB",
                                                         "gpu__time_duration.sum ms"])
r1 = ncu_table.ranges(launches)
check("runs: the fused kernel, then the four GEMM launches", [(n, c) for n, c, _ in r1] ==
      [("megakernel_fwd_kernel<1,0,1>", 1), ("gemm_sm90_kernel<128,256,0>", 4)])
r2 = ncu_table.ranges(launches, 2)
check("cycle 2: GEMM1 and GEMM2 apart", [(n, c) for n, c, _ in r2] ==
      [("megakernel_fwd_kernel<1,0,1>", 1), ("gemm_sm90_kernel<128,256,0>", 2), ("gemm_sm90_kernel<128,256,0>", 2)])
check("cycle 2: GEMM1's range", r2[1][2]["lts__t_sectors_op_read.sum GB"] == (64.0, 67.2))
check("cycle 2: GEMM2's range", r2[2][2]["dram__bytes_read.sum GB"] == (11.70, 11.73))
check("not a kernel line", ncu_table.kernel_name("== step ncu171 01:19:58") is None)

os.makedirs(SCRATCH, exist_ok=True)
log = os.path.join(SCRATCH, "log.txt.gz")
with gzip.open(log, "wt") as f:
    f.write(LOG)
cmd = [sys.executable, os.path.join(SRC, "scripts", "ncu_table.py")]
out = subprocess.run(cmd + [log, "--ranges", "--cycle", "2", "--markdown"], capture_output=True, text=True)
check("command exit 0", out.returncode == 0)
check("markdown rows", out.stdout.count("\n| gemm_sm90_kernel<128,256,0> | 2 |") == 2)
check("min-max cell", "| 64-67.2 |" in out.stdout)
committed = os.path.join(SRC, "results", "h100x1", "2026-12-08-l2-source", "log-c1-n.txt.gz")
out = subprocess.run(cmd + [committed, "--ranges"], capture_output=True, text=True)
eight = [ln.split()[:2] for ln in out.stdout.splitlines()]
fused = ["megakernel_fwd_kernel<1,0,0,0,0,0,0,0,0,0,0>", "8"]
check("committed log: the fused kernel's eight launches", fused in eight)
empty = os.path.join(SCRATCH, "empty.txt")
open(empty, "w").write("== nothing\n")
out = subprocess.run(cmd + [empty], capture_output=True, text=True)
check("no kernel line: exit 2 with a message", out.returncode == 2 and "no ncu kernel line" in out.stderr)

if failures:
    sys.exit(f"{len(failures)} failed")
print("test_scripts_ncu_table: all passed")
