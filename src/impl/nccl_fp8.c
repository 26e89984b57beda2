/* nccl_fp8: the NCCL baselines' fp8_block forward (see nccl_fp8.h). */
#include "nccl_fp8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "fail.h"
#include "mok_kernels.h"
#include "nccl_common.h"

int mok_nccl_fp8_wire_bytes(int hidden) { return (hidden + hidden / 32 + 15) / 16 * 16; }

/* gemm=mok's fp8_block configuration: 128 x 128 tiles (the 128 x 256 lean layout is not measured yet), products of 64
 * columns (1-4% faster than 128 at these shapes: results/h200x1/2026-12-02-fp8-gemm), the deepest ring, the bf16
 * configuration's CTAs. */
struct mok_gemm_sm90_config mok_nccl_fp8_mok_config(const struct mok_gemm_sm90_config *bf16)
{
    return (struct mok_gemm_sm90_config){.tile_m = 128, .tile_n = 128, .stages = 0, .sms = bf16->sms, .cluster_m = 1,
                                         .lockstep = 0, .raster = 0, .fp8_n = 64};
}

int mok_nccl_fp8_setup(struct mok_nccl_pipe *s, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_fp8 *f = calloc(1, sizeof(*f));
    if (!f)
        FAIL("out of host memory");
    s->fp8 = f;
    const size_t T = (size_t)p->tokens, H = (size_t)p->hidden, I = (size_t)p->inter, cap = (size_t)s->cap_rows;
    f->wire_bytes = mok_nccl_fp8_wire_bytes(p->hidden);
    if ((size_t)f->wire_bytes > H * 2) /* the send and receive buffers hold bf16 rows */
        FAIL("fp8_block: a wire row of %d bytes exceeds a bf16 row of hidden %d", f->wire_bytes, p->hidden);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->xq, T * H + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->xs, T * (H / 128) * 4 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->aq, cap * H + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->as, cap * (H / 128) * 4 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->hq, cap * I + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->hs, cap * (I / 128) * 4 + 16), return -1);
    if (s->mok_gemm) {
        s->mok_cfg = mok_nccl_fp8_mok_config(&s->mok_cfg);
        return 0;
    }
    int max_rows = 1;
    const int EL = p->local_experts;
    for (int i = 0; i < s->chunks * EL; i++)
        max_rows = s->splits.expert_rows[i] > max_rows ? s->splits.expert_rows[i] : max_rows;
    f->lt = true;
    return mok_fp8_experts_init_rows(&f->experts, &s->gemms, p, s->cap_rows, max_rows, s->cl->stream, err, err_len);
}

void mok_nccl_fp8_teardown(struct mok_nccl_pipe *s)
{
    struct mok_nccl_fp8 *f = s->fp8;
    if (!f)
        return;
    if (f->lt)
        mok_fp8_experts_destroy(&f->experts);
    void *bufs[] = {f->xq, f->xs, f->aq, f->as, f->hq, f->hs};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        cudaFree(bufs[i]);
    free(f);
    s->fp8 = NULL;
}

int mok_nccl_fp8_dispatch_rows(struct mok_nccl_pipe *s, int set, cudaStream_t st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_fp8 *f = s->fp8;
    /* x is finite by construction: the status flag is the problem's, checked where its own quantizers run */
    MOK_CHECK(cuda, mok_quant_fp8_block_bf16(p->x[set], p->tokens, p->hidden, f->xq, f->xs, p->fp8.status,
                                             (mok_stream_t)st), return -1);
    MOK_CHECK(cuda, mok_fp8_rows_scatter(f->xq, f->xs, p->hidden, p->topk, s->send_pos, 0, p->tokens * p->topk,
                                         (uint8_t *)s->send.ptr, f->wire_bytes, (mok_stream_t)st), return -1);
    return 0;
}

int mok_nccl_fp8_gather(struct mok_nccl_pipe *s, int base, int rows, char *err, int err_len)
{
    struct mok_nccl_fp8 *f = s->fp8;
    const size_t H = (size_t)s->p->hidden;
    MOK_CHECK(cuda, mok_fp8_rows_gather((const uint8_t *)s->recv.ptr, f->wire_bytes, s->em_from_recv + base, rows,
                                        (int)H, f->aq + (size_t)base * H, f->as + (size_t)base * (H / 128),
                                        (mok_stream_t)s->compute), return -1);
    return 0;
}

/* gemm=mok: GEMM1 + SwiGLU (aq -> hbuf), h quantized (hbuf -> hq), GEMM2 (hq -> em_out), one grouped launch each
 * over the stage's expert group (its rows contiguous in the expert-major buffers). */
static int mok_gemms(struct mok_nccl_pipe *s, int set, int st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_fp8 *f = s->fp8;
    const struct mok_fp8_block_operands *w = &p->fp8;
    const size_t H = (size_t)p->hidden, I = (size_t)p->inter, row0 = (size_t)s->stage_row0[st];
    const size_t e0 = (size_t)s->stage_expert0[st];
    const int rows = s->stage_rows[st];
    if (rows == 0)
        return 0;
    const int32_t *offset = s->mok_offsets + (size_t)st * (p->local_experts + 1);
    struct mok_gemm_args g1 = {.dtype = MOK_GEMM_FP8_BLOCK, .a_fp8 = f->aq + row0 * H,
                               .a_scale = f->as + row0 * (H / 128), .b_fp8 = w->w13[set] + e0 * 2 * I * H,
                               .b_scale = w->w13_scale[set] + e0 * (2 * I / 128) * (H / 128), .c = s->hbuf + row0 * I,
                               .offset = offset, .groups = s->stage_experts[st], .rows_capacity = rows,
                               .n_out = (int)I, .k = (int)H, .swiglu = 1};
    struct mok_gemm_args g2 = {.dtype = MOK_GEMM_FP8_BLOCK, .a_fp8 = f->hq + row0 * I,
                               .a_scale = f->hs + row0 * (I / 128), .b_fp8 = w->w2[set] + e0 * H * I,
                               .b_scale = w->w2_scale[set] + e0 * (H / 128) * (I / 128), .c = s->em_out + row0 * H,
                               .offset = offset, .groups = s->stage_experts[st], .rows_capacity = rows,
                               .n_out = (int)H, .k = (int)I, .swiglu = 0};
    const mok_stream_t cs = (mok_stream_t)s->compute;
    MOK_CHECK(cuda, mok_gemm_sm90(&g1, &s->mok_cfg, cs), return -1);
    MOK_CHECK(cuda, mok_quant_fp8_block_bf16(s->hbuf + row0 * I, rows, (int)I, f->hq + row0 * I,
                                             f->hs + row0 * (I / 128), p->fp8.status, cs), return -1);
    MOK_CHECK(cuda, mok_gemm_sm90(&g2, &s->mok_cfg, cs), return -1);
    return 0;
}

int mok_nccl_fp8_gemms(struct mok_nccl_pipe *s, int set, int st, char *err, int err_len)
{
    if (s->mok_gemm)
        return mok_gemms(s, set, st, err, err_len);
    struct mok_problem *p = s->p;
    struct mok_nccl_fp8 *f = s->fp8;
    const struct mok_gemm_group *groups = s->gemm_groups + (size_t)st * p->local_experts;
    const int n = s->ngemm_groups[st];
    const int row0 = s->splits.stage_base[st], rows = s->splits.stage_base[st + 1] - row0;
    if (rows == 0)
        return 0;
    if (mok_fp8_experts_run_rows(&f->experts, &s->gemms, s->compute, 1, p, set, groups, n, f->aq, f->as, row0, rows,
                                 NULL, NULL, err, err_len))
        return -1;
    return mok_fp8_experts_run_rows(&f->experts, &s->gemms, s->compute, 2, p, set, groups, n, f->aq, f->as, row0,
                                    rows, NULL, s->em_out, err, err_len);
}
