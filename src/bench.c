/* bench: runs every candidate of every problem and reports (see bench.h). */
#include "bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "candidate.h"
#include "check.h"
#include "impl.h"
#include "journal.h"
#include "output_check.h"
#include "roofline.h"
#include "search.h"
#include "summary.h"
#include "tunedb.h"
#include "sweep.h"

#define ERR_LEN 512

/* The journal rank 0 appends every finished row to (empty until it is open, and on the other ranks): an aborted run
 * names it, so what was measured before the failure is not lost. */
static char journal_path[600];

void mok_bench_abort(const struct mok_cluster *cl, const char *what, const char *err)
{
    fprintf(stderr, "mok-bench: rank %d: %s: %s\n", cl->rank, what, err);
    if (journal_path[0])
        fprintf(stderr, "mok-bench: the rows measured before this are in %s; `mok-bench --resume` with the same config "
                        "reuses them\n", journal_path);
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
    mok_inputs_label(&spec->inputs, row->inputs, sizeof(row->inputs));
    snprintf(row->dtype, sizeof(row->dtype), "%s", mok_dtype_name(spec->dtype));
    snprintf(row->pass, sizeof(row->pass), "%s", mok_pass_name(spec->pass));
    if (mok_pass_has_bwd(spec->pass))
        snprintf(row->wgrad, sizeof(row->wgrad), "%s", mok_wgrad_name(spec->wgrad));
    snprintf(row->mode, sizeof(row->mode), "%s", mok_mode_name(spec->mode));
    row->capacity_factor = spec->capacity_factor;
    row->seed = (double)spec->routing.seed; /* at most 2^53 - 1 (config.c): exact */
}

/* ---- the sweep: rank 0 decides every candidate and broadcasts it; the others follow ----------------------- */

#define MSG_STOP 0
#define MSG_RUN 1

struct bench_state {
    const struct mok_config *cfg;
    const struct mok_bench_opts *opts;
    struct mok_cluster *cl;
    struct mok_checker checker;
    struct mok_row *rows;
    int nrows, cap_rows, failures;
    struct mok_journal journal;
    struct mok_row *resumed;
    int nresumed;
    struct mok_tunedb db;
    long long done, total;
    double t0;
    struct mok_baseline base; /* speedups are over the best baseline candidate so far in the current problem */
    struct mok_roofline roof; /* the current problem's, on this rank (roofline.h) */
    char run_start[24];       /* ISO 8601 UTC, on every row */
    char sets_note[128];      /* the current problem's, where timing.input_sets leaves its inputs in L2's reach */
};

/* One problem x implementation on its way through a search. */
struct impl_ctx {
    struct bench_state *b;
    struct mok_problem *prob;
    const struct mok_impl_desc *desc;
    const struct mok_impl_ops *ops;
    const struct mok_tune *tune;
    const char *note; /* appended to each row's note ("tuned"), or NULL */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* On a terminal, a progress line on stderr (candidates done / planned, elapsed, estimated time left); elsewhere
 * the rows themselves are the one plain line per candidate. */
static void progress(struct bench_state *b)
{
    if (b->cl->rank != 0 || !isatty(2))
        return;
    double el = now_s() - b->t0, left = b->done ? el / b->done * (double)(b->total - b->done) : 0;
    fprintf(stderr, "\r[%lld/%lld candidates] %02d:%02d elapsed, about %02d:%02d left   ", b->done, b->total,
            (int)el / 60, (int)el % 60, (int)left / 60, (int)left % 60);
    fflush(stderr);
}

static int row_result(const struct mok_row *row, double *time_us)
{
    if (!strcmp(row->disposition, MOK_DISPOSITION_NOT_SUPPORTED))
        return MOK_MEASURE_UNSUPPORTED;
    if (strcmp(row->disposition, MOK_DISPOSITION_PASSED) && strcmp(row->disposition, MOK_DISPOSITION_NOT_VERIFIED))
        return MOK_MEASURE_FAILED;
    *time_us = row->time_med_us;
    return MOK_MEASURE_OK;
}

/* The row's speedup over the best baseline candidate measured so far in this problem (final values are set when
 * the problem is done). */
static void live_speedup(struct bench_state *b, struct mok_row *row)
{
    mok_baseline_offer(&b->base, row);
    mok_baseline_apply(&b->base, row);
}

static struct mok_row *new_row(struct bench_state *b)
{
    if (b->nrows == b->cap_rows) {
        int cap = b->cap_rows ? 2 * b->cap_rows : 64;
        struct mok_row *r = realloc(b->rows, sizeof(*r) * (size_t)cap);
        if (!r)
            mok_bench_abort(b->cl, "rows", "out of host memory");
        b->rows = r;
        b->cap_rows = cap;
    }
    return &b->rows[b->nrows++];
}

/* Runs one candidate with parameter values `params` on every rank; rank 0 records, journals and prints it. */
static int measure_params(struct impl_ctx *ic, const int *params, double *time_us)
{
    struct bench_state *b = ic->b;
    struct mok_row *row = new_row(b);
    mok_row_init(row);
    fill_problem_fields(row, &ic->prob->spec);
    snprintf(row->impl, sizeof(row->impl), "%s", ic->desc->name);
    mok_impl_params_label(ic->desc, params, row->params, sizeof(row->params));
    row->warmup = b->cfg->warmup;
    row->warmup_ms = b->cfg->warmup_ms;
    snprintf(row->run_start, sizeof(row->run_start), "%s", b->run_start);
    if (b->cl->rank == 0) {
        for (int i = 0; i < b->nresumed; i++) /* measured before an interruption: reuse it */
            if (mok_row_same_candidate(&b->resumed[i], row)) {
                int problem = row->problem;
                *row = b->resumed[i];
                row->problem = problem;
                live_speedup(b, row);
                mok_report_print_row(stdout, row);
                b->done++;
                progress(b);
                int res = row_result(row, time_us);
                b->failures += res == MOK_MEASURE_FAILED; /* a resumed failure still fails the run */
                return res;
            }
        int msg[1 + MOK_MAX_PARAMS] = {MSG_RUN};
        memcpy(msg + 1, params, sizeof(int) * MOK_MAX_PARAMS);
        MPI_Bcast(msg, 1 + MOK_MAX_PARAMS, MPI_INT, 0, MPI_COMM_WORLD);
    }
    b->failures += mok_candidate_run(b->cfg, b->cl, ic->prob, &b->checker, ic->ops, params, row);
    row->roofline_bytes = b->roof.weight_bytes + b->roof.act_bytes;
    row->roofline_grad_bytes = b->roof.grad_bytes;
    row->roofline_mem_us = b->roof.mem_us;
    row->roofline_gemm_us = b->roof.gemm_us;
    row->roofline_us = b->roof.bound_us;
    row->time_over_roofline = row->time_med_us / row->roofline_us;
    if (ic->note) { /* appended: the implementation's own note (capacity, stages...) may already be there */
        size_t used = strlen(row->note);
        snprintf(row->note + used, sizeof(row->note) - used, "%s%s", used ? "; " : "", ic->note);
    }
    if (b->sets_note[0] && strcmp(row->disposition, MOK_DISPOSITION_NOT_SUPPORTED) != 0)
        mok_row_note_prepend(row, b->sets_note); /* first: a long note loses its end */
    if (b->cl->rank == 0) {
        char err[ERR_LEN];
        live_speedup(b, row);
        mok_report_print_row(stdout, row);
        if (mok_journal_append(&b->journal, &b->cl->env, row, err, sizeof(err)))
            fprintf(stderr, "mok-bench: %s (rows are still kept in memory)\n", err);
        b->done++;
        progress(b);
    }
    return row_result(row, time_us);
}

static int measure_index(void *vctx, const int *value_index, double *time_us)
{
    struct impl_ctx *ic = vctx;
    int params[MOK_MAX_PARAMS] = {0};
    for (int j = 0; j < ic->desc->nparams; j++)
        params[j] = ic->tune->values[j][value_index[j]];
    return measure_params(ic, params, time_us);
}

/* The tuning-database key of a problem on this machine. */
static void tune_key(const struct bench_state *b, const struct mok_problem_spec *spec, struct mok_tune_key *k)
{
    memset(k, 0, sizeof(*k));
    const struct mok_env *env = &b->cl->env;
    const struct mok_model *m = &spec->model;
    snprintf(k->gpu, sizeof(k->gpu), "%s", env->gpu);
    k->sm_count = env->sm_count, k->ranks = env->nranks, k->lsa_size = env->lsa_size;
    k->hidden = m->hidden, k->intermediate = m->intermediate, k->experts = m->experts, k->topk = m->topk;
    k->shared_experts = m->shared_experts, k->tokens_per_rank = spec->tokens_per_rank;
    mok_routing_label(&spec->routing, k->routing, sizeof(k->routing));
    mok_inputs_label(&spec->inputs, k->inputs, sizeof(k->inputs));
    snprintf(k->dtype, sizeof(k->dtype), "%s", mok_dtype_name(spec->dtype));
    if (mok_pass_has_bwd(spec->pass)) /* the two wgrad modes are two problems to tune */
        snprintf(k->pass, sizeof(k->pass), "%s/%s", mok_pass_name(spec->pass), mok_wgrad_name(spec->wgrad));
    else
        snprintf(k->pass, sizeof(k->pass), "%s", mok_pass_name(spec->pass));
    snprintf(k->mode, sizeof(k->mode), "%s", mok_mode_name(spec->mode));
}

/* Rank 0: the stored best of this problem and implementation, or a search over the config's tune lists; the
 * winner goes back into the database. */
static void decide_impl(struct impl_ctx *ic)
{
    struct bench_state *b = ic->b;
    struct mok_tune_key key;
    tune_key(b, &ic->prob->spec, &key);
    /* a problem timed on fewer input sets than the default (timing.input_sets) may run from L2: its times are not
     * the problem's, so the database neither answers nor stores them */
    const bool use_db = b->opts->tuned_path && !b->sets_note[0];
    if (use_db) {
        const struct mok_tune_entry *e = mok_tunedb_find(&b->db, &key, ic->desc->name);
        char why[256] = "";
        int params[MOK_MAX_PARAMS] = {0};
        if (e && mok_tunedb_check(e, why, sizeof(why)) == 0 &&
            mok_tunedb_params_parse(ic->desc, e->params, params, why, sizeof(why)) == 0) {
            double t;
            ic->note = "tuned: from the database, no search";
            if (measure_params(ic, params, &t) != MOK_MEASURE_OK)
                printf("# tuned candidate %s %s no longer passes; it stays in the database as it was\n",
                       ic->desc->name, e->params);
            ic->note = NULL;
            return;
        }
        if (e)
            printf("# tuning database entry for %s ignored (stale: %s); searching\n", ic->desc->name, why);
    }
    struct mok_search_opts so = {.strategy = (enum mok_search_strategy)b->cfg->search_strategy,
                                 .max_measurements = b->cfg->search_max_measurements,
                                 .budget_s = b->cfg->search_budget_s, .seed = b->cfg->search_seed};
    struct mok_search_result res;
    if (mok_search_run(ic->desc->nparams, ic->tune->nvalues, &so, measure_index, ic, &res) != 0)
        mok_bench_abort(b->cl, "search", "invalid search space");
    if (b->cfg->search_strategy != MOK_SEARCH_EXHAUSTIVE || res.stopped)
        printf("# search %s for %s: %d of %d candidates measured (%d not supported, %d failed)%s\n",
               mok_search_strategy_name(so.strategy), ic->desc->name, res.measured + res.failed, res.total,
               res.unsupported, res.failed, res.stopped ? ", stopped by its budget" : "");
    if (use_db && res.found) {
        struct mok_tune_entry e;
        memset(&e, 0, sizeof(e));
        e.key = key;
        snprintf(e.impl, sizeof(e.impl), "%s", ic->desc->name);
        int params[MOK_MAX_PARAMS] = {0};
        for (int j = 0; j < ic->desc->nparams; j++)
            params[j] = ic->tune->values[j][res.best[j]];
        mok_impl_params_label(ic->desc, params, e.params, sizeof(e.params));
        e.time_us = res.best_time_us;
        time_t now = time(NULL);
        struct tm tm;
        if (gmtime_r(&now, &tm))
            strftime(e.measured_utc, sizeof(e.measured_utc), "%Y-%m-%dT%H:%M:%SZ", &tm);
        snprintf(e.commit, sizeof(e.commit), "%s", b->cl->env.commit);
        mok_tunedb_put(&b->db, &e);
    }
}

/* Ranks other than 0: run what rank 0 broadcasts until it says stop. */
static void follow_impl(struct impl_ctx *ic)
{
    for (;;) {
        int msg[1 + MOK_MAX_PARAMS];
        MPI_Bcast(msg, 1 + MOK_MAX_PARAMS, MPI_INT, 0, MPI_COMM_WORLD);
        if (msg[0] == MSG_STOP)
            return;
        double t;
        measure_params(ic, msg + 1, &t);
    }
}

static void open_journal_and_db(struct bench_state *b, const char *config_json)
{
    char err[ERR_LEN], note[2048], identity[512]; /* the note names up to two journal paths */
    const struct mok_env *env = &b->cl->env;
    snprintf(identity, sizeof(identity), "config %016llx | %s | %d SMs | %d ranks | LSA %d",
             (unsigned long long)mok_hash64(config_json, strlen(config_json)), env->gpu, env->sm_count,
             env->nranks, env->lsa_size);
    if (mok_journal_open(&b->journal, b->cfg->output_dir, b->cfg->output_name, identity, b->opts->resume, env,
                         &b->resumed, &b->nresumed, note, sizeof(note), err, sizeof(err)))
        fprintf(stderr, "mok-bench: %s (no journal: an interruption loses the rows)\n", err);
    else
        snprintf(journal_path, sizeof journal_path, "%s", b->journal.path);
    if (note[0])
        printf("# %s\n", note);
    if (b->opts->tuned_path && mok_tunedb_load(b->opts->tuned_path, &b->db, err, sizeof(err))) {
        fprintf(stderr, "mok-bench: --tuned: %s\n", err);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
}

/* What the end of a run writes, so it can be written again elsewhere if output.dir fails. */
struct report_job {
    const char *name;
    const struct mok_env *env;
    const struct mok_row *rows;
    int nrows;
    const char *summary_json;
    const struct mok_summary_item *items;
    int nitems, moe_layers;
    int argc;
    char **argv;
    const char *config_json;
};

/* The CSV, the JSON and the summary CSV into dir (paths into csv, json, sum_csv). */
static int write_reports(const struct report_job *j, const char *dir, char *csv, char *json, char *sum_csv,
                         int path_len, char *err, size_t err_len)
{
    if (mok_report_choose_paths(dir, j->name, csv, json, path_len, err, (int)err_len) ||
        mok_report_write_csv(csv, j->env, j->rows, j->nrows, err, (int)err_len) ||
        mok_report_write_json(json, j->argc, j->argv, j->config_json, j->env, j->rows, j->nrows, j->summary_json, err,
                              (int)err_len))
        return -1;
    if (mok_report_summary_path(csv, sum_csv, path_len + 16)) {
        snprintf(err, err_len, "summary report: path too long");
        return -1;
    }
    return mok_summary_write_csv(sum_csv, j->items, j->nitems, j->moe_layers, err, (int)err_len);
}

/* The problem's roofline: the rows each global expert gets (layer mode: every rank's routes, summed; gemm mode:
 * this rank's own), against --probe's DRAM and GEMM figures, on each rank, then the slowest rank's on all.
 * Collective with several ranks. */
static void problem_roofline(struct bench_state *b, const struct mok_problem *p)
{
    int32_t *rows = calloc((size_t)p->experts, sizeof(int32_t));
    if (!rows)
        mok_bench_abort(b->cl, "roofline", "out of host memory");
    for (size_t r = 0; r < (size_t)p->tokens * p->topk; r++)
        rows[p->h_ids[r]]++;
    if (p->spec.mode == MOK_MODE_LAYER)
        MPI_Allreduce(MPI_IN_PLACE, rows, p->experts, MPI_INT32_T, MPI_SUM, MPI_COMM_WORLD);
    mok_roofline_of(&p->spec, p->nranks, p->rank, rows, b->cl->env.probe_dram_gbps,
                    mok_gemm_rate_for(&b->cl->env, p->spec.dtype), mok_gemm_rate_for(&b->cl->env, MOK_DTYPE_BF16),
                    &b->roof);
    free(rows);
    if (p->nranks > 1 && p->spec.mode != MOK_MODE_COMM) { /* the row's time is the max over ranks: its roofline
                                                         * is the slowest rank's (by its bound, or without --probe
                                                         * by its bytes), every column from that one rank */
        const struct mok_roofline *r = &b->roof;
        struct {
            double v;
            int rank;
        } mine = {isnan(r->bound_us) ? r->weight_bytes + r->act_bytes : r->bound_us, p->rank}, slowest;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
        MPI_Bcast(&b->roof, (int)sizeof b->roof, MPI_BYTE, slowest.rank, MPI_COMM_WORLD);
    }
}

int mok_bench_run(const struct mok_config *cfg, const struct mok_bench_opts *opts, const char *config_json,
                  struct mok_cluster *cl, int argc, char **argv)
{
    bool root = cl->rank == 0;
    /* speedups are over the mode's baseline (summary.h: the best nccl / nccl-overlap candidate, nccl-p2p, cublas-gemm) */
    const char *mode = mok_mode_name(cfg->mode);
    int nproblems = mok_config_problem_count(cfg);
    struct bench_state b = {.cfg = cfg, .opts = opts, .cl = cl, .total = mok_sweep_total(cfg), .t0 = now_s()};
    time_t start = time(NULL);
    struct tm start_tm;
    if (gmtime_r(&start, &start_tm))
        strftime(b.run_start, sizeof(b.run_start), "%Y-%m-%dT%H:%M:%SZ", &start_tm);
    struct cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, cl->device);
    if (mok_checker_init(&b.checker))
        mok_bench_abort(cl, "start", "cannot allocate the checker");
    if (root) {
        mok_report_print_header(stdout, &cl->env, cfg->source);
        open_journal_and_db(&b, config_json);
        mok_report_print_table_head(stdout);
    }
    for (int pi = 0; pi < nproblems; pi++) {
        struct mok_problem_spec spec;
        mok_config_problem_at(cfg, pi, &spec);
        struct mok_problem prob;
        char err[ERR_LEN];
        int sets = mok_problem_sets_for(&spec, cl->nranks, prop.l2CacheSize);
        struct mok_problem_spec sized = spec; /* what the default would rotate */
        sized.input_sets = 0;
        const int l2_sets = mok_problem_sets_for(&sized, cl->nranks, prop.l2CacheSize);
        b.sets_note[0] = 0;
        if (sets < l2_sets)
            snprintf(b.sets_note, sizeof b.sets_note, "inputs: %d set%s (timing.input_sets; the default rotates %d): "
                     "may stay in L2", sets, sets == 1 ? "" : "s", l2_sets);
        if (mok_problem_create(&prob, &spec, cl, sets, cfg->check_enabled, err, sizeof(err)))
            mok_bench_abort(cl, "problem setup", err);
        problem_roofline(&b, &prob);
        if (root) {
            char inputs[48];
            printf("# problem %d: inputs %s, %d input sets rotated (L2 %d MiB); reference %.1f ms\n", pi,
                   mok_inputs_label(&spec.inputs, inputs, sizeof inputs), prob.sets, prop.l2CacheSize >> 20,
                   prob.reference_ms);
        }
        int first_row = b.nrows;
        mok_baseline_init(&b.base, mode);
        for (int ii = 0; ii < cfg->nimpls; ii++) {
            struct impl_ctx ic = {.b = &b, .prob = &prob, .desc = mok_impl_desc_find(cfg->impls[ii]),
                                  .ops = mok_impl_find(cfg->impls[ii]), .tune = &cfg->tune[ii]};
            if (!ic.desc || !ic.ops)
                mok_bench_abort(cl, "registry", cfg->impls[ii]);
            if (root) {
                decide_impl(&ic);
                int stop[1 + MOK_MAX_PARAMS] = {MSG_STOP};
                MPI_Bcast(stop, 1 + MOK_MAX_PARAMS, MPI_INT, 0, MPI_COMM_WORLD);
            } else {
                follow_impl(&ic);
            }
        }
        /* speedups against the best baseline candidate of this problem, measured in this run */
        mok_baseline_fill(b.rows + first_row, b.nrows - first_row, mode);
        mok_problem_destroy(&prob);
    }
    mok_checker_destroy(&b.checker);
    if (root && isatty(2))
        fputc('\n', stderr);

    int measured = 0; /* rows with a time: a run whose every candidate was refused measured nothing */
    for (int i = 0; i < b.nrows; i++)
        measured += strcmp(b.rows[i].disposition, MOK_DISPOSITION_NOT_SUPPORTED) != 0;
    int rc = b.failures || (b.nrows && !measured) ? 1 : 0;
    if (root) {
        char csv[MOK_PATH_LEN + 80], json[MOK_PATH_LEN + 80], sum_csv[MOK_PATH_LEN + 96], err[ERR_LEN] = "";
        struct mok_summary_item *items = calloc((size_t)b.nrows + 1, sizeof(*items));
        int nitems = items ? mok_summary_build(b.rows, b.nrows, mode, cfg->moe_layers, items, b.nrows) : 0;
        char *summary = items ? mok_summary_json(items, nitems, cfg->moe_layers) : NULL;
        mok_summary_print(stdout, items, nitems, cfg->moe_layers);
        struct report_job job = {cfg->output_name, &cl->env, b.rows, b.nrows, summary, items, nitems,
                                 cfg->moe_layers, argc, argv, config_json};
        if (write_reports(&job, cfg->output_dir, csv, json, sum_csv, (int)sizeof(csv), err, sizeof(err))) {
            /* output.dir was writable at the start (output_check); if it fails now, the rows still go somewhere */
            char fallback[MOK_PATH_LEN], err2[ERR_LEN];
            fprintf(stderr, "mok-bench: report: %s\n", err);
            if (mok_output_fallback_dir(cfg->output_name, fallback, sizeof fallback) == 0 &&
                write_reports(&job, fallback, csv, json, sum_csv, (int)sizeof(csv), err2, sizeof(err2)) == 0)
                fprintf(stderr, "mok-bench: the reports were written to the fallback %s, %s and %s instead\n", csv,
                        json, sum_csv);
            else
                fprintf(stderr, "mok-bench: the fallback directory failed too; the rows are in the table above%s\n",
                        b.journal.f ? " and in the journal" : "");
            rc = 1;
        } else {
            printf("# reports: %s %s %s\n", csv, json, sum_csv);
        }
        if (opts->tuned_path) {
            if (mok_tunedb_save(opts->tuned_path, &b.db, err, sizeof(err))) {
                fprintf(stderr, "mok-bench: --tuned: %s\n", err);
                rc = 1;
            } else {
                printf("# tuning database: %s (%d entries)\n", opts->tuned_path, b.db.n);
            }
        }
        if (b.nrows && !measured)
            printf("# FAILED: none of the %d candidates could run here (each row's reason says why)\n", b.nrows);
        else
            printf("# %s: %d candidates, %d failed or incorrect\n", b.failures ? "FAILED" : "OK", b.nrows,
                   b.failures);
        free(summary);
        free(items);
        mok_journal_close(&b.journal);
        mok_tunedb_free(&b.db);
        free(b.resumed);
    }
    free(b.rows);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}
