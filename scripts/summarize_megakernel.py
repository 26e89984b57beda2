#!/usr/bin/env python3
"""summarize_megakernel.py REPORT.csv [...]: markdown table of the best passed megakernel candidate per problem
against the baselines of the same run: speedup over `nccl` and the best `nccl-overlap` (three decimals: a 1.396x
must not read as 1.40x against a 1.4x goal), the layer rate as a fraction of the rate of the nccl baseline's cuBLAS
expert GEMMs timed alone (gemm_alone_us of its row), the bound that rate sets (nccl's time over those GEMMs alone:
the speedup a layer running its GEMMs at cuBLAS's rate with free, fully hidden communication would have), and, with
breakdown=1, the kernel with communication skipped (compute alone) and the exposed communication from the row's
note; where the report has them (NVML on the GPU machine), the energy per forward of the job (megakernel / nccl),
and the share of the time under the power cap. Reads .csv, .json and .json.gz reports of schema v1 or v2
(scripts/mok_report.py). Every number comes from the reports."""
import re
import sys

import mok_report
from mok_report import num, ratio
from report_labels import routing_label


def exposed_share(m):
    """The exposed communication as a share of the layer time: v2's exposed_comm_us column, else (v1) the
    megakernel's note ("exposed comm N us (P%)"); None where the row has neither (no breakdown)."""
    if m.get("exposed_comm_us"):
        return f"{ratio(num(m, 'exposed_comm_us'), num(m, 'time_med_us')):.0%}"
    found = re.search(r"exposed comm (-?\d+) us \((-?\d+)%\)", m.get("note", ""))
    return found.group(2) + "%" if found else None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    best = {}
    for r in mok_report.read_all(sys.argv[1:], "summarize_megakernel.py"):
        if not mok_report.counts(r):
            continue
        key = (r["_file"], r["problem"], r["impl"])
        if key not in best or num(r, "time_med_us") < num(best[key], "time_med_us"):
            best[key] = r
    print("| model | tokens/rank | routing | megakernel ms (p10-p90) | vs nccl | vs nccl-overlap | layer rate / cuBLAS "
          "GEMMs' | bound at cuBLAS's rate | compute alone ms | exposed | J per forward (megakernel / nccl) | "
          "power-capped | params |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    shown = 0
    for key in sorted(best, key=lambda k: (k[0], int(num(best[k], "problem")))):
        path, problem, impl = key
        if impl != "megakernel":
            continue
        m = best[key]
        nccl, overlap = best.get((path, problem, "nccl")), best.get((path, problem, "nccl-overlap"))
        t = num(m, "time_med_us")
        vs_nccl = f"{ratio(num(nccl, 'time_med_us'), t):.3f}" if nccl else "-"
        vs_overlap = f"{ratio(num(overlap, 'time_med_us'), t):.3f}" if overlap else "-"
        has_gemms = bool(nccl and nccl.get("gemm_alone_us"))
        cublas = f"{ratio(num(nccl, 'gemm_alone_us'), t):.0%}" if has_gemms else "-"
        bound = f"{ratio(num(nccl, 'time_med_us'), num(nccl, 'gemm_alone_us')):.2f}" if has_gemms else "-"
        alone = f"{num(m, 'gemm_alone_us') / 1e3:.2f}" if m.get("gemm_alone_us") else "-"
        exposed = exposed_share(m)
        energy = f"{num(m, 'energy_j'):.2f} / {num(nccl, 'energy_j'):.2f}" if m.get("energy_j") and nccl and \
            nccl.get("energy_j") else "-"
        capped = f"{num(m, 'power_capped_share'):.0%}" if m.get("power_capped_share") else "-"
        print(f"| {m['model']} | {m['tokens_per_rank']} | {routing_label(m)} | {t / 1e3:.2f} "
              f"({num(m, 'time_p10_us') / 1e3:.2f}-{num(m, 'time_p90_us') / 1e3:.2f}) | {vs_nccl} | {vs_overlap} | "
              f"{cublas} | {bound} | {alone} | {exposed or '-'} | {energy} | {capped} | "
              f"{m['params']} |")
        shown += 1
    if not shown:
        print(f"(no passed megakernel candidates in {', '.join(sys.argv[1:])})")


if __name__ == "__main__":
    main()
