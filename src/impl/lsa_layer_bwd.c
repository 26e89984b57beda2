/* lsa_layer_bwd: lsa-layer's backward (pass bwd, fwd_bwd), unfused and without host synchronization, on the
 * forward's schedule (lsa_state.h):
 *   dispatch  a new epoch, the ready counters from zero, dy pulled into its own expert slots (the forward's
 *             dispatch on the dy slot of the set's window, lsa_layout.c);
 *   experts   each slot's route weight (0 for padding), mok's GEMM core's backward over the slots
 *             (gemm_mok_bwd.h: dh' = dy W2, the SwiGLU backward with w h and the per-slot d_router, dx = [dg, du]
 *             W13, dW2 and dW13 with K = each expert's slots in order), every slot's d_router to its owner's window;
 *   combine   dx rows per route to their owners (the forward's per-route combine without its weighted sum) and the
 *             owner's fixed-order sum over k with d_router copied out (mok_lsa_grad_sum).
 * The forward keeps GEMM1's gate and up (GEMM1 unfused, then the SwiGLU kernel). The weight gradients also run over
 * each expert's padding slots: their weight is 0, so w h and [dg, du] are 0 there (the slots' buffers are zeroed
 * once at setup, so nothing non-finite ever sits in them), and they add nothing. dy sits in the window from setup
 * on (mok-bench's dy is fixed per input set), so the pull needs no flag saying an owner's dy is in; a caller
 * rewriting dy per step would need one (as the forward's publish says x is in).
 * With peers, the dispatch starts with a stream-ordered one-int all-reduce: the experts and combine steps write
 * d_router and dx into the peers' windows (off_dr, off_comb), which a peer's forward sum (fwd_bwd) or previous
 * backward sum (bwd) may still be reading; the forward's publish orders its own sends that way, the backward has no
 * publish. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "fail.h"
#include "gemm_mok_bwd.h"
#include "lsa_state.h"
#include "megakernel.h" /* mok_megakernel_next_epoch */

struct lsa_bwd {
    uint16_t *x_slots;  /* the forward's expert slots (a.xin) */
    uint16_t *dy_slots; /* [capacity][H] */
    uint16_t *gu, *dhp, *dgu, *hw; /* [capacity][2I], [capacity][I], [capacity][2I], [capacity][I] */
    float *w, *dr;      /* [capacity]: each slot's route weight, its d_router */
    int32_t *barrier_word; /* the dispatch's all-reduce with the peers (0, and the sum keeps it so) */
    struct mok_core_bwd_config cfg;
    /* the run's outputs (lsa_bwd_outputs) */
    uint16_t *dx, *y;
    uint16_t *y_scratch; /* pass bwd: the one saved forward's output, run at setup */
    float *d_router;
    void *dw13, *dw2;
    int dw_bf16;
};

int lsa_bwd_setup(struct lsa_state *s, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct lsa_bwd *b = calloc(1, sizeof(*b));
    if (!b)
        FAIL("out of host memory");
    s->bwd = b;
    const size_t cap = (size_t)s->a.capacity, H = (size_t)p->hidden, I = (size_t)p->inter;
    b->x_slots = s->a.xin;
    b->cfg = mok_core_bwd_config(s->gemm_cfg.tile_n, s->gemm_cfg.stages, 0, 1);
    void **bufs[] = {(void **)&b->dy_slots, (void **)&b->gu, (void **)&b->dhp, (void **)&b->dgu, (void **)&b->hw,
                     (void **)&b->w, (void **)&b->dr, (void **)&b->barrier_word};
    const size_t bytes[] = {cap * H * 2, cap * 2 * I * 2, cap * I * 2, cap * 2 * I * 2, cap * I * 2, cap * 4, cap * 4,
                            sizeof(int32_t)};
    for (size_t i = 0; i < sizeof bytes / sizeof bytes[0]; i++) {
        MOK_CHECK(cuda, cudaMalloc(bufs[i], bytes[i] + 16), return -1);
        MOK_CHECK(cuda, cudaMemset(*bufs[i], 0, bytes[i] + 16), return -1); /* padding slots finite forever */
    }
    MOK_CHECK(cuda, cudaMemset(b->x_slots, 0, cap * H * 2), return -1);
    MOK_CHECK(cuda, cudaMemset(s->out, 0, cap * H * 2), return -1);
    /* dy beside x in the window (the dy slot of set k is input slot sets + k) */
    for (int set = 0; set < p->sets; set++)
        MOK_CHECK(cuda, cudaMemcpy((char *)s->win.ptr + s->a.off_x + (size_t)(p->sets + set) * s->a.x_set_bytes,
                                   p->lbwd.dy[set], (size_t)p->tokens * H * 2, cudaMemcpyDeviceToDevice),
                  return -1);
    MOK_CHECK(cuda, cudaDeviceSynchronize(), return -1);
    if (p->spec.pass == MOK_PASS_BWD) { /* the one saved forward (pass bwd runs on problems of one input set) */
        MOK_CHECK(cuda, cudaMalloc((void **)&b->y_scratch, (size_t)(p->tokens ? p->tokens : 1) * H * 2), return -1);
        for (int f = 0; f < 3; f++)
            if (lsa_forward_phase(s, f, 0, b->y_scratch, s->cl->stream, err, err_len))
                return -1;
        MOK_CHECK(cuda, cudaStreamSynchronize(s->cl->stream), return -1);
    }
    return 0;
}

int lsa_bwd_gemm1(struct lsa_state *s, int set, cudaStream_t st)
{
    struct mok_problem *p = s->p;
    struct mok_lsa_args *a = &s->a;
    struct mok_gemm_args g = {.a = a->xin, .b = p->w13[set], .c = s->bwd->gu, .offset = a->offset,
                              .groups = a->local_experts, .rows_capacity = a->capacity, .n_out = 2 * p->inter,
                              .k = p->hidden, .swiglu = 0};
    int rc = mok_gemm_sm90(&g, &s->gemm_cfg, (mok_stream_t)st);
    return rc ? rc : mok_swiglu_bf16(s->bwd->gu, a->capacity, p->inter, s->h, (mok_stream_t)st);
}

int lsa_bwd_outputs(struct lsa_state *s, const struct mok_outputs *out, char *err, int err_len)
{
    struct lsa_bwd *b = s->bwd;
    b->dx = mok_output_bf16(out, "dx");
    b->d_router = mok_output_f32(out, "d_router");
    const struct mok_output *o13 = mok_output_find(out, "dw13"), *o2 = mok_output_find(out, "dw2");
    if (!b->dx || !b->d_router || !o13 || !o2 || o13->type != o2->type)
        FAIL("the backward needs outputs dx (bf16), d_router (fp32), dw13 and dw2 (both fp32 or both bf16)");
    b->dw13 = o13->data, b->dw2 = o2->data, b->dw_bf16 = o13->type == MOK_OUT_BF16;
    if (s->p->spec.pass == MOK_PASS_FWD_BWD && !(b->y = mok_impl_forward_y(out, err, err_len)))
        return -1;
    return 0;
}

/* The backward's three steps (see the file comment). */
static int dispatch_dy(struct lsa_state *s, int set, cudaStream_t st, char *err, int err_len)
{
    if (s->a.nranks > 1) /* every peer's stream is past its last sum before any of our writes reach its window */
        MOK_CHECK(nccl, ncclAllReduce(s->bwd->barrier_word, s->bwd->barrier_word, 1, ncclInt32, ncclSum, s->cl->nccl,
                                      st),
                  return -1);
    struct mok_lsa_args a = s->a;
    a.set = s->p->sets + set, a.xin = s->bwd->dy_slots;
    int rc = mok_megakernel_next_epoch(a.epoch, (mok_stream_t)st);
    if (!rc)
        rc = (int)cudaMemsetAsync(a.ready, 0, sizeof(int32_t) * (size_t)s->nchunks, st);
    if (!rc)
        rc = mok_lsa_dispatch(&a, s->sms, (mok_stream_t)st);
    MOK_CHECK(cuda, rc, return -1);
    return 0;
}

static int expert_gemms(struct lsa_state *s, int set, cudaStream_t st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct lsa_bwd *b = s->bwd;
    MOK_CHECK(cuda, mok_lsa_slot_weights(&s->a, b->w, (mok_stream_t)st), return -1);
    struct mok_expert_bwd eb = {.x = b->x_slots, .dy = b->dy_slots, .gu = b->gu, .w = b->w, .w13 = p->w13[set],
                                .w2 = p->w2[set], .dhp = b->dhp, .dgu = b->dgu, .hw = b->hw, .dx = s->out,
                                .d_router = b->dr, .dw13 = b->dw13, .dw2 = b->dw2, .dw_bf16 = b->dw_bf16,
                                .experts = s->a.local_experts};
    if (mok_core_expert_backward(&b->cfg, st, s->a.offset, s->a.local_experts, s->a.capacity, p->hidden, p->inter,
                                 &eb, err, err_len))
        return -1;
    MOK_CHECK(cuda, mok_lsa_send_route_values(&s->a, b->dr, (mok_stream_t)st), return -1);
    return 0;
}

static int combine_dx(struct lsa_state *s, cudaStream_t st, char *err, int err_len)
{
    struct mok_lsa_args a = s->a;
    a.expert_out = s->out; /* dx's slots */
    a.y = s->bwd->dx, a.d_router = s->bwd->d_router, a.shared_y = NULL;
    MOK_CHECK(cuda, mok_lsa_combine_routes(&a, s->sms, (mok_stream_t)st), return -1);
    MOK_CHECK(cuda, mok_lsa_grad_sum(&a, (mok_stream_t)st), return -1);
    return 0;
}

int lsa_bwd_phase(struct lsa_state *s, int phase, int set, cudaStream_t st, char *err, int err_len)
{
    const bool with_fwd = s->p->spec.pass == MOK_PASS_FWD_BWD;
    if (phase == 0) {
        if (!with_fwd && dispatch_dy(s, set, st, err, err_len))
            return -1;
        for (int f = 0; with_fwd && f < 3; f++) /* the whole forward, its sum included */
            if (lsa_forward_phase(s, f, set, s->bwd->y, st, err, err_len))
                return -1;
        return 0;
    }
    if (phase == 1) {
        if (with_fwd && dispatch_dy(s, set, st, err, err_len))
            return -1;
        return expert_gemms(s, set, st, err, err_len);
    }
    return combine_dx(s, st, err, err_len);
}

void lsa_bwd_teardown(struct lsa_state *s)
{
    struct lsa_bwd *b = s->bwd;
    if (!b)
        return;
    void *dev[] = {b->dy_slots, b->gu, b->dhp, b->dgu, b->hw, b->w, b->dr, b->barrier_word, b->y_scratch};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        cudaFree(dev[i]);
    free(b);
    s->bwd = NULL;
}
