/* candidate: one candidate of one problem, start to end (see candidate.h). */
#include "candidate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "mok_kernels.h"
#include "output_check.h"
#include "timing.h"

#define ERR_LEN 512

struct layer_ctx {
    const struct mok_impl_ops *ops;
    void *state;
    struct mok_problem *p;
};

double mok_gemm_rate_for(const struct mok_env *env, enum mok_dtype dtype)
{
    /* mxfp8: the same FP8 tensor-core ceiling (no Hopper library runs MX GEMMs to measure one of its own) */
    return dtype == MOK_DTYPE_FP8_BLOCK || dtype == MOK_DTYPE_MXFP8 ? env->probe_gemm_fp8_tflops
                                                                   : env->probe_gemm_tflops;
}

static int layer_call(void *vctx, int iter, int slot, char *err, int err_len)
{
    struct layer_ctx *ctx = vctx;
    return ctx->ops->run(ctx->state, iter % ctx->p->sets, &ctx->p->out, slot, err, err_len);
}

static double median_of(double *v, int n)
{
    struct mok_stats st;
    mok_stats_compute(v, n, &st);
    return st.median;
}

/* Phase medians of the per-iteration max over ranks. */
static void collect_phases(const struct mok_impl_ops *ops, void *state, int slots, struct mok_row *row)
{
    if (!ops->phase_ms || slots <= 0)
        return;
    double *ph = malloc(sizeof(double) * (size_t)slots * MOK_NPHASES);
    double *col = malloc(sizeof(double) * (size_t)slots);
    if (!ph || !col) {
        free(ph);
        free(col);
        return;
    }
    for (size_t i = 0; i < (size_t)slots * MOK_NPHASES; i++)
        ph[i] = NAN;
    for (int s = 0; s < slots; s++)
        ops->phase_ms(state, s, ph + (size_t)s * MOK_NPHASES);
    MPI_Allreduce(MPI_IN_PLACE, ph, slots * MOK_NPHASES, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    double med[MOK_NPHASES];
    for (int k = 0; k < MOK_NPHASES; k++) {
        for (int s = 0; s < slots; s++)
            col[s] = ph[(size_t)s * MOK_NPHASES + k];
        med[k] = median_of(col, slots);
    }
    row->dispatch_us = med[MOK_PHASE_DISPATCH] * 1e3;
    row->gemm_us = med[MOK_PHASE_GEMM] * 1e3;
    row->combine_us = med[MOK_PHASE_COMBINE] * 1e3;
    row->gemm1_us = med[MOK_PHASE_GEMM1] * 1e3;
    row->gemm2_us = med[MOK_PHASE_GEMM2] * 1e3;
    free(ph);
    free(col);
}

/* Diagnostics: with MOK_ITER_LOG=file, rank 0 appends every timed iteration's time (max over ranks, ms) of each
 * candidate, one line each, to see a distribution the report's median and p10/p90 only summarize. */
static void log_iterations(const struct mok_cluster *cl, const struct mok_row *row, const double *iter_ms, int iters)
{
    const char *path = getenv("MOK_ITER_LOG");
    if (!path || !path[0] || cl->rank != 0)
        return;
    FILE *f = fopen(path, "a");
    if (!f) {
        fprintf(stderr, "mok-bench: MOK_ITER_LOG: cannot open %s\n", path);
        return;
    }
    fprintf(f, "%s %d %s %s %s:", row->model, row->tokens_per_rank, row->routing, row->impl, row->params);
    for (int i = 0; i < iters; i++)
        fprintf(f, " %.4f", iter_ms[i]);
    fprintf(f, "\n");
    fclose(f);
}

/* NaN into every output, so an element an implementation does not write fails its check. */
static int poison_outputs(const struct mok_problem *p, cudaStream_t st)
{
    for (int i = 0; i < p->out.n; i++) {
        const struct mok_output *o = &p->out.o[i];
        int rc = o->init_id && o->type == MOK_OUT_F32
                     ? mok_fill_f32(o->data, o->elems, o->init_seed, o->init_id, o->init_scale, (mok_stream_t)st)
                 : o->type == MOK_OUT_F32 ? mok_poison_f32(o->data, o->elems, (mok_stream_t)st)
                                          : mok_poison_bf16(o->data, o->elems, (mok_stream_t)st);
        if (rc)
            return rc;
    }
    return 0;
}

/* The stream's work done: 0, or -1 with "what: the CUDA error" in err. */
static int finish(const struct mok_cluster *cl, const char *what, char *err, int err_len)
{
    cudaError_t e = cudaStreamSynchronize(cl->stream);
    if (e != cudaSuccess) {
        snprintf(err, (size_t)err_len, "%s: %s", what, cudaGetErrorString(e));
        return -1;
    }
    return 0;
}

/* The outputs an implementation keeps in its own buffers until asked (impl.h), written and waited for. */
static int export_outputs(const struct mok_impl_ops *ops, void *state, const struct mok_problem *p,
                          const struct mok_cluster *cl, char *err, int err_len)
{
    if (!ops->export_outputs)
        return 0;
    if (ops->export_outputs(state, &p->out, err, err_len))
        return -1;
    return finish(cl, "exporting the outputs", err, err_len);
}

/* impl.h's keep_exports, where the implementation has it. */
static int keep_exports(const struct mok_impl_ops *ops, void *state, bool on, char *err, int err_len)
{
    return ops->keep_exports ? ops->keep_exports(state, on, err, err_len) : 0;
}

/* The check after the timed iterations, for an implementation whose timed runs leave out what its export brings
 * (impl.h keep_exports): two forwards with it on, back to back on the stream (poisoned between), so that the checked
 * one still follows another as every timed one did. */
static int check_forwards(const struct mok_impl_ops *ops, void *state, const struct mok_problem *p,
                          const struct mok_cluster *cl, char *err, int err_len)
{
    if (keep_exports(ops, state, true, err, err_len) || ops->run(state, 0, &p->out, -1, err, err_len) ||
        poison_outputs(p, cl->stream) || ops->run(state, 0, &p->out, -1, err, err_len))
        return -1;
    return finish(cl, "the forwards after the timed ones", err, err_len);
}

int mok_candidate_run(const struct mok_config *cfg, struct mok_cluster *cl, struct mok_problem *p,
                      struct mok_checker *checker, const struct mok_impl_ops *ops, const int *params,
                      struct mok_row *row)
{
    char err[ERR_LEN] = "", why[256] = "";
    /* what needs no GPU first (the dry-run showed the same verdict), then what the implementation asks of it */
    int ok = mok_impl_host_supports(mok_impl_desc_find(ops->name), &p->spec, cl->nranks, p->sets, params, why,
                                    sizeof(why)) &&
             ops->supports(p, cl, params, why, sizeof(why));
    int all_ok = ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!all_ok) {
        snprintf(row->disposition, sizeof(row->disposition), "%s", MOK_DISPOSITION_NOT_SUPPORTED);
        snprintf(row->note, sizeof(row->note), "%s", why[0] ? why : "not supported on another rank");
        return 0;
    }
    void *state = NULL;
    int slots = cfg->iters < 256 ? cfg->iters : 256;
    if (ops->setup(&state, p, cl, params, slots, err, sizeof(err)))
        mok_bench_abort(cl, "setup", err);
    /* Setups fill their buffers with plain cudaMemcpy / cudaMemset, which run on the legacy stream and may return
     * before they complete; the runs go on non-blocking streams that do not wait for it. Everything set up is
     * done before the first run. */
    cudaError_t setup_done = cudaDeviceSynchronize();
    if (setup_done != cudaSuccess)
        mok_bench_abort(cl, "setup", cudaGetErrorString(setup_done));

    /* correctness first: poisoned output, one run, compare */
    int verdict = 1;
    if (poison_outputs(p, cl->stream) || ops->run(state, 0, &p->out, -1, err, sizeof(err)) ||
        cudaStreamSynchronize(cl->stream) != cudaSuccess)
        mok_bench_abort(cl, "check run", err[0] ? err : cudaGetErrorString(cudaGetLastError()));
    if (cfg->check_enabled) {
        if (export_outputs(ops, state, p, cl, err, sizeof(err)) ||
            mok_problem_refresh_references(p, cl->stream, err, sizeof(err)))
            mok_bench_abort(cl, "check", err);
        verdict = mok_check_outputs(checker, p, cfg->rtol, false, cl->stream, row, err, sizeof(err));
        if (verdict < 0)
            mok_bench_abort(cl, "check", err);
    }

    struct layer_ctx ctx = {ops, state, p};
    double *iter_ms = NULL;
    struct mok_stats st;
    struct mok_power_window pw;
    if (keep_exports(ops, state, false, err, sizeof(err)) || poison_outputs(p, cl->stream) ||
        mok_time_layer(cl->stream, cfg->warmup, cfg->warmup_ms, cfg->iters, cfg->timed_ms, layer_call, &ctx, &iter_ms,
                       &st, &pw, err, sizeof(err)))
        mok_bench_abort(cl, "timed run", err);
    log_iterations(cl, row, iter_ms, st.n);
    free(iter_ms);

    /* the timed iterations wrote the outputs too: check the last one, so a race that only shows back to back is
     * caught (the accumulated ones have added every iteration's gradient: their check is the first run's); where
     * the timed runs leave out what the export brings, the second of two forwards run for it */
    if (cfg->check_enabled && verdict == 1) {
        struct mok_row again = *row;
        if ((ops->keep_exports && check_forwards(ops, state, p, cl, err, sizeof(err))) ||
            export_outputs(ops, state, p, cl, err, sizeof(err)) ||
            keep_exports(ops, state, false, err, sizeof(err)) || /* the extras run as the timed runs did */
            mok_problem_refresh_references(p, cl->stream, err, sizeof(err)))
            mok_bench_abort(cl, "check", err);
        int v2 = mok_check_outputs(checker, p, cfg->rtol, true, cl->stream, &again, err, sizeof(err));
        if (v2 < 0)
            mok_bench_abort(cl, "check", err);
        if (v2 == 0) {
            *row = again;
            verdict = 0;
            snprintf(row->note, sizeof(row->note), "%s", ops->keep_exports
                                                         ? "first run passed, a forward after the timed ones failed"
                                                         : "first run passed, last timed run failed the check");
        }
    }
    row->iters = st.n;
    row->time_med_us = st.median * 1e3;
    row->time_p10_us = st.p10 * 1e3;
    row->time_p90_us = st.p90 * 1e3;
    row->energy_j = pw.energy_j;
    row->power_w = pw.power_w;
    row->power_capped_share = pw.capped_frac;
    collect_phases(ops, state, slots, row);
    /* as many iterations as the layer's (timed_ms), after its warm-up time */
    const struct mok_alone_timing alone = {st.n, cfg->warmup_ms};
    if (ops->extras && ops->extras(state, row, &alone, err, sizeof(err)))
        mok_bench_abort(cl, "extras", err);
    /* where a breakdown timed the compute alone (the megakernel's breakdown=1, the nccl baselines' GEMMs alone):
     * what the communication adds to the layer */
    if (p->spec.mode == MOK_MODE_LAYER)
        row->exposed_comm_us = row->time_med_us - row->gemm_alone_us;
    ops->teardown(state);

    row->flops = p->flops;
    row->tflops = p->flops > 0 ? p->flops / (row->time_med_us * 1e-6) / 1e12 : NAN; /* comm mode: no FLOPs */
    row->comm_gbps = (row->dispatch_bytes + row->combine_bytes) / (row->time_med_us * 1e-6) / 1e9;
    row->dispatch_gbps = row->dispatch_bytes / (row->dispatch_us * 1e-6) / 1e9;
    /* every rank sends at once, so the ceiling is the both-directions peer bandwidth --probe measured */
    if (cl->env.probe_bidir_gbps > 0)
        row->peer_frac = row->comm_gbps / cl->env.probe_bidir_gbps;
    const double rate = mok_gemm_rate_for(&cl->env, p->spec.dtype);
    if (rate > 0)
        row->gemm_frac = row->tflops / rate;
    const char *disp = !cfg->check_enabled ? MOK_DISPOSITION_NOT_VERIFIED
                       : verdict == 1      ? MOK_DISPOSITION_PASSED
                                           : MOK_DISPOSITION_INCORRECT;
    snprintf(row->disposition, sizeof(row->disposition), "%s", disp);
    return verdict == 1 ? 0 : 1;
}
