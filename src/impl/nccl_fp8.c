/* nccl_fp8: the NCCL baselines' FP8 forward (see nccl_fp8.h). */
#include "nccl_fp8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "fail.h"
#include "fp8_mlp.h"
#include "mok_kernels.h"
#include "nccl_common.h"

int mok_nccl_fp8_batches_per_stage(const struct mok_problem *p, bool mok_gemm)
{
    return p->spec.dtype == MOK_DTYPE_MXFP8 && !mok_gemm ? 2 : 1;
}

/* The emulation's weights: every set's local experts dequantized to bf16 (exact), once. */
static int emulated_setup(struct mok_nccl_pipe *s, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_fp8 *f = s->fp8;
    const struct mok_mxfp8_operands *q = &p->mx;
    const size_t EL = (size_t)p->local_experts, H = (size_t)p->hidden, I = (size_t)p->inter;
    f->emulated = true;
    MOK_CHECK(cuda, cudaMalloc((void **)&f->h_deq, (size_t)s->cap_rows * I * 2 + 16), return -1);
    for (int set = 0; set < p->sets; set++) {
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w13_deq[set], EL * 2 * I * H * 2 + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w2_deq[set], EL * H * I * 2 + 16), return -1);
        MOK_CHECK(cuda, mok_dequant_mxfp8_bf16(q->w13[set], q->w13_scale[set], (long long)(EL * 2 * I), p->hidden,
                                               f->w13_deq[set], (mok_stream_t)s->cl->stream), return -1);
        MOK_CHECK(cuda, mok_dequant_mxfp8_bf16(q->w2[set], q->w2_scale[set], (long long)(EL * H), p->inter,
                                               f->w2_deq[set], (mok_stream_t)s->cl->stream), return -1);
    }
    MOK_CHECK(cuda, cudaStreamSynchronize(s->cl->stream), return -1);
    return 0;
}

int mok_nccl_fp8_setup(struct mok_nccl_pipe *s, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_fp8 *f = calloc(1, sizeof(*f));
    if (!f)
        FAIL("out of host memory");
    s->fp8 = f;
    f->mx = p->spec.dtype == MOK_DTYPE_MXFP8;
    const size_t T = (size_t)p->tokens, H = (size_t)p->hidden, I = (size_t)p->inter, cap = (size_t)s->cap_rows;
    f->wire_bytes = mok_fp8_wire_bytes(p->hidden);
    if ((size_t)f->wire_bytes > H * 2) /* the send and receive buffers hold bf16 rows */
        FAIL("%s: a wire row of %d bytes exceeds a bf16 row of hidden %d", mok_dtype_name(p->spec.dtype),
             f->wire_bytes, p->hidden);
    /* scales: k / 32 bytes per row in either format */
    MOK_CHECK(cuda, cudaMalloc((void **)&f->xq, T * H + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc(&f->xs, T * (H / 32) + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->aq, cap * H + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc(&f->as, cap * (H / 32) + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->hq, cap * I + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc(&f->hs, cap * (I / 32) + 16), return -1);
    if (s->mok_gemm) {
        s->mok_cfg = mok_fp8_mok_config(&s->mok_cfg, (int)p->spec.dtype, s->mx_scheme);
        if (f->mx && s->mx_scheme >= 2) /* the weights' MX values in bf16, the megakernel's mx_scheme 3 alike */
            return mok_fp8_weights_bf16(p, s->mx_scheme, f->w13_deq, f->w2_deq, s->cl->stream, err, err_len);
        return 0;
    }
    if (f->mx)
        return emulated_setup(s, err, err_len);
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
    void *bufs[] = {f->xq, f->xs, f->aq, f->as, f->hq, f->hs, f->h_deq};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        cudaFree(bufs[i]);
    for (int set = 0; set < MOK_MAX_SETS; set++) {
        cudaFree(f->w13_deq[set]);
        cudaFree(f->w2_deq[set]);
    }
    free(f);
    s->fp8 = NULL;
}

int mok_nccl_fp8_dispatch_rows(struct mok_nccl_pipe *s, int set, cudaStream_t st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_fp8 *f = s->fp8;
    MOK_CHECK(cuda, mok_fp8_quant_rows(p, p->x[set], p->tokens, NULL, p->hidden, f->xq, f->xs, st), return -1);
    MOK_CHECK(cuda, mok_fp8_rows_scatter(f->xq, f->xs, p->hidden, p->topk, s->send_pos, 0, p->tokens * p->topk,
                                         (uint8_t *)s->send.ptr, f->wire_bytes, (mok_stream_t)st), return -1);
    return 0;
}

int mok_nccl_fp8_gather(struct mok_nccl_pipe *s, int base, int rows, char *err, int err_len)
{
    struct mok_nccl_fp8 *f = s->fp8;
    const size_t H = (size_t)s->p->hidden;
    MOK_CHECK(cuda, mok_fp8_rows_gather((const uint8_t *)s->recv.ptr, f->wire_bytes, s->em_from_recv + base, rows,
                                        (int)H, f->aq + (size_t)base * H, (uint8_t *)f->as + (size_t)base * (H / 32),
                                        (mok_stream_t)s->compute), return -1);
    return 0;
}

/* gemm=mok: GEMM1 + SwiGLU (aq -> hbuf), h quantized (hbuf -> hq), GEMM2 (hq -> em_out), one grouped launch each
 * over the stage's expert group (its rows contiguous in the expert-major buffers; fp8_mlp.h). */
static int mok_gemms(struct mok_nccl_pipe *s, int set, int st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_fp8 *f = s->fp8;
    const size_t H = (size_t)p->hidden, I = (size_t)p->inter, row0 = (size_t)s->stage_row0[st];
    const int rows = s->stage_rows[st];
    if (rows == 0)
        return 0;
    const struct mok_fp8_mlp m = {.aq = f->aq + row0 * H, .as = (uint8_t *)f->as + row0 * (H / 32),
                                  .h = s->hbuf + row0 * I, .hq = f->hq + row0 * I,
                                  .hs = (uint8_t *)f->hs + row0 * (I / 32), .out = s->em_out + row0 * H,
                                  .offset = s->mok_offsets + (size_t)st * (p->local_experts + 1),
                                  .e0 = s->stage_expert0[st], .groups = s->stage_experts[st], .rows_capacity = rows,
                                  .w13x = f->w13_deq[set], .w2x = f->w2_deq[set]};
    return mok_fp8_mok_mlp(p, set, &m, &s->mok_cfg, s->compute, err, err_len);
}

/* mxfp8 emulated: the stage's rows dequantized (aq -> em_in), GEMM1 + SwiGLU in bf16 (-> hbuf), h quantized and
 * dequantized (hbuf -> hq -> h_deq), GEMM2 in bf16 (-> em_out); the GEMMs on the bf16 path's cuBLAS calls (grouped
 * or per expert), each part with its own pointer-array batch. */
static int emulated_gemms(struct mok_nccl_pipe *s, int set, int st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_nccl_fp8 *f = s->fp8;
    const size_t H = (size_t)p->hidden, I = (size_t)p->inter;
    const struct mok_gemm_group *groups = s->gemm_groups + (size_t)st * p->local_experts;
    const int n = s->ngemm_groups[st];
    const size_t row0 = (size_t)s->splits.stage_base[st];
    const int rows = s->splits.stage_base[st + 1] - (int)row0;
    if (rows == 0)
        return 0;
    uint8_t *hs = (uint8_t *)f->hs + row0 * (I / 32);
    const mok_stream_t cs = (mok_stream_t)s->compute;
    MOK_CHECK(cuda, mok_dequant_mxfp8_bf16(f->aq + row0 * H, (const uint8_t *)f->as + row0 * (H / 32), rows, (int)H,
                                           s->em_in + row0 * H, cs), return -1);
    s->gemms.parts = 1;
    MOK_CHECK(cuda_or_cublas, mok_expert_gemms_run(&s->gemms, s->compute, 2 * st, groups, n, f->w13_deq[set],
                                                   f->w2_deq[set], (int)H, (int)I, s->em_in, s->g1, s->hbuf,
                                                   s->em_out), return -1);
    MOK_CHECK(cuda, mok_fp8_quant_rows(p, s->hbuf + row0 * I, rows, NULL, (int)I, f->hq + row0 * I, hs, s->compute),
              return -1);
    MOK_CHECK(cuda, mok_dequant_mxfp8_bf16(f->hq + row0 * I, hs, rows, (int)I, f->h_deq + row0 * I, cs), return -1);
    s->gemms.parts = 2;
    MOK_CHECK(cuda_or_cublas, mok_expert_gemms_run(&s->gemms, s->compute, 2 * st + 1, groups, n, f->w13_deq[set],
                                                   f->w2_deq[set], (int)H, (int)I, s->em_in, s->g1, f->h_deq,
                                                   s->em_out), return -1);
    s->gemms.parts = 3;
    return 0;
}

int mok_nccl_fp8_gemms(struct mok_nccl_pipe *s, int set, int st, char *err, int err_len)
{
    if (s->mok_gemm)
        return mok_gemms(s, set, st, err, err_len);
    if (s->fp8->emulated)
        return emulated_gemms(s, set, st, err, err_len);
    struct mok_problem *p = s->p;
    struct mok_nccl_fp8 *f = s->fp8;
    const struct mok_gemm_group *groups = s->gemm_groups + (size_t)st * p->local_experts;
    const int n = s->ngemm_groups[st];
    const int row0 = s->splits.stage_base[st], rows = s->splits.stage_base[st + 1] - row0;
    if (rows == 0)
        return 0;
    if (mok_fp8_experts_run_rows(&f->experts, &s->gemms, s->compute, 1, p, set, groups, n, f->aq, f->as, row0, rows,
                                 s->hbuf, NULL, err, err_len))
        return -1;
    return mok_fp8_experts_run_rows(&f->experts, &s->gemms, s->compute, 2, p, set, groups, n, f->aq, f->as, row0,
                                    rows, s->hbuf, s->em_out, err, err_len);
}
