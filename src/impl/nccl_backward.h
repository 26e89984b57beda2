/* nccl_backward: the NCCL baselines' backward (pass bwd and fwd_bwd), on the forward's pipeline (nccl_common.h).
 *
 * It reuses the forward's routing work: the same splits, send positions and expert-major maps (the routing is the
 * problem's, so the backward needs no count and no host synchronization of its own), and the forward's saved
 * context: the expert-major x rows and GEMM1's gate/up output gu (and the shared MLP's), kept per input set for
 * pass bwd, whose forward runs once per set at setup, untimed.
 *
 * Per stage (token chunk x local expert group): the owner's dy rows and router weights go to the expert ranks
 * (grouped ncclSend/ncclRecv, the forward's messages), are permuted to expert-major, then per expert GEMM2's dgrad
 * dh' = dy W2, the SwiGLU backward (d_router = <dh', h>, dgu = w [dh' u silu'(g), dh' silu(g)]) and GEMM1's dgrad
 * dx = dgu W13 (cuBLAS per expert, gemm_cublas.h), the dx rows and d_router values go back (the forward's combine
 * messages), and each token's dx is the fixed-order sum over its k slots plus the shared MLP's dx. The weight
 * gradients dW2 += (w dy)^T h and dW13 += dgu^T x: `nccl` runs them right after each stage's dgrad; `nccl-overlap`
 * defers each stage's to after the next stage's dgrad, so they run beside the dx combine (Megatron's delayed
 * wgrad) and the dgrad of the critical path goes first. With token chunks, an expert group's wgrad runs once,
 * after its last chunk, over its rows of every chunk gathered contiguous. With gemm=mok every step above is one
 * grouped launch per stage on mok's GEMM core (gemm_mok_bwd.h: transposed-weight dgrad, K = rows wgrad). */
#ifndef MOK_NCCL_BACKWARD_H
#define MOK_NCCL_BACKWARD_H

#include "nccl_common.h"

struct mok_nccl_bwd {
    int nctx; /* saved contexts: one per input set (pass bwd) or one (fwd_bwd: its own forward's) */
    uint16_t *ctx_em_in[MOK_MAX_SETS], *ctx_g1[MOK_MAX_SETS], *ctx_shared_g1[MOK_MAX_SETS];
    int32_t *ctx_send_pos[MOK_MAX_SETS]; /* [T k]: where the forward that made the context placed each route */
    uint16_t *em_dy, *dgu, *hw; /* [cap][H], [cap][2I], [cap][I]; dh' goes to the forward's hbuf, dx rows em_out */
    float *em_w, *em_dr;        /* [cap]: the rows' router weights, and their d_router */
    struct mok_symmem send_w, comb_dr; /* [T k] router weights out, d_router back (send layout) */
    struct mok_symmem recv_w, ret_dr;  /* [cap] (recv layout) */
    float *ones;                       /* [T k] 1.0: dx's sum over the slots is unweighted */
    uint16_t *shared_dgu, *shared_hw;  /* [T][2 SI], [T][SI]; the shared dh' in shared_h, its dx in shared_out */
    float *shared_dr;                  /* [T]: the shared MLP's "router" gradient, unused */
    struct mok_expert_gemms shared_gemms;
    /* token chunks: each expert group's wgrad once, over its rows of every chunk gathered contiguous */
    uint16_t *wg_x, *wg_dy, *wg_dgu, *wg_hw;  /* [cap][H], [cap][H], [cap][2I], [cap][I] */
    int32_t *wg_idx, *h_wg_idx, *wg_plan;     /* [cap] device, pinned staging, host: the gathered rows' em rows */
    int32_t *wg_first;                        /* [EL + 1]: each local expert's first gathered row (host) */
    int wg_rows;                              /* rows of the plan on the device (-1: none yet) */
    struct mok_gemm_group *wg_groups;         /* [EL]: each expert's rows in the wg buffers, group after group */
    int *wg_gfirst;                           /* [expert groups + 1]: each group's first entry of wg_groups */
    uint8_t *zeros;                           /* [EL] 0: under bf16 each wgrad call writes its experts' dW */
    /* gemm=mok (gemm_mok_bwd.h): the core's configuration, and with token chunks the gathered rows' group
     * offsets per expert group ([expert groups][EL + 1], device and pinned staging, written with the plan) */
    struct mok_core_bwd_config core;
    int32_t *wg_off, *h_wg_off;
    int *idle, nidle;    /* local experts with no rows this step (their written bf16 gradient is zero) */
    cudaEvent_t *ev;     /* [slots][stages][8]: dispatch, dgrad, combine, wgrad begin/end */
};

/* After the forward's setup: the backward's buffers; for pass bwd, the forward of every input set (untimed). */
int mok_nccl_bwd_setup(struct mok_nccl_pipe *s, char *err, int err_len);
/* The saved context of input set `set` becomes the pipeline's em_in, g1, shared_g1 and send_pos (the forward
 * writes there). */
void mok_nccl_bwd_select(struct mok_nccl_pipe *s, int set);
int mok_nccl_bwd_run(struct mok_nccl_pipe *s, int set, const struct mok_outputs *out, int slot, char *err,
                     int err_len);
/* The backward's expert GEMMs of every stage (dgrad and wgrad), nothing beside them: its "GEMMs alone". */
int mok_nccl_bwd_gemms(struct mok_nccl_pipe *s, int set, char *err, int err_len);
/* The backward's dy dispatch of every stage alone. */
int mok_nccl_bwd_dispatch(struct mok_nccl_pipe *s, char *err, int err_len);
/* Adds the backward's phase times of a slot (dispatch, GEMMs = dgrad + wgrad, combine) to out. */
void mok_nccl_bwd_phase_ms(struct mok_nccl_pipe *s, int slot, double out[MOK_NPHASES]);
void mok_nccl_bwd_teardown(struct mok_nccl_pipe *s);

#endif
