/* problem: seeded workload and fp32 reference of one MoE forward problem on this rank. */
#include "problem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_call.h"
#include "mok_kernels.h"
#include "plan.h"
#include "routing.h"

uint64_t mok_tensor_id(enum mok_tensor_kind kind, uint64_t index) { return ((uint64_t)kind << 40) | index; }

/* Weight scales keep every stage O(1): x ~ U(-1,1) has variance 1/3, so U(-3/sqrt(K), 3/sqrt(K)) weights give
 * GEMM outputs of variance about 1 over a K-long dot product. */
float mok_weight_scale(int k) { return 3.0f / sqrtf((float)k); }

/* A tensor of the problem's inputs distribution (config "inputs"): uniform in [-spread, spread), or the normal with
 * the same standard deviation (spread / sqrt 3), rounded to the config's mantissa bits. Activations spread over
 * the config's scale, weights over mok_weight_scale(K) whatever the scale. */
int mok_problem_fill(const struct mok_problem_spec *s, uint16_t *dst, size_t n, uint64_t id, float spread,
                     cudaStream_t st)
{
    const bool normal = s->inputs.dist == MOK_INPUTS_NORMAL;
    return mok_fill_bf16(dst, n, s->routing.seed, id, normal, normal ? spread / sqrtf(3.0f) : spread,
                         s->inputs.mantissa_bits, (mok_stream_t)st);
}

double mok_problem_flops(const struct mok_problem_spec *s)
{
    const struct mok_model *m = &s->model;
    if (s->mode == MOK_MODE_COMM)
        return 0.0; /* no expert compute */
    double per_token = 2.0 * 3.0 * m->hidden * (double)m->intermediate;
    /* gemm mode runs the routed experts' GEMMs only: a model's shared experts count in layer mode */
    const int shared = s->mode == MOK_MODE_LAYER ? m->shared_experts : 0;
    double fwd = (double)s->tokens_per_rank * per_token * (m->topk + shared);
    /* the backward: dgrad and wgrad, two GEMMs of each forward GEMM's size */
    return (mok_pass_has_fwd(s->pass) ? fwd : 0.0) + (mok_pass_has_bwd(s->pass) ? 2.0 * fwd : 0.0);
}

int mok_problem_sets_for(const struct mok_problem_spec *s, int nranks, long long l2_bytes)
{
    return mok_plan_input_sets(s, mok_plan_set_bytes(s, nranks), l2_bytes);
}

size_t mok_problem_bytes(const struct mok_problem_spec *s, int nranks, int sets, bool with_reference)
{
    const struct mok_model *m = &s->model;
    size_t t = (size_t)s->tokens_per_rank, h = (size_t)m->hidden, i = (size_t)m->intermediate, k = (size_t)m->topk;
    size_t bytes = (size_t)sets * (size_t)mok_plan_set_bytes(s, nranks) + t * h * 2 + t * k * 8;
    if (mok_pass_has_bwd(s->pass) && s->mode != MOK_MODE_GEMM) { /* problem_bwd.c; the forward's reference with fwd_bwd */
        bytes += mok_plan_layer_bwd_bytes(s, nranks, sets, with_reference);
        with_reference = with_reference && mok_pass_has_fwd(s->pass);
    } else if (mok_pass_has_bwd(s->pass)) { /* gemm mode: problem_gemm_bwd.c's inputs, outputs and references */
        size_t rows = t * k, e = (size_t)m->experts;
        bytes += rows * (h * 2 + 4 + 2 * i * 2 + h * 2 + 4) + e * 3 * h * i * 4 + t * h * 2;
        if (with_reference)
            bytes += rows * (h * 4 + 4) + e * 3 * h * i * 4 + rows * 6 * i * 4;
    }
    /* the FP8 dtypes' quantized copies (gemm mode: and the rows, their h and its reference's scratch); layer mode's
     * forward: the output h and its check (problem_fp8_layer.c) */
    const bool gemm = s->mode == MOK_MODE_GEMM;
    const int fp8_experts = gemm ? m->experts : m->experts / nranks, fp8_rows = gemm ? (int)(t * k) : 0;
    if (s->mode != MOK_MODE_COMM && s->dtype == MOK_DTYPE_FP8_BLOCK) /* comm mode has no weights */
        bytes += mok_plan_fp8_block_bytes(fp8_experts, fp8_rows, m->hidden, m->intermediate, sets, with_reference);
    if (s->mode != MOK_MODE_COMM && s->dtype == MOK_DTYPE_MXFP8)
        bytes += mok_plan_mxfp8_bytes(fp8_experts, fp8_rows, m->hidden, m->intermediate, sets, with_reference);
    if (mok_fp8_layer_on(s))
        bytes += mok_plan_fp8_layer_bytes((int)t, (int)k, m->hidden, m->intermediate, with_reference);
    if (with_reference) {
        size_t max_rows = t * k > t ? t * k : t;
        size_t si = (size_t)(m->shared_experts > 1 ? m->shared_experts : 1) * i;
        bytes += t * h * 4                 /* y_ref */
                 + t * k * h * 4           /* per-route outputs */
                 + 3 * h * i * 2           /* one expert's weights */
                 + 3 * h * si * 2          /* shared weights scratch is covered by the set; g and h below */
                 + max_rows * 2 * si * 4   /* g */
                 + max_rows * si * 2       /* h */
                 + (m->shared_experts ? t * h * 4 : 0) + t * k * 8;
        if (mok_fp8_layer_on(s))
            bytes += t * h * 4; /* y_ref_bf16 */
    }
    return bytes;
}

int mok_problem_refresh_references(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    if (p->spec.mode == MOK_MODE_GEMM && p->spec.dtype == MOK_DTYPE_FP8_BLOCK)
        return mok_problem_fp8_refresh(p, st, err, err_len);
    if (p->spec.mode == MOK_MODE_GEMM && p->spec.dtype == MOK_DTYPE_MXFP8)
        return mok_problem_mxfp8_refresh(p, st, err, err_len);
    if (mok_fp8_layer_on(&p->spec))
        return mok_fp8_layer_refresh(p, st, err, err_len);
    return 0;
}

void mok_problem_destroy(struct mok_problem *p)
{
    mok_problem_gemm_destroy(p);
    mok_problem_layer_bwd_destroy(p);
    mok_fp8_layer_destroy(p);
    for (int s = 0; s < MOK_MAX_SETS; s++) {
        cudaFree(p->x[s]);
        cudaFree(p->w13[s]);
        cudaFree(p->w2[s]);
        cudaFree(p->shared_w13[s]);
        cudaFree(p->shared_w2[s]);
    }
    cudaFree(p->ids);
    cudaFree(p->w);
    cudaFree(p->y);
    cudaFree(p->y_ref);
    cudaFree(p->y_ref_bf16);
    free(p->h_ids);
    free(p->h_w);
    memset(p, 0, sizeof(*p));
}

/* The reference: for every global expert e, regenerate its weights from the seed, gather this rank's tokens
 * routed to e, run GEMM1 -> bf16 -> SwiGLU -> bf16 -> GEMM2 in fp32 SIMT, write each route's row; then the
 * shared MLP; then the fixed-order weighted sum. Shares no code with any implementation but the seeded fill (and,
 * for the FP8 dtypes, the quantizers that define the formats). FP8 dtypes: a first pass computes h's reference with
 * the formats' quantization (problem_fp8_layer.c, whose refresh computes y_ref from each run's own h), the bf16 pass
 * then y_ref_bf16 (the format's own error, information). */
static int build_reference(struct mok_problem *p, cudaStream_t st, char *err, int err_len)
{
    int T = p->tokens, H = p->hidden, I = p->inter, K = p->topk, E = p->experts;
    size_t routes = (size_t)T * K;
    int32_t *h_token = malloc(routes * sizeof(int32_t)), *h_route = malloc(routes * sizeof(int32_t));
    int *first = calloc((size_t)E + 1, sizeof(int));
    int32_t *d_token = NULL, *d_route = NULL;
    uint16_t *w13 = NULL, *w2 = NULL, *hbuf = NULL;
    float *g = NULL, *route_out = NULL, *shared_out = NULL;
    int rc = -1;
    cudaEvent_t ev0 = NULL, ev1 = NULL;
    const bool fp8 = mok_fp8_layer_on(&p->spec);
    if (!h_token || !h_route || !first) {
        snprintf(err, (size_t)err_len, "reference: out of host memory");
        goto fail;
    }
    /* counting sort of routes by expert: each expert's rows in ascending (token, k) order */
    for (size_t r = 0; r < routes; r++)
        first[p->h_ids[r] + 1]++;
    for (int e = 0; e < E; e++)
        first[e + 1] += first[e];
    {
        int *cursor = malloc(sizeof(int) * (size_t)E);
        if (!cursor) {
            snprintf(err, (size_t)err_len, "reference: out of host memory");
            goto fail;
        }
        memcpy(cursor, first, sizeof(int) * (size_t)E);
        for (size_t r = 0; r < routes; r++) {
            int slot = cursor[p->h_ids[r]]++;
            h_token[slot] = (int32_t)(r / (size_t)K);
            h_route[slot] = (int32_t)r;
        }
        free(cursor);
    }
    int max_rows = T;
    for (int e = 0; e < E; e++)
        if (first[e + 1] - first[e] > max_rows)
            max_rows = first[e + 1] - first[e];
    int SI = (p->shared > 1 ? p->shared : 1) * I;
    MOK_CHECK(cuda, cudaEventCreate(&ev0), goto fail);
    MOK_CHECK(cuda, cudaEventCreate(&ev1), goto fail);
    MOK_CHECK(cuda, cudaEventRecord(ev0, st), goto fail);
    MOK_CHECK(cuda, cudaMalloc((void **)&d_token, routes * sizeof(int32_t)), goto fail);
    MOK_CHECK(cuda, cudaMalloc((void **)&d_route, routes * sizeof(int32_t)), goto fail);
    MOK_CHECK(cuda, cudaMalloc((void **)&w13, (size_t)2 * I * H * 2), goto fail);
    MOK_CHECK(cuda, cudaMalloc((void **)&w2, (size_t)H * I * 2), goto fail);
    MOK_CHECK(cuda, cudaMalloc((void **)&g, (size_t)max_rows * 2 * SI * 4), goto fail);
    MOK_CHECK(cuda, cudaMalloc((void **)&hbuf, (size_t)max_rows * SI * 2), goto fail);
    MOK_CHECK(cuda, cudaMalloc((void **)&route_out, routes * H * 4), goto fail);
    MOK_CHECK(cuda, cudaMalloc((void **)&p->y_ref, (size_t)T * H * 4), goto fail);
    MOK_CHECK(cuda, cudaMemcpyAsync(d_token, h_token, routes * sizeof(int32_t), cudaMemcpyHostToDevice, st), goto fail);
    MOK_CHECK(cuda, cudaMemcpyAsync(d_route, h_route, routes * sizeof(int32_t), cudaMemcpyHostToDevice, st), goto fail);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), goto fail); /* the host arrays are freed below */
    if (fp8 && mok_fp8_layer_begin(p, first, d_token, d_route, max_rows, st, err, err_len))
        goto fail;
    if (p->shared) {
        MOK_CHECK(cuda, cudaMalloc((void **)&shared_out, (size_t)T * H * 4), goto fail);
        MOK_CHECK(cuda, mok_ref_gemm_f32(p->x[0], NULL, T, H, p->shared_w13[0], 2 * SI, g, NULL, (mok_stream_t)st),
                  goto fail);
        MOK_CHECK(cuda, mok_ref_swiglu(g, T, SI, hbuf, (mok_stream_t)st), goto fail);
        MOK_CHECK(cuda, mok_ref_gemm_f32(hbuf, NULL, T, SI, p->shared_w2[0], H, shared_out, NULL, (mok_stream_t)st),
                  goto fail);
    }
    /* FP8: h's reference with the same quantization (the verdicts'), then the bf16 y (y_ref_bf16: the format's own
     * error, reported as information) */
    if (fp8)
        MOK_CHECK(cuda, cudaMalloc((void **)&p->y_ref_bf16, (size_t)T * H * 4), goto fail);
    for (int pass = 0; pass < (fp8 ? 2 : 1); pass++) {
        const bool quantized = fp8 && pass == 0;
        for (int e = 0; e < E; e++) {
            int n = first[e + 1] - first[e];
            if (n == 0)
                continue;
            MOK_CHECK(cuda, mok_problem_fill(&p->spec, w13, (size_t)2 * I * H, mok_tensor_id(MOK_T_W13, (uint64_t)e),
                                             mok_weight_scale(H), st), goto fail);
            if (quantized) { /* GEMM2 waits for the run's own h (mok_fp8_layer_refresh) */
                if (mok_fp8_layer_expert(p, e, w13, g, hbuf, st, err, err_len))
                    goto fail;
                continue;
            }
            MOK_CHECK(cuda, mok_problem_fill(&p->spec, w2, (size_t)H * I, mok_tensor_id(MOK_T_W2, (uint64_t)e),
                                             mok_weight_scale(I), st), goto fail);
            MOK_CHECK(cuda, mok_ref_gemm_f32(p->x[0], d_token + first[e], n, H, w13, 2 * I, g, NULL, (mok_stream_t)st),
                      goto fail);
            MOK_CHECK(cuda, mok_ref_swiglu(g, n, I, hbuf, (mok_stream_t)st), goto fail);
            MOK_CHECK(cuda, mok_ref_gemm_f32(hbuf, NULL, n, I, w2, H, route_out, d_route + first[e], (mok_stream_t)st),
                      goto fail);
        }
        if (quantized) {
            if (mok_problem_quant_status(p->fl.status, st, mok_dtype_name(p->spec.dtype), "the reference's weights",
                                         err, err_len))
                goto fail;
            continue;
        }
        MOK_CHECK(cuda, mok_ref_sum_routes(route_out, p->w, T, K, H, shared_out, fp8 ? p->y_ref_bf16 : p->y_ref,
                                           (mok_stream_t)st), goto fail);
    }
    MOK_CHECK(cuda, cudaEventRecord(ev1, st), goto fail);
    MOK_CHECK(cuda, cudaStreamSynchronize(st), goto fail);
    {
        float ms = 0;
        cudaEventElapsedTime(&ms, ev0, ev1);
        p->reference_ms = ms;
    }
    if (fp8) { /* every refresh adds the shared MLP's output */
        mok_fp8_layer_keep_shared(p, shared_out);
        shared_out = NULL;
    }
    rc = 0;
fail:
    if (ev0)
        cudaEventDestroy(ev0);
    if (ev1)
        cudaEventDestroy(ev1);
    cudaFree(d_token);
    cudaFree(d_route);
    cudaFree(w13);
    cudaFree(w2);
    cudaFree(g);
    cudaFree(hbuf);
    cudaFree(route_out);
    cudaFree(shared_out);
    free(h_token);
    free(h_route);
    free(first);
    return rc;
}

int mok_problem_create(struct mok_problem *p, const struct mok_problem_spec *spec, const struct mok_cluster *cl,
                       int sets, bool with_reference, char *err, int err_len)
{
    memset(p, 0, sizeof(*p));
    const struct mok_model *m = &spec->model;
    p->spec = *spec;
    p->rank = cl->rank;
    p->nranks = cl->nranks;
    p->tokens = spec->tokens_per_rank;
    p->hidden = m->hidden;
    p->inter = m->intermediate;
    p->experts = m->experts;
    p->topk = m->topk;
    p->shared = m->shared_experts;
    p->local_experts = m->experts / cl->nranks;
    p->expert_begin = cl->rank * p->local_experts;
    if (spec->mode == MOK_MODE_GEMM) { /* each rank: its own routes over every expert, no communication */
        p->local_experts = m->experts;
        p->expert_begin = 0;
    }
    p->y_elems = (size_t)p->tokens * p->hidden;
    p->sets = sets < 1 ? 1 : sets > MOK_MAX_SETS ? MOK_MAX_SETS : sets;
    p->flops = mok_problem_flops(spec);
    cudaStream_t st = cl->stream;
    size_t T = (size_t)p->tokens, H = (size_t)p->hidden, I = (size_t)p->inter, K = (size_t)p->topk;
    size_t EL = (size_t)p->local_experts, SI = (size_t)p->shared * I;

    p->h_ids = malloc(T * K * sizeof(int32_t) + 1);
    p->h_w = malloc(T * K * sizeof(float) + 1);
    if (!p->h_ids || !p->h_w) {
        snprintf(err, (size_t)err_len, "out of host memory for routing");
        goto fail;
    }
    if (mok_routing_generate(&spec->routing, p->experts, p->topk, cl->rank, p->tokens, p->h_ids, p->h_w)) {
        snprintf(err, (size_t)err_len, "routing generation rejected the problem");
        goto fail;
    }
    MOK_CHECK(cuda, cudaMalloc((void **)&p->ids, T * K * sizeof(int32_t) + 16), goto fail);
    MOK_CHECK(cuda, cudaMalloc((void **)&p->w, T * K * sizeof(float) + 16), goto fail);
    MOK_CHECK(cuda, cudaMemcpyAsync(p->ids, p->h_ids, T * K * sizeof(int32_t), cudaMemcpyHostToDevice, st), goto fail);
    MOK_CHECK(cuda, cudaMemcpyAsync(p->w, p->h_w, T * K * sizeof(float), cudaMemcpyHostToDevice, st), goto fail);
    MOK_CHECK(cuda, cudaMalloc((void **)&p->y, T * H * 2 + 16), goto fail);

    const float x_spread = (float)spec->inputs.scale;
    for (int s = 0; s < p->sets; s++) {
        MOK_CHECK(cuda, cudaMalloc((void **)&p->x[s], T * H * 2 + 16), goto fail);
        if (spec->mode == MOK_MODE_COMM) { /* experts return their input: no weights */
            if (s == 0)
                MOK_CHECK(cuda, mok_problem_fill(spec, p->x[0], T * H, mok_tensor_id(MOK_T_X, (uint64_t)cl->rank), x_spread, st),
                          goto fail);
            else
                MOK_CHECK(cuda, cudaMemcpyAsync(p->x[s], p->x[0], T * H * 2, cudaMemcpyDeviceToDevice, st), goto fail);
            continue;
        }
        MOK_CHECK(cuda, cudaMalloc((void **)&p->w13[s], EL * 2 * I * H * 2 + 16), goto fail);
        MOK_CHECK(cuda, cudaMalloc((void **)&p->w2[s], EL * H * I * 2 + 16), goto fail);
        if (s == 0) {
            MOK_CHECK(cuda, mok_problem_fill(spec, p->x[0], T * H, mok_tensor_id(MOK_T_X, (uint64_t)cl->rank), x_spread, st),
                      goto fail);
            for (size_t e = 0; e < EL; e++) {
                uint64_t ge = (uint64_t)p->expert_begin + e;
                MOK_CHECK(cuda, mok_problem_fill(spec, p->w13[0] + e * 2 * I * H, 2 * I * H, mok_tensor_id(MOK_T_W13, ge),
                                            mok_weight_scale((int)H), st), goto fail);
                MOK_CHECK(cuda, mok_problem_fill(spec, p->w2[0] + e * H * I, H * I, mok_tensor_id(MOK_T_W2, ge),
                                            mok_weight_scale((int)I), st), goto fail);
            }
        } else {
            MOK_CHECK(cuda, cudaMemcpyAsync(p->x[s], p->x[0], T * H * 2, cudaMemcpyDeviceToDevice, st), goto fail);
            MOK_CHECK(cuda, cudaMemcpyAsync(p->w13[s], p->w13[0], EL * 2 * I * H * 2, cudaMemcpyDeviceToDevice, st),
                      goto fail);
            MOK_CHECK(cuda, cudaMemcpyAsync(p->w2[s], p->w2[0], EL * H * I * 2, cudaMemcpyDeviceToDevice, st),
                      goto fail);
        }
        if (SI) {
            MOK_CHECK(cuda, cudaMalloc((void **)&p->shared_w13[s], 2 * SI * H * 2 + 16), goto fail);
            MOK_CHECK(cuda, cudaMalloc((void **)&p->shared_w2[s], H * SI * 2 + 16), goto fail);
            if (s == 0) {
                MOK_CHECK(cuda, mok_problem_fill(spec, p->shared_w13[0], 2 * SI * H, mok_tensor_id(MOK_T_SHARED_W13, 0),
                                            mok_weight_scale((int)H), st), goto fail);
                MOK_CHECK(cuda, mok_problem_fill(spec, p->shared_w2[0], H * SI, mok_tensor_id(MOK_T_SHARED_W2, 0),
                                            mok_weight_scale((int)SI), st), goto fail);
            } else {
                MOK_CHECK(cuda, cudaMemcpyAsync(p->shared_w13[s], p->shared_w13[0], 2 * SI * H * 2,
                                                cudaMemcpyDeviceToDevice, st), goto fail);
                MOK_CHECK(cuda, cudaMemcpyAsync(p->shared_w2[s], p->shared_w2[0], H * SI * 2,
                                                cudaMemcpyDeviceToDevice, st), goto fail);
            }
        }
    }
    MOK_CHECK(cuda, cudaStreamSynchronize(st), goto fail);
    if (spec->mode == MOK_MODE_LAYER && spec->dtype == MOK_DTYPE_FP8_BLOCK &&
        mok_problem_fp8_weights_setup(p, st, err, err_len))
        goto fail;
    if (spec->mode == MOK_MODE_LAYER && spec->dtype == MOK_DTYPE_MXFP8 &&
        mok_problem_mxfp8_weights_setup(p, st, err, err_len))
        goto fail;
    const bool layer_fp8 = mok_fp8_layer_on(spec);
    if (layer_fp8 && mok_fp8_layer_setup(p, err, err_len))
        goto fail;
    if (spec->mode == MOK_MODE_GEMM) {
        if (mok_problem_gemm_setup(p, st, with_reference, err, err_len))
            goto fail;
    } else if (with_reference && spec->mode == MOK_MODE_COMM) {
        MOK_CHECK(cuda, cudaMalloc((void **)&p->y_ref, T * H * 4), goto fail);
        MOK_CHECK(cuda, mok_ref_comm_f32(p->x[0], p->w, p->tokens, p->topk, p->hidden, p->y_ref, (mok_stream_t)st),
                  goto fail);
        MOK_CHECK(cuda, cudaStreamSynchronize(st), goto fail);
    } else if (with_reference && mok_pass_has_fwd(spec->pass) && build_reference(p, st, err, err_len)) {
        goto fail;
    }
    p->device_bytes = mok_problem_bytes(spec, cl->nranks, p->sets, with_reference);
    if (mok_pass_has_bwd(spec->pass)) { /* dx, d_router, dw13, dw2 (and fwd_bwd's y) */
        if (spec->mode == MOK_MODE_GEMM ? mok_problem_gemm_bwd_setup(p, st, with_reference, err, err_len)
                                        : mok_problem_layer_bwd_setup(p, st, with_reference, err, err_len))
            goto fail;
        return 0;
    }
    /* the forward's one output (gemm mode: GEMM2's rows, y_elems of them); the FP8 forwards also h (gemm mode:
     * expert-major rows; layer mode: route order, problem_fp8_layer.c), each GEMM checked on its own */
    p->out.n = 1;
    p->out.o[0] =
        (struct mok_output){.name = "y", .type = MOK_OUT_BF16, .data = p->y, .ref = p->y_ref, .elems = p->y_elems};
    if (layer_fp8)
        p->out.o[p->out.n++] = (struct mok_output){.name = "h", .type = MOK_OUT_BF16, .data = p->fl.h,
                                                   .ref = p->fl.h_ref, .elems = (size_t)p->tokens * p->topk * p->inter};
    if (spec->mode == MOK_MODE_GEMM && spec->dtype == MOK_DTYPE_FP8_BLOCK)
        p->out.o[p->out.n++] = (struct mok_output){.name = "h", .type = MOK_OUT_BF16, .data = p->fp8.h,
                                                   .ref = p->fp8.h_ref, .elems = (size_t)p->gemm_rows * p->inter};
    if (spec->mode == MOK_MODE_GEMM && spec->dtype == MOK_DTYPE_MXFP8)
        p->out.o[p->out.n++] = (struct mok_output){.name = "h", .type = MOK_OUT_BF16, .data = p->mx.h,
                                                   .ref = p->mx.h_ref, .elems = (size_t)p->gemm_rows * p->inter};
    return 0;
fail:
    mok_problem_destroy(p);
    return -1;
}
