/* problem_gemm: the gemm-mode part of a problem. This rank's routes, sorted by expert (counting sort, routes of
 * one expert in (token, k) order), give the expert-major rows the expert GEMMs read: A[r] = x[token of r]. The
 * reference runs the plain fp32 SIMT GEMMs per expert with the layer's bf16 roundings (GEMM1 output, SwiGLU
 * output) and keeps GEMM2's output in fp32. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "mok_kernels.h"
#include "problem.h"


void mok_problem_gemm_destroy(struct mok_problem *p)
{
    for (int s = 0; s < MOK_MAX_SETS; s++) {
        cudaFree(p->gemm_a[s]);
        p->gemm_a[s] = NULL;
    }
    mok_problem_gemm_bwd_destroy(p);
    mok_problem_fp8_destroy(p);
    mok_problem_mxfp8_destroy(p);
    cudaFree(p->gemm_offset);
    cudaFree(p->gemm_token);
    p->gemm_token = NULL;
    free(p->h_gemm_offset);
    free(p->h_gemm_route);
    p->h_gemm_route = NULL;
    p->gemm_offset = NULL;
    p->h_gemm_offset = NULL;
}

int mok_problem_gemm_max_rows(const struct mok_problem *p)
{
    int max_rows = 1;
    for (int e = 0; e < p->experts; e++)
        if (p->h_gemm_offset[e + 1] - p->h_gemm_offset[e] > max_rows)
            max_rows = p->h_gemm_offset[e + 1] - p->h_gemm_offset[e];
    return max_rows;
}

int mok_problem_gemm_setup(struct mok_problem *p, cudaStream_t st, bool with_reference, char *err, int err_len)
{
    int E = p->experts, K = p->topk, H = p->hidden, I = p->inter;
    size_t routes = (size_t)p->tokens * K;
    int rc = -1;
    int32_t *h_token = malloc(routes * sizeof(int32_t) + 4), *d_token = NULL;
    int *cursor = calloc((size_t)E + 1, sizeof(int));
    float *g = NULL;
    uint16_t *h = NULL;
    p->h_gemm_offset = calloc((size_t)E + 1, sizeof(int32_t));
    p->h_gemm_route = malloc(routes * sizeof(int32_t) + 4);
    if (!h_token || !cursor || !p->h_gemm_offset || !p->h_gemm_route) {
        snprintf(err, (size_t)err_len, "gemm problem: out of host memory");
        goto out;
    }
    for (size_t r = 0; r < routes; r++)
        p->h_gemm_offset[p->h_ids[r] + 1]++;
    for (int e = 0; e < E; e++)
        p->h_gemm_offset[e + 1] += p->h_gemm_offset[e];
    memcpy(cursor, p->h_gemm_offset, sizeof(int) * (size_t)E);
    for (size_t r = 0; r < routes; r++) {
        const int row = cursor[p->h_ids[r]]++;
        h_token[row] = (int32_t)(r / (size_t)K);
        p->h_gemm_route[row] = (int32_t)r;
    }
    p->gemm_rows = (int)routes;
    /* The copies go on st, the stream the gather below runs on, and st is waited for before the gather. A plain
     * cudaMemcpy from pageable memory may return before its DMA lands, and st (non-blocking) does not wait for the
     * legacy stream: the gather then read a fresh allocation's stale contents as token indices, an illegal address
     * on the first problem after a model change (issue 19 item 8; tests/gpu_grow_shrink_gemm.json). */
    MOK_CHECK(cuda, cudaMalloc((void **)&p->gemm_offset, sizeof(int32_t) * ((size_t)E + 1)), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&d_token, routes * sizeof(int32_t) + 4), goto out);
    MOK_CHECK(cuda,
              cudaMemcpyAsync(p->gemm_offset, p->h_gemm_offset, sizeof(int32_t) * ((size_t)E + 1),
                              cudaMemcpyHostToDevice, st),
              goto out);
    MOK_CHECK(cuda, cudaMemcpyAsync(d_token, h_token, routes * sizeof(int32_t), cudaMemcpyHostToDevice, st), goto out);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), goto out);
    for (int s = 0; s < p->sets; s++) {
        MOK_CHECK(cuda, cudaMalloc((void **)&p->gemm_a[s], routes * H * 2 + 16), goto out);
        MOK_CHECK(cuda, mok_gather_rows(p->x[s], d_token, (int)routes, H, p->gemm_a[s], (mok_stream_t)st), goto out);
    }
    /* y holds GEMM2's output rows, not tokens */
    cudaFree(p->y);
    p->y = NULL;
    p->y_elems = routes * H;
    MOK_CHECK(cuda, cudaMalloc((void **)&p->y, routes * H * 2 + 16), goto out);
    if (p->spec.dtype == MOK_DTYPE_FP8_BLOCK || p->spec.dtype == MOK_DTYPE_MXFP8) {
        if (with_reference)
            MOK_CHECK(cuda, cudaMalloc((void **)&p->y_ref, routes * H * 4 + 16), goto out);
        if (p->spec.dtype == MOK_DTYPE_FP8_BLOCK ? mok_problem_fp8_setup(p, st, with_reference, err, err_len)
                                                 : mok_problem_mxfp8_setup(p, st, with_reference, err, err_len))
            goto out;
    } else if (with_reference && mok_pass_has_fwd(p->spec.pass)) { /* the backward's: problem_gemm_bwd.c */
        const int max_rows = mok_problem_gemm_max_rows(p);
        MOK_CHECK(cuda, cudaMalloc((void **)&p->y_ref, routes * H * 4 + 16), goto out);
        MOK_CHECK(cuda, cudaMalloc((void **)&g, (size_t)max_rows * 2 * I * 4), goto out);
        MOK_CHECK(cuda, cudaMalloc((void **)&h, (size_t)max_rows * I * 2), goto out);
        for (int e = 0; e < E; e++) {
            int n = p->h_gemm_offset[e + 1] - p->h_gemm_offset[e], row0 = p->h_gemm_offset[e];
            if (!n)
                continue;
            const uint16_t *w13 = p->w13[0] + (size_t)e * 2 * I * H, *w2 = p->w2[0] + (size_t)e * H * I;
            MOK_CHECK(cuda, mok_ref_gemm_f32(p->gemm_a[0] + (size_t)row0 * H, NULL, n, H, w13, 2 * I, g, NULL,
                                             (mok_stream_t)st), goto out);
            MOK_CHECK(cuda, mok_ref_swiglu(g, n, I, h, (mok_stream_t)st), goto out);
            MOK_CHECK(cuda, mok_ref_gemm_f32(h, NULL, n, I, w2, H, p->y_ref + (size_t)row0 * H, NULL, (mok_stream_t)st),
                      goto out);
        }
    }
    MOK_CHECK(cuda, cudaStreamSynchronize(st), goto out);
    rc = 0;
out:
    cudaStreamSynchronize(st); /* no copy still reads h_token, no kernel still reads d_token */
    free(h_token);
    free(cursor);
    if (rc == 0)
        p->gemm_token = d_token; /* the backward's reference reads rows by token */
    else
        cudaFree(d_token);
    cudaFree(g);
    cudaFree(h);
    return rc;
}
