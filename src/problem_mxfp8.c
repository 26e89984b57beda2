/* problem_mxfp8: the mxfp8 operands of a gemm-mode problem (dtype mxfp8; src/fp8.h defines the format: e4m3 values,
 * one e8m0 scale per 32 consecutive K elements, activations and weights alike).
 * Setup, not timed, per input set: the expert weights quantized per row per 32 K (W13 [E][2I][H] per 32 H, W2
 * [E][H][I] per 32 I), their scales also rearranged into the tile layout mok's GEMM kernel reads
 * (mok_scale_mx_tiles), and the expert-major x rows quantized per 32 H (in gemm mode the rows arrive as they would
 * from the dispatch). One GPU quantizer for all of them, kernels/util/quant.cu's, matched byte for byte against
 * src/fp8.c (tests/test_gpu_quant.c).
 *
 * The check is fp8_block's (src/problem_fp8.c gives the reason for checking each GEMM on its own):
 *   h  GEMM1 + SwiGLU's bf16 output against the reference GEMM1 (fp32 SIMT on the operands dequantized exactly,
 *      e4m3 x 2^(e - 127)), rounded to bf16 and SwiGLU'd as the bf16 reference does; computed once at setup.
 *   y  GEMM2's output against the reference GEMM2 on the implementation's own h quantized by the same quantizer;
 *      recomputed after every checked run (mok_problem_refresh_references). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "mok_kernels.h"
#include "problem.h"

void mok_problem_mxfp8_destroy(struct mok_problem *p)
{
    struct mok_mxfp8_operands *f = &p->mx;
    for (int s = 0; s < MOK_MAX_SETS; s++) {
        cudaFree(f->w13[s]);
        cudaFree(f->w13_scale[s]);
        cudaFree(f->w13_tiles[s]);
        cudaFree(f->w2[s]);
        cudaFree(f->w2_scale[s]);
        cudaFree(f->w2_tiles[s]);
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

/* Every set's local expert weights (and, in gemm mode, its rows) quantized; layer mode has no gemm rows (R 0). */
static int quantize_sets(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    struct mok_mxfp8_operands *f = &p->mx;
    const size_t E = (size_t)p->local_experts, H = (size_t)p->hidden, I = (size_t)p->inter, R = (size_t)p->gemm_rows;
    for (int s = 0; s < p->sets; s++) {
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w13[s], E * 2 * I * H + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w13_scale[s], E * 2 * I * (H / 32) + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w13_tiles[s], E * 2 * I * (H / 32) + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w2[s], E * H * I + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w2_scale[s], E * H * (I / 32) + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->w2_tiles[s], E * H * (I / 32) + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->a[s], R * H + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&f->a_scale[s], R * (H / 32) + 16), return -1);
        /* stacked matrices are one tall matrix to a per-row quantizer */
        MOK_CHECK(cuda, mok_quant_mxfp8_bf16(p->w13[s], (int)(E * 2 * I), p->hidden, f->w13[s], f->w13_scale[s],
                                             f->status, (mok_stream_t)st), return -1);
        MOK_CHECK(cuda, mok_quant_mxfp8_bf16(p->w2[s], (int)(E * H), p->inter, f->w2[s], f->w2_scale[s], f->status,
                                             (mok_stream_t)st), return -1);
        MOK_CHECK(cuda, mok_scale_mx_tiles(f->w13_scale[s], (long long)E, 2 * p->inter, p->hidden, 1,
                                           f->w13_tiles[s], (mok_stream_t)st), return -1);
        MOK_CHECK(cuda, mok_scale_mx_tiles(f->w2_scale[s], (long long)E, p->hidden, p->inter, 0, f->w2_tiles[s],
                                           (mok_stream_t)st), return -1);
        if (R)
            MOK_CHECK(cuda, mok_quant_mxfp8_bf16(p->gemm_a[s], (int)R, p->hidden, f->a[s], f->a_scale[s], f->status,
                                                 (mok_stream_t)st), return -1);
    }
    return mok_problem_quant_status(p->mx.status, st, "mxfp8", "the weights or x", err, err_len);
}

/* h_ref: GEMM1 + SwiGLU of every expert's rows of set 0, as the file's comment says. */
static int reference_h(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    struct mok_mxfp8_operands *f = &p->mx;
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
        const size_t w_at = (size_t)e * 2 * I; /* the expert's first W13 row */
        MOK_CHECK(cuda, mok_ref_gemm_mxfp8(f->a[0] + (size_t)row0 * H, f->a_scale[0] + (size_t)row0 * (H / 32), n, H,
                                           f->w13[0] + w_at * H, f->w13_scale[0] + w_at * (H / 32), 2 * I, g,
                                           (mok_stream_t)st), goto out);
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

int mok_problem_mxfp8_refresh(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    struct mok_mxfp8_operands *f = &p->mx;
    const int H = p->hidden, I = p->inter, R = p->gemm_rows;
    if (!p->y_ref || !R)
        return 0;
    /* a NaN left in h (an implementation that did not write it) sets the status flag: h's own check reports it */
    MOK_CHECK(cuda, mok_quant_mxfp8_bf16(f->h, R, I, f->ref_hq, f->ref_hs, f->status, (mok_stream_t)st), return -1);
    for (int e = 0; e < p->experts; e++) {
        const int n = p->h_gemm_offset[e + 1] - p->h_gemm_offset[e], row0 = p->h_gemm_offset[e];
        if (!n)
            continue;
        const size_t w_at = (size_t)e * H; /* the expert's first W2 row */
        MOK_CHECK(cuda, mok_ref_gemm_mxfp8(f->ref_hq + (size_t)row0 * I, f->ref_hs + (size_t)row0 * (I / 32), n, I,
                                           f->w2[0] + w_at * I, f->w2_scale[0] + w_at * (I / 32), H,
                                           p->y_ref + (size_t)row0 * H, (mok_stream_t)st),
                  return -1);
    }
    MOK_CHECK(cuda, cudaMemsetAsync(f->status, 0, sizeof(int32_t), st), return -1);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    return 0;
}

/* The weights every set's implementations read (in gemm mode the rows too): layer mode's whole setup here; its
 * reference and check are src/problem_fp8_layer.c's. The format needs multiples of 32; mok's kernel multiples of
 * 128 (its k blocks and 64-row scale blocks of 128-column tiles), and one rule for every implementation keeps their
 * problems the same. */
int mok_problem_mxfp8_weights_setup(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    if (p->hidden % 128 || p->inter % 128) {
        snprintf(err, (size_t)err_len, "mxfp8: hidden %d and intermediate %d must be multiples of 128 (mok's GEMM "
                 "tiles and scale blocks)", p->hidden, p->inter);
        return -1;
    }
    MOK_CHECK(cuda, cudaMalloc((void **)&p->mx.status, sizeof(int32_t)), return -1);
    MOK_CHECK(cuda, cudaMemsetAsync(p->mx.status, 0, sizeof(int32_t), st), return -1);
    return quantize_sets(p, st, err, err_len);
}

int mok_problem_mxfp8_setup(struct mok_problem *p, cudaStream_t st, bool with_reference, char *err, int err_len)
{
    if (mok_problem_mxfp8_weights_setup(p, st, err, err_len))
        return -1;
    const size_t R = (size_t)p->gemm_rows, I = (size_t)p->inter;
    MOK_CHECK(cuda, cudaMalloc((void **)&p->mx.h, R * I * 2 + 16), return -1); /* the output h */
    if (!with_reference)
        return 0;
    MOK_CHECK(cuda, cudaMalloc((void **)&p->mx.h_ref, R * I * 4 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&p->mx.ref_hq, R * I + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&p->mx.ref_hs, R * (I / 32) + 16), return -1);
    return reference_h(p, st, err, err_len);
}
