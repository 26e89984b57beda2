/* mok-gemm (gemm mode): mok's own expert GEMMs (kernels/mok_gemm.h): GEMM1 with SwiGLU in the epilogue, then
 * GEMM2, group sizes read on the device. The Hopper wgmma kernel with its tile, stage and CTA-count parameters,
 * or the portable mma.sync kernel. dtype fp8_block: the Hopper kernel's fp8_block policy on the problem's quantized
 * rows and weights (src/problem_fp8.c); GEMM1 writes h in bf16 and a separate kernel quantizes it 1 x 128 for
 * GEMM2 (timed with GEMM1: the quantization in GEMM1's epilogue is not written yet). dtype mxfp8: the same with the
 * kernel's mxfp8 policy (mx_scheme 0: every 32 K promoted with the row's and the column's e8m0 scales; 1: the
 * operands expanded to bf16 in shared memory for bf16 wgmma; src/problem_mxfp8.c's operands, the weights' scales in
 * the kernel's tile layout either way; 2: the rows expanded so, the weights' MX values expanded to bf16 here at setup,
 * not timed, as the quantization is not; 3: the rows expanded into the consumers' registers, the weights so expanded
 * with K permuted within each 64-K block) and h quantized per 32 by the mxfp8 quantizer.
 * pass bwd (bf16): the backward on the GEMM core (gemm_mok_bwd.h: dgrad with the weights read transposed, the
 * SwiGLU backward, wgrad with K = each expert's rows), from the problem's saved gate/up rows, timed whole; fwd_bwd:
 * the forward keeps GEMM1's gate/up output for it (GEMM1 unfused into gu, the SwiGLU kernel, GEMM2), then the
 * backward. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_call.h"
#include "fp8_mlp.h"
#include "gemm_mok_bwd.h"
#include "impl.h"
#include "params.h"
#include "mok_gemm.h"
#include "slot_events.h"
#include "timing.h"

/* The Hopper kernel's configuration from a candidate's values (params.h names them). */
static struct mok_gemm_sm90_config sm90_config(const int *params)
{
    struct mok_params_mok_gemm g = mok_params_mok_gemm(params);
    return (struct mok_gemm_sm90_config){.tile_m = g.tile_m, .tile_n = g.tile_n, .stages = g.stages, .sms = g.ctas,
                                         .cluster_m = g.cluster, .lockstep = g.lockstep_k, .raster = g.raster,
                                         .fp8_n = g.fp8_n, .mx_scheme = g.mx_scheme,
                                         .land_stages = g.land_stages, .lean = g.lean, .cluster_n = g.cluster_n};
}

/* The backward's four GEMMs on the same configuration, the weight gradients' ring at wgrad_stages where it is set */
static struct mok_core_bwd_config bwd_config(const int *params, const struct mok_gemm_sm90_config *c)
{
    struct mok_core_bwd_config b = mok_core_bwd_config(c->tile_n, c->stages, c->sms, c->raster);
    const int ws = mok_params_mok_gemm(params).wgrad_stages;
    if (ws)
        b.wgrad.stages = ws;
    return b;
}

struct mg_state {
    struct mok_problem *p;
    cudaStream_t st;
    struct mok_gemm_sm90_config cfg;
    int portable;
    uint16_t *h;
    uint8_t *h_fp8; /* fp8_block and mxfp8: h quantized for GEMM2, and its scales (one of the two) */
    float *h_scale;
    uint8_t *h_mx_scale;
    uint16_t *w13_x[MOK_MAX_SETS], *w2_x[MOK_MAX_SETS]; /* mx_scheme 2, 3: every set's weights expanded to bf16 */
    struct mok_slot_events ev; /* marks: start, GEMM1 done, GEMM2 done (bwd: start and end) */
    struct mok_core_bwd_config bwd; /* pass bwd, fwd_bwd */
    uint16_t *gu, *dhp, *dgu, *hw;  /* fwd_bwd: the forward's [rows][2I] gate/up; the backward's scratch */
};

/* h_fp8 with h_scale (fp8_block) or h_mx_scale (mxfp8): the quantized h (GEMM2's A) */
static void gemm_args(const struct mok_problem *p, int set, uint16_t *h, const uint8_t *h_fp8, const float *h_scale,
                      const uint8_t *h_mx_scale, uint16_t *y, int first, struct mok_gemm_args *g)
{
    *g = (struct mok_gemm_args){.offset = p->gemm_offset, .groups = p->experts, .rows_capacity = p->gemm_rows};
    if (first) /* GEMM1 + SwiGLU: x rows -> h */
        g->a = p->gemm_a[set], g->b = p->w13[set], g->c = h, g->n_out = p->inter, g->k = p->hidden, g->swiglu = 1;
    else /* GEMM2: h -> y */
        g->a = h, g->b = p->w2[set], g->c = y, g->n_out = p->hidden, g->k = p->inter, g->swiglu = 0;
    if (p->spec.dtype == MOK_DTYPE_FP8_BLOCK) {
        const struct mok_fp8_block_operands *f = &p->fp8;
        g->dtype = MOK_GEMM_FP8_BLOCK, g->a = NULL, g->b = NULL;
        if (first)
            g->a_fp8 = f->a[set], g->a_scale = f->a_scale[set], g->b_fp8 = f->w13[set], g->b_scale = f->w13_scale[set];
        else
            g->a_fp8 = h_fp8, g->a_scale = h_scale, g->b_fp8 = f->w2[set], g->b_scale = f->w2_scale[set];
    }
    if (p->spec.dtype == MOK_DTYPE_MXFP8) {
        const struct mok_mxfp8_operands *f = &p->mx;
        g->dtype = MOK_GEMM_MXFP8, g->a = NULL, g->b = NULL;
        if (first)
            g->a_fp8 = f->a[set], g->a_mx_scale = f->a_scale[set], g->b_fp8 = f->w13[set],
            g->b_mx_scale = f->w13_tiles[set];
        else
            g->a_fp8 = h_fp8, g->a_mx_scale = h_mx_scale, g->b_fp8 = f->w2[set], g->b_mx_scale = f->w2_tiles[set];
    }
}

static int mg_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                       int why_len)
{
    (void)cl;
    if (mok_params_mok_gemm(params).kernel == 1) /* the portable kernel has no tuning knobs */
        return 1;
    struct mok_gemm_sm90_config c = sm90_config(params);
    if (mok_pass_has_bwd(p->spec.pass)) {
        struct mok_core_bwd_config b = bwd_config(params, &c);
        if (!mok_core_bwd_supports(&b, p->experts, p->hidden, p->inter, why, why_len))
            return 0;
        if (p->spec.pass == MOK_PASS_BWD)
            return 1;
        /* fwd_bwd: GEMM1 unfused (n_out 2I) beside the forward's GEMM2, checked below */
        struct mok_gemm_args g1 = {.a = (const uint16_t *)(uintptr_t)256, .b = (const uint16_t *)(uintptr_t)256,
                                   .c = (uint16_t *)(uintptr_t)256, .offset = p->gemm_offset, .groups = p->experts,
                                   .rows_capacity = p->gemm_rows, .n_out = 2 * p->inter, .k = p->hidden};
        if (!mok_gemm_sm90_supports(&g1, &c, why, why_len))
            return 0;
    }
    struct mok_gemm_args g;
    const bool fp8 = p->spec.dtype == MOK_DTYPE_FP8_BLOCK || p->spec.dtype == MOK_DTYPE_MXFP8;
    for (int first = 1; first >= 0; first--) {
        gemm_args(p, 0, NULL, NULL, NULL, NULL, NULL, first, &g);
        g.c = (uint16_t *)(uintptr_t)256; /* alignment only */
        if (fp8) {
            const uintptr_t a = 256; /* alignment only: supports() reads no operand */
            g.a_fp8 = (const uint8_t *)a, g.b_fp8 = g.a_fp8, g.a_scale = (const float *)a, g.b_scale = g.a_scale;
            g.a_mx_scale = g.a_fp8, g.b_mx_scale = g.a_fp8;
            g.b = (const uint16_t *)a; /* mx_scheme 2's bf16 weights */
        } else {
            g.a = (const uint16_t *)(uintptr_t)256, g.b = g.a;
        }
        if (!mok_gemm_sm90_supports(&g, &c, why, why_len))
            return 0;
    }
    return 1;
}

static int mg_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots,
                    char *err, int err_len)
{
    struct mg_state *s = calloc(1, sizeof(*s));
    *state = s;
    if (!s) {
        snprintf(err, (size_t)err_len, "out of host memory");
        return -1;
    }
    s->p = p;
    s->st = cl->stream;
    s->portable = mok_params_mok_gemm(params).kernel == 1;
    s->cfg = sm90_config(params);
    cudaError_t ce = cudaMalloc((void **)&s->h, (size_t)p->gemm_rows * p->inter * 2 + 16);
    const bool mx = p->spec.dtype == MOK_DTYPE_MXFP8;
    if (ce == cudaSuccess && (p->spec.dtype == MOK_DTYPE_FP8_BLOCK || mx)) {
        if (s->portable) {
            snprintf(err, (size_t)err_len, "mok-gemm: %s runs on the Hopper kernel (kernel=sm90) only",
                     mok_dtype_name(p->spec.dtype));
            return -1;
        }
        ce = cudaMalloc((void **)&s->h_fp8, (size_t)p->gemm_rows * p->inter + 16);
        if (ce == cudaSuccess && mx)
            ce = cudaMalloc((void **)&s->h_mx_scale, (size_t)p->gemm_rows * (p->inter / 32) + 16);
        else if (ce == cudaSuccess)
            ce = cudaMalloc((void **)&s->h_scale, (size_t)p->gemm_rows * (p->inter / 128) * 4 + 16);
    }
    if (ce == cudaSuccess && mx && s->cfg.mx_scheme >= 2 && /* exact; mx_scheme 3 in its K order */
        mok_fp8_weights_bf16(p, s->cfg.mx_scheme, s->w13_x, s->w2_x, s->st, err, err_len))
        return -1;
    if (ce == cudaSuccess && mok_pass_has_bwd(p->spec.pass)) {
        const size_t rows = (size_t)p->gemm_rows, I = (size_t)p->inter;
        if (s->portable) {
            snprintf(err, (size_t)err_len, "mok-gemm: the backward runs on the Hopper kernel (kernel=sm90) only");
            return -1;
        }
        s->bwd = bwd_config(params, &s->cfg);
        ce = cudaMalloc((void **)&s->dhp, rows * I * 2 + 16);
        if (ce == cudaSuccess)
            ce = cudaMalloc((void **)&s->dgu, rows * 2 * I * 2 + 16);
        if (ce == cudaSuccess)
            ce = cudaMalloc((void **)&s->hw, rows * I * 2 + 16);
        if (ce == cudaSuccess && p->spec.pass == MOK_PASS_FWD_BWD)
            ce = cudaMalloc((void **)&s->gu, rows * 2 * I * 2 + 16);
    }
    if (ce == cudaSuccess)
        ce = mok_slot_events_create(&s->ev, max_slots, 3);
    if (ce != cudaSuccess) {
        snprintf(err, (size_t)err_len, "mok-gemm setup: %s", cudaGetErrorString(ce));
        return -1;
    }
    return 0;
}

/* pass bwd from the problem's saved gu; fwd_bwd from the gu its own forward (mg_run) kept */
static int mg_run_backward(struct mg_state *s, int set, const struct mok_outputs *out, int slot, char *err,
                           int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_expert_bwd b;
    if (mok_impl_gemm_bwd_operands(p, set, s->gu ? s->gu : p->bwd.gu, s->dhp, s->dgu, s->hw, out, "mok-gemm", &b, err,
                                   err_len))
        return -1;
    bool timed = mok_slot_events_timed(&s->ev, slot) && p->spec.pass == MOK_PASS_BWD;
    if (timed)
        mok_slot_events_record(&s->ev, slot, 0, s->st);
    /* dgrad, then wgrad: apart, so that the report's phases say what each costs (gemm1_us, gemm2_us) */
    for (int part = 0; part < 2; part++) {
        b.parts = part == 0 ? MOK_BWD_DGRAD : MOK_BWD_WGRAD;
        if (mok_core_expert_backward(&s->bwd, s->st, p->gemm_offset, p->experts, p->gemm_rows, p->hidden, p->inter,
                                     &b, err, err_len))
            return -1;
        if (timed)
            mok_slot_events_record(&s->ev, slot, part + 1, s->st);
    }
    return 0;
}

/* fwd_bwd's forward: GEMM1 into gu (the gate/up rows the backward needs), SwiGLU, GEMM2 */
static int mg_run_forward_saving(struct mg_state *s, int set, uint16_t *y, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_gemm_args g1, g2;
    gemm_args(p, set, s->h, NULL, NULL, NULL, y, 1, &g1);
    gemm_args(p, set, s->h, NULL, NULL, NULL, y, 0, &g2);
    g1.c = s->gu, g1.n_out = 2 * p->inter, g1.swiglu = 0;
    const mok_stream_t st = (mok_stream_t)s->st;
    MOK_CHECK(cuda, mok_gemm_sm90(&g1, &s->cfg, st), return -1);
    MOK_CHECK(cuda, mok_swiglu_bf16(s->gu, p->gemm_rows, p->inter, s->h, st), return -1);
    MOK_CHECK(cuda, mok_gemm_sm90(&g2, &s->cfg, st), return -1);
    return 0;
}

static int forward_gemms(struct mg_state *s, int set, uint16_t *h, uint16_t *y, int slot, char *err, int err_len);

static int mg_run(void *state, int set, const struct mok_outputs *out, int slot, char *err, int err_len)
{
    struct mg_state *s = state;
    if (s->p->spec.pass == MOK_PASS_BWD)
        return mg_run_backward(s, set, out, slot, err, err_len);
    uint16_t *y = mok_impl_forward_y(out, err, err_len);
    if (!y)
        return -1;
    if (s->p->spec.pass == MOK_PASS_FWD_BWD) {
        if (s->p->gemm_rows && mg_run_forward_saving(s, set, y, err, err_len))
            return -1;
        return mg_run_backward(s, set, out, slot, err, err_len);
    }
    uint16_t *h = mok_output_bf16(out, "h"); /* gemm mode's FP8 forward checks h apart (problem_fp8.c) */
    return forward_gemms(s, set, h ? h : s->h, y, slot, err, err_len);
}

/* The forward's GEMMs (GEMM1 + SwiGLU, h's quantization for the FP8 dtypes, GEMM2); phase events where the slot is
 * timed. */
static int forward_gemms(struct mg_state *s, int set, uint16_t *h, uint16_t *y, int slot, char *err, int err_len)
{
    bool timed = mok_slot_events_timed(&s->ev, slot);
    for (int part = 0; part < 2; part++) {
        struct mok_gemm_args g;
        gemm_args(s->p, set, h, s->h_fp8, s->h_scale, s->h_mx_scale, y, part == 0, &g);
        if (s->w13_x[set]) /* mx_scheme 2, 3: B is the weights' MX values in bf16 */
            g.b = part == 0 ? s->w13_x[set] : s->w2_x[set], g.b_fp8 = NULL, g.b_mx_scale = NULL;
        if (timed)
            mok_slot_events_record(&s->ev, slot, part, s->st);
        int rc = s->portable ? mok_gemm_portable(&g, (mok_stream_t)s->st)
                             : mok_gemm_sm90(&g, &s->cfg, (mok_stream_t)s->st);
        if (rc) {
            snprintf(err, (size_t)err_len, "mok-gemm GEMM%d: %s", part + 1, cudaGetErrorString((cudaError_t)rc));
            return -1;
        }
        /* FP8: h quantized for GEMM2 (finite by construction; the status flag is the problem's, checked at
         * setup, and not read back here: no host synchronization inside a timed run) */
        if (part == 0 && s->h_fp8 && s->p->gemm_rows) {
            rc = s->h_mx_scale ? mok_quant_mxfp8_bf16(h, s->p->gemm_rows, s->p->inter, s->h_fp8, s->h_mx_scale,
                                                      s->p->mx.status, (mok_stream_t)s->st)
                               : mok_quant_fp8_block_bf16(h, s->p->gemm_rows, s->p->inter, s->h_fp8, s->h_scale,
                                                          s->p->fp8.status, (mok_stream_t)s->st);
            if (rc) {
                snprintf(err, (size_t)err_len, "mok-gemm: quantizing h: %s", cudaGetErrorString((cudaError_t)rc));
                return -1;
            }
        }
    }
    if (timed)
        mok_slot_events_record(&s->ev, slot, 2, s->st);
    return 0;
}

static int gemms_once(void *ctx, int iter, char *err, int err_len)
{
    struct mg_state *s = ctx;
    return forward_gemms(s, (iter + 2) % s->p->sets, s->h, s->p->y, -1, err, err_len);
}

/* The forward's GEMMs timed back to back by the method that times the layer baselines' GEMM phase alone
 * (timing.c, mok_time_alone): gemm_alone_us, so that `nccl` with gemm=mok compares with this row by one method
 * (issue 19 asks the baseline's GEMM phase within 5% of mok-gemm's own time). */
static int mg_extras(void *state, struct mok_row *row, const struct mok_alone_timing *t, char *err, int err_len)
{
    struct mg_state *s = state;
    if (s->p->spec.pass != MOK_PASS_FWD || !s->p->gemm_rows)
        return 0;
    double ms = NAN;
    if (mok_time_alone(s->st, t, gemms_once, s, &ms, err, err_len))
        return -1;
    row->gemm_alone_us = ms * 1e3;
    return 0;
}

static void mg_phase_ms(void *state, int slot, double out[MOK_NPHASES])
{
    struct mg_state *s = state;
    float a = 0, b = 0;
    if (s->p->spec.pass == MOK_PASS_FWD_BWD)
        return; /* the training step is timed whole */
    /* pass fwd: GEMM1 + SwiGLU, GEMM2; pass bwd: dgrad (both GEMMs and the SwiGLU backward), wgrad */
    if (mok_slot_events_ms(&s->ev, slot, 0, &a) && mok_slot_events_ms(&s->ev, slot, 1, &b)) {
        out[MOK_PHASE_GEMM1] = a;
        out[MOK_PHASE_GEMM2] = b;
    }
}

static void mg_teardown(void *state)
{
    struct mg_state *s = state;
    if (!s)
        return;
    cudaDeviceSynchronize();
    mok_slot_events_destroy(&s->ev);
    cudaFree(s->h);
    cudaFree(s->h_fp8);
    cudaFree(s->h_scale);
    cudaFree(s->h_mx_scale);
    for (int set = 0; set < MOK_MAX_SETS; set++) {
        cudaFree(s->w13_x[set]);
        cudaFree(s->w2_x[set]);
    }
    cudaFree(s->gu);
    cudaFree(s->dhp);
    cudaFree(s->dgu);
    cudaFree(s->hw);
    free(s);
}

const struct mok_impl_ops mok_impl_mok_gemm = {
    .name = "mok-gemm",
    .supports = mg_supports,
    .setup = mg_setup,
    .run = mg_run,
    .phase_ms = mg_phase_ms,
    .extras = mg_extras,
    .teardown = mg_teardown,
};
