/* bench: runs every candidate of every problem and reports (see bench.h). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "impl.h"
#include "mok_kernels.h"
#include "sweep.h"
#include "timing.h"

#define ERR_LEN 512

struct layer_ctx {
    const struct mok_impl_ops *ops;
    void *state;
    struct mok_problem *p;
};

static int layer_call(void *vctx, int iter, int slot, char *err, int err_len)
{
    struct layer_ctx *ctx = vctx;
    return ctx->ops->run(ctx->state, iter % ctx->p->sets, ctx->p->y, slot, err, err_len);
}

/* A failure inside a collective phase can leave peers blocked in NCCL; abort the job with the reason rather
 * than hang. */
static void die(const struct mok_cluster *cl, const char *what, const char *err)
{
    fprintf(stderr, "mok-bench: rank %d: %s: %s\n", cl->rank, what, err);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void fill_problem_fields(struct mok_row *row, const struct mok_problem_spec *spec)
{
    const struct mok_model *m = &spec->model;
    row->problem = spec->index;
    snprintf(row->model, sizeof(row->model), "%s", m->name);
    row->hidden = m->hidden;
    row->intermediate = m->intermediate;
    row->experts = m->experts;
    row->topk = m->topk;
    row->shared_experts = m->shared_experts;
    row->tokens_per_rank = spec->tokens_per_rank;
    mok_routing_label(&spec->routing, row->routing, sizeof(row->routing));
    snprintf(row->dtype, sizeof(row->dtype), "%s", mok_dtype_name(spec->dtype));
    snprintf(row->pass, sizeof(row->pass), "%s", mok_pass_name(spec->pass));
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
    free(ph);
    free(col);
}

/* One candidate, start to end. Returns the row's disposition class: 0 fine, 1 a failure to report. */
static int run_candidate(const struct mok_config *cfg, struct mok_cluster *cl, struct mok_problem *p,
                         struct mok_checker *checker, const struct mok_impl_ops *ops, const int *params,
                         struct mok_row *row)
{
    char err[ERR_LEN] = "", why[256] = "";
    int ok = ops->supports(p, cl, params, why, sizeof(why));
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
        die(cl, "setup", err);

    /* correctness first: poisoned output, one run, compare */
    int verdict = 1;
    if (mok_poison_bf16(p->y, (size_t)p->tokens * p->hidden, (mok_stream_t)cl->stream) ||
        ops->run(state, 0, p->y, -1, err, sizeof(err)) || cudaStreamSynchronize(cl->stream) != cudaSuccess)
        die(cl, "check run", err[0] ? err : cudaGetErrorString(cudaGetLastError()));
    if (cfg->check_enabled) {
        verdict = mok_check_output(checker, p, cfg->rtol, cl->stream, row, err, sizeof(err));
        if (verdict < 0)
            die(cl, "check", err);
    }

    struct layer_ctx ctx = {ops, state, p};
    double *iter_ms = calloc((size_t)cfg->iters, sizeof(double));
    struct mok_stats st;
    if (!iter_ms)
        die(cl, "timing", "out of host memory");
    if (mok_poison_bf16(p->y, (size_t)p->tokens * p->hidden, (mok_stream_t)cl->stream) ||
        mok_time_layer(cl->stream, cfg->warmup, cfg->iters, layer_call, &ctx, iter_ms, &st, err, sizeof(err)))
        die(cl, "timed run", err);
    free(iter_ms);

    /* the timed iterations wrote y too: check the last one, so a race that only shows back to back is caught */
    if (cfg->check_enabled && verdict == 1) {
        struct mok_row again = *row;
        int v2 = mok_check_output(checker, p, cfg->rtol, cl->stream, &again, err, sizeof(err));
        if (v2 < 0)
            die(cl, "check", err);
        if (v2 == 0) {
            *row = again;
            verdict = 0;
            snprintf(row->note, sizeof(row->note), "first run passed, last timed run failed the check");
        }
    }
    row->iters = st.n;
    row->time_med_us = st.median * 1e3;
    row->time_p10_us = st.p10 * 1e3;
    row->time_p90_us = st.p90 * 1e3;
    collect_phases(ops, state, slots, row);
    if (ops->extras && ops->extras(state, row, cfg->iters, err, sizeof(err)))
        die(cl, "extras", err);
    ops->teardown(state);

    row->flops = p->flops;
    row->tflops = p->flops > 0 ? p->flops / (row->time_med_us * 1e-6) / 1e12 : NAN; /* comm mode: no FLOPs */
    row->comm_gbps = (row->dispatch_bytes + row->combine_bytes) / (row->time_med_us * 1e-6) / 1e9;
    row->dispatch_gbps = row->dispatch_bytes / (row->dispatch_us * 1e-6) / 1e9;
    /* every rank sends at once, so the ceiling is the both-directions peer bandwidth --probe measured */
    if (cl->env.probe_bidir_gbps > 0)
        row->peer_frac = row->comm_gbps / cl->env.probe_bidir_gbps;
    const char *disp = !cfg->check_enabled ? MOK_DISPOSITION_NOT_VERIFIED
                       : verdict == 1      ? MOK_DISPOSITION_PASSED
                                           : MOK_DISPOSITION_INCORRECT;
    snprintf(row->disposition, sizeof(row->disposition), "%s", disp);
    return verdict == 1 ? 0 : 1;
}

int mok_bench_run(const struct mok_config *cfg, const char *config_json, struct mok_cluster *cl, int argc,
                  char **argv)
{
    bool root = cl->rank == 0;
    /* speedups are over the NCCL baseline of the mode: the whole layer, or its dispatch + combine alone */
    const char *baseline = cfg->mode == MOK_MODE_COMM ? "nccl-p2p" : "nccl";
    int nproblems = mok_config_problem_count(cfg);
    long long total = mok_sweep_total(cfg);
    struct mok_row *rows = calloc((size_t)(total > 0 ? total : 1), sizeof(*rows));
    if (!rows)
        die(cl, "start", "out of host memory");
    int nrows = 0, failures = 0;
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, cl->device);
    struct mok_checker checker;
    if (mok_checker_init(&checker))
        die(cl, "start", "cannot allocate the checker");
    if (root) {
        mok_report_print_header(stdout, &cl->env, cfg->source);
        mok_report_print_table_head(stdout);
    }
    for (int pi = 0; pi < nproblems; pi++) {
        struct mok_problem_spec spec;
        mok_config_problem_at(cfg, pi, &spec);
        struct mok_problem prob;
        char err[ERR_LEN];
        int sets = mok_problem_sets_for(&spec, cl->nranks, prop.l2CacheSize);
        if (mok_problem_create(&prob, &spec, cl, sets, cfg->check_enabled, err, sizeof(err)))
            die(cl, "problem setup", err);
        if (root)
            printf("# problem %d: %d input sets rotated (L2 %d MiB); reference %.1f ms\n", pi, prob.sets,
                   prop.l2CacheSize >> 20, prob.reference_ms);
        int first_row = nrows;
        double best_nccl_us = NAN;
        for (int ii = 0; ii < cfg->nimpls; ii++) {
            const struct mok_impl_desc *desc = mok_impl_desc_find(cfg->impls[ii]);
            const struct mok_impl_ops *ops = mok_impl_find(cfg->impls[ii]);
            if (!desc || !ops)
                die(cl, "registry", cfg->impls[ii]);
            int ncand = mok_sweep_count(desc, &cfg->tune[ii]);
            for (int c = 0; c < ncand; c++) {
                int params[MOK_MAX_PARAMS] = {0};
                mok_sweep_at(desc, &cfg->tune[ii], c, params);
                struct mok_row *row = &rows[nrows++];
                mok_row_init(row);
                fill_problem_fields(row, &spec);
                snprintf(row->impl, sizeof(row->impl), "%s", desc->name);
                mok_impl_params_label(desc, params, row->params, sizeof(row->params));
                failures += run_candidate(cfg, cl, &prob, &checker, ops, params, row);
                bool counted = !strcmp(row->disposition, MOK_DISPOSITION_PASSED) ||
                               !strcmp(row->disposition, MOK_DISPOSITION_NOT_VERIFIED);
                if (!strcmp(desc->name, baseline) && counted && !(row->time_med_us >= best_nccl_us))
                    best_nccl_us = row->time_med_us;
                row->speedup_vs_nccl = best_nccl_us / row->time_med_us;
                if (root)
                    mok_report_print_row(stdout, row);
            }
        }
        /* final speedups against the best nccl candidate of this problem, measured in this run */
        for (int r = first_row; r < nrows; r++)
            rows[r].speedup_vs_nccl = best_nccl_us / rows[r].time_med_us;
        mok_problem_destroy(&prob);
    }
    mok_checker_destroy(&checker);

    int rc = failures ? 1 : 0;
    if (root) {
        char csv[MOK_PATH_LEN + 80], json[MOK_PATH_LEN + 80], err[ERR_LEN];
        if (mok_report_choose_paths(cfg->output_dir, cfg->output_name, csv, json, (int)sizeof(csv), err,
                                    sizeof(err)) ||
            mok_report_write_csv(csv, &cl->env, rows, nrows, err, sizeof(err)) ||
            mok_report_write_json(json, argc, argv, config_json, &cl->env, rows, nrows, NULL, err, sizeof(err))) {
            fprintf(stderr, "mok-bench: report: %s\n", err);
            rc = 1;
        } else {
            printf("# reports: %s %s\n", csv, json);
        }
        printf("# %s: %d candidates, %d failed or incorrect\n", failures ? "FAILED" : "OK", nrows, failures);
    }
    free(rows);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}
