/* summary: the capacity-planning view of a run and the baseline of its speedups (see summary.h). */
#include "summary.h"

#include <stdbool.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int usable(const struct mok_row *r)
{
    return (!strcmp(r->disposition, MOK_DISPOSITION_PASSED) || !strcmp(r->disposition, MOK_DISPOSITION_NOT_VERIFIED)) &&
           r->time_med_us > 0;
}

/* ---- the baseline --------------------------------------------------------------------------------------- */

/* Per mode, what its figures are judged against: the layer against NCCL's whole layer, with or without its own
 * overlap (the better of the two is the honest bar), the communication against NCCL's send/recv alone, the GEMMs
 * against cuBLAS. */
int mok_baseline_impl(const char *mode, const char *impl)
{
    if (mode && !strcmp(mode, "comm"))
        return !strcmp(impl, "nccl-p2p");
    if (mode && !strcmp(mode, "gemm"))
        return !strcmp(impl, "cublas-gemm");
    return !strcmp(impl, "nccl") || !strcmp(impl, "nccl-overlap");
}

void mok_baseline_init(struct mok_baseline *b, const char *mode)
{
    memset(b, 0, sizeof *b);
    b->mode = mode;
    b->time_us = NAN;
}

void mok_baseline_offer(struct mok_baseline *b, const struct mok_row *row)
{
    if (!usable(row) || !mok_baseline_impl(b->mode, row->impl) || row->time_med_us >= b->time_us)
        return;
    b->time_us = row->time_med_us;
    snprintf(b->impl, sizeof b->impl, "%s", row->impl);
}

void mok_baseline_apply(const struct mok_baseline *b, struct mok_row *row)
{
    row->speedup = b->time_us / row->time_med_us;
    snprintf(row->speedup_baseline, sizeof row->speedup_baseline, "%s", isnan(row->speedup) ? "" : b->impl);
}

void mok_baseline_fill(struct mok_row *rows, int n, const char *mode)
{
    struct mok_baseline b;
    mok_baseline_init(&b, mode);
    for (int i = 0; i < n; i++)
        mok_baseline_offer(&b, &rows[i]);
    for (int i = 0; i < n; i++)
        mok_baseline_apply(&b, &rows[i]);
}

/* ---- the summary ---------------------------------------------------------------------------------------- */

/* Whether row f is the forward of backward row b: the same implementation on the same problem but the pass (the
 * weight-gradient mode is the backward's alone) */
static bool forward_of(const struct mok_row *f, const struct mok_row *b)
{
    const bool seeds = f->seed == b->seed || (isnan(f->seed) && isnan(b->seed));
    return (f->pass[0] == 0 || !strcmp(f->pass, "fwd")) && !strcmp(f->impl, b->impl) && !strcmp(f->model, b->model) &&
           f->hidden == b->hidden && f->intermediate == b->intermediate && f->experts == b->experts &&
           f->topk == b->topk && f->shared_experts == b->shared_experts && f->tokens_per_rank == b->tokens_per_rank &&
           !strcmp(f->routing, b->routing) && !strcmp(f->inputs, b->inputs) && !strcmp(f->dtype, b->dtype) &&
           !strcmp(f->mode, b->mode) && seeds;
}

/* bf16, or no dtype (a row read from a report older than the dtype column) */
static bool is_bf16(const char *dtype) { return !dtype[0] || !strcmp(dtype, "bf16"); }

/* Whether row t is the bf16 twin of FP8 row r: the same problem (and pass, and weight-gradient mode) in bf16 */
static bool bf16_twin(const struct mok_row *t, const struct mok_row *r)
{
    const bool seeds = t->seed == r->seed || (isnan(t->seed) && isnan(r->seed));
    return is_bf16(t->dtype) && !is_bf16(r->dtype) && !strcmp(t->model, r->model) &&
           t->hidden == r->hidden && t->intermediate == r->intermediate && t->experts == r->experts &&
           t->topk == r->topk && t->shared_experts == r->shared_experts && t->tokens_per_rank == r->tokens_per_rank &&
           !strcmp(t->routing, r->routing) && !strcmp(t->inputs, r->inputs) && !strcmp(t->pass, r->pass) &&
           !strcmp(t->wgrad, r->wgrad) && !strcmp(t->mode, r->mode) && seeds;
}

/* Item k's speedups over its bf16 twin problem's items, where the run has one. */
static void against_bf16(struct mok_summary_item *out, int n, int k, const char *mode)
{
    const struct mok_row *r = out[k].best;
    out[k].speedup_vs_bf16 = out[k].speedup_vs_bf16_baseline = NAN;
    out[k].bf16_baseline[0] = '\0';
    int twin = -1;
    for (int m = 0; m < n && twin < 0; m++)
        if (bf16_twin(out[m].best, r))
            twin = out[m].problem;
    if (twin < 0)
        return;
    struct mok_baseline base;
    mok_baseline_init(&base, mode);
    for (int m = 0; m < n; m++) {
        if (out[m].problem != twin)
            continue;
        mok_baseline_offer(&base, out[m].best);
        if (!strcmp(out[m].best->impl, r->impl))
            out[k].speedup_vs_bf16 = out[m].best->time_med_us / r->time_med_us;
    }
    out[k].speedup_vs_bf16_baseline = base.time_us / r->time_med_us;
    if (!isnan(out[k].speedup_vs_bf16_baseline))
        snprintf(out[k].bf16_baseline, sizeof out[k].bf16_baseline, "%s", base.impl);
}

int mok_summary_build(const struct mok_row *rows, int nrows, const char *mode, int moe_layers,
                      struct mok_summary_item *out, int max)
{
    int n = 0;
    for (int i = 0; i < nrows; i++) {
        const struct mok_row *r = &rows[i];
        if (!usable(r))
            continue;
        int k = 0; /* the item of this (problem, impl), if any */
        while (k < n && !(out[k].problem == r->problem && !strcmp(out[k].best->impl, r->impl)))
            k++;
        if (k == n) {
            if (n == max)
                continue;
            out[n++] = (struct mok_summary_item){.problem = r->problem, .best = r};
        } else if (r->time_med_us < out[k].best->time_med_us) { /* candidates that failed never get here */
            out[k].best = r;
        }
    }
    for (int k = 0; k < n; k++) {
        const struct mok_row *b = out[k].best;
        /* the best row of each baseline implementation is among the items: their best is the problem's */
        struct mok_baseline base;
        mok_baseline_init(&base, mode);
        for (int m = 0; m < n; m++)
            if (out[m].problem == out[k].problem)
                mok_baseline_offer(&base, out[m].best);
        out[k].speedup = base.time_us / b->time_med_us;
        snprintf(out[k].speedup_baseline, sizeof out[k].speedup_baseline, "%s", isnan(out[k].speedup) ? "" : base.impl);
        out[k].ms_per_layer = b->time_med_us * 1e-3;
        out[k].tokens_per_s_per_gpu = b->tokens_per_rank / (b->time_med_us * 1e-6);
        out[k].ms_per_step = moe_layers * out[k].ms_per_layer;
        out[k].j_per_step = moe_layers * b->energy_j; /* NaN stays NaN */
        snprintf(out[k].step, sizeof out[k].step, "%s", b->pass[0] ? b->pass : "fwd");
    }
    for (int k = 0; k < n; k++) { /* a backward's training step: its forward plus itself, where both ran */
        const struct mok_row *b = out[k].best;
        if (strcmp(b->pass, "bwd") != 0)
            continue;
        for (int m = 0; m < n; m++)
            if (forward_of(out[m].best, b)) {
                out[k].ms_per_step = moe_layers * (out[m].ms_per_layer + out[k].ms_per_layer);
                out[k].j_per_step = moe_layers * (out[m].best->energy_j + b->energy_j);
                snprintf(out[k].step, sizeof out[k].step, "fwd+bwd");
                break;
            }
    }
    for (int k = 0; k < n; k++)
        against_bf16(out, n, k, mode);
    return n;
}

/* "-" where a figure is unknown, as the row table prints it; else printf's fixed notation. */
static const char *fixed(char *buf, size_t len, int prec, double v)
{
    if (isnan(v))
        return "-";
    snprintf(buf, len, "%.*f", prec, v);
    return buf;
}

/* A time in ms as the report prints times: 0.1 us (4 decimals) or 4 significant digits, "-" where unknown. */
static const char *ms_text(char *buf, size_t len, double ms)
{
    mok_report_fmt_time(buf, len, ms, 4);
    return buf[0] ? buf : "-";
}

void mok_summary_print(FILE *out, const struct mok_summary_item *items, int n, int moe_layers)
{
    fprintf(out, "# summary: best passed candidate per problem and implementation; step = %d MoE layer%s of the "
                 "`step` column's passes (the problem's pass, forward unless the routing column names bwd or "
                 "fwd_bwd; fwd+bwd: a backward row plus its problem's forward measured in this run; bf16: bf16 weight "
                 "gradients); x bf16 = an FP8 row against the same implementation on its problem in bf16, x bf16 "
                 "base against that problem's baseline\n",
            moe_layers, moe_layers == 1 ? "" : "s");
    fprintf(out, "# %4s %-16s %7s %-14s %-9s %-13s %10s %8s %-13s %8s %11s %14s %10s %-7s %9s  %s\n", "prob", "model",
            "tokens", "routing", "dtype", "impl", "ms/layer", "speedup", "vs", "x bf16", "x bf16 base", "tokens/s/GPU",
            "ms/step", "step", "J/step", "params");
    for (int k = 0; k < n; k++) {
        const struct mok_row *b = items[k].best;
        char routing[128]; /* the inputs too when not the default, so rows of a multi-inputs config differ; the
                              * pass when it is not the forward */
        const bool fwd = b->pass[0] == 0 || strcmp(b->pass, "fwd") == 0;
        char pass[32] = ""; /* ",bwd" or ",fwd_bwd", with ",bf16" when the weight gradients are bf16 */
        if (!fwd)
            snprintf(pass, sizeof pass, ",%s%s", b->pass, strcmp(b->wgrad, "bf16") == 0 ? ",bf16" : "");
        if (b->inputs[0] && strcmp(b->inputs, "uniform") != 0)
            snprintf(routing, sizeof routing, "%s,%s%s", b->routing, b->inputs, pass);
        else
            snprintf(routing, sizeof routing, "%s%s", b->routing, pass);
        char layer[48], step[48], sp[48], tps[48], j[48], xb[48], xbb[48];
        /* speedups to three decimals: a 1.396x must not read as 1.40x against a 1.4x goal */
        const char *vs = items[k].speedup_baseline[0] ? items[k].speedup_baseline : "-";
        fprintf(out, "# %4d %-16s %7d %-14s %-9s %-13s %10s %8s %-13s %8s %11s %14s %10s %-7s %9s  %s\n",
                items[k].problem, b->model, b->tokens_per_rank, routing, b->dtype[0] ? b->dtype : "bf16", b->impl,
                ms_text(layer, sizeof layer, items[k].ms_per_layer), fixed(sp, sizeof sp, 3, items[k].speedup), vs,
                fixed(xb, sizeof xb, 3, items[k].speedup_vs_bf16),
                fixed(xbb, sizeof xbb, 3, items[k].speedup_vs_bf16_baseline),
                fixed(tps, sizeof tps, 0, items[k].tokens_per_s_per_gpu), ms_text(step, sizeof step, items[k].ms_per_step),
                items[k].step, fixed(j, sizeof j, 1, items[k].j_per_step), b->params);
    }
    fflush(out);
}

static cJSON *num_or_null(double v) { return isfinite(v) ? cJSON_CreateNumber(v) : cJSON_CreateNull(); }

char *mok_summary_json(const struct mok_summary_item *items, int n, int moe_layers)
{
    cJSON *root = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(root, "items");
    cJSON_AddNumberToObject(root, "moe_layers", moe_layers);
    for (int k = 0; k < n && arr; k++) {
        const struct mok_row *b = items[k].best;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "problem", items[k].problem);
        cJSON_AddStringToObject(o, "model", b->model);
        cJSON_AddNumberToObject(o, "tokens_per_rank", b->tokens_per_rank);
        cJSON_AddStringToObject(o, "routing", b->routing);
        cJSON_AddStringToObject(o, "inputs", b->inputs);
        cJSON_AddStringToObject(o, "dtype", b->dtype);
        cJSON_AddStringToObject(o, "pass", b->pass);
        cJSON_AddStringToObject(o, "mode", b->mode);
        cJSON_AddStringToObject(o, "impl", b->impl);
        cJSON_AddStringToObject(o, "params", b->params);
        cJSON_AddItemToObject(o, "time_med_us", num_or_null(b->time_med_us));
        cJSON_AddItemToObject(o, "speedup_vs_baseline", num_or_null(items[k].speedup));
        cJSON_AddStringToObject(o, "speedup_baseline", items[k].speedup_baseline);
        cJSON_AddItemToObject(o, "tokens_per_s_per_gpu", num_or_null(items[k].tokens_per_s_per_gpu));
        cJSON_AddItemToObject(o, "ms_per_layer", num_or_null(items[k].ms_per_layer));
        cJSON_AddItemToObject(o, "ms_per_step", num_or_null(items[k].ms_per_step));
        cJSON_AddItemToObject(o, "j_per_step", num_or_null(items[k].j_per_step));
        cJSON_AddStringToObject(o, "wgrad", b->wgrad);
        cJSON_AddStringToObject(o, "step", items[k].step);
        cJSON_AddItemToObject(o, "speedup_vs_bf16", num_or_null(items[k].speedup_vs_bf16));
        cJSON_AddItemToObject(o, "speedup_vs_bf16_baseline", num_or_null(items[k].speedup_vs_bf16_baseline));
        cJSON_AddStringToObject(o, "bf16_baseline", items[k].bf16_baseline);
        cJSON_AddItemToArray(arr, o);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* ---- the summary CSV ------------------------------------------------------------------------------------ */

/* Named as the summary's JSON keys, plus moe_layers on every line (a CSV has no header block to hold it). */
const char *const mok_summary_csv_columns[] = {
    "problem",         "model",           "tokens_per_rank",      "routing",      "inputs",   "dtype",
    "pass",            "mode",            "impl",                 "params",       "time_med_us",
    "speedup_vs_baseline", "speedup_baseline", "tokens_per_s_per_gpu", "ms_per_layer", "moe_layers",
    "ms_per_step",     "j_per_step",      "wgrad",                "step",         "speedup_vs_bf16",
    "speedup_vs_bf16_baseline", "bf16_baseline", NULL};

static void put_exact(FILE *f, double v)
{
    char buf[64] = "";
    if (!isnan(v))
        mok_report_fmt_exact(buf, sizeof buf, v);
    fprintf(f, ",%s", buf);
}

static void put_time(FILE *f, double v, int min_decimals)
{
    char buf[64];
    mok_report_fmt_time(buf, sizeof buf, v, min_decimals);
    fprintf(f, ",%s", buf);
}

static void put_str(FILE *f, const char *s)
{
    fputc(',', f);
    mok_report_csv_cell(f, s);
}

char *mok_summary_csv(const struct mok_summary_item *items, int n, int moe_layers)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return NULL;
    for (int i = 0; mok_summary_csv_columns[i]; i++)
        fprintf(f, "%s%s", i ? "," : "", mok_summary_csv_columns[i]);
    fputc('\n', f);
    for (int k = 0; k < n; k++) {
        const struct mok_row *b = items[k].best;
        fprintf(f, "%d", items[k].problem);
        put_str(f, b->model);
        fprintf(f, ",%d", b->tokens_per_rank);
        put_str(f, b->routing), put_str(f, b->inputs), put_str(f, b->dtype), put_str(f, b->pass);
        put_str(f, b->mode), put_str(f, b->impl), put_str(f, b->params);
        put_time(f, b->time_med_us, 1);
        put_exact(f, items[k].speedup);
        put_str(f, items[k].speedup_baseline);
        put_exact(f, items[k].tokens_per_s_per_gpu);
        put_time(f, items[k].ms_per_layer, 4);
        fprintf(f, ",%d", moe_layers);
        put_time(f, items[k].ms_per_step, 4);
        put_exact(f, items[k].j_per_step);
        put_str(f, b->wgrad);
        put_str(f, items[k].step);
        put_exact(f, items[k].speedup_vs_bf16);
        put_exact(f, items[k].speedup_vs_bf16_baseline);
        put_str(f, items[k].bf16_baseline);
        fputc('\n', f);
    }
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

int mok_summary_write_csv(const char *path, const struct mok_summary_item *items, int n, int moe_layers, char *err,
                          int err_len)
{
    char *text = mok_summary_csv(items, n, moe_layers);
    if (!text) {
        snprintf(err, (size_t)err_len, "%s: out of memory", path);
        return -1;
    }
    int rc = mok_write_file_atomic(path, text, strlen(text), err, err_len);
    free(text);
    return rc;
}
