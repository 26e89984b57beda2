#!/bin/bash
# ncu_gemm.sh CONFIG [N]: ncu metrics of the first N (default 4) expert-GEMM kernels (ours: gemm_sm90; cuBLAS's:
# nvjet/sm90_xmma) of a gemm-mode config, clocks and caches left as they are, one warm-up-free iteration. The
# metrics behind results/h200x2/2026-11-29-gemm: time, tensor-pipe activity, L2 hit rate, DRAM bytes read; and the
# shared-memory banks' read and write utilization (TMA fills, wgmma operand reads, the threads' accesses: whether a
# tile is bound by shared-memory bandwidth, NOTES.md on mxfp8); DRAM bytes written and DRAM throughput (whether the
# backward's weight-gradient tiles stream at the DRAM rate). NCU_KERNELS="regex ...": other kernels (default: the
# grouped GEMM core's and cuBLAS's), e.g. the fused backward's megakernel_bwd. NCU_EXTRA="metric,...": more metrics
# (step ncutails: the L2's bytes, against scripts/tile_traffic.py's model of the tiles' reads). NCU_MAYBE="metric ...":
# more metrics, each kept only where this device's ncu lists it (--query-metrics; the names of the L2's per-source
# counters differ between chips), the list's matching names printed first.
# node.sh's step "ncugemm"; run from the repository root on the GPU node.
set -u
. scripts/device/env.sh # MPIRUN, DEV and the library paths: node.sh's own sourcing does not reach this process
CFG=$1; N=${2:-4}
M="gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
M="$M,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed"
M="$M,l1tex__data_bank_reads.avg.pct_of_peak_sustained_elapsed"
M="$M,l1tex__data_bank_writes.avg.pct_of_peak_sustained_elapsed"
M="$M,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed${NCU_EXTRA:+,$NCU_EXTRA}"
if [ -n "${NCU_MAYBE:-}" ]; then
  known=$(ncu --query-metrics 2>&1 | awk '{print $1}')
  echo "$known" | grep -q "^lts__" || echo "ncu_gemm.sh: ncu --query-metrics listed no lts__ metric: $(echo "$known" | head -3)"
  echo "$known" | grep -E "^lts__t_(sectors|requests)_srcunit" | tr '\n' ' '; echo
  for m in $NCU_MAYBE; do
    if echo "$known" | grep -qx "${m%.*}"; then M="$M,$m"; else echo "ncu_gemm.sh: $m not listed here, left out"; fi
  done
fi
for k in ${NCU_KERNELS:-gemm_sm90 '^(nvjet|sm90_xmma|cutlass)'}; do
  $MPIRUN -np 1 ncu --clock-control none --cache-control none --metrics "$M" -k "regex:$k" --launch-count "$N" \
    "$DEV/bin/mok-bench" -w 0 -n 1 -o "${OUT:-.}/ncu-run" "$CFG" 2>&1 | \
    grep -E "^  [a-zA-Z_<].*\(|gpu__time|hmma|hit_rate|dram__|lts__t|data_bank" | sed -E 's/\(CUtensorMap.*//; s/ +/ /g'
done
