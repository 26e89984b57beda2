/* problem_gemm_bwd: gemm mode's backward problem (problem.h: struct mok_gemm_bwd), for pass bwd and, with the
 * forward's y before the gradients, fwd_bwd (whose implementations save gu in their own forward). The rows are the forward's
 * expert-major rows (problem_gemm.c); dy is seeded per token and gathered into row order like x. The saved
 * context is GEMM1's output as a forward keeps it, bf16(x W13^T), made here with the reference GEMM so that every
 * implementation starts from the same bits. The reference is kernels/reference/backward.cu (fp32, per expert,
 * from x, dy and the weights alone, with the forward's bf16 roundings of gate, up and h), accumulating into the
 * weight gradients' seeded start as the implementations do. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "mok_kernels.h"
#include "problem.h"

/* The seeded start of the accumulated weight gradients: of the order of one step's gradient, so that an
 * implementation that overwrites instead of adding fails its check. */
static const float kGradStartScale = 0.05f;

void mok_problem_gemm_bwd_destroy(struct mok_problem *p)
{
    struct mok_gemm_bwd *b = &p->bwd;
    void *dev[] = {b->dy, b->w, b->gu, b->dx, b->d_router, b->dw13, b->dw2,
                   b->dx_ref, b->d_router_ref, b->dw13_ref, b->dw2_ref};
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        cudaFree(dev[i]);
    memset(b, 0, sizeof *b);
}

static int build_reference(struct mok_problem *p, cudaStream_t st, const uint16_t *dy_tokens, char *err, int err_len)
{
    struct mok_gemm_bwd *b = &p->bwd;
    size_t rows = (size_t)p->gemm_rows, H = (size_t)p->hidden, I = (size_t)p->inter, E = (size_t)p->experts;
    const int max_rows = mok_problem_gemm_max_rows(p);
    int rc = -1;
    float *scratch = NULL;
    int32_t *iota = NULL, *h_iota = malloc(sizeof(int32_t) * (rows + 1));
    if (!h_iota) {
        snprintf(err, (size_t)err_len, "gemm backward reference: out of host memory");
        return -1;
    }
    for (size_t r = 0; r < rows; r++)
        h_iota[r] = (int32_t)r; /* the reference's route ids are the rows themselves here */
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dx_ref, rows * H * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->d_router_ref, rows * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dw13_ref, E * 2 * I * H * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dw2_ref, E * H * I * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&scratch, (size_t)max_rows * 6 * I * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&iota, sizeof(int32_t) * (rows + 1)), goto out);
    MOK_CHECK(cuda, cudaMemcpyAsync(iota, h_iota, sizeof(int32_t) * rows, cudaMemcpyHostToDevice, st), goto out);
    uint64_t seed = p->spec.routing.seed;
    if (p->spec.wgrad == MOK_WGRAD_BF16) { /* the gradient alone */
        MOK_CHECK(cuda, cudaMemsetAsync(b->dw13_ref, 0, E * 2 * I * H * 4, st), goto out);
        MOK_CHECK(cuda, cudaMemsetAsync(b->dw2_ref, 0, E * H * I * 4, st), goto out);
    } else { /* the seeded start the implementation adds to, plus the gradient */
        MOK_CHECK(cuda, mok_fill_f32(b->dw13_ref, E * 2 * I * H, seed, MOK_T_DW13, kGradStartScale, (mok_stream_t)st),
                  goto out);
        MOK_CHECK(cuda, mok_fill_f32(b->dw2_ref, E * H * I, seed, MOK_T_DW2, kGradStartScale, (mok_stream_t)st),
                  goto out);
    }
    for (size_t e = 0; e < E; e++) {
        int n = p->h_gemm_offset[e + 1] - p->h_gemm_offset[e], row0 = p->h_gemm_offset[e];
        if (!n)
            continue;
        MOK_CHECK(cuda,
                  mok_ref_bwd_expert_f32(p->x[0], dy_tokens, b->w, p->gemm_token + row0, iota + row0, n, (int)H,
                                         (int)I, p->w13[0] + e * 2 * I * H, p->w2[0] + e * H * I, 1, scratch,
                                         b->dx_ref, b->dw13_ref + e * 2 * I * H, b->dw2_ref + e * H * I,
                                         b->d_router_ref, (mok_stream_t)st),
                  goto out);
    }
    MOK_CHECK(cuda, cudaStreamSynchronize(st), goto out);
    rc = 0;
out:
    cudaStreamSynchronize(st);
    free(h_iota);
    cudaFree(iota);
    cudaFree(scratch);
    return rc;
}

int mok_problem_gemm_bwd_setup(struct mok_problem *p, cudaStream_t st, bool with_reference, char *err, int err_len)
{
    struct mok_gemm_bwd *b = &p->bwd;
    size_t rows = (size_t)p->gemm_rows, H = (size_t)p->hidden, I = (size_t)p->inter, E = (size_t)p->experts;
    size_t T = (size_t)p->tokens;
    const int max_rows = mok_problem_gemm_max_rows(p);
    int rc = -1;
    uint16_t *dy_tokens = NULL;
    float *g = NULL, *h_w = malloc(sizeof(float) * (rows + 1));
    if (!h_w) {
        snprintf(err, (size_t)err_len, "gemm backward problem: out of host memory");
        goto out;
    }
    for (size_t r = 0; r < rows; r++) /* the router weights in row order */
        h_w[r] = p->h_w[p->h_gemm_route[r]];
    MOK_CHECK(cuda, cudaMalloc((void **)&dy_tokens, T * H * 2 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dy, rows * H * 2 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->w, rows * 4 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->gu, rows * 2 * I * 2 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dx, rows * H * 2 + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->d_router, rows * 4 + 16), goto out);
    const bool dw_bf16 = p->spec.wgrad == MOK_WGRAD_BF16; /* written in bf16, else fp32 accumulated */
    const size_t dw_size = dw_bf16 ? 2 : 4;
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dw13, E * 2 * I * H * dw_size + 16), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&b->dw2, E * H * I * dw_size + 16), goto out);
    MOK_CHECK(cuda, cudaMemcpyAsync(b->w, h_w, rows * 4, cudaMemcpyHostToDevice, st), goto out);
    /* dy: seeded per token at the scale of a layer's output gradient (unit spread; the check is relative) */
    MOK_CHECK(cuda,
              mok_fill_bf16(dy_tokens, T * H, p->spec.routing.seed, MOK_T_DY, 0, 1.0f, 7, (mok_stream_t)st),
              goto out);
    MOK_CHECK(cuda, mok_gather_rows(dy_tokens, p->gemm_token, (int)rows, (int)H, b->dy, (mok_stream_t)st), goto out);
    /* the saved context: gu = bf16(x W13^T) per expert */
    MOK_CHECK(cuda, cudaMalloc((void **)&g, (size_t)max_rows * 2 * I * 4 + 16), goto out);
    for (size_t e = 0; e < E; e++) {
        int n = p->h_gemm_offset[e + 1] - p->h_gemm_offset[e], row0 = p->h_gemm_offset[e];
        if (!n)
            continue;
        MOK_CHECK(cuda, mok_ref_gemm_f32(p->gemm_a[0] + (size_t)row0 * H, NULL, n, (int)H, p->w13[0] + e * 2 * I * H,
                                         (int)(2 * I), g, NULL, (mok_stream_t)st), goto out);
        MOK_CHECK(cuda, mok_convert_f32_bf16(g, (size_t)n * 2 * I, b->gu + (size_t)row0 * 2 * I, (mok_stream_t)st),
                  goto out);
    }
    MOK_CHECK(cuda, cudaStreamSynchronize(st), goto out);
    if (with_reference && build_reference(p, st, dy_tokens, err, err_len))
        goto out;
    uint64_t seed = p->spec.routing.seed;
    int n = 0;
    if (mok_pass_has_fwd(p->spec.pass)) /* fwd_bwd: the forward's GEMM2 rows too (problem_gemm.c's y) */
        p->out.o[n++] =
            (struct mok_output){.name = "y", .type = MOK_OUT_BF16, .data = p->y, .ref = p->y_ref, .elems = p->y_elems};
    p->out.o[n++] =
        (struct mok_output){.name = "dx", .type = MOK_OUT_BF16, .data = b->dx, .ref = b->dx_ref, .elems = rows * H};
    p->out.o[n++] = (struct mok_output){.name = "d_router", .type = MOK_OUT_F32, .data = b->d_router,
                                        .ref = b->d_router_ref, .elems = rows};
    if (dw_bf16) { /* written: poisoned before each checked run */
        p->out.o[n++] = (struct mok_output){.name = "dw13", .type = MOK_OUT_BF16, .data = b->dw13, .ref = b->dw13_ref,
                                            .elems = E * 2 * I * H};
        p->out.o[n++] = (struct mok_output){.name = "dw2", .type = MOK_OUT_BF16, .data = b->dw2, .ref = b->dw2_ref,
                                            .elems = E * H * I};
    } else { /* accumulated: refilled with the seeded start before each checked run */
        p->out.o[n++] = (struct mok_output){.name = "dw13", .type = MOK_OUT_F32, .data = b->dw13, .ref = b->dw13_ref,
                                            .elems = E * 2 * I * H, .init_seed = seed, .init_id = MOK_T_DW13,
                                            .init_scale = kGradStartScale};
        p->out.o[n++] = (struct mok_output){.name = "dw2", .type = MOK_OUT_F32, .data = b->dw2, .ref = b->dw2_ref,
                                            .elems = E * H * I, .init_seed = seed, .init_id = MOK_T_DW2,
                                            .init_scale = kGradStartScale};
    }
    p->out.n = n;
    rc = 0;
out:
    cudaStreamSynchronize(st);
    free(h_w);
    cudaFree(dy_tokens);
    cudaFree(g);
    return rc;
}
