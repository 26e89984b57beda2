/* nccl_backward: the NCCL baselines' backward (see nccl_backward.h). */
#include "nccl_backward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "fail.h"
#include "mok_kernels.h"

enum { EV_DISPATCH = 0, EV_DGRAD = 2, EV_COMBINE = 4, EV_WGRAD = 6, EV_PER_STAGE = 8 };

static cudaEvent_t bwd_event(struct mok_nccl_pipe *s, int slot, int stage, int which)
{
    if (slot < 0 || slot >= s->max_slots)
        return NULL;
    return s->bwd->ev[((size_t)slot * s->stages + stage) * EV_PER_STAGE + which];
}

static int mark(struct mok_nccl_pipe *s, int slot, int stage, int which, cudaStream_t st)
{
    cudaEvent_t e = bwd_event(s, slot, stage, which);
    return e ? (int)cudaEventRecord(e, st) : 0;
}

void mok_nccl_bwd_select(struct mok_nccl_pipe *s, int set)
{
    struct mok_nccl_bwd *b = s->bwd;
    int c = b->nctx > 1 ? set % b->nctx : 0;
    s->em_in = b->ctx_em_in[c];
    s->g1 = b->ctx_g1[c];
    s->shared_g1 = b->ctx_shared_g1[c];
    s->send_pos = b->ctx_send_pos[c];
}

int mok_nccl_bwd_setup(struct mok_nccl_pipe *s, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_cluster *cl = s->cl;
    const size_t T = (size_t)p->tokens, H = (size_t)p->hidden, I = (size_t)p->inter, K = (size_t)p->topk;
    const size_t SI = (size_t)p->shared * I, EL = (size_t)p->local_experts, S = (size_t)s->stages;
    const size_t cap = (size_t)s->cap_rows;
    struct mok_nccl_bwd *b = calloc(1, sizeof(*b));
    if (!b)
        FAIL("out of host memory");
    s->bwd = b;
    /* pass bwd: one saved context per input set, so the rotation over sets reads the backward's inputs from as
     * many addresses as the forward's; the first is the forward's own buffers. A context includes the routes' send
     * positions: mok_route_positions places a chunk's routes to one destination in atomic order, so every forward
     * lays out its expert-major rows in an order of its own (the maps from there on follow the counts alone) */
    b->nctx = mok_pass_has_fwd(p->spec.pass) ? 1 : p->sets;
    b->ctx_em_in[0] = s->em_in, b->ctx_g1[0] = s->g1, b->ctx_shared_g1[0] = s->shared_g1;
    b->ctx_send_pos[0] = s->send_pos;
    for (int c = 1; c < b->nctx; c++) {
        MOK_CHECK(cuda, cudaMalloc((void **)&b->ctx_send_pos[c], T * K * sizeof(int32_t) + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&b->ctx_em_in[c], cap * H * 2), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&b->ctx_g1[c], cap * 2 * I * 2), return -1);
        if (SI)
            MOK_CHECK(cuda, cudaMalloc((void **)&b->ctx_shared_g1[c], T * 2 * SI * 2), return -1);
    }
    MOK_CHECK(cuda, cudaMalloc((void **)&b->em_dy, cap * H * 2), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dgu, cap * 2 * I * 2), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->hw, cap * I * 2), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->em_w, cap * 4), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->em_dr, cap * 4), return -1);
    long long send_rows = mok_allreduce_max_ll((long long)(T * K)); /* symmetric windows: one size on every rank */
    if (mok_symmem_alloc(cl, (size_t)send_rows * 4 + 16, &b->send_w, err, err_len) ||
        mok_symmem_alloc(cl, (size_t)send_rows * 4 + 16, &b->comb_dr, err, err_len) ||
        mok_symmem_alloc(cl, cap * 4 + 16, &b->recv_w, err, err_len) ||
        mok_symmem_alloc(cl, cap * 4 + 16, &b->ret_dr, err, err_len))
        return -1;
    float *h_ones = malloc(T * K * sizeof(float) + 4);
    if (!h_ones)
        FAIL("out of host memory");
    for (size_t i = 0; i < T * K; i++)
        h_ones[i] = 1.0f;
    MOK_CHECK(cuda, cudaMalloc((void **)&b->ones, T * K * 4 + 16), free(h_ones); return -1);
    cudaError_t ce = cudaMemcpy(b->ones, h_ones, T * K * 4, cudaMemcpyHostToDevice); /* synchronous: freed next */
    free(h_ones);
    MOK_CHECK(cuda, ce, return -1);
    if (SI) {
        MOK_CHECK(cuda, cudaMalloc((void **)&b->shared_dgu, T * 2 * SI * 2), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&b->shared_hw, T * SI * 2), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&b->shared_dr, T * 4), return -1);
        MOK_CHECK(cuda_or_cublas, mok_expert_gemms_init(&b->shared_gemms, MOK_GEMM_PER_EXPERT, 1, 0, 1, 1), return -1);
    }
    if (s->chunks > 1) { /* the gathered wgrad's rows (wgrad_after) */
        MOK_CHECK(cuda, cudaMalloc((void **)&b->wg_x, cap * H * 2), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&b->wg_dy, cap * H * 2), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&b->wg_dgu, cap * 2 * I * 2), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&b->wg_hw, cap * I * 2), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&b->wg_idx, cap * sizeof(int32_t)), return -1);
        MOK_CHECK(cuda, cudaMallocHost((void **)&b->h_wg_idx, cap * sizeof(int32_t)), return -1);
        b->wg_plan = malloc(cap * sizeof(int32_t) + 4);
        b->wg_first = malloc((EL + 1) * sizeof(int32_t));
        if (!b->wg_plan || !b->wg_first)
            FAIL("out of host memory");
        b->wg_rows = -1;
    }
    if (s->mok_gemm) {
        b->core = mok_gemm_baseline_bwd_config(s->mok_cfg.sms);
        if (s->chunks > 1) {
            const size_t n = (size_t)s->expert_groups * (EL + 1) * sizeof(int32_t);
            MOK_CHECK(cuda, cudaMalloc((void **)&b->wg_off, n), return -1);
            MOK_CHECK(cuda, cudaMallocHost((void **)&b->h_wg_off, n), return -1);
        }
    }
    b->wg_groups = calloc(EL + 1, sizeof(*b->wg_groups));
    b->wg_gfirst = calloc((size_t)s->expert_groups + 1, sizeof(int));
    b->zeros = calloc(EL + 1, 1);
    if (!b->wg_groups || !b->wg_gfirst || !b->zeros)
        FAIL("out of host memory");
    b->idle = calloc(EL + 1, sizeof(int));
    size_t nev = (size_t)s->max_slots * S * EV_PER_STAGE;
    b->ev = calloc(nev + 1, sizeof(cudaEvent_t));
    if (!b->idle || !b->ev)
        FAIL("out of host memory");
    for (size_t i = 0; i < nev; i++)
        MOK_CHECK(cuda, cudaEventCreate(&b->ev[i]), return -1);
    if (mok_pass_has_fwd(p->spec.pass))
        return 0;
    /* pass bwd: the saved context of every set, from the forward (p->y is scratch here). Setup's plain cudaMemcpy
     * and cudaMemset calls run on the legacy stream and may not have completed (bench.c waits for the device
     * after setup for the same reason): a forward started before them read unfinished buffers at 100 tokens and
     * more (tests/gpu_bwd_layer_small.json, pass bwd). */
    MOK_CHECK(cuda, cudaDeviceSynchronize(), return -1);
    for (int set = 0; set < p->sets; set++)
        if (mok_nccl_pipe_run(s, set, p->y, -1, err, err_len))
            return -1;
    MOK_CHECK(cuda, cudaStreamSynchronize(cl->stream), return -1);
    return 0;
}

/* The local experts with no rows this step: a written (bf16) gradient of theirs is zero, which no GEMM writes. */
static void find_idle_experts(struct mok_nccl_pipe *s)
{
    struct mok_nccl_bwd *b = s->bwd;
    const struct mok_splits *sp = &s->splits;
    const int EL = s->p->local_experts;
    b->nidle = 0;
    for (int e = 0; e < EL; e++) {
        int rows = 0;
        for (int c = 0; c < s->chunks; c++)
            rows += sp->expert_rows[c * EL + e];
        if (!rows)
            b->idle[b->nidle++] = e;
    }
}

static void expert_bwd_args(struct mok_nccl_pipe *s, int set, int parts, void *dw13, void *dw2, bool dw_bf16,
                            struct mok_expert_bwd *eb)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_bwd *b = s->bwd;
    *eb = (struct mok_expert_bwd){.x = s->em_in, .dy = b->em_dy, .gu = s->g1, .w = b->em_w, .w13 = p->w13[set],
                                  .w2 = p->w2[set], .dhp = s->hbuf, .dgu = b->dgu, .hw = b->hw, .dx = s->em_out,
                                  .d_router = b->em_dr, .dw13 = dw13, .dw2 = dw2, .dw_bf16 = dw_bf16,
                                  .experts = p->local_experts, .parts = parts,
                                  /* each call makes its experts' whole gradient (an expert's rows are in one
                                   * stage, or gathered from every chunk: wgrad_after); with several stages the
                                   * idle experts are zeroed once (zero_idle), not per call */
                                  .dw_accumulate = s->stages > 1 ? b->zeros : NULL};
}

/* gemm=mok: the backward of `groups` local experts from e0 on, over rows [row0, +rows) of eb's row operands, whose
 * group offsets (relative to row0) are on the device. Each call makes or adds its experts' whole gradient (an
 * expert's rows are in one stage, or gathered from every chunk), so no accumulate flags. */
static int core_backward(struct mok_nccl_pipe *s, const struct mok_expert_bwd *all, const int32_t *offset, int e0,
                         int groups, int row0, int rows, char *err, int err_len)
{
    const size_t H = (size_t)s->p->hidden, I = (size_t)s->p->inter, r = (size_t)row0, e = (size_t)e0;
    const size_t dw_size = all->dw_bf16 ? 2 : 4;
    struct mok_expert_bwd eb = *all;
    eb.x += r * H, eb.dy += r * H, eb.gu += r * 2 * I, eb.w += r, eb.w13 += e * 2 * I * H, eb.w2 += e * H * I;
    eb.dhp += r * I, eb.dgu += r * 2 * I, eb.hw += r * I, eb.dx += r * H, eb.d_router += r;
    eb.dw13 = (char *)eb.dw13 + e * 2 * I * H * dw_size, eb.dw2 = (char *)eb.dw2 + e * H * I * dw_size;
    eb.dw_accumulate = NULL;
    return mok_core_expert_backward(&s->bwd->core, s->compute, offset, groups, rows, (int)H, (int)I, &eb, err,
                                    err_len);
}

static int stage_gemms(struct mok_nccl_pipe *s, int set, int stage, int parts, void *dw13, void *dw2, bool dw_bf16,
                       char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_expert_bwd eb;
    expert_bwd_args(s, set, parts, dw13, dw2, dw_bf16, &eb);
    if (s->mok_gemm)
        return core_backward(s, &eb, s->mok_offsets + (size_t)stage * (p->local_experts + 1), s->stage_expert0[stage],
                             s->stage_experts[stage], s->stage_row0[stage], s->stage_rows[stage], err, err_len);
    MOK_CHECK(cuda_or_cublas,
              mok_expert_gemms_backward(&s->gemms, s->compute, s->gemm_groups + (size_t)stage * p->local_experts,
                                        s->ngemm_groups[stage], p->hidden, p->inter, &eb),
              return -1);
    return 0;
}

/* Written (bf16) gradients of experts no stage touched: zero, as the whole step's gradient is. */
static int zero_idle(struct mok_nccl_pipe *s, void *dw13, void *dw2, char *err, int err_len)
{
    const size_t H = (size_t)s->p->hidden, I = (size_t)s->p->inter;
    for (int i = 0; i < s->bwd->nidle; i++) {
        size_t e = (size_t)s->bwd->idle[i];
        MOK_CHECK(cuda, cudaMemsetAsync((char *)dw13 + e * 2 * I * H * 2, 0, 2 * I * H * 2, s->compute), return -1);
        MOK_CHECK(cuda, cudaMemsetAsync((char *)dw2 + e * H * I * 2, 0, H * I * 2, s->compute), return -1);
    }
    return 0;
}

/* Token chunks (chunks > 1): the rows of an expert group's experts from every chunk, gathered contiguous in the
 * wg_* buffers (splits.h: mok_splits_gathered), with the host's groups (wg_groups, wg_gfirst) and for gemm=mok the
 * groups' device offsets. The plan is built in plain host memory and copied to the pinned staging only when it
 * changed (new splits come after the forward's host synchronization), so the pinned rows are never rewritten under
 * a copy still queued. */
static int plan_gathered_wgrad(struct mok_nccl_pipe *s, char *err, int err_len)
{
    struct mok_nccl_bwd *b = s->bwd;
    const struct mok_splits *sp = &s->splits;
    const int EL = s->p->local_experts;
    int32_t *plan = b->wg_plan, *first = b->wg_first;
    const int n = mok_splits_gathered(sp, s->cap_rows, plan, first);
    if (n < 0)
        FAIL("rank %d: the gathered wgrad's %d rows exceed the %d rows of its buffers", s->p->rank, sp->recv_total,
             s->cap_rows);
    int ng = 0;
    for (int g = 0; g < s->expert_groups; g++) {
        int gb = 0, ge = 0;
        mok_splits_group(EL, s->expert_groups, g, &gb, &ge);
        b->wg_gfirst[g] = ng;
        for (int e = gb; e < ge; e++)
            if (first[e + 1] > first[e])
                b->wg_groups[ng++] = (struct mok_gemm_group){e, first[e], first[e + 1] - first[e]};
    }
    b->wg_gfirst[s->expert_groups] = ng;
    /* gemm=mok: every expert of each group, offsets from the group's first gathered row, written in place and
     * compared apart from the plan: two splits can gather the same rows in the same order with other expert
     * boundaries (counts {0, 2 | 0, 2} and {2, 0 | 2, 0} over two experts and two chunks) */
    int off_same = b->wg_rows >= 0;
    for (int g = 0; b->h_wg_off && g < s->expert_groups; g++) {
        int gb = 0, ge = 0;
        mok_splits_group(EL, s->expert_groups, g, &gb, &ge);
        for (int e = gb; e <= ge; e++) {
            int32_t *o = &b->h_wg_off[(size_t)g * (EL + 1) + (e - gb)];
            off_same &= *o == first[e] - first[gb];
            *o = first[e] - first[gb];
        }
    }
    const int plan_same = b->wg_rows == n && !memcmp(plan, b->h_wg_idx, (size_t)n * sizeof(int32_t));
    if (!plan_same) {
        memcpy(b->h_wg_idx, plan, (size_t)n * sizeof(int32_t));
        MOK_CHECK(cuda, cudaMemcpyAsync(b->wg_idx, b->h_wg_idx, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice,
                                        s->compute), return -1);
    }
    if (b->h_wg_off && !off_same)
        MOK_CHECK(cuda,
                  cudaMemcpyAsync(b->wg_off, b->h_wg_off, (size_t)s->expert_groups * (EL + 1) * sizeof(int32_t),
                                  cudaMemcpyHostToDevice, s->compute),
                  return -1);
    b->wg_rows = n;
    return 0;
}

/* The weight gradients that stage `stage`'s dgrad made ready. One chunk: the stage's own experts. Token chunks: an
 * expert group's wgrad once over its rows of every chunk, after the group's last chunk, so each gradient is read
 * and written once per step (per chunk, the fp32 read-modify-write would be repeated chunks times: 1.3-2.1x slower
 * at one GPU with 2 chunks, results/h200x1/2026-12-04-layer-backward). The events enclose it either way. */
static int wgrad_after(struct mok_nccl_pipe *s, int set, int stage, int slot, void *dw13, void *dw2, bool dw_bf16,
                       char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_bwd *b = s->bwd;
    MOK_CHECK(cuda, mark(s, slot, stage, EV_WGRAD, s->compute), return -1);
    if (s->chunks == 1) {
        if (stage_gemms(s, set, stage, MOK_BWD_WGRAD, dw13, dw2, dw_bf16, err, err_len))
            return -1;
    } else if (stage / s->expert_groups == s->chunks - 1) {
        const int g = stage % s->expert_groups, g0 = b->wg_gfirst[g], ng = b->wg_gfirst[g + 1] - g0;
        const size_t H = (size_t)p->hidden, I = (size_t)p->inter;
        if (ng > 0) {
            const struct mok_gemm_group *first = &b->wg_groups[g0], *last = &b->wg_groups[g0 + ng - 1];
            const int row0 = first->row, rows = last->row + last->rows - row0;
            const int32_t *idx = b->wg_idx + row0;
            const mok_stream_t cs = (mok_stream_t)s->compute;
            MOK_CHECK(cuda, mok_gather_rows(s->em_in, idx, rows, (int)H, b->wg_x + row0 * H, cs), return -1);
            MOK_CHECK(cuda, mok_gather_rows(b->em_dy, idx, rows, (int)H, b->wg_dy + row0 * H, cs), return -1);
            MOK_CHECK(cuda, mok_gather_rows(b->dgu, idx, rows, (int)(2 * I), b->wg_dgu + row0 * 2 * I, cs), return -1);
            MOK_CHECK(cuda, mok_gather_rows(b->hw, idx, rows, (int)I, b->wg_hw + row0 * I, cs), return -1);
            struct mok_expert_bwd eb;
            expert_bwd_args(s, set, MOK_BWD_WGRAD, dw13, dw2, dw_bf16, &eb);
            eb.x = b->wg_x, eb.dy = b->wg_dy, eb.dgu = b->wg_dgu, eb.hw = b->wg_hw;
            if (s->mok_gemm) { /* the group's every expert, those without rows included (an offset step of 0) */
                int gb = 0, ge = 0;
                mok_splits_group(p->local_experts, s->expert_groups, g, &gb, &ge);
                if (core_backward(s, &eb, b->wg_off + (size_t)g * (p->local_experts + 1), gb, ge - gb, row0, rows,
                                  err, err_len))
                    return -1;
            } else {
                MOK_CHECK(cuda_or_cublas,
                          mok_expert_gemms_backward(&s->gemms, s->compute, first, ng, p->hidden, p->inter, &eb),
                          return -1);
            }
        }
    }
    MOK_CHECK(cuda, mark(s, slot, stage, EV_WGRAD + 1, s->compute), return -1);
    return 0;
}

/* The shared MLP's backward over this rank's tokens (weight 1, rows = tokens), on the compute stream. */
static int shared_backward(struct mok_nccl_pipe *s, int set, void *dw13, void *dw2, bool dw_bf16, char *err,
                           int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_bwd *b = s->bwd;
    const size_t H = (size_t)p->hidden, I = (size_t)p->inter, SI = (size_t)p->shared * I;
    const size_t EL = (size_t)p->local_experts, dw_size = dw_bf16 ? 2 : 4;
    struct mok_gemm_group all = {0, 0, p->tokens};
    struct mok_expert_bwd eb = {.x = p->x[set], .dy = p->lbwd.dy[set], .gu = s->shared_g1, .w = b->ones,
                                .w13 = p->shared_w13[set], .w2 = p->shared_w2[set], .dhp = s->shared_h,
                                .dgu = b->shared_dgu, .hw = b->shared_hw, .dx = s->shared_out, .d_router = b->shared_dr,
                                .dw13 = (char *)dw13 + EL * 2 * I * H * dw_size,
                                .dw2 = (char *)dw2 + EL * H * I * dw_size, .dw_bf16 = dw_bf16, .experts = 1};
    MOK_CHECK(cuda_or_cublas, mok_expert_gemms_backward(&b->shared_gemms, s->compute, &all, 1, (int)H, (int)SI, &eb),
              return -1);
    return 0;
}

/* dy rows and router weights of a stage to the expert ranks: the forward's dispatch messages, one NCCL group */
static int dispatch_stage(struct mok_nccl_pipe *s, int stage, char *err, int err_len)
{
    struct mok_nccl_bwd *b = s->bwd;
    MOK_CHECK(nccl, ncclGroupStart(), return -1);
    if (mok_nccl_p2p_stage(s, stage, true, s->send.ptr, s->recv.ptr, (size_t)s->p->hidden, ncclBfloat16, err,
                           err_len) ||
        mok_nccl_p2p_stage(s, stage, true, b->send_w.ptr, b->recv_w.ptr, 1, ncclFloat32, err, err_len))
        return -1;
    MOK_CHECK(nccl, ncclGroupEnd(), return -1);
    return 0;
}

/* dx rows and d_router values of a stage back to their owners: the forward's combine messages */
static int combine_stage(struct mok_nccl_pipe *s, int stage, char *err, int err_len)
{
    struct mok_nccl_bwd *b = s->bwd;
    MOK_CHECK(nccl, ncclGroupStart(), return -1);
    if (mok_nccl_p2p_stage(s, stage, false, s->ret.ptr, s->comb.ptr, (size_t)s->p->hidden, ncclBfloat16, err,
                           err_len) ||
        mok_nccl_p2p_stage(s, stage, false, b->ret_dr.ptr, b->comb_dr.ptr, 1, ncclFloat32, err, err_len))
        return -1;
    MOK_CHECK(nccl, ncclGroupEnd(), return -1);
    return 0;
}

int mok_nccl_bwd_run(struct mok_nccl_pipe *s, int set, const struct mok_outputs *out, int slot, char *err,
                     int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_bwd *b = s->bwd;
    const struct mok_splits *sp = &s->splits;
    cudaStream_t st = s->cl->stream;
    const size_t H = (size_t)p->hidden;
    const int K = p->topk;
    uint16_t *dx = mok_output_bf16(out, "dx");
    float *d_router = mok_output_f32(out, "d_router");
    const struct mok_output *o13 = mok_output_find(out, "dw13"), *o2 = mok_output_find(out, "dw2");
    if (!dx || !d_router || !o13 || !o2 || o13->type != o2->type)
        FAIL("the backward needs outputs dx (bf16), d_router (fp32), dw13 and dw2 (both fp32 or both bf16)");
    const bool dw_bf16 = o13->type == MOK_OUT_BF16;
    mok_nccl_bwd_select(s, set);
    find_idle_experts(s);
    if (s->chunks > 1 && plan_gathered_wgrad(s, err, err_len))
        return -1;
    MOK_CHECK(cuda, mok_scatter_tokens(p->lbwd.dy[set], p->hidden, K, s->send_pos, 0, p->tokens * K, s->send.ptr,
                                       (mok_stream_t)st), return -1);
    MOK_CHECK(cuda, mok_scatter_f32(p->w, p->tokens * K, s->send_pos, b->send_w.ptr, (mok_stream_t)st), return -1);
    MOK_CHECK(cuda, mok_nccl_fork(s, st), return -1);
    if (p->shared) { /* first on the compute stream: it fills the time the first dispatch takes */
        if (shared_backward(s, set, o13->data, o2->data, dw_bf16, err, err_len))
            return -1;
        MOK_CHECK(cuda, cudaEventRecord(s->shared_done, s->compute), return -1);
    }
    /* comm stream order D0 D1 C0 D2 C1 ... as the forward's; compute stream dgrad0 dgrad1 wgrad0 dgrad2 wgrad1 ...
     * under overlap (nccl: each stage's wgrad right after its dgrad) */
    for (int step = 0; step <= s->stages; step++) {
        if (step < s->stages) {
            int c = step, base = sp->stage_base[c], rows = sp->stage_base[c + 1] - base;
            MOK_CHECK(cuda, mark(s, slot, c, EV_DISPATCH, s->comm), return -1);
            if (dispatch_stage(s, c, err, err_len))
                return -1;
            MOK_CHECK(cuda, mark(s, slot, c, EV_DISPATCH + 1, s->comm), return -1);
            MOK_CHECK(cuda, cudaEventRecord(s->dispatched[c], s->comm), return -1);
            MOK_CHECK(cuda, cudaStreamWaitEvent(s->compute, s->dispatched[c], 0), return -1);
            MOK_CHECK(cuda, mark(s, slot, c, EV_DGRAD, s->compute), return -1);
            MOK_CHECK(cuda, mok_gather_rows(s->recv.ptr, s->em_from_recv + base, rows, p->hidden,
                                            b->em_dy + (size_t)base * H, (mok_stream_t)s->compute), return -1);
            MOK_CHECK(cuda, mok_gather_f32(b->recv_w.ptr, s->em_from_recv + base, rows, b->em_w + base,
                                           (mok_stream_t)s->compute), return -1);
            if (stage_gemms(s, set, c, MOK_BWD_DGRAD, o13->data, o2->data, dw_bf16, err, err_len))
                return -1;
            MOK_CHECK(cuda, mok_gather_rows(s->em_out, s->recv_from_em + base, rows, p->hidden,
                                            (uint16_t *)s->ret.ptr + (size_t)base * H, (mok_stream_t)s->compute),
                      return -1);
            MOK_CHECK(cuda, mok_gather_f32(b->em_dr, s->recv_from_em + base, rows, (float *)b->ret_dr.ptr + base,
                                           (mok_stream_t)s->compute), return -1);
            MOK_CHECK(cuda, mark(s, slot, c, EV_DGRAD + 1, s->compute), return -1);
            MOK_CHECK(cuda, cudaEventRecord(s->gemmed[c], s->compute), return -1);
            int w = s->overlap ? c - 1 : c; /* the stage whose wgrad runs now */
            if (w >= 0 && wgrad_after(s, set, w, slot, o13->data, o2->data, dw_bf16, err, err_len))
                return -1;
        }
        if (step >= 1) {
            int c = step - 1;
            MOK_CHECK(cuda, cudaStreamWaitEvent(s->comm, s->gemmed[c], 0), return -1);
            MOK_CHECK(cuda, mark(s, slot, c, EV_COMBINE, s->comm), return -1);
            if (combine_stage(s, c, err, err_len))
                return -1;
            MOK_CHECK(cuda, mark(s, slot, c, EV_COMBINE + 1, s->comm), return -1);
            if (c % s->expert_groups != s->expert_groups - 1)
                continue; /* a token chunk is complete once its last expert group came back */
            if (c == s->expert_groups - 1 && p->shared) /* the first sum needs the shared MLP's dx */
                MOK_CHECK(cuda, cudaStreamWaitEvent(s->comm, s->shared_done, 0), return -1);
            int chunk = c / s->expert_groups, t0 = chunk * s->chunk_tokens;
            int t1 = t0 + s->chunk_tokens < p->tokens ? t0 + s->chunk_tokens : p->tokens;
            MOK_CHECK(cuda,
                      mok_weighted_combine(s->comb.ptr, s->send_pos, b->ones, t0, t1, K, p->hidden,
                                           p->shared ? s->shared_out : NULL, dx, (mok_stream_t)s->comm),
                      return -1);
            MOK_CHECK(cuda,
                      mok_gather_f32(b->comb_dr.ptr, s->send_pos + (size_t)t0 * K, (t1 - t0) * K,
                                     d_router + (size_t)t0 * K, (mok_stream_t)s->comm),
                      return -1);
        }
    }
    /* the last stage's wgrad, beside the last combine */
    if (s->overlap && wgrad_after(s, set, s->stages - 1, slot, o13->data, o2->data, dw_bf16, err, err_len))
        return -1;
    if (dw_bf16 && s->stages > 1 && zero_idle(s, o13->data, o2->data, err, err_len))
        return -1;
    MOK_CHECK(cuda, mok_nccl_join(s, st), return -1);
    return 0;
}

int mok_nccl_bwd_gemms(struct mok_nccl_pipe *s, int set, char *err, int err_len)
{
    struct mok_layer_bwd *lb = &s->p->lbwd;
    const bool dw_bf16 = s->p->spec.wgrad == MOK_WGRAD_BF16;
    mok_nccl_bwd_select(s, set);
    find_idle_experts(s);
    if (s->chunks > 1 && plan_gathered_wgrad(s, err, err_len))
        return -1;
    for (int st = 0; st < s->stages; st++)
        if (stage_gemms(s, set, st, MOK_BWD_DGRAD, lb->dw13, lb->dw2, dw_bf16, err, err_len) ||
            wgrad_after(s, set, st, -1, lb->dw13, lb->dw2, dw_bf16, err, err_len))
            return -1;
    return 0;
}

int mok_nccl_bwd_dispatch(struct mok_nccl_pipe *s, char *err, int err_len)
{
    for (int st = 0; st < s->stages; st++)
        if (dispatch_stage(s, st, err, err_len))
            return -1; /* a peer may now wait in NCCL: the caller aborts the job */
    return 0;
}

void mok_nccl_bwd_phase_ms(struct mok_nccl_pipe *s, int slot, double out[MOK_NPHASES])
{
    static const int phase_of[4] = {MOK_PHASE_DISPATCH, MOK_PHASE_GEMM, MOK_PHASE_COMBINE, MOK_PHASE_GEMM};
    if (!s->bwd || slot < 0 || slot >= s->max_slots)
        return;
    if (!mok_pass_has_fwd(s->p->spec.pass)) /* else the forward's phases are in out already, added to here */
        for (int i = 0; i < 4; i++)
            out[phase_of[i]] = 0.0;
    for (int c = 0; c < s->stages; c++)
        for (int i = 0; i < 4; i++) {
            float ms = 0;
            int ph = phase_of[i];
            if (cudaEventElapsedTime(&ms, bwd_event(s, slot, c, 2 * i), bwd_event(s, slot, c, 2 * i + 1)) !=
                cudaSuccess) {
                cudaGetLastError();
                out[ph] = NAN;
            } else {
                out[ph] += ms;
            }
        }
}

void mok_nccl_bwd_teardown(struct mok_nccl_pipe *s)
{
    struct mok_nccl_bwd *b = s->bwd;
    if (!b)
        return;
    cudaDeviceSynchronize();
    /* the first context is the forward's own buffers, which the pipeline's teardown frees */
    s->em_in = b->ctx_em_in[0], s->g1 = b->ctx_g1[0], s->shared_g1 = b->ctx_shared_g1[0];
    s->send_pos = b->ctx_send_pos[0];
    for (int c = 1; c < b->nctx; c++) {
        cudaFree(b->ctx_send_pos[c]);
        cudaFree(b->ctx_em_in[c]);
        cudaFree(b->ctx_g1[c]);
        cudaFree(b->ctx_shared_g1[c]);
    }
    if (b->ev)
        for (size_t i = 0; i < (size_t)s->max_slots * s->stages * EV_PER_STAGE; i++)
            if (b->ev[i])
                cudaEventDestroy(b->ev[i]);
    void *dev[] = {b->em_dy, b->dgu, b->hw, b->em_w, b->em_dr, b->ones, b->shared_dgu, b->shared_hw, b->shared_dr,
                   b->wg_x, b->wg_dy, b->wg_dgu, b->wg_hw, b->wg_idx, b->wg_off};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        cudaFree(dev[i]);
    mok_symmem_free(s->cl, &b->send_w);
    mok_symmem_free(s->cl, &b->comb_dr);
    mok_symmem_free(s->cl, &b->recv_w);
    mok_symmem_free(s->cl, &b->ret_dr);
    if (s->p->shared)
        mok_expert_gemms_destroy(&b->shared_gemms);
    cudaFreeHost(b->h_wg_idx);
    cudaFreeHost(b->h_wg_off);
    free(b->wg_plan);
    free(b->wg_first);
    free(b->wg_groups);
    free(b->wg_gfirst);
    free(b->zeros);
    free(b->idle);
    free(b->ev);
    free(b);
    s->bwd = NULL;
}
