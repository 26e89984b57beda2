/* megakernel (layer mode): the fused forward and backward through libmok (include/libmok.h) and nothing else of
 * mok's: a workspace per candidate whose input slots hold the problem's input sets (and with a backward, dy beside
 * each), then per forward mok_route (publish + schedule), mok_forward_kernel (dispatch, shared and routed expert
 * GEMMs, combine sends in one persistent launch) and mok_forward_sum (the owner's sum). Those three calls are the
 * report's phase slots: dispatch = publish + schedule, experts = the megakernel, combine = the owner's sum. The
 * training passes' slots are the forward (fwd_bwd) | mok_backward_kernel | mok_backward_sum (train_phase).
 * launch=graph captures each call per input set. Parameters: params.h's megakernel table (desc.c says what each
 * does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "check_call.h"
#include "fail.h"
#include "impl.h"
#include "libmok.h"
#include "params.h"
#include "phased_run.h"
#include "sched_check.h"
#include "timing.h"

struct mega_state {
    struct mok_problem *p;
    struct mok_cluster *cl;
    mok_workspace *ws;
    struct mok_layer_desc desc;
    bool breakdown;
    struct phased_run run;
    struct mok_schedule host; /* the same schedule built on the host from the gathered routing */
    /* pass bwd / fwd_bwd (desc.train): the run's outputs, set by run() before its phases (stable pointers: the
     * problem's outputs, so graphs captured once stay valid) */
    struct mok_grads grads;
    uint16_t *dx, *y; /* y: the forward's output (pass bwd: scratch for the untimed forward at setup) */
    float *d_router;
    uint16_t *y_scratch;
    /* mxfp8 with mx_scheme 3: every set's weights as their MX values in bf16 (mok_expand_weights_mxfp8, at setup) */
    uint16_t *w13_x[MOK_MAX_SETS], *w2_x[MOK_MAX_SETS];
};

/* wgrad_mix -1: the weight-gradient tiles interleaved with GEMM1 dgrad's for fp32 gradients (DRAM-bound tiles
 * beside tensor-bound ones), after them for bf16 (README, Tuning the megakernel, has the measurements) */
static int mega_wgrad_mix_auto(const struct mok_problem_spec *spec)
{
    return mok_pass_has_bwd(spec->pass) && spec->wgrad == MOK_WGRAD_FP32_ACCUMULATE;
}

/* The layer description of a candidate: max_tokens over all ranks, one input slot per input set. */
static struct mok_layer_desc mega_desc(const struct mok_problem *p, const int *values, int max_tokens)
{
    struct mok_params_megakernel m = mok_params_megakernel(values);
    struct mok_layer_desc d = {.hidden = p->hidden, .intermediate = p->inter,
                               .shared_intermediate = p->shared * p->inter, .experts = p->experts,
                               .topk = p->topk, .max_tokens = max_tokens,
                               .capacity_factor = p->spec.capacity_factor, .input_slots = p->sets,
                               .comm_sms = m.comm_sms, .combine_sms = m.combine_sms,
                               .send_from_gemm = m.send, .lockstep = m.wave_lockstep, .own_first = m.own_first,
                               .split_half = m.split_half,
                               .combine_per_rank = m.combine, .chunk_rows = m.chunk_rows, .stages = m.stages,
                               .dispatch_push = m.dispatch, .raster = m.raster,
                               .train = mok_pass_has_bwd(p->spec.pass), .act_recompute = m.act,
                               .wgrad_mix = m.wgrad_mix >= 0 ? m.wgrad_mix : mega_wgrad_mix_auto(&p->spec),
                               .wgrad_reduce = mok_pass_has_bwd(p->spec.pass) ? m.wgrad_reduce : 0,
                               .shared_sms = m.shared_sms,
                               .shared_units = m.shared_units, .mx_scheme = m.mx_scheme,
                               .swap_tail = m.swap_tail, .land_stages = m.land_stages,
                               .fp8_tile_n = p->spec.dtype == MOK_DTYPE_FP8_BLOCK ? m.fp8_tile_n : 0,
                               .push_all = p->spec.dtype != MOK_DTYPE_BF16 ? m.push_all : 0,
                               .gather = m.gather,
                               .dtype = p->spec.dtype == MOK_DTYPE_FP8_BLOCK ? MOK_LAYER_FP8_BLOCK
                                        : p->spec.dtype == MOK_DTYPE_MXFP8   ? MOK_LAYER_MXFP8
                                                                             : MOK_LAYER_BF16};
    if (d.gather < 0) /* resolved here, so the run (its schedule check, its note) sees what the kernel runs */
        d.gather = mok_layer_gather_auto(&d, p->nranks);
    return d;
}

static int mega_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *mp, char *why,
                         int why_len)
{
    /* this rank's tokens stand for max_tokens: supports() must not communicate (the driver takes the minimum) */
    struct mok_layer_desc d = mega_desc(p, mp, p->tokens > 0 ? p->tokens : 1);
    return mok_layer_check(cl->nccl, &d, why, why_len) == MOK_OK;
}

/* This set's weights in the problem's dtype (FP8: quantized once at setup, src/problem_fp8.c, problem_mxfp8.c;
 * mxfp8's scales in the GEMM tile layout; with mx_scheme 3 the same MX values in bf16, expanded at setup), the
 * shared experts' only where the model has them. */
static struct mok_weights set_weights(const struct mega_state *s, int set)
{
    const struct mok_problem *p = s->p;
    struct mok_weights w = {.w13 = p->w13[set], .w2 = p->w2[set]};
    if (p->spec.dtype == MOK_DTYPE_FP8_BLOCK)
        w = (struct mok_weights){.w13_e4m3 = p->fp8.w13[set], .w13_scale = p->fp8.w13_scale[set],
                                 .w2_e4m3 = p->fp8.w2[set], .w2_scale = p->fp8.w2_scale[set]};
    if (p->spec.dtype == MOK_DTYPE_MXFP8)
        w = s->w13_x[set] ? (struct mok_weights){.w13 = s->w13_x[set], .w2 = s->w2_x[set]}
                          : (struct mok_weights){.w13_e4m3 = p->mx.w13[set], .w13_mx = p->mx.w13_tiles[set],
                                                 .w2_e4m3 = p->mx.w2[set], .w2_mx = p->mx.w2_tiles[set]};
    if (p->shared)
        w.shared_w13 = p->shared_w13[set], w.shared_w2 = p->shared_w2[set];
    return w;
}

/* A libmok call's status as a bench failure: the message it wrote, behind its status. */
static int lib_fail(int rc, const char *call, char *err, int err_len)
{
    if (rc == MOK_OK)
        return 0;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", err);
    snprintf(err, (size_t)err_len, "%s: %s: %s", call, mok_status_string(rc), msg);
    return -1;
}

/* The forward in one phase: route, kernel, sum. */
static int forward_all(struct mega_state *s, int set, uint16_t *y, cudaStream_t st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    struct mok_weights w = set_weights(s, set);
    if (lib_fail(mok_route(s->ws, set, p->tokens, p->ids, p->w, st, err, err_len), "mok_route", err, err_len) ||
        lib_fail(mok_forward_kernel(s->ws, &w, MOK_VARIANT_FULL, st, err, err_len), "mok_forward_kernel", err,
                 err_len))
        return -1;
    return lib_fail(mok_forward_sum(s->ws, y, st, err, err_len), "mok_forward_sum", err, err_len);
}

/* The training passes' phases: fwd_bwd the forward (route, kernel, sum), the backward kernel, the backward sum;
 * bwd the last two (on the forward setup ran). */
static int train_phase(struct mega_state *s, int phase, int set, cudaStream_t st, char *err, int err_len)
{
    struct mok_problem *p = s->p;
    if (phase == 0)
        return p->spec.pass == MOK_PASS_FWD_BWD ? forward_all(s, set, s->y, st, err, err_len) : 0;
    if (phase == 1) {
        struct mok_weights w = set_weights(s, set);
        return lib_fail(mok_backward_kernel(s->ws, &w, &s->grads, MOK_VARIANT_FULL, st, err, err_len),
                        "mok_backward_kernel", err, err_len);
    }
    return lib_fail(mok_backward_sum(s->ws, s->dx, s->d_router, st, err, err_len), "mok_backward_sum", err, err_len);
}

/* The phases (phased_run's phase_fn): route, kernel, sum, each one libmok call (the training passes: train_phase). */
static int mega_phase(void *ctx, int phase, int set, uint16_t *y, cudaStream_t st, char *err, int err_len)
{
    struct mega_state *s = ctx;
    struct mok_problem *p = s->p;
    if (s->desc.train)
        return train_phase(s, phase, set, st, err, err_len);
    if (phase == 0)
        return lib_fail(mok_route(s->ws, set, p->tokens, p->ids, p->w, st, err, err_len), "mok_route", err, err_len);
    if (phase == 1) {
        struct mok_weights w = set_weights(s, set);
        return lib_fail(mok_forward_kernel(s->ws, &w, MOK_VARIANT_FULL, st, err, err_len), "mok_forward_kernel",
                        err, err_len);
    }
    return lib_fail(mok_forward_sum(s->ws, y, st, err, err_len), "mok_forward_sum", err, err_len);
}

static int mega_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *mp, int max_slots,
                      char *err, int err_len)
{
    struct mega_state *s = calloc(1, sizeof(*s));
    if (!s)
        FAIL("out of host memory");
    *state = s;
    s->p = p;
    s->cl = cl;
    s->breakdown = mok_params_megakernel(mp).breakdown == 1;
    s->desc = mega_desc(p, mp, (int)mok_allreduce_max_ll(p->tokens));
    if (lib_fail(mok_workspace_create(cl->nccl, &s->desc, cl->stream, &s->ws, err, err_len), "mok_workspace_create",
                 err, err_len))
        return -1;
    if (s->desc.dtype == MOK_LAYER_MXFP8 && s->desc.mx_scheme == 3) /* the problem's quantizer, its values in bf16 */
        for (int set = 0; set < p->sets; set++) {
            const size_t el = (size_t)p->local_experts, H = (size_t)p->hidden, I = (size_t)p->inter;
            MOK_CHECK(cuda, cudaMalloc((void **)&s->w13_x[set], el * 2 * I * H * 2), return -1);
            MOK_CHECK(cuda, cudaMalloc((void **)&s->w2_x[set], el * H * I * 2), return -1);
            if (lib_fail(mok_expand_weights_mxfp8(p->w13[set], (int)el, 2 * p->inter, p->hidden, s->w13_x[set],
                                                  cl->stream, err, err_len),
                         "mok_expand_weights_mxfp8", err, err_len) ||
                lib_fail(mok_expand_weights_mxfp8(p->w2[set], (int)el, p->hidden, p->inter, s->w2_x[set], cl->stream,
                                                  err, err_len),
                         "mok_expand_weights_mxfp8", err, err_len))
                return -1;
        }
    /* the input sets into the workspace's slots (no peer reads them before a forward routes them); dy beside them */
    for (int set = 0; set < p->sets; set++) {
        MOK_CHECK(cuda, cudaMemcpy(mok_workspace_input(s->ws, set), p->x[set], (size_t)p->tokens * p->hidden * 2,
                                   cudaMemcpyDeviceToDevice), return -1);
        if (s->desc.train)
            MOK_CHECK(cuda, cudaMemcpy(mok_workspace_grad_input(s->ws, set), p->lbwd.dy[set],
                                       (size_t)p->tokens * p->hidden * 2, cudaMemcpyDeviceToDevice), return -1);
    }
    if (p->spec.pass == MOK_PASS_BWD) { /* the one saved forward the timed backwards run on */
        MOK_CHECK(cuda, cudaMalloc((void **)&s->y_scratch, (size_t)(p->tokens ? p->tokens : 1) * p->hidden * 2),
                  return -1);
        if (forward_all(s, 0, s->y_scratch, cl->stream, err, err_len))
            return -1;
        MOK_CHECK(cuda, cudaStreamSynchronize(cl->stream), return -1);
    }
    if (phased_run_init(&s->run, mega_phase, s, p->sets, mok_params_megakernel(mp).launch == 1, max_slots, err, err_len))
        return -1;
    struct mok_schedule_view v;
    mok_workspace_schedule(s->ws, &v);
    return sched_check_build(p, s->desc.max_tokens, v.tile_rows, v.chunk_rows, v.capacity, &s->host, err, err_len);
}

/* The training passes' outputs into the state (the phases read them there). */
static int train_outputs(struct mega_state *s, const struct mok_outputs *out, char *err, int err_len)
{
    s->dx = mok_output_bf16(out, "dx");
    s->d_router = mok_output_f32(out, "d_router");
    const struct mok_output *o13 = mok_output_find(out, "dw13"), *o2 = mok_output_find(out, "dw2");
    if (!s->dx || !s->d_router || !o13 || !o2 || o13->type != o2->type)
        FAIL("the backward needs outputs dx (bf16), d_router (fp32), dw13 and dw2 (both fp32 or both bf16)");
    bool b16 = o13->type == MOK_OUT_BF16;
    s->grads = (struct mok_grads){.dw13_f32 = b16 ? NULL : o13->data, .dw2_f32 = b16 ? NULL : o2->data,
                                  .dw13_bf16 = b16 ? o13->data : NULL, .dw2_bf16 = b16 ? o2->data : NULL};
    if (s->p->shared) { /* the outputs hold the local experts' gradients, then the shared MLP's (problem.h) */
        const struct mok_problem *p = s->p;
        size_t el = (size_t)(p->experts / s->cl->nranks), e13 = el * 2 * p->inter * p->hidden,
               e2 = el * p->hidden * p->inter, size = b16 ? 2 : 4;
        s->grads.shared_dw13 = (char *)o13->data + e13 * size;
        s->grads.shared_dw2 = (char *)o2->data + e2 * size;
    }
    if (s->p->spec.pass == MOK_PASS_FWD_BWD) {
        s->y = mok_impl_forward_y(out, err, err_len);
        if (!s->y)
            return -1;
    }
    return 0;
}

/* impl.h's keep_exports: FP8 layer mode exports h for the check, which GEMM2 reads only quantized (the wide
 * fp8_block tiles, mx_scheme 1 and 3): the check runs store it, warm-up, the timed runs and the breakdown's variants
 * leave that store out, as a trained layer would (libmok's mok_workspace_store_h). */
static int mega_keep_exports(void *state, bool on, char *err, int err_len)
{
    struct mega_state *s = state;
    return mok_output_find(&s->p->out, "h") ? lib_fail(mok_workspace_store_h(s->ws, on, s->cl->stream, err, err_len),
                                                       "mok_workspace_store_h", err, err_len)
                                            : 0;
}

static int mega_run(void *state, int set, const struct mok_outputs *out, int slot, char *err, int err_len)
{
    struct mega_state *s = state;
    if (s->desc.train) /* dx keys the captured graphs: the outputs' pointers do not change between runs */
        return train_outputs(s, out, err, err_len) ? -1 : phased_run(&s->run, set, s->dx, slot, s->cl->stream, err,
                                                                       err_len);
    uint16_t *y = mok_impl_forward_y(out, err, err_len);
    return y ? phased_run(&s->run, set, y, slot, s->cl->stream, err, err_len) : -1;
}

/* Layer mode's FP8 check reads h per route (src/problem_fp8_layer.c): libmok brings it from the experts' ranks. */
static int mega_export(void *state, const struct mok_outputs *out, char *err, int err_len)
{
    struct mega_state *s = state;
    if (!mok_output_find(out, "h"))
        return 0;
    uint16_t *h = mok_output_bf16(out, "h");
    if (!h)
        FAIL("output h: bf16 expected");
    return lib_fail(mok_workspace_export_h(s->ws, h, s->cl->stream, err, err_len), "mok_workspace_export_h", err,
                    err_len);
}

static void mega_phase_ms(void *state, int slot, double out[MOK_NPHASES])
{
    phased_run_ms(&((struct mega_state *)state)->run, slot, true, out);
}

/* One iteration of a breakdown variant on input set 0: the kernel alone (compute only), or route, kernel and sum
 * (comm only: the whole communication path, flags and epochs advancing as in a forward). */
static int variant_once(struct mega_state *s, enum mok_variant variant, cudaStream_t st, char *err, int err_len)
{
    struct mok_weights w = set_weights(s, 0);
    int comm = variant == MOK_VARIANT_COMM_ONLY;
    if (s->desc.train) { /* the backward's: compute alone on the last full one's dy rows; or its communication
                          * path (dispatch, sends, the owner's sum) with nothing computed */
        if (lib_fail(mok_backward_kernel(s->ws, &w, &s->grads, variant, st, err, err_len), "mok_backward_kernel",
                     err, err_len))
            return -1;
        return comm ? lib_fail(mok_backward_sum(s->ws, s->dx, s->d_router, st, err, err_len), "mok_backward_sum",
                               err, err_len)
                    : 0;
    }
    if (comm && mega_phase(s, 0, 0, s->p->y, st, err, err_len))
        return -1;
    if (lib_fail(mok_forward_kernel(s->ws, &w, variant, st, err, err_len), "mok_forward_kernel", err, err_len))
        return -1;
    return comm ? mega_phase(s, 2, 0, s->p->y, st, err, err_len) : 0;
}

struct variant_run {
    struct mega_state *s;
    enum mok_variant variant;
};

static int variant_run_once(void *ctx, int iter, char *err, int err_len)
{
    struct variant_run *r = ctx;
    (void)iter;
    return variant_once(r->s, r->variant, r->s->cl->stream, err, err_len);
}

/* The breakdown: the same kernel with communication skipped (compute alone, on the same compute blocks, over the
 * rows the last full forward left in the slots) and with compute skipped (publish + schedule, dispatch, combine
 * sends and the owner's sum, GEMM2 counted done at once), timed as the baselines' parts alone are (timing.h: the
 * median of per-iteration maxima over ranks); y is garbage afterwards (the driver's checks ran before). */
static int mega_variant_ms(struct mega_state *s, enum mok_variant variant, const struct mok_alone_timing *t,
                           double *out_ms, char *err, int err_len)
{
    struct variant_run r = {s, variant};
    return mok_time_alone(s->cl->stream, t, variant_run_once, &r, out_ms, err, err_len);
}

/* The schedule of the last full forward against the host's (an overflow fails it too), and the report's bytes and
 * note. */
static int mega_check_schedule(struct mega_state *s, struct mok_row *row, char *err, int err_len)
{
    char msg[400] = "", overflow[512] = "";
    int rc = mok_workspace_check(s->ws, s->cl->stream, msg, sizeof msg);
    if (rc != MOK_OK && rc != MOK_ERR_OVERFLOW)
        FAIL("mok_workspace_check: %s: %s", mok_status_string(rc), msg);
    if (rc == MOK_ERR_OVERFLOW)
        snprintf(overflow, sizeof overflow, "schedule overflow: %s", msg);
    struct mok_schedule_view v;
    mok_workspace_schedule(s->ws, &v);
    if (s->desc.gather) /* GEMM1 read the landed rows: nothing counted them in the ready counters */
        v.ready = NULL;
    if (sched_check_compare(&v, &s->host, s->p->rank, rc == MOK_ERR_OVERFLOW ? overflow : NULL, err, err_len))
        return -1;
    sched_check_report(row, s->p, &s->host, v.capacity, s->desc.combine_per_rank, s->desc.comm_sms);
    if (s->desc.dtype != MOK_LAYER_BF16) /* counted as bf16 rows; the push sends wire rows (the combine stays bf16) */
        row->dispatch_bytes *= (double)(s->p->hidden + s->p->hidden / 32) / (2.0 * s->p->hidden);
    return 0;
}

/* The training passes' note: the phases, what the backward keeps from the forward (act=save: the routed rows' x and
 * gate/up, bf16, and the shared experts' gate/up; act=recompute: the routing only) and, under recompute, the FLOPs
 * executed against the useful ones the row's TFLOP/s counts (GEMM1 runs twice). */
static void train_note(const struct mega_state *s, char *note, size_t len)
{
    const struct mok_problem *p = s->p;
    double rows = (double)p->tokens * p->topk, H = p->hidden, I = p->inter, SI = (double)p->shared * p->inter;
    double saved = rows * (H + 2 * I) * 2 + (double)p->tokens * 2 * SI * 2;
    double gemm1 = 2.0 * (rows * I + (double)p->tokens * SI) * 2 * H; /* the routed and shared GEMM1 FLOPs */
    /* useful: the forward's 3 GEMMs per route (and per shared token), the backward's twice that (DESIGN.md) */
    double fwd = 2.0 * (rows * I + (double)p->tokens * SI) * 3 * H;
    double useful = (p->spec.pass == MOK_PASS_FWD_BWD ? 3 : 2) * fwd;
    size_t n = strlen(note);
    snprintf(note + n, len - n, " fused backward (phases: %s | backward kernel | backward sum); act=%s: ",
             p->spec.pass == MOK_PASS_FWD_BWD ? "forward" : "-", s->desc.act_recompute ? "recompute" : "save");
    n = strlen(note);
    if (s->desc.act_recompute)
        snprintf(note + n, len - n, "saved activations: routing only; executed FLOPs %.4g = useful %.4g x %.3f "
                 "(GEMM1 recomputed)", useful + gemm1, useful, (useful + gemm1) / useful);
    else
        snprintf(note + n, len - n, "saved activations %.2f GB per rank (x rows, gate and up)", saved / 1e9);
    n = strlen(note);
    snprintf(note + n, len - n, "; workspace %.2f GB per rank", (double)mok_workspace_bytes(s->ws) / 1e9);
}

/* What the forward kernel ran that its params do not say outright (the training passes have train_note): the FP8
 * paths, gather's resolved value. */
static const char *path_note(const struct mega_state *s)
{
    if (s->desc.dtype == MOK_LAYER_BF16)
        return s->desc.gather ? ", GEMM1 read the rows where they landed (gather 1)"
                              : ", rows copied into expert slots for GEMM1 (gather 0)";
    return s->desc.dtype == MOK_LAYER_FP8_BLOCK && s->desc.fp8_tile_n == 256
               ? ", fp8_block: rows quantized in the push, h in GEMM1's epilogue from its staging, 128 x 256 tiles"
           : s->desc.dtype == MOK_LAYER_FP8_BLOCK ? ", fp8_block: rows quantized in the push, h in GEMM1's epilogue, "
                                                  "128 x 128 tiles"
           : s->desc.dtype == MOK_LAYER_MXFP8 && s->desc.mx_scheme
               ? ", mxfp8: rows quantized in the push, h in GEMM1's epilogue, e4m3 expanded to bf16 in shared memory, "
                 "bf16 128 x 256 tiles"
           : s->desc.dtype == MOK_LAYER_MXFP8 ? ", mxfp8: rows quantized in the push, h in GEMM1's epilogue, "
                                                "128 x 128 tiles promoted per 32 K"
                                              : "";
}

static int mega_extras(void *state, struct mok_row *row, const struct mok_alone_timing *t, char *err, int err_len)
{
    struct mega_state *s = state;
    if (mega_check_schedule(s, row, err, err_len)) /* before the variants: it reads the last full forward's state */
        return -1;
    if (!s->breakdown) {
        if (s->desc.train)
            train_note(s, row->note, sizeof row->note);
        else
            snprintf(row->note + strlen(row->note), sizeof(row->note) - strlen(row->note),
                     " fused (phases: schedule | kernel | owner's sum)%s", path_note(s));
        return 0;
    }
    double compute_ms = 0, comm_ms = 0;
    const struct mok_alone_timing n = {t->iters < 3 ? 3 : t->iters, t->warmup_ms};
    if (s->desc.train) { /* the backward's kernels with communication skipped, and its communication alone */
        if (mega_variant_ms(s, MOK_VARIANT_COMPUTE_ONLY, &n, &compute_ms, err, err_len) ||
            mega_variant_ms(s, MOK_VARIANT_COMM_ONLY, &n, &comm_ms, err, err_len))
            return -1;
        row->gemm_alone_us = compute_ms * 1e3;
        row->dispatch_alone_us = comm_ms * 1e3;
        train_note(s, row->note, sizeof row->note);
        snprintf(row->note + strlen(row->note), sizeof(row->note) - strlen(row->note),
                 "; backward kernel%s with communication skipped %.0f us, communication alone (dy dispatch, dx and "
                 "d_router sends, the owner's sum) %.0f us", s->desc.act_recompute ? "s (recompute and backward)" : "",
                 row->gemm_alone_us, row->dispatch_alone_us);
        if (s->p->spec.pass == MOK_PASS_BWD) {
            double exposed = row->time_med_us - row->gemm_alone_us;
            snprintf(row->note + strlen(row->note), sizeof(row->note) - strlen(row->note),
                     ", exposed %.0f us (%.0f%%)", exposed,
                     row->time_med_us > 0 ? 100.0 * exposed / row->time_med_us : 0.0);
        }
        return 0;
    }
    if (mega_variant_ms(s, MOK_VARIANT_COMPUTE_ONLY, &n, &compute_ms, err, err_len) ||
        mega_variant_ms(s, MOK_VARIANT_COMM_ONLY, &n, &comm_ms, err, err_len))
        return -1;
    row->gemm_alone_us = compute_ms * 1e3;   /* the kernel with communication skipped */
    row->dispatch_alone_us = comm_ms * 1e3;  /* the forward with compute skipped */
    double exposed = row->time_med_us - row->gemm_alone_us;
    snprintf(row->note + strlen(row->note), sizeof(row->note) - strlen(row->note),
             " fused (phases: schedule | kernel | owner's sum)%s; compute alone %.0f us, comm alone %.0f us, exposed "
             "comm %.0f us (%.0f%%)", path_note(s),
             row->gemm_alone_us, row->dispatch_alone_us, exposed,
             row->time_med_us > 0 ? 100.0 * exposed / row->time_med_us : 0.0);
    return 0;
}

static void mega_teardown(void *state)
{
    struct mega_state *s = state;
    if (!s)
        return;
    cudaDeviceSynchronize();
    phased_run_destroy(&s->run);
    mok_workspace_destroy(s->ws); /* collective: waits for every rank (peers may still read this window) */
    cudaFree(s->y_scratch);
    for (int set = 0; set < MOK_MAX_SETS; set++) {
        cudaFree(s->w13_x[set]);
        cudaFree(s->w2_x[set]);
    }
    mok_schedule_free(&s->host);
    free(s);
}

const struct mok_impl_ops mok_impl_megakernel = {
    .name = "megakernel",
    .supports = mega_supports,
    .setup = mega_setup,
    .run = mega_run,
    .export_outputs = mega_export,
    .keep_exports = mega_keep_exports,
    .phase_ms = mega_phase_ms,
    .extras = mega_extras,
    .teardown = mega_teardown,
};
