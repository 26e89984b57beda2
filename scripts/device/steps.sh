# steps.sh: the table of named steps scripts/device/node.sh runs (STEPS="a b c"), sourced by it: one case per step,
# its comment (after the name, on the same line) is what `node.sh --list` prints. A step's status is its last
# command's; steps of several commands print each one's rc themselves. Every multi-rank launch goes through $MPIRUN
# (scripts/device/env.sh: NCCL_NVLS_ENABLE=0 to every rank) with $NP ranks; reports go under $R.
# Environment: DEV, MPIRUN (env.sh), NP, R, OUT (node.sh).
# compute-sanitizer over mok-bench, one iteration without warm-up: san_run TOOL SECONDS NP OUT LOG CONFIG [ARGS...]
# (SECONDS 0: no limit; OUT the report name and LOG the tool's output, both under $R; ARGS go to mok-bench before -o).
# Its status is the run's: 9 when the tool found an error, 124 when the limit cut it.
san_run() {
  san_tool=$1 san_secs=$2 san_np=$3 san_out=$4 san_log=$5 san_cfg=$6
  shift 6
  timeout "$san_secs" $MPIRUN -np "$san_np" compute-sanitizer --tool "$san_tool" --report-api-errors no \
    --error-exitcode 9 "$BIN" -w 0 -n 1 "$@" -o "$R/$san_out" "$san_cfg" > "$R/$san_log" 2>&1
}
mok_step() {
  BIN=$DEV/bin/mok-bench
  case $1 in
    libs) # the staged binaries' shared libraries; "not found" ones are for stage.sh's STAGE_LIBS
      for b in "$DEV"/bin/*; do echo "$b:"; ldd "$b" | grep -E "not found|nccl|cjson|mpi|cublas|cudart"; done
      ! ldd "$DEV"/bin/* 2> /dev/null | grep -q "not found";;
    probe) $MPIRUN -np "$NP" "$BIN" --probe;; # the GPUs, links and what each implementation supports there
    checkcfg) rc=0; for c in $CHECK_CONFIGS; do # CHECK_CONFIGS="a.json ...": each through gpu_impls.sh (checked)
        sh tests/gpu_impls.sh "$BIN" . "$R/check-$(basename "$c" .json)" "$c"; r=$?; echo "$c rc=$r"; [ $r = 0 ] || rc=1
      done; [ $rc = 0 ];;
    runcfg) rc=0; for c in $RUN_CONFIGS; do # RUN_CONFIGS="a.json ...": each timed on one rank with --probe, every timed iteration in iters-NAME.txt
        MOK_ITER_LOG="$R/iters-$(basename "$c" .json).txt" $MPIRUN -np 1 -x MOK_ITER_LOG "$BIN" --probe -o "$R" "$c"
        r=$?; echo "$c rc=$r"; [ $r = 0 ] || rc=1
      done; [ $rc = 0 ];;
    # ncu writes the CSV at the end: a run cut by its part's limit leaves nothing, so keep warm-up and iterations few
    tracecfg) rc=0; for c in $TRACE_CONFIGS; do # TRACE_CONFIGS="a.json ...": every kernel's duration (ncu, one rank) in trace-NAME.csv for scripts/kernel_phases.py; TRACE_BIN: another staged binary (an A/B's old one)
        n=$(basename "$c" .json)
        $MPIRUN -np 1 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base \
          --log-file "$R/trace-$n.csv" "${TRACE_BIN:-$BIN}" -o "$R" "$c" > "$R/trace-$n.log" 2>&1
        r=$?; echo "$c rc=$r"; [ $r = 0 ] || rc=1
      done; [ $rc = 0 ];;
    sancfg) rc=0; for c in $SAN_CONFIGS; do for tool in memcheck racecheck; do # SAN_CONFIGS="a.json ...": each under compute-sanitizer memcheck and racecheck (one rank, one iteration)
        n=$(basename "$c" .json)-$tool
        san_run $tool 240 1 "san-$n" "san-$n.log" "$c"; r=$?
        echo "compute-sanitizer $tool $c rc=$r"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|OK:" "$R/san-$n.log"; [ $r = 0 ] || rc=1
      done; done; [ $rc = 0 ];;
    symmem) sh tests/gpu_run.sh "$DEV/bin/test_gpu_symmem";;
    small) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-small";; # every implementation on small ragged problems, checked
    lsatest) sh tests/gpu_run.sh "$DEV/bin/test_gpu_lsa"; echo "rc=$?"
      sh tests/gpu_lsa_timeout.sh "$DEV/bin/test_gpu_lsa";;
    sanitize) for tool in memcheck racecheck; do
        san_run $tool 0 "$NP" "san-$tool" "sanitize-$tool.log" tests/gpu_sanitize.json
        echo "compute-sanitizer $tool rc=$?"; grep -E "ERROR SUMMARY|Error|hazard" "$R/sanitize-$tool.log" | sort | uniq -c | head
      done;;
    profile) $MPIRUN -np "$NP" ncu --clock-control none --metrics gpu__time_duration.sum --print-summary none \
        -k regex:lsa_ --launch-skip 20 --launch-count 20 "$BIN" -o "$R/profile" configs/profile-comm.json \
        > "$R/profile.log" 2>&1; echo "rc=$?"; grep -E "^  lsa_[a-z_]+kernel|gpu__time_duration" "$R/profile.log" | \
        sed -E 's/\(mok_lsa_args.*Device ([0-9]).*/ dev\1/' | paste - - | awk '{print $1, $2, $(NF)}';;
    gemmtest) "$DEV/bin/test_gpu_gemm"; echo "rc=$?"
      sh tests/gpu_impls.sh "$BIN" . "$R/gpu-gemm-small" tests/gpu_gemm_small.json &&
      sh tests/gpu_impls.sh "$BIN" . "$R/gpu-gemm-cluster-n" tests/gpu_gemm_cluster_n.json;;
    layer) $MPIRUN -np "$NP" "$BIN" --probe -o "$R" configs/layer-devicedriven.json;;
    gemm) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/gemm-deepseek.json;; # gemm mode: one rank
    gemmcluster) $MPIRUN -np 1 "$BIN" -o "$R" configs/gemm-cluster.json;; # cluster 1 vs 2 (B multicast), 300 iterations, power columns
    gemmbest) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/gemm-best.json;; # issue 4: the best candidates, 50 iterations
    commsmall) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-comm-small" tests/gpu_comm_small.json;;
    libmok) sh tests/gpu_run.sh "$DEV/bin/test_libmok";;
    libmokfp8) sh tests/gpu_run.sh "$DEV/bin/test_libmok_fp8";; # libmok's FP8 forwards (fp8_block, mxfp8): the weight quantizers, the exported h and y against a host reference on src/fp8.c
    libmokbwd) sh tests/gpu_run.sh "$DEV/bin/test_libmok_bwd";; # libmok's training pass: forward + backward checked against a host reference, bitwise repeatable, order errors
    ncugemm) bash scripts/device/ncu_gemm.sh configs/gemm-ncu.json 12;; # ncu metrics of the expert GEMMs, ours and cuBLAS's
    ncumx) bash scripts/device/ncu_gemm.sh configs/gemm-ncu-mx.json 24;; # ncu metrics (tensor pipe, shared-memory bank reads and writes) of mok's mxfp8 scheme (b) and bf16 GEMMs on 128 x 256 tiles at DeepSeek-V3-local 4096 (scheme (a): results/h100x1/2026-12-05-first-h100): is the expansion bound by shared-memory bandwidth
    ncubwd) NCU_KERNELS="megakernel_ gemm_sm90|wgrad_sm90" bash scripts/device/ncu_gemm.sh configs/ncu-bwd-mega.json 24;; # ncu of the fused backward (and the forward before it) and of nccl gemm=mok's backward GEMMs (DeepSeek-V3 shape, 64 experts, 128 rows each; fp32 and bf16 gradients): tensor pipe, DRAM bytes and throughput: does the weight-gradient traffic stream at the DRAM rate, and does it overlap the dgrad work
    ncubwdrows) NCU_KERNELS="megakernel_bwd gemm_sm90|wgrad_sm90" bash scripts/device/ncu_gemm.sh configs/ncu-bwd-mega-rows.json 32;; # ncubwd at 256 and 512 rows per expert (2048 / 4096 tokens, 64 experts), where the fused backward is 1.4-1.6x its roofline (results/h100x1/2026-12-05-wgrad-reduce)
    ncutails) NCU_KERNELS=megakernel_fwd NCU_EXTRA="lts__t_bytes.sum,lts__t_sectors_op_read.sum" bash scripts/device/ncu_gemm.sh configs/ncu-mega-tails.json 40;; # ncu of the fused bf16 forward at 64 / 128 rows per expert (DeepSeek-V3, 256 experts, 2048 / 4096 tokens), padded, swap_tail and gather: the L2's bytes and throughput against scripts/tile_traffic.py's model (NOTES.md item 1: tensor work or L2 loads at 128 rows)
    ncu171) NCU_KERNELS=megakernel_fwd NCU_EXTRA="lts__t_sectors_op_read.sum" bash scripts/device/ncu_gemm.sh configs/ncu-mega-171.json 8
      NCU_EXTRA="lts__t_sectors_op_read.sum" bash scripts/device/ncu_gemm.sh configs/ncu-gemm-171.json 8;; # ncu at 171 rows per expert (384 experts, top-8, 8192 tokens): the fused forward with wave_lockstep 0 / 1 beside mok-gemm's two GEMMs alone: are the weights read from DRAM more than once where the fused kernel's compute is 1.10-1.13x the GEMMs' (NOTES.md item 1)
    ncu171src) export NCU_EXTRA="lts__t_sectors_op_read.sum"
      S="lts__t_sectors_srcunit_tex_op_read.sum lts__t_sectors_srcunit_ltcfabric.sum"
      S="$S lts__t_sectors_srcunit_ltcfabric_op_read.sum lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"
      S="$S lts__t_sectors_srcunit_gcc.sum lts__t_sectors_srcunit_gcc_op_read.sum lts__t_sectors_srcnode_gpc_op_read.sum"
      S="$S lts__t_sectors_srcunit_tex_op_write.sum lts__t_sectors_srcunit_tex_op_atom.sum lts__t_sectors_srcunit_tex_op_red.sum"
      NCU_KERNELS=megakernel_fwd NCU_MAYBE="$S" bash scripts/device/ncu_gemm.sh configs/ncu-mega-171.json 4
      NCU_MAYBE="$S" bash scripts/device/ncu_gemm.sh configs/ncu-gemm-171.json 4
      NCU_KERNELS=megakernel_fwd NCU_MAYBE="$S" bash scripts/device/ncu_gemm.sh configs/ncu-mega-171-alone.json 8
      unset NCU_EXTRA;; # ncu171's kernels with the L2's reads split by source (the SMs' loads and TMA, tex; the other L2 partition's, ltcfabric; the instruction and constant caches', gcc): the fused forward read 134.7-136.7 GB through the L2 where scripts/tile_traffic.py models 105.6 for it and mok-gemm's two GEMMs read 97.3 (results/h100x1/2026-12-08-l2-source); then with breakdown 1, whose launches after the full forwards are, in src/impl/megakernel.c's order, the kernel with communication skipped (no scatter, no sends) and with compute skipped
    ncumxstalls) bash scripts/device/ncu_stalls.sh configs/gemm-ncu-mx.json gemm_sm90 mx-expand;; # SASS stall sampling of mok-gemm's mxfp8 scheme (b) GEMM1 (128 x 256 tiles, DeepSeek-V3-local 4096): where the producer's expansion waits
    ncustalls) bash scripts/device/ncu_stalls.sh configs/ncu-mega-1rank.json megakernel_fwd megakernel-1rank;; # SASS stall sampling, 1 rank
    inputs) "$DEV/bin/test_gpu_fill"; echo "rc=$?" # the seeded fills' statistics; the layer implementations on normal / scaled inputs
      sh tests/gpu_impls.sh "$BIN" . "$R/gpu-inputs" tests/gpu_inputs_small.json;;
    inputspower) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/inputs-power.json;; # uniform vs normal inputs at 8192 tokens: time, power, energy
    megaissue5) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/megakernel-issue5.json;; # issue 5's four problems (uniform, 4096 / 8192), 100 iterations, breakdown
    megaqwen3tune) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/megakernel-qwen3-tune.json;; # Qwen3 4096 / 8192: comm SMs 8-32 x own_first 8 / 16 / 32, breakdown, beside nccl and nccl-overlap
    megaqwen4096) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/megakernel-qwen4096-exposed.json;; # Qwen3 4096: comm SMs x own_first x chunk, breakdown (exposed)
    megasmall) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-mega-small" tests/gpu_mega_small.json;;
    megasplit) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-mega-split" tests/gpu_mega_split.json;; # the megakernel's split-half units (split_half=1) on small ragged problems
    rowvec) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-row-vectors" tests/gpu_row_vectors.json;; # lsa-layer on rows of 144 (bf16, hidden 1152) and 17 (FP8 wire rows, hidden 256) 16-byte vectors: the pull dispatch's warp loop with slot shuffles
    megaswap) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-mega-swap" tests/gpu_mega_swap.json;; # the megakernel's swapped tail units (swap_tail=1) on small ragged problems
    megagather) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-mega-gather" tests/gpu_mega_gather.json;; # gather 1 beside 0, small ragged problems
    megaorder) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-mega-order" tests/gpu_mega_order.json;; # own_first x lockstep x send
    mega) $MPIRUN -np "$NP" "$BIN" --probe -o "$R" configs/megakernel.json;;
    megareport) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/megakernel-report.json;; # issue 5: 1024-16384 tokens, uniform and zipf, breakdown
    megapower) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/megakernel-power.json;; # 300 iterations: power_w, energy_j
    megaownfirst) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/megakernel-own-first.json;; # own_first = 0 / K experts / all
    megabreakdown) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/megakernel-breakdown.json;;
    megasanitize) for tool in memcheck racecheck; do
        san_run $tool 300 "$NP" "mega-san-$tool" "mega-sanitize-$tool.log" tests/gpu_mega_sanitize.json
        echo "compute-sanitizer $tool (megakernel) rc=$?"; grep -E "ERROR SUMMARY|Error|hazard" "$R/mega-sanitize-$tool.log" | sort | uniq -c | head
      done;;
    megagathersan) for tool in memcheck racecheck; do # gather=1 under compute-sanitizer (with the breakdown's runs)
        san_run $tool 300 "$NP" "mega-gather-san-$tool" "mega-gather-sanitize-$tool.log" \
          tests/gpu_mega_gather_sanitize.json
        echo "compute-sanitizer $tool (megakernel gather) rc=$?"
        grep -E "ERROR SUMMARY|Error|hazard" "$R/mega-gather-sanitize-$tool.log" | sort | uniq -c | head
      done;;
    tunecheck) for cfg in deepseek-v3 qwen3-235b; do # issue 6: budgeted search vs exhaustive, then --tuned reuse
        python3 scripts/tune_check.py --mpirun "$MPIRUN -np $NP" --bin "$BIN" --config configs/$cfg.json \
          --impl nccl-overlap --out "$R/tune-check-$cfg"; echo "rc=$?"
      done;;
    tunemega) python3 scripts/tune_check.py --mpirun "$MPIRUN -np $NP" --bin "$BIN" --config configs/megakernel.json \
        --impl megakernel --out "$R/tune-check-megakernel";;
    graphsmall) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-graph-small" tests/gpu_graph_small.json;;
    comm) $MPIRUN -np "$NP" "$BIN" --probe -o "$R" configs/comm-deepseek.json;;
    commbest) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/comm-deepseek-best.json;; # the best lsa candidates, 100 iterations
    commsmallbatch) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/comm-small-batch.json;;
    ab) . scripts/device/ab.sh;; # AB_OLD, AB_NEW, AB_CONFIG, AB_REPS: two binaries on one config, alternating
    quick) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/quick.json;; # the README's first run
    firstrun) # issue 20 on a GPU: scripts/run.sh as the README says, a plan above the GPU's memory, the fallback write
      NP=$NP MOK_BUILD=$DEV/bin sh scripts/run.sh configs/quick.json -o "$R/run-sh" -n 3 > "$R/run-sh.log" 2>&1
      echo "run.sh rc=$? (0 expected)"; tail -n 2 "$R/run-sh.log"
      printf '%s\n' '{"model": {"hidden": 65536, "intermediate": 65536, "experts": 64, "topk": 8},' \
        '"tokens_per_rank": 8192, "impls": ["nccl"]}' > "$R/too-big.json"
      $MPIRUN -np 1 "$BIN" -o "$R/too-big" "$R/too-big.json" > "$R/too-big.log" 2>&1
      echo "plan above the GPU's memory rc=$? (2 expected)"; grep "refused" "$R/too-big.log"
      # the final write fails: output.dir is replaced by a plain file while the run goes on (root writes anywhere
      # a directory is); the reports go to $TMPDIR/mok-bench-NAME-PID and the run exits 1
      TMPDIR=$R $MPIRUN -np 1 -x TMPDIR "$BIN" -n 3 -o "$R/final-write" configs/quick.json > "$R/fallback.log" 2>&1 &
      pid=$!; sleep 8; rm -rf "$R/final-write"; touch "$R/final-write"; wait $pid
      echo "failed final write rc=$? (1 expected)"; grep -E "fallback|report:" "$R/fallback.log"
      ls -d "$R"/mok-bench-quick-* && ls "$R"/mok-bench-quick-*;;
    quant) "$DEV/bin/test_gpu_quant";; # the GPU's FP8 quantizers (the separate kernels, the megakernel's lane-group ones) against the host reference, byte for byte
    refbwd) "$DEV/bin/test_gpu_ref_bwd";; # the GPU's fp32 backward reference against the host's (double precision)
    reffp8) "$DEV/bin/test_gpu_ref_fp8";; # the fp8_block reference GEMM against the host's dequantized double-precision GEMM
    ltfp8) "$DEV/bin/test_gpu_cublaslt_fp8";; # cuBLASLt's block-scaled and per-tensor FP8 GEMMs against the host
    fp8sanitize) for tool in memcheck racecheck; do # the fp8_block GEMMs (mok's policy, cuBLASLt's) under compute-sanitizer
        san_run $tool 300 1 "fp8-san-$tool" "fp8-sanitize-$tool.log" tests/gpu_fp8_sanitize.json
        echo "compute-sanitizer $tool (fp8_block) rc=$?"; grep -E "ERROR SUMMARY|Error|hazard" "$R/fp8-sanitize-$tool.log" | sort | uniq -c | head
      done;;
    fp8gemm) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-fp8-gemm" tests/gpu_fp8_gemm_small.json;; # fp8_block expert GEMMs on small ragged problems
    h1fp8gemm) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-fp8-gemm.json;; # one GPU: bf16 and fp8_block expert GEMMs at DeepSeek-V3 (128 experts) and Qwen3-235B shapes
    bwdmega) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-bwd-mega" tests/gpu_bwd_mega_small.json;; # the fused backward (megakernel bwd, fwd_bwd) on small ragged problems, every output checked
    bwdshunits) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-bwd-shared-units" tests/gpu_bwd_mega_shared_units.json;; # the fused backward with the shared experts' backward inside the kernel (shared_units 1) and after it (0), small ragged problems, every output checked
    bwdreduce) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-bwd-mega-reduce" tests/gpu_bwd_mega_reduce.json;; # the fused backward's fp32 gradients added by TMA reduce (wgrad_reduce 1) beside the load-add-store tiles (0): with and without shared experts inside, both act, both wgrad_mix, small ragged problems, every output checked
    bwdmegasan) for tool in memcheck racecheck; do # the fused backward under compute-sanitizer, a small problem
        # racecheck on a config without shared_sms 8 (the same kernels beside each other): under it the reference
        # takes ~30 s a problem and a candidate 1-4 s an iteration, and the whole config did not finish in 215 s
        cfg=tests/gpu_bwd_mega_sanitize.json; [ $tool = racecheck ] && cfg=tests/gpu_bwd_mega_racecheck.json
        san_run $tool 240 1 "bwd-mega-san-$tool" "bwd-mega-$tool.log" $cfg
        echo "compute-sanitizer $tool (fused backward) rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$R/bwd-mega-$tool.log"
      done;;
    h1bwdmega) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-bwd-layer-mega.json # one GPU: the fused backward (bwd, fwd_bwd; act save, recompute) beside nccl (gemm=mok, per expert) at Qwen3-235B and DeepSeek-V3 shapes, uniform, then zipf at 4096
      $MPIRUN -np 1 "$BIN" -o "$R" configs/h200x1-bwd-layer-mega-zipf.json;;
    h1bwdshared) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-bwd-mega-shared.json;; # one GPU: the fused backward with DeepSeek-V3's shared expert after the kernel (shared_sms 0) or beside it on 8 / 16 / 24 SMs, with the breakdown, beside nccl (gemm=mok)
    fp8layer) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-fp8-layer" tests/gpu_fp8_layer_small.json;; # FP8 layers (nccl, nccl-overlap: fp8_block on cuBLASLt per expert or mok's core, mxfp8 on mok's core or emulated; lsa-layer: wire rows through LSA, mok's core; the megakernel: rows quantized in its push) on small ragged problems, h and y checked apart against the quantized reference
    fp8mega) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-fp8-mega" tests/gpu_fp8_mega_small.json;; # the FP8 megakernel alone (fp8_block, mxfp8 mx_scheme 0 / 1 / 3; 1 and 2 comm SMs) on small ragged problems: its dispatch's cases in ~15 s
    fp8layersan) for tool in memcheck racecheck; do # the FP8 layers (nccl, nccl-overlap, lsa-layer, megakernel) under compute-sanitizer
        san_run $tool 240 1 "fp8-layer-san-$tool" "fp8-layer-$tool.log" tests/gpu_fp8_layer_sanitize.json
        echo "compute-sanitizer $tool (FP8 layers) rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$R/fp8-layer-$tool.log"
      done;;
    fp8layerrace) # racecheck of the FP8 layers that fp8layersan's time limit cut (nccl-overlap, lsa-layer), alone
      san_run racecheck 470 1 fp8-layer-race fp8-layer-race.log tests/gpu_fp8_layer_sanitize.json --only nccl-overlap,lsa-layer
      echo "compute-sanitizer racecheck (FP8 nccl-overlap, lsa-layer) rc=$?"; grep -E "RACECHECK SUMMARY" "$R/fp8-layer-race.log";;
    h1fp8layer) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-fp8-layer.json;; # one GPU: the fp8_block and mxfp8 forwards of nccl, lsa-layer and the megakernel beside their bf16 forwards, DeepSeek-V3 and Qwen3-235B shapes
    h1fp8tune) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-fp8-layer-tune.json;; # one GPU: the bf16 and fp8_block megakernel over comm_sms 8 / 24 / 32 x chunk_rows 64 / 128 / 256 beside nccl (gemm=mok), DeepSeek-V3 and Qwen3-235B: where the FP8 kernel's exposed communication goes down
    h1bwdlsa) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-bwd-lsa-layer.json # one GPU: lsa-layer's backward beside nccl (gemm=mok) and the fused backward (act=save, breakdown), then mok-gemm's backward GEMMs alone at the same shapes (the fused kernel's GEMM rate)
      $MPIRUN -np 1 "$BIN" -o "$R" configs/h200x1-bwd-gemm-mok-best.json;;
    h1bwdmix) $MPIRUN -np 1 "$BIN" -o "$R" configs/h200x1-bwd-mega-mix.json;; # one GPU: the fused backward's weight-gradient tiles after GEMM1 dgrad or interleaved with it (wgrad_mix 0 / 1), beside nccl gemm=mok
    h2bwd) $MPIRUN -np "$NP" "$BIN" --probe -o "$R" configs/h200x2-bwd-layer.json;; # two GPUs (issue 23): the training pass of every layer implementation (nccl, nccl-overlap, lsa-layer, the fused backward) at Qwen3-235B and DeepSeek-V3 shapes
    bwdoneset) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-bwd-one-set" tests/gpu_bwd_one_set.json;; # pass bwd on one input set (timing.input_sets 1), small problems: the fused backward's and lsa-layer's rows, which the multi-set configs skip
    bwdlayer) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-bwd-layer" tests/gpu_bwd_layer_small.json;; # the NCCL baselines' backward and training step on small ragged problems, every output checked
    h2fp8) $MPIRUN -np "$NP" "$BIN" --probe -o "$R" configs/h200x2-fp8-layer.json;; # two GPUs (issue 23): the fp8_block and mxfp8 forwards beside bf16 for every layer implementation (those without FP8 say so) at Qwen3-235B and DeepSeek-V3 shapes; the summary's x bf16 columns
    h1bwdlayer) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-bwd-layer.json # one GPU: the layers' bwd and fwd_bwd (nccl, nccl-overlap) at Qwen3-235B and DeepSeek-V3 shapes, uniform, then zipf at 4096
      $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-bwd-layer-zipf.json;;
    h1bwdlayermok) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-bwd-layer-mok.json;; # one GPU: the layers' bwd and fwd_bwd with gemm=mok (mok's GEMM core, grouped), the shapes of h1bwdlayer (run beside it)
    refmx) "$DEV/bin/test_gpu_mxfp8";; # mxfp8 against the host: reference GEMM, dequantization, scale tiles, scheme (b)'s conversion table, mok's mxfp8 kernel (mx_scheme 0 to 3) on ragged groups
    mxgemm) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-mxfp8-gemm" tests/gpu_mxfp8_gemm_small.json;; # mxfp8 expert GEMMs (mok's policies, mx_scheme 0 to 3; cuBLAS emulated) on small ragged problems
    mxsanitize) for tool in memcheck racecheck; do # the mxfp8 GEMMs (mok's policies, mx_scheme 0 to 3; the emulation) under compute-sanitizer
        san_run $tool 300 1 "mx-san-$tool" "mx-sanitize-$tool.log" tests/gpu_mxfp8_sanitize.json
        echo "compute-sanitizer $tool (mxfp8) rc=$?"; grep -E "ERROR SUMMARY|Error|hazard" "$R/mx-sanitize-$tool.log" | sort | uniq -c | head
      done;;
    h1mxgemm) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-mxfp8-gemm.json;; # one GPU: bf16, fp8_block and mxfp8 (mx_scheme 0 and 1) expert GEMMs at DeepSeek-V3 (128 experts) and Qwen3-235B (64) shapes
    mxschemes) $MPIRUN -np 1 "$BIN" -o "$R" configs/gemm-mx-schemes.json;; # one GPU: mok-gemm's mxfp8 mx_scheme 1, 2 and 3 beside its bf16 GEMMs at the DeepSeek-V3 (128 experts) and Qwen3-235B (64) shapes
    bwdgemm) sh tests/gpu_impls.sh "$BIN" . "$R/gpu-bwd-gemm" tests/gpu_bwd_gemm_small.json;; # the expert GEMMs' backward on small ragged problems, every output checked
    growshrink) for m in layer gemm comm; do # every mode over problems that grow and shrink (issue 19 item 8)
        sh tests/gpu_impls.sh "$BIN" . "$R/gpu-grow-shrink-$m" "tests/gpu_grow_shrink_$m.json"; echo "grow/shrink $m rc=$?"
      done;;
    h1ab) for c in ${H1AB:-forward gemm}; do # one GPU: the forward and mok-gemm, mok-bench-old (25cb9ea) and the new one alternating, 3 reps
        (R="$R/ab-$c"; AB_CONFIG="configs/h200x1-ab-$c.json"; AB_REPS=3; . scripts/device/ab.sh)
      done;;
    h1baseline) for c in baseline-mok baseline-mok-gemm baseline-mok-small baseline-mok-small-gemm; do # one GPU: gemm=mok's GEMM phase against mok-gemm on the same problems
        $MPIRUN -np 1 "$BIN" -o "$R" "configs/h200x1-$c.json"; echo "h200x1-$c rc=$?"
      done;;
    h1bwdgemm) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-bwd-gemm.json;; # one GPU: the expert GEMMs' backward (cublas-gemm) at the forward's shapes, rooflines
    gemmbwdtest) "$DEV/bin/test_gpu_gemm_bwd";; # the GEMM core's dgrad and wgrad against a host reference on ragged groups, every configuration
    mokbwdsan) for tool in memcheck racecheck; do # mok-gemm's backward (the GEMM core's dgrad and wgrad) under compute-sanitizer
        san_run $tool 300 1 "mok-bwd-san-$tool" "mok-bwd-sanitize-$tool.log" tests/gpu_bwd_mok_sanitize.json
        echo "compute-sanitizer $tool (mok-gemm backward) rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$R/mok-bwd-sanitize-$tool.log"
      done;;
    h1corestages) # one GPU: mok-gemm's ring of 4 at tile_n 256 (stages, wgrad_stages 4: output in two rounds)
      # against the 3 its whole staging leaves, fwd and bwd, in both candidate orders (a candidate's place among its
      # problem's moves its time by a few percent), compared by scripts/order_compare.py
      python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); t=c["tune"]["mok-gemm"]
t["stages"].reverse(); t["wgrad_stages"].reverse(); json.dump(c, open(sys.argv[2], "w"))' \
        configs/h200x1-core-stages.json "$R/core-stages-reversed.json" || return 1
      $MPIRUN -np 1 "$BIN" --probe -o "$R/order-04" configs/h200x1-core-stages.json &&
        $MPIRUN -np 1 "$BIN" --probe -o "$R/order-40" "$R/core-stages-reversed.json" &&
        python3 scripts/order_compare.py "$R"/order-04/h200x1-core-stages.csv "$R"/order-40/h200x1-core-stages.csv \
          --columns gemm1_us,gemm2_us;;
    h1bwdgemmmok) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-bwd-gemm-mok.json;; # one GPU: the expert GEMMs' backward, mok's GEMM core (tile_n, dgrad's raster) beside per-expert cuBLAS, both wgrad modes
    h1traingemm) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-train-gemm.json;; # one GPU: the expert GEMMs' fwd, bwd and fwd_bwd (cublas-gemm) at the forward's shapes
    bwdsanitize) san_run memcheck 0 1 bwd-san bwd-sanitize.log tests/gpu_bwd_gemm_small.json --only cublas-gemm
      echo "compute-sanitizer memcheck (backward) rc=$?"; grep -E "ERROR SUMMARY" "$R/bwd-sanitize.log";;
    bwdlayersan) for tool in memcheck racecheck; do # the layers' backward under compute-sanitizer, a small problem
        san_run $tool 0 1 "bwd-layer-san-$tool" "bwd-layer-$tool.log" tests/gpu_bwd_layer_sanitize.json
        echo "compute-sanitizer $tool (layers' backward) rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$R/bwd-layer-$tool.log"
      done;;
    bwdlayermokrace) # racecheck of the NCCL layers' backward, gemm=mok only (cuBLAS's take ~2 s an iteration there)
      san_run racecheck 0 1 bwd-layer-mok-race bwd-layer-mok-racecheck.log tests/gpu_bwd_layer_mok_racecheck.json
      echo "compute-sanitizer racecheck (layers' backward, gemm=mok) rc=$?"; grep -E "RACECHECK SUMMARY" "$R/bwd-layer-mok-racecheck.log";;
    h1split) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-small-groups-split.json;; # one GPU: small groups, the megakernel with split_half 0 and 1 beside nccl gemm=mok, rooflines
    h1swap) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-small-groups-swap.json;; # one GPU: small groups, the megakernel with swap_tail 0 and 1 beside nccl gemm=mok, rooflines
    h1forward) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-forward.json;; # one GPU: the forward beside the strong baselines (gemm=mok), rooflines
    h1small) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-small-groups.json;; # one GPU: 384 experts, 32-128 rows per expert, rooflines
    h1many) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-many-experts.json;; # one GPU: 512 small experts, where per-expert cuBLAS is launch-bound (gemm=mok beside it)
    h1smallgemm) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-small-groups-gemm.json;; # one GPU: 64- against 128-row tiles at 32-128 rows per expert
    h1gemm) $MPIRUN -np 1 "$BIN" --probe -o "$R" configs/h200x1-gemm.json;; # one GPU: mok-gemm against cuBLAS, the baseline's gemm=mok reference
    deepseek) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/deepseek-v3.json;;
    qwen) $MPIRUN -np "$NP" "$BIN" -o "$R" configs/qwen3-235b.json;;
    *) echo "node.sh: no step '$1' (scripts/device/node.sh --list names them)"; return 2;;
  esac
}
