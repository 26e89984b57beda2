/* gemm_mok_bwd: the expert MLP's backward on mok's GEMM core (gemm_mok_bwd.h). */
#include "gemm_mok_bwd.h"

#include <stdio.h>

#include "check_call.h"

struct mok_core_bwd_config mok_core_bwd_config(int tile_n, int stages, int ctas, int raster)
{
    struct mok_core_bwd_config c = {
        .dgrad = {.tile_m = 128, .tile_n = tile_n, .stages = stages, .sms = ctas, .cluster_m = 1, .raster = raster},
        .wgrad = {.tile_m = 128, .tile_n = tile_n, .stages = stages, .sms = ctas, .cluster_m = 1}};
    return c;
}

/* The four GEMMs' arguments over rows [0, rows) of b's operands. */
static void dgrad_args(const struct mok_expert_bwd *b, const int32_t *offset, int groups, int rows, int hidden,
                       int inter, struct mok_gemm_args *g2, struct mok_gemm_args *g1)
{
    /* dh' [rows][I] = dy [rows][H] W2[e] ([H][I]: k = H, n = I) */
    *g2 = (struct mok_gemm_args){.a = b->dy, .b = b->w2, .c = b->dhp, .offset = offset, .groups = groups,
                                 .rows_capacity = rows, .n_out = inter, .k = hidden, .b_transposed = 1};
    /* dx [rows][H] = dgu [rows][2I] W13[e] ([2I][H]: k = 2I, n = H) */
    *g1 = (struct mok_gemm_args){.a = b->dgu, .b = b->w13, .c = b->dx, .offset = offset, .groups = groups,
                                 .rows_capacity = rows, .n_out = hidden, .k = 2 * inter, .b_transposed = 1};
}

static void wgrad_args(const struct mok_expert_bwd *b, const int32_t *offset, int groups, int rows, int hidden,
                       int inter, struct mok_wgrad_args *w2, struct mok_wgrad_args *w13)
{
    float *f2 = b->dw_bf16 ? NULL : b->dw2, *f13 = b->dw_bf16 ? NULL : b->dw13;
    uint16_t *h2 = b->dw_bf16 ? b->dw2 : NULL, *h13 = b->dw_bf16 ? b->dw13 : NULL;
    /* dW2[e] [H][I] (+)= dy^T (w h): m = H, n = I */
    *w2 = (struct mok_wgrad_args){.a = b->dy, .b = b->hw, .c_f32 = f2, .c_bf16 = h2, .offset = offset,
                                  .groups = groups, .rows_capacity = rows, .m = hidden, .n = inter};
    /* dW13[e] [2I][H] (+)= dgu^T x: m = 2I, n = H */
    *w13 = (struct mok_wgrad_args){.a = b->dgu, .b = b->x, .c_f32 = f13, .c_bf16 = h13, .offset = offset,
                                   .groups = groups, .rows_capacity = rows, .m = 2 * inter, .n = hidden};
}

int mok_core_bwd_supports(const struct mok_core_bwd_config *c, int groups, int hidden, int inter, char *why,
                          int why_len)
{
    /* alignment only: supports() reads no operand */
    static const uint16_t any[8] __attribute__((aligned(16)));
    static float anyf[4] __attribute__((aligned(16)));
    struct mok_expert_bwd b = {.x = any, .dy = any, .gu = any, .w13 = any, .w2 = any, .dhp = (uint16_t *)any,
                               .dgu = (uint16_t *)any, .hw = (uint16_t *)any, .dx = (uint16_t *)any,
                               .dw13 = anyf, .dw2 = anyf};
    const int32_t *offset = (const int32_t *)anyf;
    struct mok_gemm_args g2, g1;
    struct mok_wgrad_args w2, w13;
    dgrad_args(&b, offset, groups, 1, hidden, inter, &g2, &g1);
    wgrad_args(&b, offset, groups, 1, hidden, inter, &w2, &w13);
    if (inter % 8) {
        snprintf(why, (size_t)why_len, "intermediate %d: the SwiGLU backward reads 8 values at a time", inter);
        return 0;
    }
    return mok_gemm_sm90_supports(&g2, &c->dgrad, why, why_len) &&
           mok_gemm_sm90_supports(&g1, &c->dgrad, why, why_len) &&
           mok_wgrad_sm90_supports(&w2, &c->wgrad, why, why_len) &&
           mok_wgrad_sm90_supports(&w13, &c->wgrad, why, why_len);
}

int mok_core_expert_backward(const struct mok_core_bwd_config *c, cudaStream_t stream, const int32_t *offset,
                             int groups, int rows, int hidden, int inter, const struct mok_expert_bwd *b, char *err,
                             int err_len)
{
    const int parts = b->parts ? b->parts : MOK_BWD_DGRAD | MOK_BWD_WGRAD;
    if (b->dw_accumulate) {
        snprintf(err, (size_t)err_len, "mok core backward: per-expert accumulate flags are not supported (each call "
                 "makes or adds the whole gradient)");
        return -1;
    }
    const mok_stream_t st = (mok_stream_t)stream;
    if (parts & MOK_BWD_DGRAD) {
        struct mok_gemm_args g2, g1;
        dgrad_args(b, offset, groups, rows, hidden, inter, &g2, &g1);
        if (rows) {
            MOK_CHECK(cuda, mok_gemm_sm90(&g2, &c->dgrad, st), return -1);
            MOK_CHECK(cuda, mok_swiglu_bwd_bf16(b->gu, b->dhp, b->w, rows, inter, b->dgu, b->hw, b->d_router, st),
                      return -1);
            MOK_CHECK(cuda, mok_gemm_sm90(&g1, &c->dgrad, st), return -1);
        }
    }
    if (parts & MOK_BWD_WGRAD) {
        struct mok_wgrad_args w2, w13;
        wgrad_args(b, offset, groups, rows, hidden, inter, &w2, &w13);
        MOK_CHECK(cuda, mok_wgrad_sm90(&w2, &c->wgrad, st), return -1);
        MOK_CHECK(cuda, mok_wgrad_sm90(&w13, &c->wgrad, st), return -1);
    }
    return 0;
}
