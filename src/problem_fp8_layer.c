/* problem_fp8_layer: layer mode's FP8 check, both formats (dtype fp8_block or mxfp8; src/fp8.h defines them).
 *
 * The check isolates kernel errors from the format's own (issue 22): the reference applies the same quantization
 * to x, the weights and h, and each GEMM is checked on its own, as in gemm mode (src/problem_fp8.c says why y end to
 * end cannot be: the tensor cores' GEMM1 differs from an fp32 one in its last bits, and re-quantizing h to e4m3 turns
 * a few of those into whole e4m3 steps). So a layer has two outputs:
 *   h  each route's SwiGLU output [tokens x topk][inter] bf16, in route order (token t's slot j at row t topk + j),
 *      as its expert's rank computed it; the implementation writes it after a checked run (impl.h: export_outputs).
 *      Its reference: GEMM1 in fp32 on the quantized x rows and weights, rounded to bf16 and SwiGLU'd as the bf16
 *      reference does (computed once, by build_reference in problem.c, expert by expert: mok_fp8_layer_expert).
 *   y  the layer's output, against a reference recomputed after every checked run from the implementation's own h
 *      (mok_fp8_layer_refresh): h quantized as the implementations quantize it, GEMM2 in fp32 per expert on the
 *      quantized weights (regenerated from the seed: the experts of other ranks too), the same fixed-order weighted
 *      sum with the shared MLP's bf16 output. Only GEMM2's accumulation and the combine separate y from it.
 * The quantizers are the format's definition, shared with the implementations and matched byte for byte against
 * src/fp8.c (tests/test_gpu_quant.c); everything else here is the references' own code (kernels/reference/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "mok_kernels.h"
#include "problem.h"

/* Rows [rows][k] into e4m3 and the format's activation scales (k / 32 bytes per row in both formats). */
static int quant_rows(const struct mok_fp8_layer *f, const uint16_t *x, int rows, int k, uint8_t *q, void *s,
                      cudaStream_t st)
{
    return f->mx ? mok_quant_mxfp8_bf16(x, rows, k, q, s, f->status, (mok_stream_t)st)
                 : mok_quant_fp8_block_bf16(x, rows, k, q, s, f->status, (mok_stream_t)st);
}

/* One expert's weight matrix [rows][k]: 128 x 128 blocks (fp8_block) or per row per 32 K (mxfp8). */
static int quant_weight(const struct mok_fp8_layer *f, const uint16_t *w, int rows, int k, uint8_t *q, void *s,
                        cudaStream_t st)
{
    return f->mx ? mok_quant_mxfp8_bf16(w, rows, k, q, s, f->status, (mok_stream_t)st)
                 : mok_quant_fp8_block_weights_bf16(w, 1, rows, k, q, s, f->status, (mok_stream_t)st);
}

static int ref_gemm(const struct mok_fp8_layer *f, const uint8_t *a, const void *as, int m, int k, const uint8_t *w,
                    const void *ws, int n, float *c, cudaStream_t st)
{
    return f->mx ? mok_ref_gemm_mxfp8(a, as, m, k, w, ws, n, c, (mok_stream_t)st)
                 : mok_ref_gemm_fp8_block(a, as, m, k, w, ws, n, c, (mok_stream_t)st);
}

/* Bytes of one weight matrix's scales [rows][k]. */
static size_t weight_scale_bytes(bool mx, size_t rows, size_t k)
{
    return mx ? rows * (k / 32) : (rows / 128) * (k / 128) * 4;
}

bool mok_fp8_layer_on(const struct mok_problem_spec *s)
{
    return s->mode == MOK_MODE_LAYER && s->pass == MOK_PASS_FWD &&
           (s->dtype == MOK_DTYPE_FP8_BLOCK || s->dtype == MOK_DTYPE_MXFP8);
}

int mok_fp8_layer_setup(struct mok_problem *p, char *err, int err_len)
{
    struct mok_fp8_layer *f = &p->fl;
    f->mx = p->spec.dtype == MOK_DTYPE_MXFP8;
    f->status = f->mx ? p->mx.status : p->fp8.status;
    const size_t routes = (size_t)p->tokens * p->topk, I = (size_t)p->inter;
    MOK_CHECK(cuda, cudaMalloc((void **)&f->h, routes * I * 2 + 16), return -1);
    return 0;
}

int mok_fp8_layer_begin(struct mok_problem *p, const int *first, const int32_t *token, const int32_t *route,
                        int max_rows, cudaStream_t st, char *err, int err_len)
{
    struct mok_fp8_layer *f = &p->fl;
    const size_t T = (size_t)p->tokens, H = (size_t)p->hidden, I = (size_t)p->inter, R = T * (size_t)p->topk;
    const size_t M = (size_t)max_rows, wide = H > I ? H : I;
    f->first = malloc(sizeof(int) * ((size_t)p->experts + 1));
    if (!f->first) {
        snprintf(err, (size_t)err_len, "fp8 layer reference: out of host memory");
        return -1;
    }
    memcpy(f->first, first, sizeof(int) * ((size_t)p->experts + 1));
    MOK_CHECK(cuda, cudaMalloc((void **)&f->token, R * 4 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->route, R * 4 + 16), return -1);
    MOK_CHECK(cuda, cudaMemcpyAsync(f->token, token, R * 4, cudaMemcpyDeviceToDevice, st), return -1);
    MOK_CHECK(cuda, cudaMemcpyAsync(f->route, route, R * 4, cudaMemcpyDeviceToDevice, st), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->h_ref, R * I * 4 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->route_out, R * H * 4 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->xq, T * H + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc(&f->xs, T * (H / 32) + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->hq, R * I + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc(&f->hs, R * (I / 32) + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->aq, M * wide + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc(&f->as, M * (wide / 32) + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->wq13, 2 * I * H + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc(&f->ws13, weight_scale_bytes(f->mx, 2 * I, H) + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->wq2, H * I + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc(&f->ws2, weight_scale_bytes(f->mx, H, I) + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->w2, H * I * 2 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->o, M * H * 4 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&f->hf, M * I * 4 + 16), return -1);
    f->max_rows = max_rows;
    MOK_CHECK(cuda, quant_rows(f, p->x[0], (int)T, (int)H, f->xq, f->xs, st), return -1);
    return mok_problem_quant_status(f->status, st, mok_dtype_name(p->spec.dtype), "x", err, err_len);
}

int mok_fp8_layer_expert(struct mok_problem *p, int e, const uint16_t *w13, float *g, uint16_t *h, cudaStream_t st,
                         char *err, int err_len)
{
    struct mok_fp8_layer *f = &p->fl;
    const int H = p->hidden, I = p->inter, n = f->first[e + 1] - f->first[e];
    const int32_t *token = f->token + f->first[e], *route = f->route + f->first[e];
    if (n == 0)
        return 0;
    MOK_CHECK(cuda, quant_weight(f, w13, 2 * I, H, f->wq13, f->ws13, st), return -1);
    MOK_CHECK(cuda, mok_ref_fp8_gather(f->xq, f->xs, H, token, n, f->aq, f->as, (mok_stream_t)st), return -1);
    MOK_CHECK(cuda, ref_gemm(f, f->aq, f->as, n, H, f->wq13, f->ws13, 2 * I, g, st), return -1);
    MOK_CHECK(cuda, mok_ref_swiglu(g, n, I, h, (mok_stream_t)st), return -1);
    MOK_CHECK(cuda, mok_ref_widen_bf16(h, (size_t)n * I, f->hf, (mok_stream_t)st), return -1);
    MOK_CHECK(cuda, mok_ref_scatter_rows_f32(f->hf, n, I, route, f->h_ref, (mok_stream_t)st), return -1);
    return 0;
}

void mok_fp8_layer_keep_shared(struct mok_problem *p, float *shared_out) { p->fl.shared_out = shared_out; }

int mok_fp8_layer_refresh(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    struct mok_fp8_layer *f = &p->fl;
    const int T = p->tokens, H = p->hidden, I = p->inter, K = p->topk;
    if (!p->y_ref || !f->first)
        return 0;
    /* a NaN left in h (an implementation that did not write it) sets the status flag: h's own check reports it */
    MOK_CHECK(cuda, quant_rows(f, f->h, T * K, I, f->hq, f->hs, st), return -1);
    for (int e = 0; e < p->experts; e++) {
        const int n = f->first[e + 1] - f->first[e];
        const int32_t *route = f->route + f->first[e];
        if (n == 0)
            continue;
        MOK_CHECK(cuda, mok_problem_fill(&p->spec, f->w2, (size_t)H * I, mok_tensor_id(MOK_T_W2, (uint64_t)e),
                                         mok_weight_scale(I), st), return -1);
        MOK_CHECK(cuda, quant_weight(f, f->w2, H, I, f->wq2, f->ws2, st), return -1);
        MOK_CHECK(cuda, mok_ref_fp8_gather(f->hq, f->hs, I, route, n, f->aq, f->as, (mok_stream_t)st), return -1);
        MOK_CHECK(cuda, ref_gemm(f, f->aq, f->as, n, I, f->wq2, f->ws2, H, f->o, st), return -1);
        MOK_CHECK(cuda, mok_ref_scatter_rows_f32(f->o, n, H, route, f->route_out, (mok_stream_t)st), return -1);
    }
    MOK_CHECK(cuda, mok_ref_sum_routes(f->route_out, p->w, T, K, H, f->shared_out, p->y_ref, (mok_stream_t)st),
              return -1);
    MOK_CHECK(cuda, cudaMemsetAsync(f->status, 0, sizeof(int32_t), st), return -1);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    return 0;
}

void mok_fp8_layer_destroy(struct mok_problem *p)
{
    struct mok_fp8_layer *f = &p->fl;
    void *bufs[] = {f->h,  f->h_ref, f->token, f->route, f->shared_out, f->route_out, f->xq, f->xs, f->hq,
                    f->hs, f->aq,    f->as,    f->wq13,  f->ws13,       f->wq2,       f->ws2, f->w2, f->o,  f->hf};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        cudaFree(bufs[i]);
    free(f->first);
    memset(f, 0, sizeof(*f));
}
