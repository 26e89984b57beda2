/* lsa-layer (layer mode): the same transfers as lsa with the expert GEMMs between them.
 * Stream-ordered kernels with no host synchronization (CUDA-graph capturable): publish, schedule, dispatch into
 * expert-major slots, GEMM1 + SwiGLU, GEMM2, combine, reduce. The step before the fused megakernel: the same data
 * path, overlapped at most by GEMM1 beside the dispatch (overlap=gemm1). Parameters: comm_sms, combine, tile_rows,
 * chunk_rows, kernel, tile_n, stages, launch, overlap. The backward: lsa_layer_bwd.c; the FP8 forward (wire rows
 * through the same transfers, mok's FP8 core): lsa_layer_fp8.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "gemm_mok_bwd.h"
#include "lsa_state.h"

/* lsa's values for the transfers of a lsa-layer candidate (params.h: mok_params_lsa_of_layer). */
static void layer_to_lsa_params(const struct mok_params_lsa_layer *lp, int *params)
{
    struct mok_params_lsa t = mok_params_lsa_of_layer(lp);
    mok_params_lsa_values(&t, params);
}

static int layer_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *values, char *why,
                          int why_len)
{
    /* shared experts, overlap with the portable kernel and lsa's combinations: decided without the GPU
     * (host_supports.c) */
    struct mok_params_lsa_layer lp = mok_params_lsa_layer(values);
    int params[MOK_MAX_PARAMS];
    layer_to_lsa_params(&lp, params);
    if (!lsa_supports(p, cl, params, why, why_len))
        return 0;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cl->device);
    if (lp.overlap == 1 && lp.comm_sms >= sms) {
        snprintf(why, (size_t)why_len, "overlap=gemm1 needs comm_sms < the GPU's %d SMs (GEMM1 runs on the others)",
                 sms);
        return 0;
    }
    if (mok_pass_has_bwd(p->spec.pass)) { /* the GEMM core's backward at these shapes (lsa_layer_bwd.c) */
        struct mok_core_bwd_config c = mok_core_bwd_config(lp.tile_n, lp.stages, 0, 1);
        if (!mok_core_bwd_supports(&c, p->local_experts, p->hidden, p->inter, why, why_len))
            return 0;
    }
    if (p->spec.dtype == MOK_DTYPE_FP8_BLOCK || p->spec.dtype == MOK_DTYPE_MXFP8)
        return lsa_fp8_supports(p, lp.mx_scheme, why, why_len);
    if (lp.kernel == 1)
        return 1;
    /* no cluster, no lockstep */
    struct mok_gemm_sm90_config c = {.tile_m = 128, .tile_n = lp.tile_n, .stages = lp.stages, .cluster_m = 1};
    struct mok_gemm_args g1 = {.a = (const uint16_t *)(uintptr_t)256, .b = (const uint16_t *)(uintptr_t)256,
                               .c = (uint16_t *)(uintptr_t)256, .groups = p->local_experts, .rows_capacity = 1 << 20,
                               .n_out = p->inter, .k = p->hidden, .swiglu = 1};
    struct mok_gemm_args g2 = g1;
    g2.n_out = p->hidden, g2.k = p->inter, g2.swiglu = 0;
    return mok_gemm_sm90_supports(&g1, &c, why, why_len) && mok_gemm_sm90_supports(&g2, &c, why, why_len);
}

static int layer_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *values, int max_slots,
                       char *err, int err_len)
{
    struct mok_params_lsa_layer lp = mok_params_lsa_layer(values);
    int params[MOK_MAX_PARAMS];
    layer_to_lsa_params(&lp, params);
    if (lsa_setup(state, p, cl, params, max_slots, err, err_len))
        return -1;
    struct lsa_state *s = *state;
    s->layer = true;
    s->gemm_portable = lp.kernel == 1;
    s->mx_scheme = lp.mx_scheme;
    s->overlap_gemm1 = lp.overlap == 1;
    int gpu_sms = 0;
    cudaDeviceGetAttribute(&gpu_sms, cudaDevAttrMultiProcessorCount, cl->device);
    /* beside the dispatch, GEMM1's persistent grid takes only the SMs the dispatch leaves: both resident at once,
     * whichever starts first (a GEMM CTA waiting on rows must never keep a dispatch block from an SM); GEMM2,
     * alone, takes them all */
    s->gemm_cfg =
        (struct mok_gemm_sm90_config){.tile_m = 128, .tile_n = lp.tile_n, .stages = lp.stages, .cluster_m = 1};
    s->gemm_sms_fed = gpu_sms - s->sms;
    if (!s->gemm_portable)
        mok_gemm_sm90_prepare((mok_stream_t)cl->stream); /* its failure record, before any graph capture */
    size_t cap = (size_t)s->a.capacity;
    MOK_CHECK(cuda, cudaMalloc((void **)&s->h, cap * p->inter * 2 + 16), return -1);
    MOK_CHECK(cuda, cudaMalloc((void **)&s->out, cap * p->hidden * 2 + 16), return -1);
    s->a.expert_out = s->out; /* combine sends the experts' outputs back */
    if (p->spec.dtype == MOK_DTYPE_FP8_BLOCK || p->spec.dtype == MOK_DTYPE_MXFP8)
        return lsa_fp8_setup(s, err, err_len);
    return mok_pass_has_bwd(p->spec.pass) ? lsa_bwd_setup(s, err, err_len) : 0;
}

/* The forward (lsa_run), or a training pass's phases over the backward's outputs (dx keys the captured graphs: the
 * outputs' pointers do not change between runs). */
static int layer_run(void *state, int set, const struct mok_outputs *out, int slot, char *err, int err_len)
{
    struct lsa_state *s = state;
    if (!s->bwd)
        return lsa_run(state, set, out, slot, err, err_len);
    if (lsa_bwd_outputs(s, out, err, err_len))
        return -1;
    return phased_run(&s->run, set, mok_output_bf16(out, "dx"), slot, s->cl->stream, err, err_len);
}

static int layer_extras(void *state, struct mok_row *row, const struct mok_alone_timing *t, char *err, int err_len)
{
    int rc = lsa_extras(state, row, t, err, err_len);
    struct lsa_state *s = state;
    snprintf(row->note + strlen(row->note), sizeof(row->note) - strlen(row->note), " unfused%s%s",
             s->overlap_gemm1 ? ", GEMM1 beside the dispatch (dispatch_us covers both)" : "",
             !s->bwd                                        ? ""
             : s->p->spec.pass == MOK_PASS_FWD_BWD ? "; phases: forward | dy dispatch + GEMM backward | dx combine + sum"
                                                   : "; phases: dy dispatch | GEMM backward | dx combine + sum");
    if (s->fp8)
        lsa_fp8_extras(s, row);
    return rc;
}

const struct mok_impl_ops mok_impl_lsa_layer = {
    .name = "lsa-layer",
    .supports = layer_supports,
    .setup = layer_setup,
    .run = layer_run,
    .export_outputs = lsa_fp8_export,
    .phase_ms = lsa_phase_ms,
    .extras = layer_extras,
    .teardown = lsa_teardown,
};
