#!/bin/bash
# h200x2.sh: everything one lease of the 2 x H200 machine runs: environment facts, the gpu tests, quick.json and
# the model-shaped configs. Logs and reports go to $OUT (one tarball plus the log, within the tool's file limits).
set -u
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
R=$OUT/reports; mkdir -p "$R"
LOG=$OUT/log.txt
exec > >(tee "$LOG") 2>&1
echo "== $(date -u) commit $(cat .dev/commit | tr '\n' ' ')"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.max.sm,power.draw --format=csv
nvidia-smi topo -m | head -5
echo "NCCL lib: $NCCL_PY"; ldd .dev/bin/mok-bench | grep -E "nccl|cjson|mpi|cublas|cudart"
BIN=.dev/bin/mok-bench
STEPS=${STEPS:-"symmem small quick deepseek qwen"}
NP=${NP:-2} # ranks of the multi-GPU steps (one per GPU): 4 or 8 on the larger kinds (issue 7)
# CLOCKS=1: sample every GPU's SM clock, power and temperature every 200 ms while the steps run (read-only queries;
# nothing here sets clocks or limits), into reports/clocks.csv, to tell power-limited clock steps from the code's
CLOCK_PID=
if [ "${CLOCKS:-0}" = 1 ]; then
  nvidia-smi --query-gpu=timestamp,index,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active \
    --format=csv -lms 200 > "$R/clocks.csv" 2>&1 &
  CLOCK_PID=$!
fi
for step in $STEPS; do
  echo "== step $step $(date -u +%T)"
  case $step in
    symmem) sh tests/gpu_run.sh .dev/bin/test_gpu_symmem; echo "rc=$?";;
    small) sh tests/gpu_impls.sh $BIN . "$R/gpu-small"; echo "rc=$?";;
    lsatest) sh tests/gpu_run.sh .dev/bin/test_gpu_lsa; echo "rc=$?"; sh tests/gpu_lsa_timeout.sh .dev/bin/test_gpu_lsa; echo "rc=$?";;
    sanitize) for tool in memcheck racecheck; do
        $MPIRUN -np $NP compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 .dev/bin/mok-bench -w 0 -n 1 -o "$R/san-$tool" tests/gpu_sanitize.json > "$R/sanitize-$tool.log" 2>&1
        echo "compute-sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|Error|hazard" "$R/sanitize-$tool.log" | sort | uniq -c | head; done;;
    profile) $MPIRUN -np $NP ncu --clock-control none --metrics gpu__time_duration.sum --print-summary none \
        -k regex:lsa_ --launch-skip 20 --launch-count 20 .dev/bin/mok-bench -o "$R/profile" configs/profile-comm.json \
        > "$R/profile.log" 2>&1; echo "rc=$?"; grep -E "^  lsa_[a-z_]+kernel|gpu__time_duration" "$R/profile.log" | \
        sed -E 's/\(mok_lsa_args.*Device ([0-9]).*/ dev\1/' | paste - - | awk '{print $1, $2, $(NF)}';;
    gemmtest) .dev/bin/test_gpu_gemm; echo "rc=$?"; sh tests/gpu_impls.sh $BIN . "$R/gpu-gemm-small" tests/gpu_gemm_small.json; echo "rc=$?";;
    layer) $MPIRUN -np $NP $BIN --probe -o "$R" configs/layer-devicedriven.json; echo "rc=$?";;
    gemm) $MPIRUN -np 1 $BIN --probe -o "$R" configs/gemm-deepseek.json; echo "rc=$?";;
    gemmcluster) $MPIRUN -np 1 $BIN -o "$R" configs/gemm-cluster.json; echo "rc=$?";;  # cluster 1 vs 2 (B multicast), 300 iterations, power columns
    gemmbest) $MPIRUN -np 1 $BIN --probe -o "$R" configs/gemm-best.json; echo "rc=$?";;  # issue 4: the best candidates, 50 iterations
    commsmall) sh tests/gpu_impls.sh $BIN . "$R/gpu-comm-small" tests/gpu_comm_small.json; echo "rc=$?";;
    libmok) sh tests/gpu_run.sh .dev/bin/test_libmok; echo "rc=$?";;
    ncugemm) bash scripts/device/ncu_gemm.sh configs/gemm-ncu.json 12; echo "rc=$?";;
    ncustalls) bash scripts/device/ncu_stalls.sh configs/ncu-mega-1rank.json megakernel_fwd megakernel-1rank; echo "rc=$?";;  # SASS stall sampling, 1 rank
    inputs) .dev/bin/test_gpu_fill; echo "rc=$?"  # the seeded fills' statistics; the layer implementations on normal / scaled inputs
        sh tests/gpu_impls.sh $BIN . "$R/gpu-inputs" tests/gpu_inputs_small.json; echo "rc=$?";;
    inputspower) $MPIRUN -np $NP $BIN -o "$R" configs/inputs-power.json; echo "rc=$?";;  # uniform vs normal inputs at 8192 tokens: time, power, energy
    megaissue5) $MPIRUN -np $NP $BIN -o "$R" configs/megakernel-issue5.json; echo "rc=$?";;  # issue 5's four problems only (uniform, 4096 / 8192), 100 iterations, breakdown
    megaqwen3tune) $MPIRUN -np $NP $BIN -o "$R" configs/megakernel-qwen3-tune.json; echo "rc=$?";;  # Qwen3 4096 / 8192: comm SMs 8-32 x own_first 8 / 16 / 32, breakdown, beside nccl and nccl-overlap
    megaqwen4096) $MPIRUN -np $NP $BIN -o "$R" configs/megakernel-qwen4096-exposed.json; echo "rc=$?";;  # Qwen3 4096: comm SMs x own_first x chunk, breakdown (exposed)
    megasmall) sh tests/gpu_impls.sh $BIN . "$R/gpu-mega-small" tests/gpu_mega_small.json; echo "rc=$?";;
    megaorder) sh tests/gpu_impls.sh $BIN . "$R/gpu-mega-order" tests/gpu_mega_order.json; echo "rc=$?";;  # own_first x lockstep x send
    mega) $MPIRUN -np $NP $BIN --probe -o "$R" configs/megakernel.json; echo "rc=$?";;
    megareport) $MPIRUN -np $NP $BIN -o "$R" configs/megakernel-report.json; echo "rc=$?";;  # issue 5: 1024-16384 tokens, uniform and zipf, breakdown
    megapower) $MPIRUN -np $NP $BIN -o "$R" configs/megakernel-power.json; echo "rc=$?";;  # 300 iterations: power_w, energy_j
    megaownfirst) $MPIRUN -np $NP $BIN -o "$R" configs/megakernel-own-first.json; echo "rc=$?";;  # own_first = 0 / K experts / all
    megabreakdown) $MPIRUN -np $NP $BIN -o "$R" configs/megakernel-breakdown.json; echo "rc=$?";;
    megasanitize) for tool in memcheck racecheck; do
        timeout 300 $MPIRUN -np $NP compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 9 $BIN -w 0 -n 1 -o "$R/mega-san-$tool" tests/gpu_mega_sanitize.json > "$R/mega-sanitize-$tool.log" 2>&1
        echo "compute-sanitizer $tool (megakernel) rc=$?"; grep -E "ERROR SUMMARY|Error|hazard" "$R/mega-sanitize-$tool.log" | sort | uniq -c | head; done;;
    tunecheck) for cfg in deepseek-v3 qwen3-235b; do  # issue 6: budgeted search vs exhaustive, then --tuned reuse
        python3 scripts/tune_check.py --mpirun "$MPIRUN -np $NP" --bin $BIN --config configs/$cfg.json \
          --impl nccl-overlap --out "$R/tune-check-$cfg"; echo "rc=$?"; done;;
    tunemega) python3 scripts/tune_check.py --mpirun "$MPIRUN -np $NP" --bin $BIN --config configs/megakernel.json \
        --impl megakernel --out "$R/tune-check-megakernel"; echo "rc=$?";;
    graphsmall) sh tests/gpu_impls.sh $BIN . "$R/gpu-graph-small" tests/gpu_graph_small.json; echo "rc=$?";;
    comm) $MPIRUN -np $NP $BIN --probe -o "$R" configs/comm-deepseek.json; echo "rc=$?";;
    commbest) $MPIRUN -np $NP $BIN -o "$R" configs/comm-deepseek-best.json; echo "rc=$?";;  # the best lsa candidates, 100 iterations
    commsmallbatch) $MPIRUN -np $NP $BIN -o "$R" configs/comm-small-batch.json; echo "rc=$?";;
    ab) . scripts/device/ab.sh;;  # AB_OLD, AB_NEW, AB_CONFIG, AB_REPS: two binaries on one config, alternating
    probe) $MPIRUN -np $NP $BIN --probe; echo "rc=$?";;
    quick) $MPIRUN -np $NP $BIN -o "$R" configs/quick.json; echo "rc=$?";;
    deepseek) $MPIRUN -np $NP $BIN -o "$R" configs/deepseek-v3.json; echo "rc=$?";;
    qwen) $MPIRUN -np $NP $BIN -o "$R" configs/qwen3-235b.json; echo "rc=$?";;
    *) eval "$step"; echo "rc=$?";;
  esac
done
[ -n "$CLOCK_PID" ] && kill "$CLOCK_PID" 2>/dev/null
tar -C "$OUT" -czf "$OUT/reports.tgz" reports && rm -rf "$R"
echo "== done $(date -u +%T)"
