/* gemm_fp8_experts: the expert MLP in fp8_block on cuBLASLt (gemm_fp8_experts.h). */
#include "gemm_fp8_experts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mok_kernels.h"

#define LT_WORKSPACE (32u << 20) /* what cuBLAS documents for Hopper */

void mok_fp8_experts_destroy(struct mok_fp8_experts *f)
{
    for (int i = 0; i < MOK_MAX_GEMM_STREAMS; i++)
        if (f->lt[i])
            mok_lt_fp8_destroy(f->lt[i]);
    for (int s = 0; s < MOK_MAX_SETS; s++) {
        cudaFree(f->w13_scale[s]);
        cudaFree(f->w2_scale[s]);
    }
    cudaFree(f->g1);
    cudaFree(f->h);
    cudaFree(f->h_fp8);
    cudaFree(f->h_scale);
    memset(f, 0, sizeof(*f));
}

int mok_fp8_experts_init(struct mok_fp8_experts *f, const struct mok_expert_gemms *g, const struct mok_problem *p,
                         const struct mok_gemm_group *groups, int ngroups, cudaStream_t stream, char *err,
                         int err_len)
{
    int max_rows = 1;
    for (int i = 0; i < ngroups; i++)
        max_rows = groups[i].rows > max_rows ? groups[i].rows : max_rows;
    return mok_fp8_experts_init_rows(f, g, p, p->gemm_rows, max_rows, stream, err, err_len);
}

int mok_fp8_experts_init_rows(struct mok_fp8_experts *f, const struct mok_expert_gemms *g,
                              const struct mok_problem *p, int rows_capacity, int max_rows, cudaStream_t stream,
                              char *err, int err_len)
{
    memset(f, 0, sizeof(*f));
    const int H = p->hidden, I = p->inter, E = p->local_experts;
    const size_t R = (size_t)rows_capacity;
    max_rows = max_rows < 1 ? 1 : max_rows;
    f->nlt = g->nstreams > 1 ? g->nstreams : 1;
    for (int i = 0; i < f->nlt; i++)
        if (mok_lt_fp8_create(&f->lt[i], LT_WORKSPACE, err, err_len) ||
            mok_lt_fp8_reserve(f->lt[i], max_rows, H > 2 * I ? H : 2 * I, H > I ? H : I, err, err_len))
            return -1;
    cudaError_t ce = cudaMalloc((void **)&f->g1, R * 2 * I * 2 + 16);
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&f->h, R * I * 2 + 16);
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&f->h_fp8, R * I + 16);
    if (ce == cudaSuccess)
        ce = cudaMalloc((void **)&f->h_scale, R * (I / 128) * 4 + 16);
    for (int s = 0; s < p->sets && ce == cudaSuccess; s++) {
        ce = cudaMalloc((void **)&f->w13_scale[s], (size_t)E * mok_lt_fp8_weight_scale_floats(2 * I, H) * 4 + 16);
        if (ce == cudaSuccess)
            ce = cudaMalloc((void **)&f->w2_scale[s], (size_t)E * mok_lt_fp8_weight_scale_floats(H, I) * 4 + 16);
        /* the weights' scales in cuBLASLt's layout: once, at setup */
        if (ce == cudaSuccess &&
            (mok_lt_fp8_prepare_weight_scales(stream, E, 2 * I, H, p->fp8.w13_scale[s], f->w13_scale[s], err,
                                              err_len) ||
             mok_lt_fp8_prepare_weight_scales(stream, E, H, I, p->fp8.w2_scale[s], f->w2_scale[s], err, err_len)))
            return -1;
    }
    if (ce != cudaSuccess) {
        snprintf(err, (size_t)err_len, "fp8_block experts setup: %s", cudaGetErrorString(ce));
        return -1;
    }
    return 0;
}

/* One GEMM per expert, experts round-robin over the side streams (or all on `stream`). */
static int per_expert(struct mok_fp8_experts *f, struct mok_expert_gemms *g, cudaStream_t stream,
                      const struct mok_gemm_group *groups, int ngroups, int N, int K, const uint8_t *a,
                      const float *a_scale, const uint8_t *w, const float *lt_w_scale, uint16_t *c, char *err,
                      int err_len)
{
    const bool side = g->nstreams > 1;
    if (side && mok_expert_gemms_fork(g, stream) != cudaSuccess) {
        snprintf(err, (size_t)err_len, "fp8_block experts: fork: %s", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    const size_t w_scale_floats = mok_lt_fp8_weight_scale_floats(N, K);
    for (int i = 0; i < ngroups; i++) {
        const struct mok_gemm_group *gr = &groups[i];
        const int si = side ? i % g->nstreams : 0;
        if (mok_lt_fp8_block_gemm(f->lt[si], side ? g->streams[si] : stream, gr->rows, N, K, a + (size_t)gr->row * K,
                                  a_scale + (size_t)gr->row * (K / 128), w + (size_t)gr->expert * N * K,
                                  lt_w_scale + (size_t)gr->expert * w_scale_floats, c + (size_t)gr->row * N, err,
                                  err_len))
            return -1;
    }
    if (side && mok_expert_gemms_join(g, stream) != cudaSuccess) {
        snprintf(err, (size_t)err_len, "fp8_block experts: join: %s", cudaGetErrorString(cudaGetLastError()));
        return -1;
    }
    return 0;
}

int mok_fp8_experts_run(struct mok_fp8_experts *f, struct mok_expert_gemms *g, cudaStream_t stream, int part,
                        const struct mok_problem *p, int set, const struct mok_gemm_group *groups, int ngroups,
                        uint16_t *h, uint16_t *y, char *err, int err_len)
{
    return mok_fp8_experts_run_rows(f, g, stream, part, p, set, groups, ngroups, p->fp8.a[set], p->fp8.a_scale[set],
                                    0, p->gemm_rows, h, y, err, err_len);
}

int mok_fp8_experts_run_rows(struct mok_fp8_experts *f, struct mok_expert_gemms *g, cudaStream_t stream, int part,
                             const struct mok_problem *p, int set, const struct mok_gemm_group *groups, int ngroups,
                             const uint8_t *a, const float *a_scale, int row0, int rows, uint16_t *h, uint16_t *y,
                             char *err, int err_len)
{
    if (!h)
        h = f->h;
    const struct mok_fp8_block_operands *q = &p->fp8;
    const int H = p->hidden, I = p->inter, R = rows;
    const size_t r0 = (size_t)row0;
    if (part == 1) {
        if (per_expert(f, g, stream, groups, ngroups, 2 * I, H, a, a_scale, q->w13[set], f->w13_scale[set], f->g1,
                       err, err_len))
            return -1;
        /* SwiGLU and h's 1 x 128 quantization over the rows at once, after every expert's GEMM1 */
        int e = R ? mok_swiglu_bf16(f->g1 + r0 * 2 * I, R, I, h + r0 * I, (mok_stream_t)stream) : 0;
        if (!e && R)
            e = mok_quant_fp8_block_bf16(h + r0 * I, R, I, f->h_fp8 + r0 * I, f->h_scale + r0 * (I / 128), q->status,
                                         (mok_stream_t)stream);
        if (e) {
            snprintf(err, (size_t)err_len, "fp8_block experts: SwiGLU or h quantization: %s",
                     cudaGetErrorString((cudaError_t)e));
            return -1;
        }
        return 0;
    }
    return per_expert(f, g, stream, groups, ngroups, H, I, f->h_fp8, f->h_scale, q->w2[set], f->w2_scale[set], y,
                      err, err_len);
}
