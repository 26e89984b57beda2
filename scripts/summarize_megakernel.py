#!/usr/bin/env python3
"""summarize_megakernel.py REPORT.csv [...]: markdown table of the best passed megakernel candidate per problem
against the baselines of the same run: speedup over `nccl` and the best `nccl-overlap` (three decimals: a 1.396x
must not read as 1.40x against a 1.4x goal), the layer rate as a fraction of the rate of the nccl baseline's cuBLAS
expert GEMMs timed alone (gemm_alone_us of its row), the bound that rate sets (nccl's time over those GEMMs alone:
the speedup a layer running its GEMMs at cuBLAS's rate with free, fully hidden communication would have), and, with
breakdown=1, the kernel with communication skipped (compute alone) and the exposed communication from the row's
note; where the report has them (NVML on the GPU machine), the energy per forward of the job (megakernel / nccl),
and the share of the time under the power cap. Every number comes from the reports."""
import csv
import re
import sys

from report_labels import routing_label


def num(row, key):
    return float(row[key]) if row.get(key) else float("nan")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    best = {}
    for path in sys.argv[1:]:
        for r in csv.DictReader(open(path)):
            if r["disposition"] not in ("passed", "not_verified") or not r["time_med_us"]:
                continue
            key = (path, r["problem"], r["impl"])
            if key not in best or num(r, "time_med_us") < num(best[key], "time_med_us"):
                best[key] = r
    print("| model | tokens/rank | routing | megakernel ms (p10-p90) | vs nccl | vs nccl-overlap | layer rate / cuBLAS "
          "GEMMs' | bound at cuBLAS's rate | compute alone ms | exposed | J per forward (megakernel / nccl) | "
          "power-capped | params |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key in sorted(best, key=lambda k: (k[0], int(k[1]))):
        path, problem, impl = key
        if impl != "megakernel":
            continue
        m = best[key]
        nccl, overlap = best.get((path, problem, "nccl")), best.get((path, problem, "nccl-overlap"))
        t = num(m, "time_med_us")
        vs_nccl = f"{num(nccl, 'time_med_us') / t:.3f}" if nccl else "-"
        vs_overlap = f"{num(overlap, 'time_med_us') / t:.3f}" if overlap else "-"
        has_gemms = bool(nccl and nccl.get("gemm_alone_us"))
        cublas = f"{num(nccl, 'gemm_alone_us') / t:.0%}" if has_gemms else "-"
        bound = f"{num(nccl, 'time_med_us') / num(nccl, 'gemm_alone_us'):.2f}" if has_gemms else "-"
        alone = f"{num(m, 'gemm_alone_us') / 1e3:.2f}" if m.get("gemm_alone_us") else "-"
        exposed = re.search(r"exposed comm (-?\d+) us \((-?\d+)%\)", m.get("note", ""))
        energy = f"{num(m, 'energy_j'):.2f} / {num(nccl, 'energy_j'):.2f}" if m.get("energy_j") and nccl and \
            nccl.get("energy_j") else "-"
        capped = f"{num(m, 'power_capped'):.0%}" if m.get("power_capped") else "-"
        print(f"| {m['model']} | {m['tokens_per_rank']} | {routing_label(m)} | {t / 1e3:.2f} "
              f"({num(m, 'time_p10_us') / 1e3:.2f}-{num(m, 'time_p90_us') / 1e3:.2f}) | {vs_nccl} | {vs_overlap} | "
              f"{cublas} | {bound} | {alone} | {exposed.group(2) + '%' if exposed else '-'} | {energy} | {capped} | "
              f"{m['params']} |")


if __name__ == "__main__":
    main()
