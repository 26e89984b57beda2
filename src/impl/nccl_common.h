/* nccl_common: the host-orchestrated expert-parallel MoE layer both NCCL baselines run.
 *
 * Per forward: count routes per (chunk, expert) on the GPU; all-gather the counts and copy them to the host,
 * which waits for them (the baseline's own CPU-GPU synchronization); compute splits and row maps on the host;
 * then per chunk: grouped ncclSend/ncclRecv dispatch, permute to expert-major, cuBLAS expert GEMMs + SwiGLU,
 * permute back, grouped ncclSend/ncclRecv combine; finally the fixed-order fp32 weighted top-k sum.
 * Buffers that NCCL moves are symmetric windows (ncclMemAlloc + NCCL_WIN_COLL_SYMMETRIC), which lifts NCCL's
 * point-to-point bandwidth on NVLink: a strong baseline, not a straw man.
 *
 * `nccl` runs one stage on one stream; `nccl-overlap` runs stages (token chunks x local expert groups, see
 * splits.h) with NCCL work on a comm stream and GEMMs on a compute stream, so stage s's GEMMs overlap stage
 * s+1's dispatch and stage s-1's combine. */
#ifndef MOK_NCCL_COMMON_H
#define MOK_NCCL_COMMON_H

#include "gemm_cublas.h"
#include "gemm_mok_bwd.h"
#include "impl.h"
#include "mok_gemm.h"
#include "splits.h"

struct mok_alone_timing; /* timing.h */

#define MOK_NCCL_MAX_SLOTS 256

struct mok_nccl_pipe {
    struct mok_problem *p;
    struct mok_cluster *cl;
    int chunks, chunk_tokens, expert_groups, stages;
    bool overlap, no_compute;
    cudaStream_t comm, compute; /* == cl->stream for `nccl` */
    struct mok_expert_gemms gemms;
    cublasHandle_t shared_cublas;

    int32_t *counts, *allcounts, *h_allcounts; /* [C][E], [P][C][E] device, pinned host copy */
    int32_t *offsets, *cursor, *send_pos;
    struct mok_symmem send, comb; /* [T*k rows] token order -> peers, and rows coming back */
    struct mok_symmem recv, ret;  /* [cap rows] rows from peers (recv layout), and results going back */
    uint16_t *em_in, *g1, *hbuf, *em_out;
    int32_t *em_from_recv, *recv_from_em, *h_maps; /* device maps, pinned host staging [2][cap] */
    uint16_t *shared_g1, *shared_h, *shared_out;
    int cap_rows;
    struct mok_splits splits;
    struct mok_gemm_group *gemm_groups; /* [stages][E_local]: experts with rows, per stage */
    int *ngemm_groups;                  /* [stages] */
    /* gemm=mok: per stage its expert group's first local expert and count, first expert-major row and rows, and
     * the group offsets the GEMM reads on the device ([stages][E_local + 1], copied each run from pinned host) */
    bool mok_gemm;
    struct mok_gemm_sm90_config mok_cfg;
    int mx_scheme; /* gemm=mok with mxfp8: mok-gemm's mx_scheme (opts) */
    int *stage_expert0, *stage_experts, *stage_row0, *stage_rows;
    int32_t *mok_offsets, *h_mok_offsets;

    /* events: per slot, per stage: dispatch, gemm, combine begin/end; plus fork/join events */
    int max_slots;
    cudaEvent_t *ev; /* [slots][stages][6] */
    cudaEvent_t fork, shared_done, comm_done, compute_done;
    cudaEvent_t *dispatched, *gemmed; /* [stages] */
    struct mok_nccl_bwd *bwd;         /* pass bwd or fwd_bwd (nccl_backward.h); NULL for the forward alone */
    struct mok_nccl_fp8 *fp8;         /* dtype fp8_block or mxfp8 (nccl_fp8.h); NULL for bf16 */
    uint16_t *h_recv, *h_back;        /* the problem has an output h: [cap rows][I] recv layout, [T k][I] send
                                       * layout (mok_nccl_pipe_export_h) */
};

struct mok_nccl_opts {
    int chunks, expert_groups;  /* stages = chunks x expert_groups */
    bool overlap;               /* comm and compute streams (nccl-overlap) or one stream (nccl) */
    bool no_compute;            /* comm mode: experts return their input rows, no GEMMs, no permutations */
    enum mok_gemm_mode gemm;    /* cuBLAS's mode, unless mok_gemm */
    bool mok_gemm;              /* mok's grouped GEMM (kernels/gemm) instead of cuBLAS */
    int gemm_streams, reserve_sms;
    int mx_scheme;              /* gemm=mok with mxfp8: mok-gemm's mx_scheme (fp8_mlp.h mok_fp8_mok_config) */
};

int mok_nccl_pipe_setup(struct mok_nccl_pipe *s, struct mok_problem *p, struct mok_cluster *cl,
                        const struct mok_nccl_opts *opts, int max_slots, char *err, int err_len);
int mok_nccl_pipe_run(struct mok_nccl_pipe *s, int set, uint16_t *y, int slot, char *err, int err_len);
/* nccl-overlap: the comm and compute streams start after what st has queued (fork), and st goes on once both are
 * done (join); no-ops for `nccl`, whose streams are st. */
cudaError_t mok_nccl_fork(struct mok_nccl_pipe *s, cudaStream_t st);
cudaError_t mok_nccl_join(struct mok_nccl_pipe *s, cudaStream_t st);
/* Stage c's grouped ncclSend/ncclRecv of rows of `width` elements of `type` (bf16 or fp32): dispatch from the send
 * layout to the peers' recv layout, or the combine's exact reverse (the forward's and the backward's messages). */
int mok_nccl_p2p_stage(struct mok_nccl_pipe *s, int c, bool dispatch, const void *src, void *dst, size_t width,
                       ncclDataType_t type, char *err, int err_len);
/* Stage c's messages of the forward (dispatch: wire rows for FP8) or its combine, on the comm stream. */
int mok_nccl_p2p_chunk(struct mok_nccl_pipe *s, int c, bool dispatch, char *err, int err_len);
/* Stage st's expert GEMMs of input set `set` (the pipeline's GEMM choice and dtype), on the compute stream. */
int mok_nccl_run_gemms(struct mok_nccl_pipe *s, int set, int st, char *err, int err_len);
void mok_nccl_pipe_phase_ms(struct mok_nccl_pipe *s, int slot, double out[MOK_NPHASES]);
/* The last run's h (hbuf, expert-major at the expert's rank) to the token's rank in route order: into out's "h"
 * [tokens x topk][inter] (impl.h: export_outputs), on cl->stream: rows to the recv layout, the combine's messages
 * with rows of inter elements, then each route's row from its send position. 0 without an output h. */
int mok_nccl_pipe_export_h(struct mok_nccl_pipe *s, const struct mok_outputs *out, char *err, int err_len);
/* GEMMs of the last run's routing timed alone (median of iters), and ncclAlltoAll moving the same remote
 * bytes, padded to the largest per-peer split, on symmetric buffers (nccl_extras.c). */
int mok_nccl_pipe_extras(struct mok_nccl_pipe *s, struct mok_row *row, const struct mok_alone_timing *t, char *err,
                         int err_len);
void mok_nccl_pipe_teardown(struct mok_nccl_pipe *s);

/* gemm=mok's grouped-GEMM configuration for this problem, with `ctas` persistent CTAs (0: every SM). */
struct mok_gemm_sm90_config mok_gemm_baseline_config(const struct mok_problem *p, int ctas);

/* gemm=mok's backward (gemm_mok_bwd.h) with `ctas` persistent CTAs: 128 x 256 tiles, n-major dgrad, the deepest
 * ring. */
struct mok_core_bwd_config mok_gemm_baseline_bwd_config(int ctas);

/* gemm=mok: whether mok's grouped GEMM runs this problem's expert GEMMs on this GPU (1), or why not (0); with a
 * backward pass, also the forward's unfused GEMM1 (it keeps the gate/up rows) and the backward's GEMMs. */
int mok_nccl_mok_gemm_supports(const struct mok_problem *p, const struct mok_cluster *cl, int reserve_sms,
                               int mx_scheme, char *why,
                               int why_len);

/* The mok_impl_ops entries all three NCCL implementations share; each file adds its supports() and a setup
 * that picks its mok_nccl_opts and calls mok_nccl_impl_setup. */
int mok_nccl_impl_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const struct mok_nccl_opts *opts,
                        int max_slots, char *err, int err_len);
int mok_nccl_impl_run(void *state, int set, const struct mok_outputs *out, int slot, char *err, int err_len);
void mok_nccl_impl_phase_ms(void *state, int slot, double out[MOK_NPHASES]);
int mok_nccl_impl_extras(void *state, struct mok_row *row, const struct mok_alone_timing *t, char *err, int err_len);
int mok_nccl_impl_export(void *state, const struct mok_outputs *out, char *err, int err_len);
void mok_nccl_impl_teardown(void *state);

#endif
