/* libmok: mok's fused MoE forward layer as a library, outside the benchmark.
 *
 * One rank per GPU, all ranks in one NVLink (NCCL LSA) domain. Per layer shape, once: a workspace, created and
 * destroyed collectively over an NCCL communicator (symmetric window for token rows, routing tables and flags;
 * schedule arrays; expert-slot, intermediate and output buffers). Per forward, every rank in the same order:
 *   1. write its tokens' rows into mok_workspace_input(ws, slot) (bf16 [tokens][hidden], in the window);
 *   2. mok_route: publishes its routing and builds the shared schedule on the GPU (no host synchronization);
 *   3. mok_forward: the megakernel (dispatch, shared and routed expert GEMMs, combine sends in one persistent
 *      kernel) and the fixed-order weighted top-k sum into y (bitwise reproducible). mok_forward is
 *      mok_forward_kernel + mok_forward_sum, for callers that time or schedule the two apart.
 * Order: every forward is mok_route, mok_forward_kernel, mok_forward_sum (or mok_route, mok_forward); a call out
 * of that order returns MOK_ERR_ORDER and enqueues nothing. The order is that of the calls as made (or captured).
 * Everything is enqueued on the caller's stream, the same one for every call on a workspace (or streams the caller
 * orders the same way): with 2 or more ranks, the order of one rank's calls on its stream is what keeps a peer from
 * writing this rank's window while its previous forward still reads it. Nothing waits on the host and nothing is
 * allocated after mok_workspace_create, so one forward's calls can be captured into a CUDA graph and replayed
 * (capture a graph per input slot, weights and y: the pointers are fixed at capture). Hopper (sm_90a) only for now.
 * Precision (desc.dtype): bf16, fp8_block (DeepSeek-V3's recipe) or mxfp8 (OCP MX), as mok-bench's README defines
 * them: the token rows stay bf16 in the input slots and are quantized (1 x 128, or per 32) by the kernel's dispatch
 * as it sends them (e4m3 values and scales cross NVLink), the routed weights are given quantized
 * (mok_quantize_weights_fp8_block / _mxfp8 make them), GEMM1's epilogue quantizes h for GEMM2, y stays bf16.
 * Functions return MOK_OK or an error code, with a message (naming the field, its value and what is allowed) in
 * err when err_len > 0. */
#ifndef LIBMOK_H
#define LIBMOK_H

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* struct mok_layer_desc.dtype */
enum mok_layer_dtype {
    MOK_LAYER_BF16 = 0,
    MOK_LAYER_FP8_BLOCK = 1, /* forward only; dispatch_push 1, own_first 0, split_half 0; shared experts in bf16 */
    MOK_LAYER_MXFP8 = 2      /* the same; the GEMMs promote per 32 K (exact; the per-32 promotion measured 2.3-2.5x
                                the bf16 GEMMs' time in mok-bench's gemm mode) */
};

enum mok_status {
    MOK_OK = 0,
    MOK_ERR_ARGUMENT = 1,    /* a field of the description or a call argument is out of range */
    MOK_ERR_UNSUPPORTED = 2, /* this GPU, build or communicator cannot run it (not sm_90a, not one LSA domain) */
    MOK_ERR_CUDA = 3,
    MOK_ERR_NCCL = 4,
    MOK_ERR_MEMORY = 5,
    MOK_ERR_OVERFLOW = 6,    /* mok_workspace_check: an expert received more rows than the capacity */
    MOK_ERR_ORDER = 7        /* a call out of a forward's order (mok_route, mok_forward_kernel, mok_forward_sum) or
                                a backward's (after a train forward's sum: mok_backward_kernel, mok_backward_sum) */
};

struct mok_layer_desc {
    int hidden, intermediate; /* hidden a multiple of 256, intermediate of 128 */
    int shared_intermediate;  /* shared experts: 0 none, else the columns of the one MLP over every rank's own
                                 tokens (shared experts x their intermediate; a multiple of 128) */
    int experts, topk;        /* routed experts over all ranks (a multiple of the rank count), top-k <= 32 */
    int max_tokens;           /* tokens per rank per forward, at most; the same on every rank */
    double capacity_factor;   /* rows a rank can receive = factor x max_tokens x topk (+ padding); 2 is ample for
                                 balanced routing, skewed routing needs more (mok_workspace_check reports overflow) */
    int input_slots;          /* token buffers in the window (>= 1): e.g. 2 to fill one while the other is in use */
    /* tuning; 0 picks the default (comm_sms 16, chunk_rows 128, stages as many as fit, flags off). Best measured on
     * 2 x H200 (results/h200x2/2026-11-29-megakernel-v3): send_from_gemm 1, dispatch_push 1, raster 1, comm_sms
     * 16-64, chunk_rows 128; lockstep and own_first measured no gain there. mok-bench's tuner finds them per shape. */
    int comm_sms;             /* SMs that dispatch and combine (fewer than the GPU's); the others run the GEMMs */
    int combine_sms;          /* of the comm SMs, those that also send the combine; the others run GEMM tiles once
                                 their share of the dispatch is done. 0: all comm SMs (none joins the GEMMs) */
    int combine_per_rank;     /* 0: one row per (token, k) back as soon as it is computed; 1: one partial per rank */
    int send_from_gemm;       /* per route only: 1, each GEMM2 tile's rows go to their owners straight from the GEMM's
                                 epilogue (stores from its registers), and every comm SM runs GEMM tiles after the
                                 dispatch */
    int chunk_rows;           /* dispatched rows per ready counter */
    int stages;               /* GEMM pipeline depth: 0 the deepest that fits, else 2..8 (if it fits) */
    int dispatch_push;        /* 0: destinations pull rows; 1: owners push them */
    int raster;               /* GEMM tile order within an expert: 0 m-major, 1 n-major (neighbouring SMs share
                                 the weight tile) */
    int own_first;            /* with dispatch_push, K in 1..65536: the own rows of the first K local experts are
                                 copied into their slots first and those GEMM1 tiles run while the peers' rows are
                                 still arriving (K >= the local experts: all; their weights then stream twice) */
    int lockstep;             /* 1: a GEMM tile starts once the previous wave's tiles have (keeps the SMs that share
                                 a weight tile in step) */
    int split_half;           /* 1: an expert's last row block whose second 64 rows are all padding runs on both
                                 consumer warpgroups (each half the columns of its 64 rows) instead of one; for
                                 small groups (<= 64 rows per expert). Not yet measured on a GPU */
    int train;                /* 1: every forward keeps what the backward needs (activations `save`: the expert-major
                                 x rows and GEMM1's gate and up columns), and the workspace holds the backward's
                                 buffers and a dy slot per input slot (mok_workspace_grad_input). Needs intermediate a multiple of
                                 256, dispatch_push 1, combine_per_rank 0, send_from_gemm 1, split_half 0 */
    int act_recompute;        /* with train: 0 (activations `save`: the forward stores GEMM1's gate and up columns and
                                 the backward reads them and the forward's expert slots), 1 (`recompute`: the forward
                                 saves nothing beyond its routing; the backward dispatches x again and recomputes
                                 GEMM1 first, in a persistent kernel of its own, then runs the backward kernel) */
    int wgrad_mix;            /* with train: 0, the weight-gradient tiles after every GEMM1-dgrad tile; 1, interleaved
                                 with them (DRAM-bound fp32 gradient tiles beside tensor-bound dgrad tiles) */
    int shared_sms;           /* with train and shared experts: 0, their backward runs after the backward kernel on
                                 every SM; k > 0, on a stream of its own beside the kernel, on k SMs (persistent CTAs
                                 of mok's GEMM core), the kernel on the others (at least comm_sms + 1). Not yet run
                                 on a GPU */
    int dtype;                /* enum mok_layer_dtype: MOK_LAYER_BF16 (0), MOK_LAYER_FP8_BLOCK (1) or MOK_LAYER_MXFP8
                                 (2); the FP8 ones the forward only, with dispatch_push 1 and no own_first or
                                 split_half; the shared experts stay bf16 (their weights too). Not yet run on a GPU */
    int mx_scheme;            /* MOK_LAYER_MXFP8 only: 0, every 32 K's e4m3 product promoted into fp32 with both
                                 scales (128 x 128 tiles); 1, the e4m3 operands expanded to bf16 in shared memory and
                                 the bf16 tiles run (exact but for values below 2^-133); 3, the weights given as
                                 their MX values in bf16 (struct mok_weights' w13 and w2, from
                                 mok_expand_weights_mxfp8: twice the FP8 weight bytes), the rows expanded by the
                                 consumer threads into registers (0.92-1.00x the bf16 forward on one H100:
                                 results/h100x1/2026-12-05-mx-weights-bf16) */
    int swap_tail;            /* MOK_LAYER_BF16 forward without train or split_half: 1, an expert's last row block of
                                 at most 112 real rows runs with the weights as wgmma's M and its tokens as N
                                 (32, 64, 96 or 112 rows) instead of as a padded 128-row block (small groups). Not
                                 yet run on a GPU */
    int land_stages;          /* mx_scheme 1: the e4m3 landing ring's depth, 2..4 k blocks loaded ahead of the
                                 expansion (0: as many as fit beside two bf16 slots, or beside `stages`) */
    int fp8_tile_n;           /* MOK_LAYER_FP8_BLOCK: 256 (or 0), the bf16 kernel's 128 x 256 tiles (one h scale
                                 block per GEMM1 tile); 128, 128 x 128 tiles */
    int shared_units;         /* with train and shared experts (shared_intermediate a multiple of 256), shared_sms 0:
                                 1, their backward runs as units of the backward kernel (their GEMM2-dgrad tiles
                                 first, while dy travels; the rest after the routed GEMM2 dgrad); 0, after the
                                 kernel */
    int wgrad_reduce;         /* with train, for backward calls with fp32 gradients (bf16 ones ignore it): 0, each
                                 weight-gradient tile loads its gradient, adds its products and stores it; 1, its
                                 products are added onto the gradient by TMA reduce in the L2 */
    int push_all;             /* MOK_LAYER_FP8_BLOCK or MOK_LAYER_MXFP8: 1, every SM quantizes and pushes its share
                                 of the token rows in a kernel before the fused one; 0, the fused kernel's comm SMs
                                 alone while its compute SMs wait for the rows to land. 1 measured 1.5-6% faster on one
                                 H100 (mok-bench's default; results/h100x1/2026-12-06-fp8-push-all) */
    int gather;               /* MOK_LAYER_BF16 forward with dispatch_push 1, without train, own_first or swap_tail: 1,
                                 GEMM1's producer warpgroup reads each row block's rows by cp.async from where they
                                 are (x, or the landing rows): no copy into the expert slots; 0, the slots are filled
                                 first and GEMM1 loads them by TMA; -1, mok_layer_gather_auto's choice */
};

/* gather = 1 applies to a bf16 forward with dispatch_push, without train, own_first or swap_tail (libmok refuses
 * it elsewhere). gather = -1: 1 where gather applies and the routes fill less than one 128-row block per expert on
 * average (max_tokens x nranks x topk < 128 x experts), else 0. Measured on one H100
 * (results/h100x1/2026-12-07-gather-ab, 2026-12-07-tails-ncu): 2.4-3.6% faster than 0 at 32-96 rows per expert
 * (where part of a row block is padding, which gather zero-fills without a load), 0.8-18% slower at 128 rows and
 * more, where it is faster without the power cap (ncu): at the cap its copies cost more energy than its fewer L2
 * bytes save (inferred); nothing measured between 97 and 127. */
static inline int mok_layer_gather_applies(const struct mok_layer_desc *d)
{
    return d->dtype == MOK_LAYER_BF16 && d->dispatch_push && !d->train && !d->own_first && !d->swap_tail;
}

static inline int mok_layer_gather_auto(const struct mok_layer_desc *d, int nranks)
{
    return mok_layer_gather_applies(d) && (long long)d->max_tokens * nranks * d->topk < 128LL * d->experts;
}

/* Weights of one forward, device memory, this rank's part; valid until the forward's work is done. The routed ones
 * in the description's dtype: bf16 (w13, w2; the e4m3 fields NULL), fp8_block (w13_e4m3, w13_scale, w2_e4m3,
 * w2_scale) or mxfp8 (w13_e4m3, w13_mx, w2_e4m3, w2_mx; with mx_scheme 3 w13 and w2 instead, the MX values in bf16
 * from mok_expand_weights_mxfp8); the fields of the other dtypes NULL. */
struct mok_weights {
    const uint16_t *w13;        /* [experts / ranks][2 * intermediate][hidden]: gate rows, then up rows */
    const uint16_t *w2;         /* [experts / ranks][hidden][intermediate] */
    const uint16_t *shared_w13; /* [2 * shared_intermediate][hidden] (gate, then up); NULL without shared experts */
    const uint16_t *shared_w2;  /* [hidden][shared_intermediate]; NULL without shared experts */
    const uint8_t *w13_e4m3;    /* fp8_block: w13's shape, e4m3 values */
    const float *w13_scale;     /* fp8_block: [experts / ranks][2 * intermediate / 128][hidden / 128] */
    const uint8_t *w2_e4m3;     /* fp8_block: w2's shape, e4m3 values */
    const float *w2_scale;      /* fp8_block: [experts / ranks][hidden / 128][intermediate / 128] */
    const uint8_t *w13_mx;      /* mxfp8: w13's e8m0 scales (one per 32 K) in mok's GEMM tile layout, as
                                   mok_quantize_weights_mxfp8 writes them (gate_up 1) */
    const uint8_t *w2_mx;       /* mxfp8: w2's (gate_up 0) */
};

/* Weight gradients of one backward, device memory, this rank's experts: fp32 accumulated (+=, as training
 * frameworks' gradient-accumulation fusion does) or bf16 written; exactly one pair is non-NULL. */
struct mok_grads {
    float *dw13_f32;     /* [experts / ranks][2 * intermediate][hidden] */
    float *dw2_f32;      /* [experts / ranks][hidden][intermediate] */
    uint16_t *dw13_bf16; /* the same shapes, bf16 */
    uint16_t *dw2_bf16;
    /* the shared experts' (shared_intermediate > 0; NULL without), of the same type as the routed ones: this rank's
     * tokens' share (the data-parallel sum over ranks is the caller's) */
    void *shared_dw13;   /* [2 * shared_intermediate][hidden] */
    void *shared_dw2;    /* [hidden][shared_intermediate] */
};

/* What mok_forward_kernel runs. The two partial variants time how much communication the full kernel hides:
 * exposed communication = t(full forward) - t(COMPUTE_ONLY). Their y is meaningless. */
enum mok_variant {
    MOK_VARIANT_FULL = 0,
    /* communication skipped: only the compute SMs run, on the rows and schedule the last full (or COMM_ONLY)
     * forward left in the slots; no mok_route before it and no mok_forward_sum after it (nothing was sent) */
    MOK_VARIANT_COMPUTE_ONLY = 1,
    /* compute skipped: the dispatch and combine sends with every GEMM counted done at once; route before and sum
     * after it as in a full forward (route + this + sum = the whole communication path) */
    MOK_VARIANT_COMM_ONLY = 2
};

/* The schedule mok_route builds on the device, read-only, for checks (e.g. against a host-built schedule). Sizes
 * hold from create on; the arrays hold the last route's schedule once its work is done (rows, offset, entry,
 * chunk_target) and the last forward kernel's (ready), until the next mok_route. After an overflow
 * (mok_workspace_check) entry holds only the slots below capacity. */
struct mok_schedule_view {
    int local_experts;           /* experts / ranks */
    int capacity;                /* slots: rows this rank's experts can receive in one forward */
    int tile_rows;               /* each expert's block of slots is padded to a multiple of this */
    int chunk_rows, chunks;      /* slots per ready counter; counters = ceil(capacity / chunk_rows) */
    const int32_t *rows;         /* device [local_experts]: routes to each local expert */
    const int32_t *offset;       /* device [local_experts + 1]: first slot of each expert; [local_experts]: used */
    const int32_t *entry;        /* device [capacity]: the route in each slot, source rank << 25 | token << 5 | k,
                                    -1 for padding */
    const int32_t *chunk_target; /* device [chunks]: rows each chunk receives */
    const int32_t *ready;        /* device [chunks]: rows received (chunk_target once the dispatch is done) */
};

typedef struct mok_workspace mok_workspace;

/* Whether desc can run over comm on the current device, without allocating or communicating (what create checks
 * first): MOK_OK, MOK_ERR_ARGUMENT (a field out of range) or MOK_ERR_UNSUPPORTED (GPU, build, communicator). */
int mok_layer_check(ncclComm_t comm, const struct mok_layer_desc *desc, char *err, int err_len);
/* Collective over comm. stream: where the setup work is enqueued (it is synchronized before returning). */
int mok_workspace_create(ncclComm_t comm, const struct mok_layer_desc *desc, cudaStream_t stream,
                         mok_workspace **out, char *err, int err_len);
/* Collective; waits for the device to finish. NULL is a no-op. */
void mok_workspace_destroy(mok_workspace *ws);
/* bf16 [max_tokens][hidden] of input slot `slot` (device memory in the symmetric window); NULL if out of range.
 * Peers read it during forwards that route this slot: rewrite it only when those are done. */
uint16_t *mok_workspace_input(mok_workspace *ws, int slot);
/* Step 1 of a forward: this forward reads input slot `slot`, `tokens` rows; ids [tokens][topk] (global expert
 * ids, distinct per token) and weights [tokens][topk] are device pointers that must stay valid until the
 * forward's work is done. */
int mok_route(mok_workspace *ws, int slot, int tokens, const int32_t *ids, const float *weights, cudaStream_t stream,
              char *err, int err_len);
/* Steps 2 and 3 in one call: mok_forward_kernel(MOK_VARIANT_FULL) then mok_forward_sum. y: bf16 [tokens][hidden]
 * (NULL only when tokens is 0). */
int mok_forward(mok_workspace *ws, const struct mok_weights *w, uint16_t *y, cudaStream_t stream, char *err,
                int err_len);
/* Step 2: the fused kernel (dispatch, shared + routed expert GEMMs, combine sends), or a partial variant. */
int mok_forward_kernel(mok_workspace *ws, const struct mok_weights *w, enum mok_variant variant,
                       cudaStream_t stream, char *err, int err_len);
/* Step 3: the owner's weighted top-k sum (plus the shared experts' output) into y, once every rank's rows are in. */
int mok_forward_sum(mok_workspace *ws, uint16_t *y, cudaStream_t stream, char *err, int err_len);
/* The backward (desc.train = 1), after a forward's mok_forward_sum and before the next mok_route, on that forward's
 * routing and saved activations:
 *   1. write dy's rows into mok_workspace_grad_input(ws, slot) (bf16 [tokens][hidden], in the window; slot: the
 *      forward's input slot);
 *   2. mok_backward_kernel: one persistent kernel: dy to the experts, GEMM2 dgrad with the SwiGLU backward and the
 *      router-weight gradient in its epilogue, GEMM1 dgrad sending dx rows to their owners, the weight gradients
 *      (one CTA per output tile, rows in order: bitwise reproducible) while dx travels;
 *      With shared experts, their backward follows the kernel on the same stream (mok's GEMM core: dgrad, SwiGLU
 *      backward, dgrad, wgrad over this rank's tokens), runs beside it (shared_sms) or inside it (shared_units);
 *   3. mok_backward_sum: the owner's fixed-order sum of dx over its top-k routes (plus the shared experts' dx), and
 *      d_router.
 * mok_backward is 2 + 3. Backwards may repeat on one saved forward (until the next mok_route); dy's slot may be
 * rewritten once the backward's sum is done (peers read it during the kernel). A COMPUTE_ONLY variant of the kernel
 * (no dispatch, no sends: the breakdown) may run after a full backward, before the next mok_route, with no sum
 * after it; it computes the weight gradients again into g (fp32 ones are added to once more). A COMM_ONLY kernel
 * (dy's dispatch and the sends of dx rows and d_router values, nothing computed) takes a full one's place, its sum
 * after it; its dx and d_router are meaningless. Argument errors are reported before order errors. */
/* dy's slot paired with input slot `slot` (bf16 [max_tokens][hidden], in the window); NULL on a train = 0 workspace or
 * for a slot out of range. */
uint16_t *mok_workspace_grad_input(mok_workspace *ws, int slot);
int mok_backward_kernel(mok_workspace *ws, const struct mok_weights *w, const struct mok_grads *g,
                        enum mok_variant variant, cudaStream_t stream, char *err, int err_len);
/* dx: bf16 [tokens][hidden]; d_router: fp32 [tokens][topk] (the forward's tokens; NULL only when tokens is 0). */
int mok_backward_sum(mok_workspace *ws, uint16_t *dx, float *d_router, cudaStream_t stream, char *err, int err_len);
int mok_backward(mok_workspace *ws, const struct mok_weights *w, const struct mok_grads *g, uint16_t *dx,
                 float *d_router, cudaStream_t stream, char *err, int err_len);
/* fp8_block weights from bf16: `matrices` stacked row-major [rows][k] matrices (rows and k multiples of 128), e4m3
 * values q (the same shape) and one fp32 scale per 128 x 128 block, scale[matrices][rows / 128][k / 128] (the
 * layout struct mok_weights takes: w13 is EL matrices of 2 x intermediate rows, w2 EL of hidden rows). Scale =
 * amax / 448 (1 for a block of zeros), values x / scale rounded to nearest even. Synchronizes stream;
 * MOK_ERR_ARGUMENT when w holds inf or NaN. */
int mok_quantize_weights_fp8_block(const uint16_t *w, int matrices, int rows, int k, uint8_t *q, float *scale,
                                   cudaStream_t stream, char *err, int err_len);
/* mxfp8 weights from bf16: `matrices` stacked [rows][k] matrices (rows multiples of 64, 128 with gate_up; k of
 * 128) into e4m3 q (the same shape) and their e8m0 scales, one per 32 K of a row (scale 2^ceil(log2(amax / 448))),
 * written in the tile layout the kernel reads: `scale_tiles` of matrices x rows x k / 32 bytes (16-byte aligned).
 * gate_up 1 for w13 (its gate and up rows' blocks interleaved as a GEMM1 tile reads them), 0 for w2. Synchronizes
 * stream; MOK_ERR_ARGUMENT when w holds inf or NaN. */
int mok_quantize_weights_mxfp8(const uint16_t *w, int matrices, int rows, int k, int gate_up, uint8_t *q,
                               uint8_t *scale_tiles, cudaStream_t stream, char *err, int err_len);
/* mxfp8 weights for mx_scheme 3, from bf16: `matrices` stacked [rows][k] matrices (k a multiple of 128) quantized as
 * mok_quantize_weights_mxfp8 does and written back as their MX values in bf16 (exact), K permuted within each 64-K
 * block as the kernel reads them, into out (the same shape, 16-byte aligned). Allocates rows x k x 33 / 32 bytes of
 * scratch for the call; synchronizes stream; MOK_ERR_ARGUMENT when w holds inf or NaN. */
int mok_expand_weights_mxfp8(const uint16_t *w, int matrices, int rows, int k, uint16_t *out, cudaStream_t stream,
                             char *err, int err_len);
/* For checks, collective: the last full forward's SwiGLU output h per route of this rank's tokens, bf16
 * [tokens][topk][intermediate] (route (t, k) at row t x topk + k), as the experts' ranks computed it (FP8: before
 * its quantization for GEMM2). Between that forward's mok_forward_sum and the next mok_route; it moves the rows
 * through the window's combine area, in column passes as wide as the area allows (two NCCL barriers each), and
 * synchronizes stream. */
int mok_workspace_export_h(mok_workspace *ws, uint16_t *h, cudaStream_t stream, char *err, int err_len);
/* For benchmarks of the FP8 forwards: on = 0, the forwards enqueued on stream after this call leave out h's bf16
 * store where GEMM2 reads only its quantized copy (fp8_block with fp8_tile_n 256, mxfp8 with mx_scheme 1 or 3; the
 * other tiles read h back to quantize it and store it regardless), a write nothing but mok_workspace_export_h reads
 * (~100 MB per forward at Qwen3-235B 4096, counted from its rows); on = 1 (the default) stores it again. A memset
 * on stream (captured when stream is capturing). mok_workspace_export_h refuses while it is 0; bf16 workspaces
 * accept only 1. */
int mok_workspace_store_h(mok_workspace *ws, int on, cudaStream_t stream, char *err, int err_len);
/* Bytes of device memory the workspace holds on this rank (the window included): what desc.train adds is the
 * difference to the same description without it. */
size_t mok_workspace_bytes(const mok_workspace *ws);
/* Fills *out (see struct mok_schedule_view); MOK_ERR_ARGUMENT when ws or out is NULL. Enqueues nothing. */
int mok_workspace_schedule(const mok_workspace *ws, struct mok_schedule_view *out);
/* Synchronizes stream and reports an overflow of the last schedule (MOK_ERR_OVERFLOW, naming the expert), a
 * kernel failure (MOK_ERR_CUDA) or MOK_OK. */
int mok_workspace_check(mok_workspace *ws, cudaStream_t stream, char *err, int err_len);
const char *mok_status_string(int status);

#ifdef __cplusplus
}
#endif
#endif
