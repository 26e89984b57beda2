/* config_echo: the validated config written back out (the canonical JSON ranks compare and reports embed), its
 * expansion into problems, and the names of its enumerations. Parsing is in config.c. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_names.h"
#include "desc.h"

static cJSON *string_array(const char *const *names, const int *idx, int n)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(names[idx[i]]));
    return a;
}

/* cJSON prints doubles with 15 digits when they compare equal within an epsilon, which loses the last bits
 * (a seed of 2^53 - 1, an s of 0.30000000000000004); the canonical text must parse back to the same bits, so
 * print the shortest of %.15g..%.17g that does. */
static void add_exact(cJSON *obj, const char *key, double d)
{
    char buf[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    cJSON_AddRawToObject(obj, key, buf);
}

char *mok_config_to_json(const struct mok_config *cfg)
{
    cJSON *root = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(root, "model");
    for (int i = 0; i < cfg->nmodels; i++) {
        const struct mok_model *m = &cfg->models[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", m->name);
        cJSON_AddNumberToObject(o, "hidden", m->hidden);
        cJSON_AddNumberToObject(o, "intermediate", m->intermediate);
        cJSON_AddNumberToObject(o, "experts", m->experts);
        cJSON_AddNumberToObject(o, "topk", m->topk);
        cJSON_AddNumberToObject(o, "shared_experts", m->shared_experts);
        cJSON_AddItemToArray(a, o);
    }
    cJSON_AddItemToObject(root, "tokens_per_rank", cJSON_CreateIntArray(cfg->tokens_per_rank, cfg->ntokens));
    a = cJSON_AddArrayToObject(root, "routing");
    for (int i = 0; i < cfg->nroutings; i++) {
        const struct mok_routing *r = &cfg->routings[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "distribution", mok_routing_dist_name(r->dist));
        if (r->dist == MOK_ROUTING_ZIPF)
            add_exact(o, "s", r->zipf_s);
        if (r->dist == MOK_ROUTING_HOT) {
            add_exact(o, "fraction", r->hot_fraction);
            cJSON_AddNumberToObject(o, "expert", r->hot_expert);
        }
        add_exact(o, "seed", (double)r->seed); /* at most 2^53 - 1: exact */
        cJSON_AddItemToArray(a, o);
    }
    a = cJSON_AddArrayToObject(root, "inputs");
    for (int i = 0; i < cfg->ninputs; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "distribution", mok_input_dist_name(cfg->inputs[i].dist));
        add_exact(o, "scale", cfg->inputs[i].scale);
        cJSON_AddNumberToObject(o, "mantissa_bits", cfg->inputs[i].mantissa_bits);
        cJSON_AddItemToArray(a, o);
    }
    int idx[MOK_NPASSES];
    for (int i = 0; i < cfg->ndtypes && i < MOK_NDTYPES; i++)
        idx[i] = cfg->dtypes[i];
    cJSON_AddItemToObject(root, "dtype", string_array(mok_cfg_dtype_names, idx, cfg->ndtypes));
    for (int i = 0; i < cfg->npasses && i < MOK_NPASSES; i++)
        idx[i] = cfg->passes[i];
    cJSON_AddItemToObject(root, "pass", string_array(mok_cfg_pass_names, idx, cfg->npasses));
    for (int i = 0; i < cfg->nwgrads && i < MOK_NWGRADS; i++)
        idx[i] = cfg->wgrads[i];
    cJSON_AddItemToObject(root, "wgrad", string_array(mok_cfg_wgrad_names, idx, cfg->nwgrads));
    a = cJSON_AddArrayToObject(root, "impls");
    cJSON *tune = cJSON_AddObjectToObject(root, "tune");
    for (int i = 0; i < cfg->nimpls; i++) {
        const struct mok_impl_desc *d = mok_impl_desc_find(cfg->impls[i]);
        cJSON_AddItemToArray(a, cJSON_CreateString(cfg->impls[i]));
        cJSON *t = cJSON_AddObjectToObject(tune, cfg->impls[i]);
        for (int k = 0; d && k < d->nparams; k++) {
            const struct mok_param_def *p = &d->params[k];
            const int *v = cfg->tune[i].values[k];
            cJSON_AddItemToObject(t, p->name, p->choices ? string_array((const char *const *)p->choices, v,
                                                                        cfg->tune[i].nvalues[k])
                                                         : cJSON_CreateIntArray(v, cfg->tune[i].nvalues[k]));
        }
    }
    cJSON_AddStringToObject(root, "mode", mok_mode_name(cfg->mode));
    add_exact(root, "capacity_factor", cfg->capacity_factor);
    cJSON *o = cJSON_AddObjectToObject(root, "search");
    cJSON_AddStringToObject(o, "strategy", mok_cfg_search_names[cfg->search_strategy]);
    cJSON_AddNumberToObject(o, "max_measurements", cfg->search_max_measurements);
    add_exact(o, "budget_s", cfg->search_budget_s);
    add_exact(o, "seed", (double)cfg->search_seed);
    o = cJSON_AddObjectToObject(root, "planning");
    cJSON_AddNumberToObject(o, "moe_layers", cfg->moe_layers);
    o = cJSON_AddObjectToObject(root, "timing");
    cJSON_AddNumberToObject(o, "warmup", cfg->warmup);
    cJSON_AddNumberToObject(o, "warmup_ms", cfg->warmup_ms);
    cJSON_AddNumberToObject(o, "iters", cfg->iters);
    if (cfg->timed_ms) /* echoed only when set, as input_sets */
        cJSON_AddNumberToObject(o, "timed_ms", cfg->timed_ms);
    if (cfg->input_sets) /* echoed only when set: the default leaves older configs' hashes (journals) alone */
        cJSON_AddNumberToObject(o, "input_sets", cfg->input_sets);
    o = cJSON_AddObjectToObject(root, "check");
    cJSON_AddBoolToObject(o, "enabled", cfg->check_enabled);
    add_exact(o, "rtol", cfg->rtol);
    o = cJSON_AddObjectToObject(root, "output");
    cJSON_AddStringToObject(o, "dir", cfg->output_dir);
    cJSON_AddStringToObject(o, "name", cfg->output_name);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* The innermost digit of a problem's index: a pass, and for the passes with a backward each wgrad (the forward's
 * problems do not repeat per wgrad). */
static int pass_points(const struct mok_config *cfg)
{
    int n = 0;
    for (int i = 0; i < cfg->npasses; i++)
        n += mok_pass_has_bwd(cfg->passes[i]) ? cfg->nwgrads : 1;
    return n;
}

int mok_config_problem_count(const struct mok_config *cfg)
{
    return cfg->nmodels * cfg->ntokens * cfg->nroutings * cfg->ninputs * cfg->ndtypes * pass_points(cfg);
}

void mok_config_problem_at(const struct mok_config *cfg, int index, struct mok_problem_spec *out)
{
    memset(out, 0, sizeof(*out));
    if (index < 0 || index >= mok_config_problem_count(cfg)) {
        out->index = -1;
        return;
    }
    int i = index; /* mixed-radix digits, pass (and wgrad) fastest, model slowest */
    out->index = index;
    out->mode = cfg->mode;
    out->capacity_factor = cfg->capacity_factor;
    out->input_sets = cfg->input_sets;
    const int points = pass_points(cfg);
    for (int d = i % points, k = 0; k < cfg->npasses; k++) {
        const int n = mok_pass_has_bwd(cfg->passes[k]) ? cfg->nwgrads : 1;
        if (d < n) {
            out->pass = cfg->passes[k];
            out->wgrad = mok_pass_has_bwd(cfg->passes[k]) ? cfg->wgrads[d] : MOK_WGRAD_FP32_ACCUMULATE;
            break;
        }
        d -= n;
    }
    i /= points;
    out->dtype = cfg->dtypes[i % cfg->ndtypes];
    i /= cfg->ndtypes;
    out->inputs = cfg->inputs[i % cfg->ninputs];
    i /= cfg->ninputs;
    out->routing = cfg->routings[i % cfg->nroutings];
    i /= cfg->nroutings;
    out->tokens_per_rank = cfg->tokens_per_rank[i % cfg->ntokens];
    i /= cfg->ntokens;
    out->model = cfg->models[i];
}

const char *mok_dtype_name(enum mok_dtype d) { return (unsigned)d < MOK_NDTYPES ? mok_cfg_dtype_names[d] : "?"; }
const char *mok_pass_name(enum mok_pass p) { return (unsigned)p < MOK_NPASSES ? mok_cfg_pass_names[p] : "?"; }
const char *mok_wgrad_name(enum mok_wgrad w) { return (unsigned)w < MOK_NWGRADS ? mok_cfg_wgrad_names[w] : "?"; }
const char *mok_mode_name(enum mok_mode m) { return (unsigned)m < 3 ? mok_cfg_mode_names[m] : "?"; }
const char *mok_routing_dist_name(enum mok_routing_dist d) { return (unsigned)d < 3 ? mok_cfg_dist_names[d] : "?"; }

const char *mok_input_dist_name(enum mok_input_dist d) { return (unsigned)d < 2 ? mok_cfg_input_dist_names[d] : "?"; }

const char *mok_inputs_label(const struct mok_inputs *in, char *buf, size_t len)
{
    char scale[32] = "", bits[16] = "";
    if (in->scale != 1.0)
        snprintf(scale, sizeof scale, "scale=%g", in->scale);
    if (in->mantissa_bits != 7)
        snprintf(bits, sizeof bits, "%sbits=%d", scale[0] ? "," : "", in->mantissa_bits);
    if (scale[0] || bits[0])
        snprintf(buf, len, "%s(%s%s)", mok_input_dist_name(in->dist), scale, bits);
    else
        snprintf(buf, len, "%s", mok_input_dist_name(in->dist));
    return buf;
}

const char *mok_routing_label(const struct mok_routing *r, char *buf, size_t len)
{
    if (r->dist == MOK_ROUTING_ZIPF)
        snprintf(buf, len, "zipf(s=%g)", r->zipf_s);
    else if (r->dist == MOK_ROUTING_HOT)
        snprintf(buf, len, "hot(f=%g,e=%d)", r->hot_fraction, r->hot_expert);
    else
        snprintf(buf, len, "%s", mok_routing_dist_name(r->dist));
    return buf;
}

uint64_t mok_hash64(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}
