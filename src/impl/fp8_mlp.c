/* fp8_mlp: the layers' shared FP8 pieces (see fp8_mlp.h). */
#include "fp8_mlp.h"

#include <stdio.h>

#include "check_call.h"
#include "mok_kernels.h"

int mok_fp8_wire_bytes(int hidden) { return (hidden + hidden / 32 + 15) / 16 * 16; }

/* fp8_block: 128 x 256 tiles in the 384-thread layout with products of 128 columns, mok-gemm's fastest at the
 * DeepSeek-V3 and Qwen3-235B expert shapes (1.44-1.51x its bf16 GEMMs; results/h200x1/2026-12-05-fp8-wide-swap-ab).
 * mxfp8: scheme (a) on 128 x 128 tiles with products of 64 columns (results/h200x1/2026-12-02-fp8-gemm), or scheme
 * (b) (mx_scheme 1) on 128 x 256 tiles (1.13-1.16x faster in the layer, same folder), or 2 and 3 (the weights in bf16)
 * on those tiles too. The deepest ring, the bf16 configuration's CTAs. */
struct mok_gemm_sm90_config mok_fp8_mok_config(const struct mok_gemm_sm90_config *bf16, int dtype, int mx_scheme)
{
    const bool wide = dtype == MOK_DTYPE_FP8_BLOCK || mx_scheme;
    return (struct mok_gemm_sm90_config){.tile_m = 128, .tile_n = wide ? 256 : 128, .stages = 0, .sms = bf16->sms,
                                         .cluster_m = 1, .lockstep = 0, .raster = 0,
                                         .fp8_n = wide ? 128 : 64, .mx_scheme = mx_scheme};
}

/* The status flag is the problem's: the inputs are finite by construction and checked where the problem's own
 * quantizers run; a timed run does not read it. */
int mok_fp8_quant_rows(const struct mok_problem *p, const uint16_t *x, int rows, const int32_t *rows_dev, int k,
                       uint8_t *q, void *scale, cudaStream_t st)
{
    const mok_stream_t s = (mok_stream_t)st;
    if (p->spec.dtype == MOK_DTYPE_MXFP8)
        return rows_dev ? mok_quant_mxfp8_bf16_upto(x, rows, rows_dev, k, q, scale, p->mx.status, s)
                        : mok_quant_mxfp8_bf16(x, rows, k, q, scale, p->mx.status, s);
    return rows_dev ? mok_quant_fp8_block_bf16_upto(x, rows, rows_dev, k, q, scale, p->fp8.status, s)
                    : mok_quant_fp8_block_bf16(x, rows, k, q, scale, p->fp8.status, s);
}

/* The GEMMs' operands: the format's dtype, the weights of experts e0.. and their scales (mxfp8: in the kernel's
 * tile layout, an expert's [rows][k / 32] bytes each). */
static void fp8_gemm_pair(const struct mok_problem *p, int set, const struct mok_fp8_mlp *m, struct mok_gemm_args *g1,
                          struct mok_gemm_args *g2)
{
    const size_t H = (size_t)p->hidden, I = (size_t)p->inter, e0 = (size_t)m->e0;
    *g1 = (struct mok_gemm_args){.a_fp8 = m->aq, .c = m->h, .offset = m->offset, .groups = m->groups,
                                 .rows_capacity = m->rows_capacity, .n_out = (int)I, .k = (int)H, .swiglu = 1};
    *g2 = (struct mok_gemm_args){.a_fp8 = m->hq, .c = m->out, .offset = m->offset, .groups = m->groups,
                                 .rows_capacity = m->rows_capacity, .n_out = (int)H, .k = (int)I, .swiglu = 0};
    if (p->spec.dtype == MOK_DTYPE_MXFP8) {
        const struct mok_mxfp8_operands *w = &p->mx;
        g1->dtype = g2->dtype = MOK_GEMM_MXFP8;
        g1->a_mx_scale = m->as, g2->a_mx_scale = m->hs;
        if (m->w13x) { /* mx_scheme 2, 3: the weights' MX values in bf16 */
            g1->b = m->w13x + e0 * 2 * I * H, g2->b = m->w2x + e0 * H * I;
            return;
        }
        g1->b_fp8 = w->w13[set] + e0 * 2 * I * H, g1->b_mx_scale = w->w13_tiles[set] + e0 * 2 * I * (H / 32);
        g2->b_fp8 = w->w2[set] + e0 * H * I, g2->b_mx_scale = w->w2_tiles[set] + e0 * H * (I / 32);
    } else {
        const struct mok_fp8_block_operands *w = &p->fp8;
        g1->dtype = g2->dtype = MOK_GEMM_FP8_BLOCK;
        g1->a_scale = m->as, g1->b_fp8 = w->w13[set] + e0 * 2 * I * H;
        g1->b_scale = w->w13_scale[set] + e0 * (2 * I / 128) * (H / 128);
        g2->a_scale = m->hs, g2->b_fp8 = w->w2[set] + e0 * H * I;
        g2->b_scale = w->w2_scale[set] + e0 * (H / 128) * (I / 128);
    }
}

int mok_fp8_weights_bf16(const struct mok_problem *p, int mx_scheme, uint16_t **w13x, uint16_t **w2x,
                         cudaStream_t st, char *err, int err_len)
{
    const struct mok_mxfp8_operands *q = &p->mx;
    const size_t EL = (size_t)p->local_experts, H = (size_t)p->hidden, I = (size_t)p->inter;
    int (*expand)(const uint8_t *, const uint8_t *, long long, int, uint16_t *, mok_stream_t) =
        mx_scheme == 3 ? mok_expand_mxfp8_bf16_k64perm : mok_dequant_mxfp8_bf16;
    for (int set = 0; set < p->sets; set++) {
        MOK_CHECK(cuda, cudaMalloc((void **)&w13x[set], EL * 2 * I * H * 2 + 16), return -1);
        MOK_CHECK(cuda, cudaMalloc((void **)&w2x[set], EL * H * I * 2 + 16), return -1);
        MOK_CHECK(cuda, expand(q->w13[set], q->w13_scale[set], (long long)(EL * 2 * I), p->hidden, w13x[set],
                               (mok_stream_t)st), return -1);
        MOK_CHECK(cuda, expand(q->w2[set], q->w2_scale[set], (long long)(EL * H), p->inter, w2x[set],
                               (mok_stream_t)st), return -1);
    }
    MOK_CHECK(cuda, cudaStreamSynchronize(st), return -1);
    return 0;
}

int mok_fp8_mok_mlp(const struct mok_problem *p, int set, const struct mok_fp8_mlp *m,
                    const struct mok_gemm_sm90_config *cfg, cudaStream_t st, char *err, int err_len)
{
    struct mok_gemm_args g1, g2;
    fp8_gemm_pair(p, set, m, &g1, &g2);
    MOK_CHECK(cuda, mok_gemm_sm90(&g1, cfg, (mok_stream_t)st), return -1);
    MOK_CHECK(cuda, mok_fp8_quant_rows(p, m->h, m->rows_capacity, m->rows_dev, p->inter, m->hq, m->hs, st),
              return -1);
    MOK_CHECK(cuda, mok_gemm_sm90(&g2, cfg, (mok_stream_t)st), return -1);
    return 0;
}

int mok_fp8_mok_supports(const struct mok_problem *p, const struct mok_gemm_sm90_config *cfg, char *why, int why_len)
{
    /* alignment only: the rows are 16-byte aligned as hidden and intermediate are, every array starts so */
    const uint8_t *any = (const uint8_t *)(uintptr_t)256;
    struct mok_gemm_args g1 = {.a_fp8 = any, .b_fp8 = any, .c = (uint16_t *)(uintptr_t)256, .groups = p->local_experts,
                               .rows_capacity = 1, .n_out = p->inter, .k = p->hidden, .swiglu = 1,
                               .b = (const uint16_t *)any}; /* (b: mx_scheme 2 and 3's bf16 weights) */
    if (p->spec.dtype == MOK_DTYPE_MXFP8)
        g1.dtype = MOK_GEMM_MXFP8, g1.a_mx_scale = g1.b_mx_scale = any;
    else
        g1.dtype = MOK_GEMM_FP8_BLOCK, g1.a_scale = g1.b_scale = (const float *)any;
    struct mok_gemm_args g2 = g1;
    g2.n_out = p->hidden, g2.k = p->inter, g2.swiglu = 0;
    return mok_gemm_sm90_supports(&g1, cfg, why, why_len) && mok_gemm_sm90_supports(&g2, cfg, why, why_len);
}
