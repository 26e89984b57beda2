/* megakernel: the forward MoE layer's dispatch, expert GEMMs and combine in one persistent launch (issue 5).
 *
 * Around it, stream-ordered and with no host synchronization: before, the routing publish and the schedule
 * (mok_lsa_publish, mok_lsa_schedule: expert-major slots padded to 128 rows, chunk ready targets); after, the
 * owner's fixed-order weighted sum (mok_lsa_reduce), which needs every rank's combined rows. The kernel itself:
 *   comm blocks (the first comm_blocks): pull this rank's routed rows from their owners' windows into the expert
 *     slots, releasing per-chunk ready counters; then send the expert outputs back (one row per route as each
 *     128-row block of GEMM2 finishes, or one partial sum per (token, rank) once all of GEMM2 has), then flag done.
 *   compute blocks (the rest): GEMM1 + SwiGLU tiles, each waiting for its rows' ready counters, then GEMM2 tiles,
 *     each waiting until every GEMM1 tile of its row block is stored; each stored tile half counts itself in a
 *     per-row-block counter.
 * All blocks must be resident at once (they wait on each other): the launch is cooperative. */
#ifndef MOK_MEGAKERNEL_H
#define MOK_MEGAKERNEL_H

#include <stddef.h>
#include <stdint.h>

#include "mok_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

struct mok_mega_args {
    struct mok_lsa_args lsa; /* layout=slots, dispatch=pull, tile_rows=128; lsa.xin: GEMM1's A, lsa.expert_out:
                                GEMM2's C, what the combine sends (set it to out) */
    const uint16_t *w13;     /* [local experts][2 * inter][hidden]: gate rows, then up rows */
    const uint16_t *w2;      /* [local experts][hidden][inter] */
    uint16_t *h;             /* [capacity][inter]: SwiGLU output, GEMM2's A */
    uint16_t *out;           /* [capacity][hidden] */
    int inter;
    int comm_blocks;         /* blocks (one per SM) that dispatch and combine; the others compute */
    int stages;              /* GEMM pipeline depth, 0: the deepest that fits */
    int32_t *done;           /* mok_megakernel_counters(...) int32: per row block, tile halves stored by GEMM1, by
                                GEMM2 (and by the shared GEMM1), then the unit ticket; zeroed by every launch */
    int send_from_gemm;      /* per route only: 1, the GEMM2 consumer warpgroup whose half tile completes a row block
                                sends that row block's rows to their owners, and every comm block joins the GEMMs
                                after the dispatch; 0, the comm blocks send */
    int combine_blocks;      /* of the comm blocks, how many send the combine; the others join the compute blocks
                                once their part of the dispatch is done. 0 (or comm_blocks): all of them */
    int own_first;           /* dispatch=push only, K >= 1: the compute blocks copy the own rows of the first K local
                                experts first and those experts' own-row GEMM1 tiles go first (they need no push,
                                so they fill the push's time); the comm blocks copy the rest. K >= local experts:
                                all of them (every expert's weights then stream twice) */
    int lockstep;            /* 1: a unit starts once every unit of the previous wave (tickets / compute blocks) has
                                started: the blocks sharing a weight tile stay in step */
    int raster;              /* tile order within an expert: 0 m-major, 1 n-major (as mok_gemm_sm90_config.raster) */
    /* Shared experts (shared_inter > 0): one MLP of shared_inter columns over this rank's own tokens, computed by
     * the compute blocks first (it needs no dispatch, so it fills the dispatch's time); its output goes to sy,
     * which the owner's sum adds (lsa.shared_y). done gets capacity / 128 + 1 + t_max / 128 more counters. */
    int shared_inter;
    const uint16_t *x_local; /* this forward's token rows [t_max][hidden] (this rank's window slot) */
    const uint16_t *sw13;    /* [2 * shared_inter][hidden]: gate rows, then up rows */
    const uint16_t *sw2;     /* [hidden][shared_inter] */
    uint16_t *sh;            /* [t_max][shared_inter] */
    uint16_t *sy;            /* [t_max][hidden] */
    int skip;                /* the breakdown's variants of the same kernel: 0 everything; 1 communication skipped
                                (comm blocks exit, the rows are what the last full forward left in the slots, the
                                ready counters preset); 2 compute skipped (compute blocks only count every GEMM2 row
                                block as done, after the push dispatch's scatter if any) */
    int split_half;          /* 1: a routed unit whose second 64 rows are all padding (an expert's last row block
                                with 64 rows or fewer) runs with both consumer warpgroups on its first 64 rows, each
                                on half the columns, instead of one warpgroup on all of them while the other idles
                                (a kernel instance of its own: megakernel_fwd_kernel<kSend, true>) */
    uint16_t *gu;            /* NULL, or [capacity][2 * inter]: GEMM1's gate and up columns (bf16, before SwiGLU),
                                stored beside h for the backward (activations `save`; not with split_half) */
    uint16_t *sgu;           /* with gu and shared experts: the shared GEMM1's gate and up columns [t_max][2 SI] */
    int gemm1_only;          /* 1: the backward's recompute (activations `recompute`): the dispatch and the GEMM1
                                tiles (routed and shared; with gu: storing gate and up) only, no routed GEMM2 and no
                                sends (send_from_gemm 1: every comm block joins the GEMMs) */
    /* fp8: the forward in an FP8 format (src/fp8.h; kernels/megakernel/fp8_comm.cuh and fp8_compute.cuh), 1
     * fp8_block or 2 mxfp8 (0: bf16): the push quantizes each token row (1 x 128, or per 32) as it sends it (e4m3
     * values and scales cross NVLink in the landing rows), GEMM1 and GEMM2 run the GEMM core's policy of the format
     * on 128 x 128 tiles, GEMM1's epilogue quantizes h for GEMM2, whose output and the combine stay bf16. h (bf16) is
     * still written where the quantization reads it back or store_h asks for it (the check's export). dispatch=push,
     * no shared experts, forward only. */
    int fp8;
    uint8_t *xq;             /* fp8: the expert slots (instead of lsa.xin) as the wire rows that land, [capacity]
                                [mok_megakernel_fp8_row_bytes(hidden)]: a row's hidden e4m3 values, then its hidden /
                                32 bytes of scales (fp8_block: fp32 per 128; mxfp8: e8m0 per 32), so the scatter copies
                                whole rows */
    uint8_t *hq;             /* fp8: h quantized [capacity][inter], GEMM2's A */
    void *hs;                /* fp8: its scales [capacity][inter / 32 bytes] (fp8_block: fp32 per 128 columns;
                                mxfp8: e8m0 per 32) */
    const uint8_t *w13q;     /* fp8: e4m3 [local experts][2 * inter][hidden] (instead of w13) */
    const uint8_t *w2q;      /* fp8: e4m3 [local experts][hidden][inter] (instead of w2) */
    const float *w13s;       /* fp8: the 128 x 128 block scales [local experts][2 inter / 128][hidden / 128] */
    const float *w2s;        /* fp8: [local experts][hidden / 128][inter / 128] */
    const uint8_t *w13mx;    /* mxfp8 (instead of w13s): w13's e8m0 scales in the GEMM core's tile layout
                                (mok_scale_mx_tiles with the gate and up blocks paired) */
    const uint8_t *w2mx;     /* mxfp8 (instead of w2s): w2's, in the tile layout */
    int swap_tail;           /* 1: an expert's last row block of at most 112 real rows runs with the weights as wgmma's
                                M and its tokens as N of 32, 64, 96 or 112 (kernels/megakernel/swap_tail.cuh); bf16
                                forward without gu or split_half */
    int land_stages;         /* mx_scheme 1: the e4m3 landing ring's depth, 2..4 (0: as many as fit beside two bf16
                                stages, or beside `stages`; the launcher resolves it) */
    int mx_scheme;           /* mxfp8: 0 promotes each 32 K's e4m3 product into fp32 with both scales (128 x 128
                                tiles, fp8_compute.cuh); 1 expands the e4m3 operands to bf16 in shared memory and runs
                                the bf16 tiles and consumers (kernels/megakernel/mx_expand.cuh); 3 runs the bf16 tiles
                                with the rows expanded into the consumers' registers and the weights' MX values in
                                bf16 as w13 and w2 (K permuted within each 64-K block: mok_expand_mxfp8_bf16_k64perm;
                                w13q, w2q and their scales unused; gemm/sm90_mx_rega.cuh) */
    int fp8_tile_n;          /* fp8 1 (fp8_block): 0 or 128, 128 x 128 tiles; 256, the bf16 kernel's 128 x 256
                                (GEMM1 128 gate + 128 up columns, GEMM2 256; fp8_compute.cuh Fp8Tile) */
    int push_all;            /* fp8 only: 1, a kernel on every SM (forward.cu fp8_push_kernel) quantizes and pushes
                                the token rows and flags "landed" before this one starts, whose comm blocks then skip
                                the push; 0, the comm blocks push while the compute blocks wait for it (the scatter,
                                and so GEMM1, waits for every landed flag) */
    const int32_t *store_h;  /* fp8 with fp8_tile_n 256 or mx_scheme 1 / 3 (GEMM1 quantizes h from its staging, GEMM2
                                reads hq): NULL or a device int: nonzero, h (bf16) stored too; 0, not stored (only the
                                check's export reads it there: libmok's mok_workspace_store_h). The 128 x 128 fp8 tiles
                                read h back to quantize it and store it regardless */
    int gather;              /* 1 (bf16 forward, dispatch=push, no gu, gemm1_only, own_first or swap_tail): GEMM1's
                                producer warpgroup reads each row block's rows by cp.async from where they are (own
                                tokens in x's input set, peers' in the landing rows) into the slot, and nothing
                                copies them into the expert slots (kernels/megakernel/gather.cuh); 0: the scatter
                                copies every route's row into its slot and GEMM1 loads slots by TMA */
};

/* The fused backward (kernels/megakernel/backward.cu), after the forward of the same routing (its schedule, slots
 * and saved activations) and a stream-ordered prologue (the epoch advanced, ready counters and counters zeroed):
 *   comm blocks: dy rows to the expert slots (the forward's dispatch, on the input slot holding dy: lsa.set), then
 *     they join the compute blocks;
 *   compute blocks, units by one ticket in this order: GEMM2 dgrad (dh' = dy W2, 128 rows x 256 of I; its
 *     epilogue runs the SwiGLU backward: dg, du into dgu, w h into hw, per-row partial dot <dh', h> into dr_part),
 *     each waiting for its dy rows; GEMM1 dgrad (dx = [dg, du] W13, 128 rows x 256 of H; its epilogue sends each
 *     row to its owner's combine row as the forward's send_from_gemm, and the n = 0 tile the route's d_router,
 *     the fixed-order sum of dr_part, to the owner's window), each waiting for its row block's dgrad tiles; then
 *     the weight gradients, one CTA per 128 x 256 output tile over the expert's rows in order (deterministic):
 *     dW2 (+)= dy^T (w h), dW13 (+)= [dg, du]^T x, each waiting for every dgrad tile of its expert;
 *   then every warpgroup's sends are flagged to their owners (kind 1, the backward's epoch), whose
 *   mok_lsa_grad_sum sums dx over k in fixed order and copies d_router out of the window. */
struct mok_mega_bwd_args {
    struct mok_mega_args m;  /* the forward's: m.lsa (schedule; lsa.set the slot holding dy, lsa.xin dy's expert
                                slots [capacity][hidden], filled here), w13, w2, inter, comm_blocks, stages, raster,
                                skip (0; 1: compute alone, dx rows stay in m.out [capacity][hidden]; 2: communication
                                alone, m.out's rows sent as dx would be), m.done:
                                mok_megakernel_bwd_counters int32 */
    const uint16_t *x;       /* the forward's expert slots [capacity][hidden] (its lsa.xin) */
    const uint16_t *gu;      /* the forward's saved GEMM1 output [capacity][2 * inter] */
    uint16_t *dgu;           /* [capacity][2 * inter]: dg, du */
    uint16_t *hw;            /* [capacity][inter]: w h */
    float *dr_part;          /* [capacity][inter / 256]: d_router partials per GEMM2-dgrad column tile */
    float *dw13_f32, *dw2_f32;     /* fp32 gradients accumulated (+=): [EL][2 inter][hidden], [EL][hidden][inter] */
    uint16_t *dw13_bf16, *dw2_bf16; /* or bf16 gradients written (exactly one pair is non-NULL) */
    int32_t *own_offset;     /* NULL, or int32 [2]: the prologue writes {0, own_tokens} (the shared experts' one group
                                of rows, for the GEMM core's backward the caller runs after this kernel) */
    int own_tokens;
    int wgrad_mix;           /* 0: the weight-gradient tiles after every GEMM1-dgrad tile; 1: interleaved with them
                                (bwd_units.cuh) */
    int wgrad_reduce;        /* fp32 gradients only: 0, each tile loads its gradient into the accumulators, adds its
                                products and stores it; 1, the products alone are added onto it by TMA reduce (the
                                L2 reads and writes the gradient; the SM never waits for its bytes) */
    int ctas;                /* persistent CTAs: 0, one per SM; fewer (more than m.comm_blocks) leave SMs to work
                                that runs beside the kernel (libmok's shared experts' backward on a side stream).
                                The same on every rank */
    /* The shared experts' backward as units of this kernel (sh.inter > 0; m.shared_inter stays 0): one MLP of
     * sh.inter columns over this rank's own tokens, router weight 1, no d_router. Its GEMM2-dgrad tiles come first
     * in the unit list (they need no dispatch), its GEMM1-dgrad tiles (their dx rows into sh.dx, which the owner's
     * sum adds) and its dW2 / dW13 tiles after the routed GEMM2 dgrad, before the routed rest (bwd_units.cuh). */
    struct mok_mega_bwd_shared {
        int inter;              /* 0: none in the kernel (the caller runs them); else a multiple of 256 */
        int tokens;             /* own tokens, <= lsa.t_max */
        const uint16_t *x, *dy; /* [t_max][hidden]: the own rows of the forward's input and of dy */
        const uint16_t *gu;     /* [t_max][2 inter]: the forward's saved gate, up */
        const uint16_t *w13;    /* [2 inter][hidden] */
        const uint16_t *w2;     /* [hidden][inter] */
        uint16_t *dgu, *hw, *dx; /* [t_max][2 inter] dg, du; [t_max][inter] h; [t_max][hidden] dx */
        float *dw13_f32, *dw2_f32;      /* as the routed experts' gradients: fp32 accumulated, */
        uint16_t *dw13_bf16, *dw2_bf16; /* or bf16 written ([2 inter][hidden], [hidden][inter]) */
    } sh;
};

/* How many int32 mok_mega_bwd_args.m.done must hold for this capacity (rows) and t_max (own tokens: the shared
 * experts' row blocks, with sh.inter > 0). */
size_t mok_megakernel_bwd_counters(int capacity, int t_max);
/* epoch[0] += 1 on stream: before a kernel that dispatches again on the same routing (the backward's recompute), so
 * that its flags are told apart from the forward's (every rank advances it at the same point). */
int mok_megakernel_next_epoch(uint64_t *epoch, mok_stream_t stream);
int mok_megakernel_bwd_supports(const struct mok_mega_bwd_args *b, char *why, int why_len);
/* own_offset[0..1] := {0, own_tokens} on stream (what the prologue writes with own_offset set): for a caller that
 * starts the shared experts' backward on another stream before the kernel. */
int mok_megakernel_bwd_own_offset(int32_t *own_offset, int own_tokens, mok_stream_t stream);
/* The backward's prologue (epoch, counters) and kernel on stream; mok_lsa_grad_sum after it. */
int mok_megakernel_bwd(const struct mok_mega_bwd_args *b, mok_stream_t stream);

/* own_first's largest value (leading local experts; a value >= the local experts means all of them) */
#define MOK_OWN_FIRST_MAX 65536

/* How many int32 mok_mega_args.done must hold for this capacity (rows), t_max (own tokens) and shared_inter; with
 * fp8, mok_megakernel_fp8_counters(capacity, inter) more (GEMM1's pairs of tiles that quantize h together). */
size_t mok_megakernel_counters(int capacity, int t_max, int shared_inter);
size_t mok_megakernel_fp8_counters(int capacity, int inter);
/* Bytes of an fp8 wire row (mok_mega_args.xq) for this hidden size, either format: hidden + hidden / 32, padded to
 * 16. */
int mok_megakernel_fp8_row_bytes(int hidden);
/* 1 if the shapes and configuration fit (sm_90a, divisibility, shared memory, resident grid), else 0 and why. */
int mok_megakernel_supports(const struct mok_mega_args *m, char *why, int why_len);
/* One forward's dispatch + GEMMs + combine sends on stream (after publish and schedule, before mok_lsa_reduce). */
int mok_megakernel_fwd(const struct mok_mega_args *m, mok_stream_t stream);
/* Allocates the failure record before any graph capture (as mok_gemm_sm90_prepare). */
void mok_megakernel_prepare(mok_stream_t stream);

#ifdef __cplusplus
}
#endif
#endif
