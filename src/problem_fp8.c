/* problem_fp8: the fp8_block operands of a gemm-mode problem (dtype fp8_block; src/fp8.h defines the format).
 * Setup, not timed: each input set's expert weights quantized in 128 x 128 blocks, and the expert-major x rows in
 * 1 x 128 blocks (in gemm mode the rows arrive as they would from the dispatch; a layer quantizes them on the way).
 *
 * The check, each GEMM on its own (the report's h_check and y_check):
 *   h  GEMM1 + SwiGLU's bf16 output, against the reference's: GEMM1 on the dequantized operands in fp32, its output
 *      rounded to bf16 and SwiGLU'd as the bf16 reference does; computed once at setup.
 *   y  GEMM2's output, against the reference's GEMM2 (fp32, dequantized operands) on the implementation's own h
 *      quantized 1 x 128 as the implementations quantize it; recomputed after every checked run
 *      (mok_problem_refresh_references), as it depends on that run's h.
 * Why not y end to end: the tensor cores accumulate FP8 products with fewer bits than fp32 (within the 128 K between
 * promotions), so GEMM1's outputs differ from an fp32 reference's in their last bits; re-quantizing h to e4m3 turns
 * those into whole e4m3 steps of a few h values (and, through a block's amax, of its scale), and y then misses an
 * end-to-end reference by up to 1.0-1.9e-2 of max |y| on a handful of elements, cuBLASLt's block-scaled GEMMs and
 * mok's kernel alike (results/h200x1/2026-12-02-fp8-gemm). Checked apart, each GEMM is held to the tolerance.
 * The GPU quantizer the check shares with the implementations is the format's definition, matched byte for byte
 * against src/fp8.c (tests/test_gpu_quant.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "mok_kernels.h"
#include "problem.h"

void mok_problem_fp8_destroy(struct mok_problem *p)
{
    struct mok_fp8_block_operands *f = &p->fp8;
    for (int s = 0; s < MOK_MAX_SETS; s++) {
        cudaFree(f->w13[s]);
        cudaFree(f->w13_scale[s]);
        cudaFree(f->w2[s]);
        cudaFree(f->w2_scale[s]);
        cudaFree(f->a[s]);
        cudaFree(f->a_scale[s]);
    }
    cudaFree(f->status);
    cudaFree(f->h);
    cudaFree(f->h_ref);
    cudaFree(f->ref_hq);
    cudaFree(f->ref_hs);
    memset(f, 0, sizeof(*f));
}

/* The quantizers flag non-finite input (the weights and x are drawn finite: a flag is a bug, not bad input). */
int mok_problem_quant_status(const int32_t *status, cudaStream_t st, const char *format, const char *what, char *err,
                             int err_len)
{
    int32_t flag = 0;
    MOK_CHECK(cuda, cudaMemcpyAsync(&flag, status, sizeof(flag), cudaMemcpyDeviceToHost, st), return -1);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    if (flag) {
        snprintf(err, (size_t)err_len, "%s: non-finite values in %s", format, what);
        return -1;
    }
    return 0;
}

/* Every set's local expert weights (and, in gemm mode, its rows) quantized; layer mode has no gemm rows (R 0). */
static int quantize_sets(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    struct mok_fp8_block_operands *f = &p->fp8;
    const size_t E = (size_t)p->local_experts, H = (size_t)p->hidden, I = (size_t)p->inter, R = (size_t)p->gemm_rows;
    for (int s = 0; s < p->sets; s++) {
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w13[s], E * 2 * I * H + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w13_scale[s], E * (2 * I / 128) * (H / 128) * 4 + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w2[s], E * H * I + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w2_scale[s], E * (H / 128) * (I / 128) * 4 + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->a[s], R * H + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->a_scale[s], R * (H / 128) * 4 + 16), return -1);
        MOK_CHECK(cuda, mok_quant_fp8_block_weights_bf16(p->w13[s], (long long)E, 2 * p->inter, p->hidden, f->w13[s],
                                                         f->w13_scale[s], f->status, (mok_stream_t)st), return -1);
        MOK_CHECK(cuda, mok_quant_fp8_block_weights_bf16(p->w2[s], (long long)E, p->hidden, p->inter, f->w2[s],
                                                         f->w2_scale[s], f->status, (mok_stream_t)st), return -1);
        if (R)
            MOK_CHECK(cuda, mok_quant_fp8_block_bf16(p->gemm_a[s], (int)R, p->hidden, f->a[s], f->a_scale[s],
                                                     f->status, (mok_stream_t)st), return -1);
    }
    return mok_problem_quant_status(p->fp8.status, st, "fp8_block", "the weights or x", err, err_len);
}

/* h_ref: GEMM1 + SwiGLU of every expert's rows of set 0, as the file's comment says. */
static int reference_h(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    struct mok_fp8_block_operands *f = &p->fp8;
    const int H = p->hidden, I = p->inter, max_rows = mok_problem_gemm_max_rows(p);
    float *g = NULL;
    uint16_t *h = NULL;
    int rc = -1;
    MOK_CHECK(cuda, cudaMalloc((void **)&g, (size_t)max_rows * 2 * I * 4), goto out);
    MOK_CHECK(cuda, cudaMalloc((void **)&h, (size_t)max_rows * I * 2), goto out);
    for (int e = 0; e < p->experts; e++) {
        const int n = p->h_gemm_offset[e + 1] - p->h_gemm_offset[e], row0 = p->h_gemm_offset[e];
        if (!n)
            continue;
        const uint8_t *w13 = f->w13[0] + (size_t)e * 2 * I * H;
        const float *s13 = f->w13_scale[0] + (size_t)e * (2 * I / 128) * (H / 128);
        MOK_CHECK(cuda, mok_ref_gemm_fp8_block(f->a[0] + (size_t)row0 * H, f->a_scale[0] + (size_t)row0 * (H / 128),
                                               n, H, w13, s13, 2 * I, g, (mok_stream_t)st), goto out);
        MOK_CHECK(cuda, mok_ref_swiglu(g, n, I, h, (mok_stream_t)st), goto out);
        MOK_CHECK(cuda, mok_ref_widen_bf16(h, (size_t)n * I, f->h_ref + (size_t)row0 * I, (mok_stream_t)st),
                  goto out);
    }
    MOK_CHECK(cuda, cudaStreamSynchronize(st), goto out);
    rc = 0;
out:
    cudaStreamSynchronize(st);
    cudaFree(g);
    cudaFree(h);
    return rc;
}

int mok_problem_fp8_refresh(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    struct mok_fp8_block_operands *f = &p->fp8;
    const int H = p->hidden, I = p->inter, R = p->gemm_rows;
    if (!p->y_ref || !R)
        return 0;
    /* a NaN left in h (an implementation that did not write it) sets the status flag: h's own check reports it */
    MOK_CHECK(cuda, mok_quant_fp8_block_bf16(f->h, R, I, f->ref_hq, f->ref_hs, f->status, (mok_stream_t)st),
              return -1);
    for (int e = 0; e < p->experts; e++) {
        const int n = p->h_gemm_offset[e + 1] - p->h_gemm_offset[e], row0 = p->h_gemm_offset[e];
        if (!n)
            continue;
        const uint8_t *w2 = f->w2[0] + (size_t)e * H * I;
        const float *s2 = f->w2_scale[0] + (size_t)e * (H / 128) * (I / 128);
        MOK_CHECK(cuda, mok_ref_gemm_fp8_block(f->ref_hq + (size_t)row0 * I, f->ref_hs + (size_t)row0 * (I / 128), n, I,
                                               w2, s2, H, p->y_ref + (size_t)row0 * H, (mok_stream_t)st),
                  return -1);
    }
    MOK_CHECK(cuda, cudaMemsetAsync(f->status, 0, sizeof(int32_t), st), return -1);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    return 0;
}

int mok_problem_fp8_setup(struct mok_problem *p, cudaStream_t st, bool with_reference, char *err, int err_len)
{
    if (mok_problem_fp8_weights_setup(p, st, err, err_len)) /* the weights, and here the gemm rows */
        return -1;
    const size_t R = (size_t)p->gemm_rows, I = (size_t)p->inter;
    MOK_CHECK(cuda, cudaMalloc((void **)&p->fp8.h, R * I * 2 + 16), return -1); /* the output h */
    if (!with_reference)
        return 0;
    MOK_CHECK(cuda, cudaMalloc((void **)&p->fp8.h_ref, R * I * 4 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&p->fp8.ref_hq, R * I + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&p->fp8.ref_hs, R * (I / 128) * 4 + 16), return -1);
    return reference_h(p, st, err, err_len);
}

/* ---- layer mode (and gemm mode's first step): the weights every set's implementations read (quantize_sets: in gemm
 * mode the rows too). The layer's reference and check: src/problem_fp8_layer.c. */
int mok_problem_fp8_weights_setup(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    if (p->hidden % 128 || p->inter % 128) {
        snprintf(err, (size_t)err_len, "fp8_block: hidden %d and intermediate %d must be multiples of 128 (the "
                 "scale blocks)", p->hidden, p->inter);
        return -1;
    }
    MOK_CHECK(cuda, cudaMalloc((void **)&p->fp8.status, sizeof(int32_t)), return -1);
    MOK_CHECK(cuda, cudaMemsetAsync(p->fp8.status, 0, sizeof(int32_t), st), return -1);
    return quantize_sets(p, st, err, err_len);
}
