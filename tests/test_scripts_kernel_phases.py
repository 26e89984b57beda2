"""test_scripts_kernel_phases: scripts/kernel_phases.py on made-up traces of both kinds it reads: ncu's per-kernel
durations (--csv, one row per metric, thousands separators, ==PROF== lines) and an nsys cuda_gpu_trace CSV (starts
and durations), each gzipped too: the windows around the anchor, each kernel's median duration and start after the
anchor's end, the idle time between kernels (nsys only), the runs of one anchor instance told apart, and a trace
without the anchor refused.
  python3 tests/test_scripts_kernel_phases.py SRC SCRATCH"""
import csv
import gzip
import os
import shutil
import subprocess
import sys

SRC, SCRATCH = sys.argv[1], sys.argv[2]
SCRIPT = os.path.join(SRC, "scripts", "kernel_phases.py")
failures = []


def check(what, cond):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)


def row_of(out, kernel):
    """(per window, median us, starts after the anchor's end) of the first table line naming kernel"""
    for line in out.splitlines():
        if not line.startswith("  "):
            continue  # a run's heading, not a table row
        parts = line.split()
        if parts and parts[0] == kernel:
            return float(parts[-3]), float(parts[-2]), float(parts[-1])
    return None


# one iteration: a memset, the schedule, the push (prologue), the fused kernel, the owner's sum; durations in ns
ITER = [("[CUDA memset]", 2000), ("lsa_place_kernel(mok_lsa_args)", 7000),
        ("void (anonymous namespace)::fp8_push_kernel<false>(mok_mega_args)", 30000),
        ("void (anonymous namespace)::megakernel_fwd_kernel<true, false>(Maps, mok_mega_args, mok_sm90_diag *)",
         2000000), ("lsa_reduce_routes_kernel(mok_lsa_args)", 100000)]
GAP = 1000  # ns between kernels in the nsys trace

shutil.rmtree(SCRATCH, ignore_errors=True)
os.makedirs(SCRATCH)

# nsys: 20 iterations of one instance, a 100 ms pause, 12 of another (another candidate)
nsys = os.path.join(SCRATCH, "nsys.csv")
with open(nsys, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["Start (ns)", "Duration (ns)", "CorrId", "GrdX", "Name"])
    t = 0
    for run_no, iters in enumerate((20, 12)):
        for _ in range(iters):
            for name, d in ITER:
                if run_no and "megakernel" in name:
                    name = name.replace("<true, false>", "<false, false>")
                t += GAP
                w.writerow([t, d, 0, 1, name])
                t += d
        t += 100_000_000
with open(nsys, "rb") as f, gzip.open(nsys + ".gz", "wb") as g:
    g.write(f.read())

for path in (nsys, nsys + ".gz"):
    r = run(path, "--skip", "2")
    check(f"{path}: exit 0 ({r.stderr.strip()})", r.returncode == 0)
    check(f"{path}: two runs", r.stdout.count("launches,") == 2)
    check(f"{path}: the first run's 20 launches, 17 windows", "20 launches, 17 windows" in r.stdout)
    check(f"{path}: the second run's 12 launches", "12 launches, 9 windows" in r.stdout)
    check(f"{path}: median window 2144.0 us, 5.0 us idle, 144.0 us outside the anchor",
          "median window 2144.0 us, no kernel running 5.0 us; outside the anchor 144.0 us (6.7% of the window)"
          in r.stdout)
    s = row_of(r.stdout, "lsa_reduce_routes_kernel")
    check(f"{path}: the sum 100 us, 1 us after the anchor: {s}", s == (1.0, 100.0, 1.0))
    p = row_of(r.stdout, "fp8_push_kernel<false>")
    check(f"{path}: the push 30 us, 113 us after the anchor: {p}", p == (1.0, 30.0, 113.0))
    a = row_of(r.stdout, "megakernel_fwd_kernel<true,")
    check(f"{path}: the anchor's own row: {a}", a is not None and a[1:] == (2000.0, -2000.0))

# ncu: the same kernels, durations only (laid end to end: no idle time)
ncu = os.path.join(SCRATCH, "ncu.csv")
with open(ncu, "w", newline="") as f:
    f.write("==PROF== Connected to process 1 (mok-bench)\n")
    w = csv.writer(f, quoting=csv.QUOTE_ALL)
    w.writerow(["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
                "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"])
    for i in range(10):
        for name, d in ITER[1:]:
            w.writerow([i, 1, "mok-bench", "h", name, 1, 7, "(256, 1, 1)", "(1, 1, 1)", 0, "9.0",
                        "Command line profiler metrics", "gpu__time_duration.sum", "ns", f"{d:,}"])
    f.write("==PROF== Disconnected from process 1\n")
r = run(ncu, "--skip", "2", "--min", "5")
check(f"ncu: exit 0 ({r.stderr.strip()})", r.returncode == 0)
check("ncu: says the gaps are not measured", "gaps are not measured" in r.stdout)
check("ncu: median window 2137.0 us, nothing idle, 137.0 us outside the anchor",
      "median window 2137.0 us, no kernel running 0.0 us; outside the anchor 137.0 us" in r.stdout)
s = row_of(r.stdout, "lsa_reduce_routes_kernel")
check(f"ncu: the sum right after the anchor: {s}", s == (1.0, 100.0, 0.0))

r = run(ncu, "--anchor", "no_such_kernel")
check("a trace without the anchor: exit non-zero naming the anchor",
      r.returncode != 0 and "no_such_kernel" in r.stderr)
empty = os.path.join(SCRATCH, "empty.csv")
open(empty, "w").write("nothing here\n")
r = run(empty)
check("a file with no kernel rows: exit non-zero naming it", r.returncode != 0 and "empty.csv" in r.stderr)

print(f"{'FAIL' if failures else 'PASS'}: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
