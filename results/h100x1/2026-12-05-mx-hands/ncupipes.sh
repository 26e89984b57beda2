#!/bin/bash
# ncu pipes and shared-memory traffic of mok-gemm's mxfp8 scheme (b) and bf16 GEMMs (128 x 256, DeepSeek-V3-local 4096)
. scripts/device/env.sh
B=$DEV/bin/mok-bench-old
M="gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
M="$M,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"
M="$M,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"
M="$M,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"
M="$M,sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum"
M="$M,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"
M="$M,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed"
M="$M,l1tex__throughput.avg.pct_of_peak_sustained_active"
for c in ncu-mx-b ncu-bf16; do
  echo "== $c metrics"
  timeout 150 $MPIRUN -np 1 ncu --clock-control none --cache-control none --metrics "$M" -k "regex:gemm_sm90" --launch-count 2 \
    $B -w 0 -n 1 -o $OUT/ncu-run-$c .dev/mini/$c.json > $OUT/$c-metrics.log 2>&1; echo "rc=$?"
  grep -E "gemm_sm90|__|==PROF==|ERR|rror" $OUT/$c-metrics.log | sed -E 's/\(CUtensorMap.*//; s/ +/ /g' | head -40
done
for c in ncu-mx-b ncu-bf16; do
  echo "== $c sections"
  timeout 200 $MPIRUN -np 1 ncu --clock-control none --cache-control none --section ComputeWorkloadAnalysis \
    --section InstructionStats --section MemoryWorkloadAnalysis_Tables -k "regex:gemm_sm90" --launch-count 1 \
    $B -w 0 -n 1 -o $OUT/ncu-run2-$c .dev/mini/$c.json > $OUT/$c-sections.log 2>&1; echo "rc=$?"
  grep -vE "^\s*$|^#|mok-bench|^\s+[0-9]+ " $OUT/$c-sections.log | grep -iE "pipe|ipc|issue|shared|bank|wavefront|busy|ALU|FMA|LSU|executed" | head -40
done
