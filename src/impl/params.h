/* params: every implementation's tuning parameters, each named once in one X-macro table (name, kind, range,
 * default, help). From these tables come the registry's definitions (desc.c: config validation, sweeps, the
 * report's params column, `mok-bench --list-params` and the README table it prints), and a struct per
 * implementation with one int field per parameter, which the implementations, the dry-run's memory estimate and
 * the host-side supports checks read by name. Pure C, no CUDA.
 *
 * X(name, kind, min, max, default, help): kind is MOK_NUMERIC or MOK_CHOICES(array) (a value is then the index
 * of its name in the array). A name means the same thing in every implementation that has it. */
#ifndef MOK_IMPL_PARAMS_H
#define MOK_IMPL_PARAMS_H

#include "megakernel.h"  /* MOK_OWN_FIRST_MAX */
#include "mok_kernels.h" /* MOK_LSA_REDUCE_CHUNK, MOK_LSA_REDUCE_CHUNK_MIN */

#define MOK_NUMERIC NULL, 0
#define MOK_GEMM_STREAMS_MAX 16 /* gemm_streams' range; gemm_cublas.c asserts its stream table holds that many */
#define MOK_CHOICES(array) array, (int)(sizeof(array) / sizeof((array)[0]))

static const char *const mok_choices_gemm[] __attribute__((unused)) = {"grouped", "per_expert"};
static const char *const mok_choices_expert_gemm[] __attribute__((unused)) = {"grouped", "per_expert", "mok"};
static const char *const mok_choices_combine[] __attribute__((unused)) = {"per_route", "per_rank"};
static const char *const mok_choices_copy[] __attribute__((unused)) = {"warp", "bulk"};
static const char *const mok_choices_layout[] __attribute__((unused)) = {"slots", "landing"};
static const char *const mok_choices_dispatch[] __attribute__((unused)) = {"pull", "push"};
static const char *const mok_choices_launch[] __attribute__((unused)) = {"stream", "graph"};
static const char *const mok_choices_overlap[] __attribute__((unused)) = {"none", "gemm1"};
static const char *const mok_choices_act[] __attribute__((unused)) = {"save", "recompute"};
static const char *const mok_choices_small[] __attribute__((unused)) = {"auto", "off", "v1"};
static const char *const mok_choices_reduce[] __attribute__((unused)) = {"after", "overlap"};
static const char *const mok_choices_kernel[] __attribute__((unused)) = {"sm90", "portable"};

/* cuBLAS offers a grouped GEMM and plain per-expert calls, which can run side by side on several streams; which
 * is fastest depends on the shape, so all are candidates and the sweep keeps the fastest. */
#define MOK_PARAMS_CUBLAS(X)                                                                                     \
    X(gemm, MOK_CHOICES(mok_choices_gemm), 0, 1, 1,                                                              \
      "cuBLAS expert GEMMs: one grouped call per GEMM, or one call per expert")                                  \
    X(gemm_streams, MOK_NUMERIC, 1, MOK_GEMM_STREAMS_MAX, 4, "per_expert: streams the experts' GEMMs are spread over (grouped: must be 1)")

/* The NCCL baselines' expert GEMMs: cuBLAS grouped or per expert, or mok's own grouped GEMM (kernels/gemm, the
 * megakernel's core, unfused, group sizes read on the device), so the baseline has the best GEMM there is. */
#define MOK_PARAMS_EXPERT_GEMM(X)                                                                                \
    X(gemm, MOK_CHOICES(mok_choices_expert_gemm), 0, 2, 1,                                                       \
      "expert GEMMs: cuBLAS, one grouped call per GEMM (grouped) or one call per expert (per_expert); or mok's "  \
      "grouped GEMM with SwiGLU fused (mok: Hopper only, 128 x 256 tiles, 64 x 256 where the local experts "     \
      "average 64 rows or fewer, n-major; with a backward pass GEMM1 unfused to keep the gate/up rows, and the "  \
      "backward on the same core). The backward runs per_expert or mok")                                        \
    X(gemm_streams, MOK_NUMERIC, 1, MOK_GEMM_STREAMS_MAX, 4,                                                     \
      "per_expert: streams the experts' GEMMs are spread over (grouped, mok: must be 1)")                       \
    X(mx_scheme, MOK_NUMERIC, 0, 3, 0,                                                                           \
      "gemm=mok with dtype mxfp8: 0, mok-gemm's mx_scheme 0 (128 x 128 tiles promoted per 32 K); 1, its " \
      "mx_scheme 1 (e4m3 expanded to bf16 in shared memory, 128 x 256 tiles); 2, 3: its mx_scheme 2, 3 (the "    \
      "weights held in bf16)")

#define MOK_PARAMS_NCCL(X) MOK_PARAMS_EXPERT_GEMM(X)

#define MOK_PARAMS_NCCL_OVERLAP(X)                                                                               \
    X(chunks, MOK_NUMERIC, 1, 64, 1,                                                                              \
      "token chunks, each a separate dispatch/GEMM/combine (re-reads expert weights per chunk)")                  \
    X(expert_groups, MOK_NUMERIC, 1, 1024, 4, "local expert groups, each a separate dispatch/GEMM/combine stage") \
    MOK_PARAMS_EXPERT_GEMM(X)                                                                                     \
    X(reserve_sms, MOK_NUMERIC, 0, 128, 0,                                                                       \
      "SMs the GEMMs leave free for NCCL's kernels (cuBLAS: cublasSetSmCountTarget; mok: fewer persistent CTAs); 0: none")

#define MOK_PARAMS_NCCL_P2P(X)

/* mxfp8 scheme (b)'s landing ring (mok-gemm, megakernel: kernels/gemm/sm90_mx_expand.cuh) */
#define MOK_PARAM_LAND_STAGES(X)                                                                                  \
    X(land_stages, MOK_NUMERIC, 0, 4, 0,                                                                         \
      "mx_scheme 1 (mok-gemm: 1 or 2): the e4m3 landing ring's depth, 2..4 k blocks loaded ahead of the "         \
      "expansion (0: as many as fit beside two bf16 slots, or beside stages)")

/* Launch latency dominates small token counts (a dozen dependent kernels); training frameworks replay MoE layers
 * as CUDA graphs, so the graph launch is what they would see. */
#define MOK_PARAM_LAUNCH(X)                                                                                       \
    X(launch, MOK_CHOICES(mok_choices_launch), 0, 1, 0,                                                          \
      "stream: kernels launched one by one each run; graph: dispatch, (experts,) combine each replayed from a "  \
      "CUDA graph captured once per input set")

/* The LSA transfers' knobs, the same in lsa and lsa-layer: how many SMs move data, how combine sends (a row per
 * route, or one fp32-summed partial per token and rank, which moves fewer bytes), the GEMM tile the schedule
 * pads each expert to, and the rows per ready counter (the overlap granularity a consumer waits on). */
#define MOK_PARAMS_LSA_TRANSFER(X)                                                                                \
    X(comm_sms, MOK_NUMERIC, 1, 132, 16, "SMs (blocks of 1024 threads) that run dispatch and combine")           \
    X(combine, MOK_CHOICES(mok_choices_combine), 0, 1, 1,                                                        \
      "combine sends one row per (token, k) or one partial sum per (token, rank)")                              \
    X(tile_rows, MOK_NUMERIC, 1, 1024, 128, "each expert's rows are padded to a multiple of this (the GEMM's M tile)") \
    X(chunk_rows, MOK_NUMERIC, 1, 1 << 20, 256, "schedule rows per ready counter")

/* At a few hundred tokens launch latency dominates: small problems fuse launches unless told not to, so a config
 * can measure what the fusion gains in the same run. */
#define MOK_PARAMS_LSA(X)                                                                                         \
    MOK_PARAMS_LSA_TRANSFER(X)                                                                                    \
    X(copy, MOK_CHOICES(mok_choices_copy), 0, 1, 0,                                                              \
      "rows move by warp 16-byte loads/stores or by the bulk copy engine: layout=slots: the pull dispatch and "  \
      "the per-route combine; layout=landing: the push and the per-rank combine through per-warp rings of rows " \
      "in shared memory (general paths; the small one-launch paths copy with warps)")                           \
    X(layout, MOK_CHOICES(mok_choices_layout), 0, 1, 0,                                                          \
      "slots: a copy of the row per expert slot; landing: one row per token and rank, slots read it there")     \
    X(dispatch, MOK_CHOICES(mok_choices_dispatch), 0, 1, 0,                                                      \
      "pull: destinations load rows from the owners; push: owners store rows into the destinations")            \
    MOK_PARAM_LAUNCH(X)                                                                                           \
    X(small, MOK_CHOICES(mok_choices_small), 0, 2, 0,                                                            \
      "auto: small problems take fused variants (push dispatch in one launch and one-block schedule <= 8192 "    \
      "routes, combine+sum on a block per token <= 512 tokens); off: always the general kernels; v1: the first " \
      "variants (table+publish, one-warp placement <= 4096 routes, combine+sum on the comm_sms blocks)")        \
    X(reduce, MOK_CHOICES(mok_choices_reduce), 0, 1, 0,                                                          \
      "combine=per_rank, general path (not the small fused ones): after: the owner sums once every rank's done " \
      "flag is in (a separate kernel); overlap: one cooperative launch, reduce blocks on the SMs the combine "   \
      "leaves sum each chunk of reduce_chunk tokens as soon as every peer flagged it (same order, bitwise the "  \
      "same y)")                                                                                                 \
    X(reduce_chunk, MOK_NUMERIC, MOK_LSA_REDUCE_CHUNK_MIN, 1024, MOK_LSA_REDUCE_CHUNK,                           \
      "reduce=overlap: owner tokens per chunk flag; finer chunks leave less of the sum after the last flag but " \
      "cost a barrier and a flag each")

/* mok-gemm: the Hopper kernel's tile shape, pipeline depth and persistent CTA count; the portable kernel ignores
 * them. */
#define MOK_PARAMS_MOK_GEMM(X)                                                                                    \
    X(kernel, MOK_CHOICES(mok_choices_kernel), 0, 1, 0, "sm90: wgmma + TMA, warp-specialized, persistent; "     \
      "portable: mma.sync")                                                                                      \
    X(tile_n, MOK_NUMERIC, 128, 256, 128, "output columns per tile before SwiGLU (128 or 256)")                  \
    X(stages, MOK_NUMERIC, 0, 8, 0,                                                                              \
      "shared-memory pipeline stages, 0: as many as fit (at tile_n 256 a GEMM without SwiGLU fits 3 beside its "  \
      "output staging; 4 stores its output in two rounds of 128 columns)")                                       \
    X(ctas, MOK_NUMERIC, 0, 1024, 0, "persistent CTAs, 0: one per SM")                                           \
    X(cluster, MOK_NUMERIC, 1, 2, 1, "CTAs per thread-block cluster along M: 2 multicasts each B tile to a pair") \
    X(lockstep_k, MOK_NUMERIC, 0, 4096, 0,                                                                       \
      "k blocks between grid barriers of the loads, so CTAs sharing A or B tiles meet in L2; 0: off")            \
    X(raster, MOK_NUMERIC, 0, 1, 0,                                                                              \
      "tile order within an expert: 0 m-major (neighbouring CTAs share A), 1 n-major (they share B)")           \
    X(tile_m, MOK_NUMERIC, 64, 256, 128,                                                                         \
      "rows per tile: 128, 256 with tile_n 128 (each consumer warpgroup runs two 64-row wgmmas), or 64 with "      \
      "tile_n 256 and cluster 1 (the warpgroups split the columns: small groups are not padded to 128 rows)")     \
    X(fp8_n, MOK_NUMERIC, 64, 128, 128,                                                                          \
      "dtype fp8_block (mxfp8 with mx_scheme 0): columns of each wgmma product promoted into fp32 per 128 K (per " \
      "32 K) (64: two per tile, 128: one)")                                                                      \
    X(mx_scheme, MOK_NUMERIC, 0, 3, 0,                                                                           \
      "dtype mxfp8: 0, e4m3 wgmma with each 32 K's product promoted into fp32 with both scales (128 x 128 "        \
      "tiles); 1, the operands expanded to bf16 (e4m3 x 2^scale, exact) in shared memory by the producer "       \
      "warpgroup and bf16 wgmma (tile_n 128 or 256, no clusters or lockstep); 2, as 1 for the rows, the weights' " \
      "MX values held in bf16 (expanded once at setup: twice the FP8 weight bytes) and loaded as bf16; 3, the "    \
      "weights as 2 (K permuted within each 64-K block), the rows expanded by the consumer threads into "        \
      "registers for wgmma's register operand")                                                                  \
    MOK_PARAM_LAND_STAGES(X)                                                                                      \
    X(lean, MOK_NUMERIC, 0, 1, 0,                                                                                \
      "dtype fp8_block with tile_n 256: 1, the lean layout (two consumer warpgroups, one thread issuing the "     \
      "loads: 256 threads of up to 255 registers); 0, a producer warpgroup beside them (384 threads)")           \
    X(cluster_n, MOK_NUMERIC, 1, 2, 1,                                                                           \
      "CTAs per thread-block cluster along N: 2 multicasts each A tile to a pair of adjacent column tiles (bf16, " \
      "tile_m 128, cluster 1, an even count of column tiles): half the A reads from L2 for small groups")      \
    X(wgrad_stages, MOK_NUMERIC, 0, 8, 0,                                                                        \
      "pass bwd: the weight-gradient kernel's pipeline stages, 0: as stages (with bf16 gradients at tile_n 256 "  \
      "its output staged whole leaves room for 3; 4 stores it in two rounds of 128 columns)")

/* lsa-layer: the transfers' knobs and the GEMM's (see mok-gemm); layout is slots and dispatch pull, since the
 * GEMMs read contiguous expert-major rows. */
#define MOK_PARAMS_LSA_LAYER(X)                                                                                   \
    MOK_PARAMS_LSA_TRANSFER(X)                                                                                    \
    X(kernel, MOK_CHOICES(mok_choices_kernel), 0, 1, 0, "sm90: wgmma + TMA expert GEMMs; portable: mma.sync")    \
    X(tile_n, MOK_NUMERIC, 128, 256, 128, "GEMM output columns per tile before SwiGLU (128 or 256)")             \
    X(stages, MOK_NUMERIC, 0, 8, 0, "GEMM shared-memory pipeline stages, 0: as many as fit")                     \
    MOK_PARAM_LAUNCH(X)                                                                                           \
    X(overlap, MOK_CHOICES(mok_choices_overlap), 0, 1, 0,                                                        \
      "none: GEMMs after the dispatch; gemm1: GEMM1 (sm90) runs beside the dispatch on the other SMs, each tile " \
      "waiting on its rows' ready counters")                                                                     \
    X(mx_scheme, MOK_NUMERIC, 0, 3, 0,                                                                           \
      "dtype mxfp8: 0, mok-gemm's mx_scheme 0 (128 x 128 tiles promoted per 32 K); 1, its mx_scheme 1 (e4m3 "    \
      "expanded to bf16 in shared memory, 128 x 256 tiles); 2, 3: its mx_scheme 2, 3 (the weights held in bf16)")

/* megakernel: dispatch, expert GEMMs and combine sends in one persistent launch; the GEMM tiles are 128 x 256 and
 * experts are padded to 128 rows (fixed: the row blocks its counters track). */
#define MOK_PARAMS_MEGAKERNEL(X)                                                                                  \
    X(comm_sms, MOK_NUMERIC, 1, 131, 16, "SMs whose blocks dispatch and combine; the others run GEMM tiles")     \
    X(combine, MOK_CHOICES(mok_choices_combine), 0, 1, 1,                                                        \
      "per_route: each row back as soon as its GEMM2 row block is stored; per_rank: partial sums once GEMM2 is " \
      "done")                                                                                                    \
    X(chunk_rows, MOK_NUMERIC, 1, 1 << 20, 128,                                                                  \
      "dispatched rows per ready counter (GEMM1 tiles wait on the counters of their rows)")                      \
    X(stages, MOK_NUMERIC, 0, 8, 0, "GEMM shared-memory pipeline stages, 0: as many as fit (4 beside the C staging)") \
    MOK_PARAM_LAUNCH(X)                                                                                           \
    X(dispatch, MOK_CHOICES(mok_choices_dispatch), 0, 1, 0,                                                      \
      "pull: comm blocks pull each row into every local expert slot; push: owners push each row once per rank "  \
      "into landing rows, the compute blocks copy them into the slots")                                          \
    X(breakdown, MOK_NUMERIC, 0, 1, 0,                                                                           \
      "1: after timing, also time the same kernel with communication skipped and with compute skipped "          \
      "(report: gemm_alone_us, dispatch_alone_us, exposed_comm_us)")                                            \
    X(raster, MOK_NUMERIC, 0, 1, 0,                                                                              \
      "GEMM tile order within an expert: 0 m-major, 1 n-major (neighbouring CTAs share the weight tile)")        \
    X(combine_sms, MOK_NUMERIC, 0, 131, 0,                                                                       \
      "of the comm SMs, those that also send the combine; the others run GEMM tiles once their share of the "    \
      "dispatch is done (0: all comm SMs)")                                                                      \
    X(send, MOK_NUMERIC, 0, 1, 0,                                                                                \
      "1: each GEMM2 tile's rows go to their owners straight from the GEMM epilogue's registers (per_route "     \
      "only) and every comm SM runs GEMM tiles after the dispatch; 0: the comm SMs send")                        \
    X(wave_lockstep, MOK_NUMERIC, 0, 1, 0,                                                                       \
      "1: a GEMM tile starts once every tile of the previous wave (one per compute SM) has started, so the SMs " \
      "that share a weight tile stay in step")                                                                   \
    X(own_first, MOK_NUMERIC, 0, MOK_OWN_FIRST_MAX, 0,                                                           \
      "dispatch=push only, K >= 1: the own rows of the first K local experts are copied into the slots first "   \
      "and those GEMM1 tiles run while the peers' rows are still arriving (K >= local experts: all)")             \
    X(split_half, MOK_NUMERIC, 0, 1, 0,                                                                          \
      "1: a row block whose second 64 rows are all padding (experts of <= 64 rows) runs on both consumer "       \
      "warpgroups, each on half the columns of its 64 rows (mok-gemm's 64-row tiles; measured -1.4..+1.3%, "     \
      "results/h200x1/2026-12-02-split-half-train-gemm); 0: on one")                                         \
    X(act, MOK_CHOICES(mok_choices_act), 0, 1, 0,                                                                \
      "pass bwd / fwd_bwd: save, the forward keeps the expert-major x rows and GEMM1's gate and up for the "     \
      "backward; recompute, the backward dispatches x again and recomputes GEMM1 (a kernel before it)")       \
    X(wgrad_mix, MOK_NUMERIC, -1, 1, -1,                                                                         \
      "pass bwd / fwd_bwd: 0, the weight-gradient tiles after every GEMM1-dgrad tile; 1, interleaved with them " \
      "(fp32 gradient tiles, DRAM-bound, beside dgrad's tensor-bound ones); -1 (the default), 1 with wgrad "     \
      "fp32_accumulate and 0 with bf16, the faster of the two on most rows measured (README, Tuning). "          \
      "Elsewhere only the default is a candidate")                                                               \
    X(wgrad_reduce, MOK_NUMERIC, 0, 1, 1,                                                                        \
      "pass bwd / fwd_bwd, wgrad fp32_accumulate: 1, each weight-gradient tile's products are added onto the "   \
      "fp32 gradient by TMA reduce (in the L2; 1.07-1.18x faster than 0, 1.13-1.24x with wgrad_mix 1, on one "   \
      "H200: results/h200x1/2026-12-06-fp8-scatter-ab section 3); 0, the tile loads the gradient, adds its "     \
      "products and stores it. Elsewhere only the default (1) is a candidate")                                   \
    X(shared_sms, MOK_NUMERIC, 0, 130, 0,                                                                        \
      "pass bwd / fwd_bwd with shared experts: 0, their backward after the backward kernel on every SM; k, on a " \
      "stream of its own beside the kernel on k SMs (the kernel on the others)")                                \
    X(shared_units, MOK_NUMERIC, 0, 1, 0,                                                                        \
      "pass bwd / fwd_bwd with shared experts, shared_sms 0: 1, their backward runs as units of the backward "   \
      "kernel (GEMM2-dgrad tiles first, while dy travels; the rest after the routed GEMM2 dgrad); 0, after it")  \
    X(mx_scheme, MOK_NUMERIC, 0, 3, 0,                                                                           \
      "dtype mxfp8: 0, each 32 K's e4m3 product promoted into fp32 with both scales (128 x 128 tiles); 1, the "  \
      "producer warpgroup expands e4m3 to bf16 in shared memory and the bf16 tiles run; 3, the bf16 tiles with "  \
      "the weights' MX values held in bf16 (expanded at setup: twice the FP8 weight bytes) and the rows "        \
      "expanded by the consumer threads into registers for wgmma's register operand (mok-gemm's 3; 2 is "       \
      "mok-gemm's only)")                                                                                        \
    X(swap_tail, MOK_NUMERIC, 0, 1, 0,                                                                           \
      "bf16 forward: 1, an expert's last row block of <= 112 real rows runs with the weights as wgmma's M and "   \
      "its tokens as N (32, 64, 96 or 112 rows), not as a padded 128-row block; 0: padded")                      \
    MOK_PARAM_LAND_STAGES(X)                                                                                      \
    X(fp8_tile_n, MOK_NUMERIC, 128, 256, 256,                                                                    \
      "dtype fp8_block: 256, the bf16 kernel's 128 x 256 tiles (one h scale block per GEMM1 tile; 11-13% faster, "\
      "results/h200x1/2026-12-05-fp8-wide-swap-ab); 128, 128 x 128 tiles (GEMM1's h scale blocks span two)")    \
    X(push_all, MOK_NUMERIC, 0, 1, 1,                                                                            \
      "dtype fp8_block or mxfp8 (forward): 1, every SM quantizes and pushes its share of the token rows in a "    \
      "kernel before the fused one (1.5-6% faster on one H100, results/h100x1/2026-12-06-fp8-push-all); 0, the " \
      "fused kernel's comm SMs push while its compute SMs wait for the rows to land")                          \
    X(gather, MOK_NUMERIC, -1, 1, -1,                                                                            \
      "bf16 forward with dispatch=push (no own_first or swap_tail): 1, GEMM1's producer warpgroup reads each "  \
      "row block's rows by cp.async from where they are (x, or the landing rows) and nothing copies them into "  \
      "expert slots; 0, the scatter copies every route's row into its slot and GEMM1 loads the slots by TMA; "   \
      "-1 (the default), 1 below 128 routed rows per expert on average, else 0 (1 was 2.4-3.6% faster at 32-96 " \
      "rows, 0.8-18% slower from 128 rows: results/h100x1/2026-12-07-gather-ab, 2026-12-07-tails-ncu); where 1 " \
      "does not apply, -1 is 0")

/* One struct per implementation, a field per parameter; mok_params_<impl>(values) reads a candidate's values
 * (in table order, as the sweep produces them) and mok_params_<impl>_values(&p, values) writes them back. */
#define MOK_PARAM_FIELD(name, kind, lo, hi, def, help) int name;
#define MOK_PARAM_READ(name, kind, lo, hi, def, help) p.name = values[i++];
#define MOK_PARAM_WRITE(name, kind, lo, hi, def, help) values[i++] = p->name;
#define MOK_PARAM_ONE(name, kind, lo, hi, def, help) +1
#define MOK_PARAMS_STRUCT(impl, TABLE)                                                                            \
    struct mok_params_##impl {                                                                                    \
        int unused_; /* keeps the struct non-empty for implementations without parameters */                      \
        TABLE(MOK_PARAM_FIELD)                                                                                    \
    };                                                                                                            \
    enum { MOK_NPARAMS_##impl = 0 TABLE(MOK_PARAM_ONE) };                                                          \
    static inline struct mok_params_##impl mok_params_##impl(const int *values)                                  \
    {                                                                                                             \
        struct mok_params_##impl p = {0};                                                                         \
        int i = 0;                                                                                                \
        (void)values, (void)i;                                                                                    \
        TABLE(MOK_PARAM_READ)                                                                                     \
        return p;                                                                                                 \
    }                                                                                                             \
    static inline void mok_params_##impl##_values(const struct mok_params_##impl *p, int *values)                \
    {                                                                                                             \
        int i = 0;                                                                                                \
        (void)p, (void)values, (void)i;                                                                           \
        TABLE(MOK_PARAM_WRITE)                                                                                    \
    }

MOK_PARAMS_STRUCT(nccl, MOK_PARAMS_NCCL)
MOK_PARAMS_STRUCT(nccl_overlap, MOK_PARAMS_NCCL_OVERLAP)
MOK_PARAMS_STRUCT(nccl_p2p, MOK_PARAMS_NCCL_P2P)
MOK_PARAMS_STRUCT(cublas_gemm, MOK_PARAMS_CUBLAS)
MOK_PARAMS_STRUCT(lsa, MOK_PARAMS_LSA)
MOK_PARAMS_STRUCT(mok_gemm, MOK_PARAMS_MOK_GEMM)
MOK_PARAMS_STRUCT(lsa_layer, MOK_PARAMS_LSA_LAYER)
MOK_PARAMS_STRUCT(megakernel, MOK_PARAMS_MEGAKERNEL)

/* lsa-layer's transfers are lsa's with slots, pull and warp copies (the GEMMs read contiguous expert-major rows);
 * the rest at 0, as lsa-layer has always run them. */
static inline struct mok_params_lsa mok_params_lsa_of_layer(const struct mok_params_lsa_layer *lp)
{
    return (struct mok_params_lsa){.comm_sms = lp->comm_sms, .combine = lp->combine, .tile_rows = lp->tile_rows,
                                   .chunk_rows = lp->chunk_rows, .launch = lp->launch};
}

#endif
