/* summary: the capacity-planning view of a run (see summary.h). */
#include "summary.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

static int usable(const struct mok_row *r)
{
    return (!strcmp(r->disposition, MOK_DISPOSITION_PASSED) || !strcmp(r->disposition, MOK_DISPOSITION_NOT_VERIFIED)) &&
           r->time_med_us > 0;
}

int mok_summary_build(const struct mok_row *rows, int nrows, const char *baseline, int moe_layers,
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
        double base = NAN;
        for (int m = 0; m < n; m++)
            if (out[m].problem == out[k].problem && !strcmp(out[m].best->impl, baseline))
                base = out[m].best->time_med_us;
        out[k].speedup = base / b->time_med_us;
        out[k].ms_per_layer = b->time_med_us * 1e-3;
        out[k].tokens_per_s_per_gpu = b->tokens_per_rank / (b->time_med_us * 1e-6);
        out[k].ms_per_step = moe_layers * out[k].ms_per_layer;
        out[k].j_per_step = moe_layers * b->energy_j; /* NaN stays NaN */
    }
    return n;
}

void mok_summary_print(FILE *out, const struct mok_summary_item *items, int n, int moe_layers)
{
    fprintf(out, "# summary: best passed candidate per problem and implementation; step = %d MoE layer%s, forward\n",
            moe_layers, moe_layers == 1 ? "" : "s");
    fprintf(out, "# %4s %-16s %7s %-14s %-13s %10s %8s %14s %10s %9s  %s\n", "prob", "model", "tokens", "routing",
            "impl", "ms/layer", "speedup", "tokens/s/GPU", "ms/step", "J/step", "params");
    for (int k = 0; k < n; k++) {
        const struct mok_row *b = items[k].best;
        char routing[112]; /* the inputs too when not the default, so rows of a multi-inputs config differ */
        if (b->inputs[0] && strcmp(b->inputs, "uniform") != 0)
            snprintf(routing, sizeof routing, "%s,%s", b->routing, b->inputs);
        else
            snprintf(routing, sizeof routing, "%s", b->routing);
        /* speedups to three decimals: a 1.396x must not read as 1.40x against a 1.4x goal */
        fprintf(out, "# %4d %-16s %7d %-14s %-13s %10.3f %8.3f %14.0f %10.2f %9.1f  %s\n", items[k].problem, b->model,
                b->tokens_per_rank, routing, b->impl, items[k].ms_per_layer, items[k].speedup,
                items[k].tokens_per_s_per_gpu, items[k].ms_per_step, items[k].j_per_step, b->params);
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
        cJSON_AddStringToObject(o, "impl", b->impl);
        cJSON_AddStringToObject(o, "params", b->params);
        cJSON_AddItemToObject(o, "time_med_us", num_or_null(b->time_med_us));
        cJSON_AddItemToObject(o, "speedup_vs_baseline", num_or_null(items[k].speedup));
        cJSON_AddItemToObject(o, "tokens_per_s_per_gpu", num_or_null(items[k].tokens_per_s_per_gpu));
        cJSON_AddItemToObject(o, "ms_per_layer", num_or_null(items[k].ms_per_layer));
        cJSON_AddItemToObject(o, "ms_per_step", num_or_null(items[k].ms_per_step));
        cJSON_AddItemToObject(o, "j_per_step", num_or_null(items[k].j_per_step));
        cJSON_AddItemToArray(arr, o);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}
