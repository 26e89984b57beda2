/* gemm_cublas: the baselines' expert GEMMs on cuBLAS (see gemm_cublas.h). */
#include "gemm_cublas.h"

#include <stdlib.h>
#include <string.h>

#include "mok_kernels.h"
#include "params.h"

_Static_assert(MOK_GEMM_STREAMS_MAX <= MOK_MAX_GEMM_STREAMS, "gemm_streams' range exceeds the stream table");

#define PTRS_PER_GROUP 6 /* A1 B1 C1 A2 B2 C2 */

int mok_expert_gemms_init(struct mok_expert_gemms *g, enum mok_gemm_mode mode, int nstreams, int sm_target,
                          int max_groups, int batches)
{
    memset(g, 0, sizeof(*g));
    g->mode = mode;
    g->parts = 3;
    g->nstreams = nstreams < 1 ? 1 : nstreams > MOK_MAX_GEMM_STREAMS ? MOK_MAX_GEMM_STREAMS : nstreams;
    g->max_groups = max_groups;
    g->batches = batches;
    cublasStatus_t s = cublasCreate(&g->handle);
    if (s == CUBLAS_STATUS_SUCCESS && sm_target > 0)
        s = cublasSetSmCountTarget(g->handle, sm_target);
    if (s != CUBLAS_STATUS_SUCCESS)
        return (int)s;
    if (mode == MOK_GEMM_PER_EXPERT && g->nstreams > 1) {
        cudaError_t ce = cudaEventCreateWithFlags(&g->fork, cudaEventDisableTiming);
        for (int i = 0; i < g->nstreams && ce == cudaSuccess; i++) {
            ce = cudaStreamCreateWithFlags(&g->streams[i], cudaStreamNonBlocking);
            if (ce == cudaSuccess)
                ce = cudaEventCreateWithFlags(&g->joins[i], cudaEventDisableTiming);
            if (ce == cudaSuccess && (s = cublasCreate(&g->handles[i])) == CUBLAS_STATUS_SUCCESS)
                s = cublasSetStream(g->handles[i], g->streams[i]);
            if (s == CUBLAS_STATUS_SUCCESS && sm_target > 0)
                s = cublasSetSmCountTarget(g->handles[i], sm_target);
            if (s != CUBLAS_STATUS_SUCCESS)
                return (int)s;
        }
        if (ce != cudaSuccess)
            return (int)ce;
    }
    size_t groups = (size_t)max_groups * batches;
    size_t ptr_bytes = groups * PTRS_PER_GROUP * sizeof(void *);
    cudaError_t e = cudaMallocHost((void **)&g->h_ptrs, ptr_bytes);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&g->d_ptrs, ptr_bytes);
    if (e != cudaSuccess)
        return (int)e;
    /* the grouped call reads these host arrays when it is called, so one set serves every batch */
    int **ints[] = {&g->h_m1, &g->h_n1, &g->h_k1, &g->h_lda1, &g->h_ldb1, &g->h_ldc1, &g->h_m2,
                    &g->h_n2, &g->h_k2, &g->h_lda2, &g->h_ldb2, &g->h_ldc2, &g->h_size};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        if (!(*ints[i] = calloc((size_t)max_groups, sizeof(int))))
            return (int)cudaErrorMemoryAllocation;
    g->h_ta = calloc((size_t)max_groups, sizeof(cublasOperation_t));
    g->h_tb = calloc((size_t)max_groups, sizeof(cublasOperation_t));
    g->h_alpha = calloc((size_t)max_groups, sizeof(float));
    g->h_beta = calloc((size_t)max_groups, sizeof(float));
    if (!g->h_ta || !g->h_tb || !g->h_alpha || !g->h_beta)
        return (int)cudaErrorMemoryAllocation;
    for (int i = 0; i < max_groups; i++) {
        g->h_ta[i] = CUBLAS_OP_T;
        g->h_tb[i] = CUBLAS_OP_N;
        g->h_alpha[i] = 1.0f;
        g->h_beta[i] = 0.0f;
        g->h_size[i] = 1;
    }
    return 0;
}

void mok_expert_gemms_destroy(struct mok_expert_gemms *g)
{
    if (g->handle)
        cublasDestroy(g->handle);
    for (int i = 0; i < MOK_MAX_GEMM_STREAMS; i++) {
        if (g->handles[i])
            cublasDestroy(g->handles[i]);
        if (g->streams[i])
            cudaStreamDestroy(g->streams[i]);
        if (g->joins[i])
            cudaEventDestroy(g->joins[i]);
    }
    if (g->fork)
        cudaEventDestroy(g->fork);
    cudaFreeHost((void *)g->h_ptrs);
    cudaFree((void *)g->d_ptrs);
    int *ints[] = {g->h_m1, g->h_n1, g->h_k1, g->h_lda1, g->h_ldb1, g->h_ldc1, g->h_m2,
                   g->h_n2, g->h_k2, g->h_lda2, g->h_ldb2, g->h_ldc2, g->h_size};
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++)
        free(ints[i]);
    free(g->h_ta);
    free(g->h_tb);
    free(g->h_alpha);
    free(g->h_beta);
    memset(g, 0, sizeof(*g));
}

/* C[rows][n] = A[rows][k] * W[n][k]^T, bf16 in and out, fp32 accumulation. */
static cublasStatus_t gemm_tn(cublasHandle_t h, int rows, int n, int k, const uint16_t *w, const uint16_t *a,
                              uint16_t *c)
{
    const float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, rows, k, &one, w, CUDA_R_16BF, k, a, CUDA_R_16BF, k, &zero,
                        c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

int mok_dense_mlp(cublasHandle_t handle, cudaStream_t stream, int rows, int hidden, int inter, const uint16_t *w13,
                  const uint16_t *w2, const uint16_t *in, uint16_t *g1, uint16_t *h, uint16_t *out)
{
    if (rows <= 0)
        return 0;
    cublasSetStream(handle, stream);
    cublasStatus_t s = gemm_tn(handle, rows, 2 * inter, hidden, w13, in, g1);
    if (s != CUBLAS_STATUS_SUCCESS)
        return (int)s;
    int e = mok_swiglu_bf16(g1, rows, inter, h, (mok_stream_t)stream);
    if (e)
        return e;
    return (int)gemm_tn(handle, rows, hidden, inter, w2, h, out);
}

static int run_per_expert(struct mok_expert_gemms *g, cudaStream_t stream, const struct mok_gemm_group *groups,
                          int ngroups, const uint16_t *w13, const uint16_t *w2, int H, int I, const uint16_t *in,
                          uint16_t *g1, uint16_t *h, uint16_t *out, int first_row, int total_rows)
{
    for (int i = 0; i < ngroups && (g->parts & 1); i++) {
        const struct mok_gemm_group *gr = &groups[i];
        cublasStatus_t s = gemm_tn(g->handle, gr->rows, 2 * I, H, w13 + (size_t)gr->expert * 2 * I * H,
                                   in + (size_t)gr->row * H, g1 + (size_t)gr->row * 2 * I);
        if (s != CUBLAS_STATUS_SUCCESS)
            return (int)s;
    }
    /* one SwiGLU over the contiguous rows of all groups */
    int e = (g->parts & 1) ? mok_swiglu_bf16(g1 + (size_t)first_row * 2 * I, total_rows, I,
                                             h + (size_t)first_row * I, (mok_stream_t)stream)
                           : 0;
    if (e)
        return e;
    for (int i = 0; i < ngroups && (g->parts & 2); i++) {
        const struct mok_gemm_group *gr = &groups[i];
        cublasStatus_t s = gemm_tn(g->handle, gr->rows, H, I, w2 + (size_t)gr->expert * H * I,
                                   h + (size_t)gr->row * I, out + (size_t)gr->row * H);
        if (s != CUBLAS_STATUS_SUCCESS)
            return (int)s;
    }
    return 0;
}

/* The side streams start after what `stream` has queued (mok_expert_gemms_fork), and `stream` goes on once they are all done
 * (mok_expert_gemms_join). */
cudaError_t mok_expert_gemms_fork(struct mok_expert_gemms *g, cudaStream_t stream)
{
    cudaError_t ce = cudaEventRecord(g->fork, stream);
    for (int i = 0; i < g->nstreams && ce == cudaSuccess; i++)
        ce = cudaStreamWaitEvent(g->streams[i], g->fork, 0);
    return ce;
}

cudaError_t mok_expert_gemms_join(struct mok_expert_gemms *g, cudaStream_t stream)
{
    cudaError_t ce = cudaSuccess;
    for (int i = 0; i < g->nstreams && ce == cudaSuccess; i++) {
        ce = cudaEventRecord(g->joins[i], g->streams[i]);
        if (ce == cudaSuccess)
            ce = cudaStreamWaitEvent(stream, g->joins[i], 0);
    }
    return ce;
}

/* Experts round-robin over side streams forked from `stream`; each runs its whole MLP (GEMM1, SwiGLU on its
 * rows, GEMM2) on its stream, and `stream` joins them all at the end. */
static int run_per_expert_streams(struct mok_expert_gemms *g, cudaStream_t stream, const struct mok_gemm_group *groups,
                                  int ngroups, const uint16_t *w13, const uint16_t *w2, int H, int I,
                                  const uint16_t *in, uint16_t *g1, uint16_t *h, uint16_t *out)
{
    cudaError_t ce = mok_expert_gemms_fork(g, stream);
    if (ce != cudaSuccess)
        return (int)ce;
    for (int i = 0; i < ngroups; i++) {
        const struct mok_gemm_group *gr = &groups[i];
        int sidx = i % g->nstreams;
        cublasHandle_t hd = g->handles[sidx];
        cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
        if (g->parts & 1) {
            s = gemm_tn(hd, gr->rows, 2 * I, H, w13 + (size_t)gr->expert * 2 * I * H, in + (size_t)gr->row * H,
                        g1 + (size_t)gr->row * 2 * I);
            if (s != CUBLAS_STATUS_SUCCESS)
                return (int)s;
            int e = mok_swiglu_bf16(g1 + (size_t)gr->row * 2 * I, gr->rows, I, h + (size_t)gr->row * I,
                                    (mok_stream_t)g->streams[sidx]);
            if (e)
                return e;
        }
        if (g->parts & 2)
            s = gemm_tn(hd, gr->rows, H, I, w2 + (size_t)gr->expert * H * I, h + (size_t)gr->row * I,
                        out + (size_t)gr->row * H);
        if (s != CUBLAS_STATUS_SUCCESS)
            return (int)s;
    }
    return (int)mok_expert_gemms_join(g, stream);
}

/* The backward of one expert's rows, on handle hd's stream (gemm_cublas.h: mok_expert_gemms_backward). cuBLAS is
 * column-major: a row-major [r][c] matrix is its column-major [c][r] with leading dimension c. */
static int backward_expert(cublasHandle_t hd, cudaStream_t st, const struct mok_gemm_group *gr, int H, int I,
                           const struct mok_expert_bwd *b)
{
    const float one = 1.0f, zero = 0.0f;
    const size_t r0 = (size_t)gr->row, e = (size_t)gr->expert;
    const int n = gr->rows;
    const cudaDataType_t dw_type = b->dw_bf16 ? CUDA_R_16BF : CUDA_R_32F;
    const size_t dw_size = b->dw_bf16 ? 2 : 4;
    /* written, or added to (fp32 always; bf16 where an earlier call of this step already wrote the expert's) */
    const float *dw_beta = b->dw_bf16 && !(b->dw_accumulate && b->dw_accumulate[e]) ? &zero : &one;
    const int parts = b->parts ? b->parts : MOK_BWD_DGRAD | MOK_BWD_WGRAD;
    char *dw13 = (char *)b->dw13 + e * 2 * I * H * dw_size, *dw2 = (char *)b->dw2 + e * H * I * dw_size;
    const uint16_t *w13 = b->w13 + e * 2 * I * H, *w2 = b->w2 + e * H * I;
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (!(parts & MOK_BWD_DGRAD))
        goto wgrad;
    /* dh' [n][I] = dy [n][H] W2 [H][I] */
    s = cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, I, n, H, &one, w2, CUDA_R_16BF, I, b->dy + r0 * H, CUDA_R_16BF, H,
                     &zero, b->dhp + r0 * I, CUDA_R_16BF, I, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return (int)s;
    int ce = mok_swiglu_bwd_bf16(b->gu + r0 * 2 * I, b->dhp + r0 * I, b->w + r0, n, I, b->dgu + r0 * 2 * I,
                                 b->hw + r0 * I, b->d_router + r0, (mok_stream_t)st);
    if (ce)
        return ce;
    /* dx [n][H] = [dg, du] [n][2I] W13 [2I][H] */
    s = cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_N, H, n, 2 * I, &one, w13, CUDA_R_16BF, H, b->dgu + r0 * 2 * I,
                     CUDA_R_16BF, 2 * I, &zero, b->dx + r0 * H, CUDA_R_16BF, H, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS || !(parts & MOK_BWD_WGRAD))
        return (int)s;
wgrad:
    /* dW2 [H][I] (+)= dy^T (w h): column-major [I][H] = (w h)^T-as-[I][n] x dy-as-[n][H] */
    s = cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_T, I, H, n, &one, b->hw + r0 * I, CUDA_R_16BF, I, b->dy + r0 * H,
                     CUDA_R_16BF, H, dw_beta, dw2, dw_type, I, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS)
        return (int)s;
    /* dW13 [2I][H] (+)= [dg, du]^T x: column-major [H][2I] = x-as-[H][n] x [dg, du]-as-[n][2I] */
    s = cublasGemmEx(hd, CUBLAS_OP_N, CUBLAS_OP_T, H, 2 * I, n, &one, b->x + r0 * H, CUDA_R_16BF, H,
                     b->dgu + r0 * 2 * I, CUDA_R_16BF, 2 * I, dw_beta, dw13, dw_type, H, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT);
    return (int)s;
}

/* Written gradients (wgrad bf16) are the step's whole gradient: an expert that received no rows has dW = 0, which
 * no GEMM writes. Groups come in expert order (one per expert with rows). */
static cudaError_t zero_idle_gradients(cudaStream_t stream, const struct mok_gemm_group *groups, int ngroups, int H,
                                       int I, const struct mok_expert_bwd *b)
{
    const size_t per13 = (size_t)2 * I * H * 2, per2 = (size_t)H * I * 2;
    for (int e = 0, gi = 0; e < b->experts; e++) {
        while (gi < ngroups && groups[gi].expert < e)
            gi++;
        if (gi < ngroups && groups[gi].expert == e)
            continue;
        cudaError_t ce = cudaMemsetAsync((char *)b->dw13 + e * per13, 0, per13, stream);
        if (ce == cudaSuccess)
            ce = cudaMemsetAsync((char *)b->dw2 + e * per2, 0, per2, stream);
        if (ce != cudaSuccess)
            return ce;
    }
    return cudaSuccess;
}

int mok_expert_gemms_backward(struct mok_expert_gemms *g, cudaStream_t stream, const struct mok_gemm_group *groups,
                              int ngroups, int hidden, int inter, const struct mok_expert_bwd *b)
{
    if (g->mode != MOK_GEMM_PER_EXPERT)
        return (int)CUBLAS_STATUS_NOT_SUPPORTED;
    const int parts = b->parts ? b->parts : MOK_BWD_DGRAD | MOK_BWD_WGRAD;
    if (b->dw_bf16 && (parts & MOK_BWD_WGRAD) && !b->dw_accumulate) {
        cudaError_t ze = zero_idle_gradients(stream, groups, ngroups, hidden, inter, b);
        if (ze != cudaSuccess)
            return (int)ze;
    }
    if (g->nstreams <= 1) {
        cublasSetStream(g->handle, stream);
        for (int i = 0; i < ngroups; i++) {
            int rc = backward_expert(g->handle, stream, &groups[i], hidden, inter, b);
            if (rc)
                return rc;
        }
        return 0;
    }
    /* experts round-robin over the side streams, each expert's five steps in order on one of them */
    cudaError_t ce = mok_expert_gemms_fork(g, stream);
    if (ce != cudaSuccess)
        return (int)ce;
    for (int i = 0; i < ngroups; i++) {
        int sidx = i % g->nstreams;
        int rc = backward_expert(g->handles[sidx], g->streams[sidx], &groups[i], hidden, inter, b);
        if (rc)
            return rc;
    }
    return (int)mok_expert_gemms_join(g, stream);
}

static int run_grouped(struct mok_expert_gemms *g, cudaStream_t stream, int batch,
                       const struct mok_gemm_group *groups, int n, const uint16_t *w13, const uint16_t *w2, int H,
                       int I, const uint16_t *in, uint16_t *g1, uint16_t *h, uint16_t *out, int first_row,
                       int total_rows)
{
    size_t base = (size_t)batch * g->max_groups * PTRS_PER_GROUP;
    const void **hp = g->h_ptrs + base;
    const void **dp = g->d_ptrs + base;
    for (int i = 0; i < n; i++) {
        const struct mok_gemm_group *gr = &groups[i];
        hp[0 * n + i] = w13 + (size_t)gr->expert * 2 * I * H;
        hp[1 * n + i] = in + (size_t)gr->row * H;
        hp[2 * n + i] = g1 + (size_t)gr->row * 2 * I;
        hp[3 * n + i] = w2 + (size_t)gr->expert * H * I;
        hp[4 * n + i] = h + (size_t)gr->row * I;
        hp[5 * n + i] = out + (size_t)gr->row * H;
        g->h_m1[i] = 2 * I, g->h_n1[i] = gr->rows, g->h_k1[i] = H;
        g->h_lda1[i] = H, g->h_ldb1[i] = H, g->h_ldc1[i] = 2 * I;
        g->h_m2[i] = H, g->h_n2[i] = gr->rows, g->h_k2[i] = I;
        g->h_lda2[i] = I, g->h_ldb2[i] = I, g->h_ldc2[i] = H;
    }
    cudaError_t ce = cudaMemcpyAsync((void *)dp, hp, (size_t)n * PTRS_PER_GROUP * sizeof(void *),
                                     cudaMemcpyHostToDevice, stream);
    if (ce != cudaSuccess)
        return (int)ce;
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (g->parts & 1) {
        s = cublasGemmGroupedBatchedEx(g->handle, g->h_ta, g->h_tb, g->h_m1, g->h_n1, g->h_k1, g->h_alpha,
                                       dp + 0 * n, CUDA_R_16BF, g->h_lda1, dp + 1 * n, CUDA_R_16BF, g->h_ldb1,
                                       g->h_beta, (void *const *)(dp + 2 * n), CUDA_R_16BF, g->h_ldc1, n, g->h_size,
                                       CUBLAS_COMPUTE_32F);
        if (s != CUBLAS_STATUS_SUCCESS)
            return (int)s;
        int e = mok_swiglu_bf16(g1 + (size_t)first_row * 2 * I, total_rows, I, h + (size_t)first_row * I,
                                (mok_stream_t)stream);
        if (e)
            return e;
    }
    if (!(g->parts & 2))
        return 0;
    s = cublasGemmGroupedBatchedEx(g->handle, g->h_ta, g->h_tb, g->h_m2, g->h_n2, g->h_k2, g->h_alpha, dp + 3 * n,
                                   CUDA_R_16BF, g->h_lda2, dp + 4 * n, CUDA_R_16BF, g->h_ldb2, g->h_beta,
                                   (void *const *)(dp + 5 * n), CUDA_R_16BF, g->h_ldc2, n, g->h_size,
                                   CUBLAS_COMPUTE_32F);
    return (int)s;
}

int mok_expert_gemms_run(struct mok_expert_gemms *g, cudaStream_t stream, int batch,
                         const struct mok_gemm_group *groups, int ngroups, const uint16_t *w13, const uint16_t *w2,
                         int hidden, int inter, const uint16_t *in, uint16_t *g1, uint16_t *h, uint16_t *out)
{
    if (ngroups <= 0)
        return 0;
    if (ngroups > g->max_groups || batch < 0 || batch >= g->batches)
        return (int)cudaErrorInvalidValue;
    cublasSetStream(g->handle, stream);
    /* groups are consecutive in the expert-major buffer: SwiGLU covers them in one launch */
    int first_row = groups[0].row;
    const struct mok_gemm_group *last = &groups[ngroups - 1];
    int total_rows = last->row + last->rows - first_row;
    if (g->mode == MOK_GEMM_PER_EXPERT && g->nstreams > 1)
        return run_per_expert_streams(g, stream, groups, ngroups, w13, w2, hidden, inter, in, g1, h, out);
    if (g->mode == MOK_GEMM_PER_EXPERT)
        return run_per_expert(g, stream, groups, ngroups, w13, w2, hidden, inter, in, g1, h, out, first_row,
                              total_rows);
    return run_grouped(g, stream, batch, groups, ngroups, w13, w2, hidden, inter, in, g1, h, out, first_row,
                       total_rows);
}
