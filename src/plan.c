/* plan: the dry-run view of a config (see plan.h). */
#include "plan.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "desc.h"
#include "outputs.h"
#include "params.h"
#include "sweep.h"

/* Same formulas as problem.c's allocation (kept here too because problem.c needs CUDA). */
static double problem_bytes(const struct mok_problem_spec *s, int nranks, long long l2, int *sets_out)
{
    const struct mok_model *m = &s->model;
    double t = s->tokens_per_rank, h = m->hidden, i = m->intermediate, k = m->topk;
    bool comm = s->mode == MOK_MODE_COMM; /* no weights, and a reference of one fp32 tensor */
    bool gemm = s->mode == MOK_MODE_GEMM;
    double el = gemm ? m->experts : (double)m->experts / nranks;
    const double set = mok_plan_set_bytes(s, nranks);
    const int sets = mok_plan_input_sets(s, set, l2);
    *sets_out = sets;
    double si = (m->shared_experts > 1 ? m->shared_experts : 1) * i;
    double rows = t * k > t ? t * k : t;
    double ref = t * h * 4 + t * k * h * 4 + 3 * h * i * 2 + rows * 2 * si * 4 + rows * si * 2 +
                 (m->shared_experts ? t * h * 4 : 0);
    if (!gemm && mok_pass_has_bwd(s->pass)) /* the layers' backward; the forward's reference only with fwd_bwd */
        return sets * set + t * h * 2 + t * k * 8 + (mok_pass_has_fwd(s->pass) ? ref : 0) +
               (double)mok_plan_layer_bwd_bytes(s, nranks, sets, true);
    if (gemm && mok_pass_has_bwd(s->pass)) { /* problem_gemm_bwd.c: dy rows, w, gu, dx, d_router, the fp32
                                            * weight gradients and (checks on) their references and scratch */
        double e = m->experts, grads = e * 3 * h * i * 4;
        double fwd_ref = mok_pass_has_fwd(s->pass) ? t * k * h * 4 + rows * 3 * i * 4 : 0; /* fwd_bwd's y */
        return sets * set + t * k * h * 2 + t * k * 8 + t * h * 2 +
               t * k * (h * 2 + 4 + 2 * i * 2 + h * 2 + 4) + grads + t * k * (h * 4 + 4) + grads + rows * 6 * i * 4 +
               fwd_ref;
    }
    const int fp8_experts = (int)el, fp8_rows = gemm ? (int)(t * k) : 0;
    double fp8 = comm ? 0
                 : s->dtype == MOK_DTYPE_FP8_BLOCK
                     ? (double)mok_plan_fp8_block_bytes(fp8_experts, fp8_rows, m->hidden, m->intermediate, sets, true)
                 : s->dtype == MOK_DTYPE_MXFP8
                     ? (double)mok_plan_mxfp8_bytes(fp8_experts, fp8_rows, m->hidden, m->intermediate, sets, true)
                     : 0;
    const bool layer_fp8 = fp8 > 0 && s->mode == MOK_MODE_LAYER && s->pass == MOK_PASS_FWD;
    if (layer_fp8) /* problem_fp8_layer.c's h and check, and the bf16 reference's y beside y_ref */
        fp8 += (double)mok_plan_fp8_layer_bytes((int)t, (int)k, m->hidden, m->intermediate, true) + t * h * 4;
    if (gemm) /* y and its fp32 reference hold GEMM2's rows; the reference's scratch is one expert's */
        return sets * set + t * k * h * (2 + 4) + t * k * 8 + rows * 2 * i * 4 + rows * i * 2 + fp8;
    return sets * set + t * h * 2 + t * k * 8 + (comm ? t * h * 4 : ref) + fp8;
}

double mok_plan_set_bytes(const struct mok_problem_spec *s, int nranks)
{
    const struct mok_model *m = &s->model;
    const double t = s->tokens_per_rank, h = m->hidden, i = m->intermediate, k = m->topk;
    if (s->mode == MOK_MODE_COMM)
        return t * h * 2;
    const bool gemm = s->mode == MOK_MODE_GEMM;
    const double el = gemm ? m->experts : (double)(m->experts / nranks);
    return t * h * 2 + el * 3 * h * i * 2 + m->shared_experts * 3 * h * i * 2 + (gemm ? t * k * h * 2 : 0);
}

int mok_plan_input_sets(const struct mok_problem_spec *spec, double set_bytes, long long l2_bytes)
{
    if (spec->input_sets > 0) /* the config's own count */
        return spec->input_sets > MOK_MAX_SETS ? MOK_MAX_SETS : spec->input_sets;
    const double sets = set_bytes > 0 ? ceil(2.0 * (double)l2_bytes / set_bytes) : 1;
    return sets < 1 ? 1 : sets > MOK_MAX_SETS ? MOK_MAX_SETS : (int)sets;
}

int mok_plan_ref_part_experts(int local_experts, int hidden, int inter)
{
    const size_t per_expert = (size_t)3 * hidden * inter * 4;
    const size_t by_bytes = ((size_t)2 << 30) / (per_expert ? per_expert : 1);
    const int quarter = (local_experts + 3) / 4;
    const int n = by_bytes < (size_t)quarter ? (int)by_bytes : quarter;
    return n < 1 ? 1 : n;
}

/* The layers' weight-gradient elements per rank: this rank's experts' dW13 and dW2, then the shared MLP's */
static size_t layer_grad_elems(const struct mok_model *m, int local_experts)
{
    const size_t h = (size_t)m->hidden, i = (size_t)m->intermediate;
    return (size_t)local_experts * 3 * h * i + 3 * h * (size_t)m->shared_experts * i;
}

size_t mok_plan_layer_bwd_bytes(const struct mok_problem_spec *spec, int nranks, int sets, bool with_reference)
{
    const struct mok_model *m = &spec->model;
    const size_t t = (size_t)spec->tokens_per_rank, h = (size_t)m->hidden, i = (size_t)m->intermediate;
    const size_t k = (size_t)m->topk, si = (size_t)m->shared_experts * i;
    const int local = m->experts / (nranks > 0 ? nranks : 1);
    const size_t grads = layer_grad_elems(m, local);
    size_t bytes = (size_t)sets * t * h * 2 + t * h * 2 + t * k * 4 +
                   grads * (spec->wgrad == MOK_WGRAD_BF16 ? 2 : 4);
    if (with_reference) {
        const size_t part = (size_t)mok_plan_ref_part_experts(local, m->hidden, m->intermediate) * 3 * h * i;
        bytes += t * h * 4 + t * k * 4 + (part > 3 * h * si ? part : 3 * h * si) * 4 + MOK_REF_PART_ELEMS * 4 +
                 t * 6 * (si > i ? si : i) * 4 + t * k * h * 4 + 3 * t * k * 4 + 3 * h * i * 2 +
                 (nranks > 1 ? t * h * 4 + t * k * 4 : 0) + (si ? t * h * 4 + t * 8 : 0) + 1024;
    }
    return bytes + 64;
}

size_t mok_plan_layer_bwd_host_bytes(const struct mok_problem_spec *spec, int nranks, bool with_reference)
{
    if (!with_reference || !mok_pass_has_bwd(spec->pass) || spec->mode == MOK_MODE_GEMM)
        return 0;
    return layer_grad_elems(&spec->model, spec->model.experts / (nranks > 0 ? nranks : 1)) * 4;
}

size_t mok_plan_fp8_block_bytes(int experts, int rows, int hidden, int inter, int sets, bool with_reference)
{
    const size_t E = (size_t)experts, H = (size_t)hidden, I = (size_t)inter, R = (size_t)rows;
    size_t per_set = E * 3 * H * I + E * 3 * (H / 128) * (I / 128) * 4 + R * H + R * (H / 128) * 4;
    /* the output h; with the reference h_ref, the output h's quantized copy, and one expert's GEMM1 output and h
     * (bounded by all rows) */
    size_t ref = with_reference ? R * (I * 4 + I + (I / 128) * 4) + R * (2 * I * 4 + I * 2) : 0;
    return (size_t)sets * per_set + R * I * 2 + ref + 64;
}

size_t mok_plan_fp8_layer_bytes(int tokens, int topk, int hidden, int inter, bool with_reference)
{
    const size_t T = (size_t)tokens, H = (size_t)hidden, I = (size_t)inter, R = T * (size_t)topk;
    const size_t wide = H > I ? H : I;
    size_t bytes = R * I * 2; /* the output h */
    if (with_reference) /* h_ref, token and route, route_out, x and h quantized, one expert's rows (up to R), its
                         * weights quantized (mxfp8's scales, the larger) and W2 in bf16, GEMM2's output, h widened */
        bytes += R * I * 4 + R * 8 + R * H * 4 + T * (H + H / 32) + R * (I + I / 32) + R * (wide + wide / 32) +
                 3 * H * I + 3 * H * I / 32 + H * I * 2 + R * H * 4 + R * I * 4;
    return bytes + 64;
}

size_t mok_plan_mxfp8_bytes(int experts, int rows, int hidden, int inter, int sets, bool with_reference)
{
    const size_t E = (size_t)experts, H = (size_t)hidden, I = (size_t)inter, R = (size_t)rows;
    size_t per_set = E * 3 * H * I + 2 * (E * 3 * H * I / 32) + R * H + R * H / 32;
    /* the output h; with the reference h_ref, the output h's quantized copy, and one expert's GEMM1 output and h
     * (bounded by all rows) */
    size_t ref = with_reference ? R * (I * 4 + I + I / 32) + R * (2 * I * 4 + I * 2) : 0;
    return (size_t)sets * per_set + R * I * 2 + ref + 64;
}

double mok_plan_impl_bytes(const char *impl, const struct mok_problem_spec *spec, int nranks, int sets,
                           const int *params)
{
    const struct mok_model *m = &spec->model;
    double t = spec->tokens_per_rank, h = m->hidden, i = m->intermediate, k = m->topk;
    if (!strcmp(impl, "cublas-gemm") && mok_pass_has_bwd(spec->pass)) /* dh', [dg, du], w h */
        return t * k * (i + 2 * i + i) * 2;
    if (!strcmp(impl, "nccl") || !strcmp(impl, "nccl-overlap")) {
        double cap = 1.25 * t * k; /* rows received, uniform routing plus margin */
        double sym = 2 * t * k * h * 2 + 2 * cap * h * 2;
        double work = cap * (2 * h + 2 * i + i) * 2;
        double shared = m->shared_experts ? t * (3 * m->shared_experts * i + h) * 2 : 0;
        double a2a = 2 * t * k * h * 2 * (nranks > 1 ? 1 : 0);
        double bwd = 0; /* nccl_backward.c: dy rows, dgu, w h, the fp32 weights and d_router of the rows, the
                         * shared MLP's dgu and w h, and pass bwd's saved x rows and gu of every further set */
        if (mok_pass_has_bwd(spec->pass)) {
            double si = m->shared_experts * i;
            bwd = cap * (h + 2 * i + i) * 2 + cap * 16 + t * k * 12 + t * 3 * si * 2 + t * 4 +
                  (mok_pass_has_fwd(spec->pass) ? 0
                                                : (sets - 1) * (cap * (h + 2 * i) * 2 + t * 2 * si * 2 + t * k * 4));
            if (!strcmp(impl, "nccl-overlap") && mok_params_nccl_overlap(params).chunks > 1)
                bwd += cap * (2 * h + 2 * i + i) * 2 + cap * 4; /* the gathered wgrad's x, dy, dgu, w h, indices */
        }
        /* nccl_fp8.c: x quantized, the expert-major rows and h quantized (scales: 1/32 of the values), and for
         * the mxfp8 emulation every set's local weights dequantized to bf16 and h dequantized; the output h's
         * export buffers (layer mode's FP8 check) */
        double fp8 = 0;
        if (spec->dtype == MOK_DTYPE_FP8_BLOCK || spec->dtype == MOK_DTYPE_MXFP8) {
            int gemm = !strcmp(impl, "nccl") ? mok_params_nccl(params).gemm : mok_params_nccl_overlap(params).gemm;
            int mx_scheme = !strcmp(impl, "nccl") ? mok_params_nccl(params).mx_scheme
                                                  : mok_params_nccl_overlap(params).mx_scheme;
            double el = (double)m->experts / nranks;
            fp8 = (t * h + cap * (h + i)) * (1 + 1.0 / 32) + (cap + t * k) * i * 2;
            if (spec->dtype == MOK_DTYPE_MXFP8 && gemm != 2)
                fp8 += sets * el * 3 * h * i * 2 + cap * i * 2;
            if (spec->dtype == MOK_DTYPE_MXFP8 && gemm == 2 && mx_scheme >= 2) /* the weights in bf16 */
                fp8 += sets * el * 3 * h * i * 2;
            if (spec->dtype == MOK_DTYPE_FP8_BLOCK && gemm == 1) /* gemm_fp8_experts.c: g1, h, h quantized, and
                                                                   * every set's weight scales in cuBLASLt's layout */
                fp8 += cap * (2 * i * 2 + i * 2 + i * (1 + 1.0 / 32)) + sets * el * 3 * h * i / (128.0 * 128) * 4 * 2;
        }
        return sym + work + shared + a2a + bwd + fp8;
    }
    if (!strcmp(impl, "nccl-p2p")) /* the same buffers, no GEMM work space used */
        return 2 * t * k * h * 2 + 2 * 1.25 * t * k * h * 2 + 4 * t * k * h * 2 * (nranks > 1);
    if (!strcmp(impl, "cublas-gemm") && spec->dtype == MOK_DTYPE_MXFP8) /* gemm_mx_emulated.c: every set's weights
                                                                          * in bf16, the rows, g1, h, h quantized and
                                                                          * h dequantized */
        return sets * (double)m->experts * 3 * h * i * 2 + t * k * (h * 2 + 2 * i * 2 + i * 2 + i * (1 + 1.0 / 32) +
                                                                    i * 2);
    if (!strcmp(impl, "cublas-gemm")) /* GEMM1's output and SwiGLU's (fp8_block: and h quantized, on cuBLASLt) */
        return t * k * 3 * i * 2 + (spec->dtype == MOK_DTYPE_FP8_BLOCK ? t * k * 3 * i * 2 + t * k * i * (1 + 4.0 / 128)
                                                                            : 0);
    if (!strcmp(impl, "mok-gemm") && mok_pass_has_bwd(spec->pass)) /* mok_gemm.c: h, dh', [dg, du], w h; fwd_bwd
                                                                       * keeps its forward's gate/up rows too */
        return t * k * (i + i + 2 * i + i) * 2 + (mok_pass_has_fwd(spec->pass) ? t * k * 2 * i * 2 : 0);
    if (!strcmp(impl, "mok-gemm")) /* SwiGLU's output only: GEMM1's stays in registers (FP8: and h quantized;
                                    * mxfp8's mx_scheme 2 and 3: every set's weights expanded to bf16) */
        return t * k * i * 2 + (spec->dtype == MOK_DTYPE_FP8_BLOCK ? t * k * i * (1 + 4.0 / 128)
                                : spec->dtype == MOK_DTYPE_MXFP8   ? t * k * i * (1 + 1.0 / 32)
                                                                   : 0) +
               (spec->dtype == MOK_DTYPE_MXFP8 && mok_params_mok_gemm(params).mx_scheme >= 2
                    ? sets * (double)m->experts * 3 * h * i * 2
                    : 0);
    if (!strcmp(impl, "lsa-layer") || !strcmp(impl, "megakernel")) { /* lsa with slots, plus experts' h and out */
        bool mega = !strcmp(impl, "megakernel");
        int per_rank = mega ? mok_params_megakernel(params).combine : mok_params_lsa_layer(params).combine;
        double cap = spec->capacity_factor * t * k + (double)m->experts / nranks * 128;
        double back = per_rank ? t * nranks * h * 2 : t * k * h * 2;
        double bytes = t * h * 2 + back + cap * h * 2 + 3.0 * nranks * t * k * 4 + cap * (i + h) * 2;
        /* the megakernel (libmok's workspace): push lands rows once per rank in the window (the slots stay
         * local), shared experts have their h and y */
        if (mega)
            bytes += (mok_params_megakernel(params).dispatch ? nranks * t * h * 2 : 0) +
                     (m->shared_experts ? t * (m->shared_experts * i + h) * 2 : 0);
        if (mega && (spec->dtype == MOK_DTYPE_FP8_BLOCK || spec->dtype == MOK_DTYPE_MXFP8)) /* wire-row slots, hq */
            bytes += cap * (h + h / 32 - h * 2) + cap * i * (1 + 4.0 / 128);
        if (mega && spec->dtype == MOK_DTYPE_MXFP8 && mok_params_megakernel(params).mx_scheme == 3) /* megakernel.c:
            * every set's weights as their MX values in bf16, and mok_expand_weights_mxfp8's scratch for one W13 */
            bytes += (double)m->experts / nranks * (sets * 3 * h * i * 2 + 2 * i * h * 33 / 32);
        /* the fused backward (libmok's train workspace): a dy slot per input set in the window, d_router per route,
         * gate and up, dy's slots, dgu, w h and the d_router partials at the capacity; with shared experts their
         * gate and up, dh', dgu, w h, dx and d_router over the own tokens */
        /* lsa-layer's backward (lsa_layer_bwd.c): a dy slot per input set in the window, d_router per route, dy's
         * slots, gate and up, dh', dgu, w h, the slots' weights and d_router */
        if (!mega && mok_pass_has_bwd(spec->pass))
            bytes += sets * t * h * 2 + t * k * 4 + cap * (h * 2 + 2 * i * 2 + i * 2 + 2 * i * 2 + i * 2 + 8);
        /* lsa-layer's FP8 forward (lsa_layer_fp8.c): x quantized, the slots' rows unpacked and h quantized (scales:
         * 1/32 of the values), and the window's region for the h rows per route the check brings home */
        if (!mega && (spec->dtype == MOK_DTYPE_FP8_BLOCK || spec->dtype == MOK_DTYPE_MXFP8))
            bytes += (t * h + cap * (h + i)) * (1 + 1.0 / 32) + t * k * i * 2;
        if (!mega && spec->dtype == MOK_DTYPE_MXFP8 && mok_params_lsa_layer(params).mx_scheme >= 2)
            bytes += sets * (double)m->experts / nranks * 3 * h * i * 2; /* mx_scheme 2, 3: the weights in bf16 */
        if (mega && mok_pass_has_bwd(spec->pass)) {
            double si = m->shared_experts * i;
            bytes += sets * t * h * 2 + t * k * 4 + cap * (2 * i * 2 + h * 2 + 2 * i * 2 + i * 2 + i / 256 * 4) +
                     (si > 0 ? t * (2 * si * 2 + si * 2 + 2 * si * 2 + si * 2 + h * 2 + 3 * 4) : 0);
        }
        return bytes;
    }
    if (!strcmp(impl, "lsa")) { /* window: x per set, rows back; local: received rows at the capacity */
        double cap = spec->capacity_factor * t * k + (double)m->experts / nranks * 128;
        double back = mok_params_lsa(params).combine ? t * nranks * h * 2 : t * k * h * 2;
        return t * h * 2 + back + cap * h * 2 + 3.0 * nranks * t * k * 4;
    }
    return 0;
}

static const char *human_bytes(double b, char *buf, size_t len)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4)
        b /= 1024, u++;
    snprintf(buf, len, "%.2f %s", b, unit[u]);
    return buf;
}

uint64_t mok_plan_print(FILE *out, const struct mok_config *cfg, int nranks, long long l2_bytes, long long gpu_bytes,
                        double *peak_bytes)
{
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return 0;
    int nproblems = mok_config_problem_count(cfg);
    fprintf(mem, "# plan: %d problems x %d implementations, %lld candidates, %d ranks, warmup %d", nproblems,
            cfg->nimpls, mok_sweep_total(cfg), nranks, cfg->warmup);
    if (cfg->warmup_ms)
        fprintf(mem, " (at least %d ms)", cfg->warmup_ms);
    fprintf(mem, ", iters %d", cfg->iters);
    if (cfg->timed_ms)
        fprintf(mem, " (more where %d ms need them)", cfg->timed_ms);
    fprintf(mem, ", check %s\n", cfg->check_enabled ? "on" : "off");
    static const char *const strategies[] = {"exhaustive", "coordinate", "halving"};
    fprintf(mem, "# search: %s", strategies[cfg->search_strategy % 3]);
    if (cfg->search_max_measurements)
        fprintf(mem, ", at most %d measurements per problem and implementation", cfg->search_max_measurements);
    if (cfg->search_budget_s > 0)
        fprintf(mem, ", %g s budget per problem and implementation", cfg->search_budget_s);
    fprintf(mem, " (the candidates listed below are the space it searches)\n");
    double worst = 0;
    long long unsupported = 0;
    for (int pi = 0; pi < nproblems; pi++) {
        struct mok_problem_spec spec;
        mok_config_problem_at(cfg, pi, &spec);
        char routing[64], inputs[48], b1[32], b2[32];
        int sets = 1;
        double pbytes = problem_bytes(&spec, nranks, l2_bytes, &sets);
        const size_t host = mok_plan_layer_bwd_host_bytes(&spec, nranks, true);
        const struct mok_model *m = &spec.model;
        fprintf(mem, "problem %d: %s H=%d I=%d E=%d k=%d shared=%d tokens/rank=%d routing=%s inputs=%s %s %s%s%s; "
                     "%d input sets; problem memory %s per rank%s%s%s\n",
                pi, m->name, m->hidden, m->intermediate, m->experts, m->topk, m->shared_experts,
                spec.tokens_per_rank, mok_routing_label(&spec.routing, routing, sizeof(routing)),
                mok_inputs_label(&spec.inputs, inputs, sizeof(inputs)), mok_dtype_name(spec.dtype),
                mok_pass_name(spec.pass), mok_pass_has_bwd(spec.pass) ? " wgrad=" : "",
                mok_pass_has_bwd(spec.pass) ? mok_wgrad_name(spec.wgrad) : "", sets,
                human_bytes(pbytes, b1, sizeof(b1)),
                host ? " (and " : "", host ? human_bytes((double)host, b2, sizeof(b2)) : "",
                host ? " of pinned host memory per rank: the weight gradients' references)" : "");
        for (int ii = 0; ii < cfg->nimpls; ii++) {
            const struct mok_impl_desc *d = mok_impl_desc_find(cfg->impls[ii]);
            if (!d)
                continue;
            int n = mok_sweep_count(d, &cfg->tune[ii]);
            for (int c = 0; c < n; c++) {
                int params[MOK_MAX_PARAMS] = {0};
                char label[MOK_PARAMS_LABEL_LEN];
                char why[256];
                mok_sweep_at(d, &cfg->tune[ii], c, params);
                mok_impl_params_label(d, params, label, sizeof(label));
                if (!mok_impl_host_supports(d, &spec, nranks, sets, params, why, sizeof why)) {
                    unsupported++;
                    fprintf(mem, "  %-14s %-32s not supported: %s\n", d->name, label, why);
                    continue;
                }
                double ib = mok_plan_impl_bytes(d->name, &spec, nranks, sets, params);
                if (pbytes + ib > worst)
                    worst = pbytes + ib;
                fprintf(mem, "  %-14s %-32s +%s (total %s)\n", d->name, label, human_bytes(ib, b1, sizeof(b1)),
                        human_bytes(pbytes + ib, b2, sizeof(b2)));
            }
        }
    }
    char b[32];
    fprintf(mem, "# candidates: %lld may run, %lld not supported (decided without a GPU; the GPU may reject more)\n",
            mok_sweep_total(cfg) - unsupported, unsupported);
    fprintf(mem, "# peak device memory per rank: %s (estimate; L2 assumed %lld MiB for input rotation)\n",
            human_bytes(worst, b, sizeof(b)), l2_bytes >> 20);
    const double gib = (double)(1ull << 30);
    if (gpu_bytes > 0 && worst > (double)gpu_bytes)
        fprintf(mem, "# REFUSED: the plan needs %.1f GiB per rank, more than this GPU's %.1f GiB free\n", worst / gib,
                (double)gpu_bytes / gib);
    else if (gpu_bytes <= 0 && worst > MOK_PLAN_WARN_BYTES)
        fprintf(mem, "# WARNING: the plan needs %.1f GiB per rank, more than an H200's 141 GiB: a run refuses it on "
                     "any GPU with less free memory\n", worst / gib);
    if (peak_bytes)
        *peak_bytes = worst;
    fclose(mem);
    uint64_t h = mok_hash64(text, len);
    if (out)
        fputs(text, out);
    free(text);
    return h;
}
