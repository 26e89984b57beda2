/* config: parses and validates the benchmark's JSON config with cJSON (see config.h).
 *
 * Every check reports through cfg_fail(), which writes "PATH = VALUE: WHAT ALLOWED"; a check that fails leaves the
 * field alone and parsing goes on, so one run lists every problem of the file. */
#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config_names.h"
#include "config_values.h"
#include "desc.h"

#define MAX_FILE_BYTES (1 << 20)
#define MAX_SEED 9007199254740991LL /* 2^53 - 1: larger integers are not exact in a JSON (double) number */

static const char *const top_keys[] = {"model",  "tokens_per_rank", "routing", "inputs",  "dtype",
                                       "pass",   "wgrad",           "mode",    "impls",   "tune",    "timing",
                                       "capacity_factor", "search", "planning", "check",   "output"};
static const char *const search_keys[] = {"strategy", "max_measurements", "budget_s", "seed"};
const char *const mok_cfg_search_names[3] = {"exhaustive", "coordinate", "halving"};
static const char *const planning_keys[] = {"moe_layers"};
const char *const mok_cfg_mode_names[3] = {"layer", "comm", "gemm"};
static const char *const model_keys[] = {"name", "hidden", "intermediate", "experts", "topk", "shared_experts"};
static const char *const routing_keys[] = {"distribution", "s", "fraction", "expert", "seed"};
static const char *const inputs_keys[] = {"distribution", "scale", "mantissa_bits"};
static const char *const timing_keys[] = {"warmup", "warmup_ms", "iters", "timed_ms", "input_sets"};
static const char *const check_keys_list[] = {"enabled", "rtol"};
static const char *const output_keys[] = {"dir", "name"};
const char *const mok_cfg_dtype_names[MOK_NDTYPES] = {"bf16", "fp8_block", "mxfp8"};
const char *const mok_cfg_pass_names[MOK_NPASSES] = {"fwd", "bwd", "fwd_bwd"};
const char *const mok_cfg_wgrad_names[MOK_NWGRADS] = {"fp32_accumulate", "bf16"};
const char *const mok_cfg_dist_names[3] = {"uniform", "zipf", "hot"};
const char *const mok_cfg_input_dist_names[2] = {"uniform", "normal"};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* What the parser needs besides cfg: whether model was a list decides how other messages name a model. */
struct parser {
    struct mok_errors *e;
    struct mok_config *cfg;
    bool model_list;
    bool impls_refused; /* an impls entry was refused: tune blocks of known names outside impls are not blamed */
};

/* ---- sections ----------------------------------------------------------------------------------------- */

static void parse_model(struct mok_errors *e, const cJSON *obj, const char *path, struct mok_model *m)
{
    cfg_check_keys(e, obj, path, model_keys, COUNT(model_keys));
    cfg_get_int(e, obj, path, "hidden", true, MOK_ALIGN_ELEMS, MOK_MAX_HIDDEN, MOK_ALIGN_ELEMS, &m->hidden);
    cfg_get_int(e, obj, path, "intermediate", true, MOK_ALIGN_ELEMS, MOK_MAX_INTERMEDIATE, MOK_ALIGN_ELEMS,
            &m->intermediate);
    bool ok_e = cfg_get_int(e, obj, path, "experts", true, 1, MOK_MAX_EXPERTS, 1, &m->experts);
    bool ok_k = cfg_get_int(e, obj, path, "topk", true, 1, MOK_MAX_TOPK, 1, &m->topk);
    cfg_get_int(e, obj, path, "shared_experts", false, 0, MOK_MAX_SHARED_EXPERTS, 1, &m->shared_experts);
    char p[PATHLEN];
    if (ok_e && ok_k && m->topk > m->experts)
        cfg_fail(e, cfg_join(p, path, "topk"), cJSON_GetObjectItemCaseSensitive(obj, "topk"), "must be <= experts (%d)",
             m->experts);
    snprintf(m->name, sizeof m->name, "H%d-I%d-E%d-k%d", m->hidden, m->intermediate, m->experts, m->topk);
    if (cfg_get_str(e, obj, path, "name", m->name, sizeof m->name) && !cfg_printable_utf8(m->name))
        cfg_fail(e, cfg_join(p, path, "name"), cJSON_GetObjectItemCaseSensitive(obj, "name"),
             "must be printable UTF-8 (no control characters; it goes into CSV and JSON reports)");
}

static void parse_models(struct parser *ps, const cJSON *v)
{
    const cJSON *items[MOK_MAX_MODELS];
    char p[PATHLEN];
    if (!v) {
        cfg_fail(ps->e, "model", NULL, "missing (required: an object or a list of 1 to %d objects)", MOK_MAX_MODELS);
        return;
    }
    int n = cfg_as_list(ps->e, v, "model", MOK_MAX_MODELS, items, &ps->model_list);
    for (int i = 0; i < n; i++) {
        const char *path = ps->model_list ? cfg_indexed(p, "model", i) : "model";
        if (!cJSON_IsObject(items[i]))
            cfg_fail(ps->e, path, items[i], ps->model_list ? "must be an object" : "must be an object or a list of objects");
        else
            parse_model(ps->e, items[i], path, &ps->cfg->models[i]);
    }
    ps->cfg->nmodels = n > 0 ? n : 0;
}

static void parse_tokens(struct parser *ps, const cJSON *v)
{
    const cJSON *items[MOK_MAX_TOKENS];
    char p[PATHLEN];
    bool list;
    if (!v) {
        cfg_fail(ps->e, "tokens_per_rank", NULL, "missing (required: positive integer or a list of 1 to %d of them)",
             MOK_MAX_TOKENS);
        return;
    }
    int n = cfg_as_list(ps->e, v, "tokens_per_rank", MOK_MAX_TOKENS, items, &list);
    for (int i = 0; i < n; i++) {
        const char *path = list ? cfg_indexed(p, "tokens_per_rank", i) : "tokens_per_rank";
        long long x;
        if (!cfg_int_value(ps->e, items[i], path, 1, MOK_MAX_TOKENS_PER_RANK, 1, &x))
            continue;
        for (int j = 0; j < i; j++)
            if (ps->cfg->tokens_per_rank[j] == x) {
                cfg_fail(ps->e, path, items[i], "duplicate value (each problem size is run once)");
                break;
            }
        ps->cfg->tokens_per_rank[i] = (int)x;
    }
    ps->cfg->ntokens = n > 0 ? n : 0;
}

static void parse_routing(struct parser *ps, const cJSON *obj, const char *path, struct mok_routing *r)
{
    struct mok_errors *e = ps->e;
    char p[PATHLEN];
    cfg_check_keys(e, obj, path, routing_keys, COUNT(routing_keys));
    const cJSON *dv = cJSON_GetObjectItemCaseSensitive(obj, "distribution");
    int dist = dv ? cfg_choice(e, dv, cfg_join(p, path, "distribution"), mok_cfg_dist_names, COUNT(mok_cfg_dist_names), COUNT(mok_cfg_dist_names))
                  : MOK_ROUTING_UNIFORM;
    long long seed = 1;
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(obj, "seed");
    if (sv)
        cfg_int_value(e, sv, cfg_join(p, path, "seed"), 0, MAX_SEED, 1, &seed);
    r->seed = (uint64_t)seed;
    if (dist < 0)
        return; /* which keys belong is unknown; the distribution error says enough */
    r->dist = (enum mok_routing_dist)dist;

    /* A key of another distribution would be silently ignored: most likely a mistake in "distribution". */
    static const char *const own_keys[] = {"s", "fraction", "expert"};
    static const int owner[] = {MOK_ROUTING_ZIPF, MOK_ROUTING_HOT, MOK_ROUTING_HOT};
    for (int k = 0; k < COUNT(own_keys); k++) {
        const cJSON *kv = cJSON_GetObjectItemCaseSensitive(obj, own_keys[k]);
        if (kv && owner[k] != dist)
            cfg_fail(e, cfg_join(p, path, own_keys[k]), kv, "only allowed with distribution \"%s\" (this one is \"%s\")",
                 mok_cfg_dist_names[owner[k]], mok_cfg_dist_names[dist]);
    }
    if (dist == MOK_ROUTING_ZIPF)
        cfg_get_num(e, obj, path, "s", true, 0, true, 4, &r->zipf_s);
    if (dist != MOK_ROUTING_HOT)
        return;
    cfg_get_num(e, obj, path, "fraction", true, 0, false, 1, &r->hot_fraction);
    if (!cfg_get_int(e, obj, path, "expert", false, 0, MOK_MAX_EXPERTS - 1, 1, &r->hot_expert))
        return;
    for (int i = 0; i < ps->cfg->nmodels; i++) {
        const struct mok_model *m = &ps->cfg->models[i];
        if (m->experts > 0 && r->hot_expert >= m->experts) { /* experts 0: that model already has an error */
            char mp[32];
            snprintf(mp, sizeof mp, ps->model_list ? "model[%d]" : "model", i);
            cfg_fail(e, cfg_join(p, path, "expert"), cJSON_GetObjectItemCaseSensitive(obj, "expert"),
                 "must be < experts of every model (%s has %d)", mp, m->experts);
            return;
        }
    }
}

static void parse_routings(struct parser *ps, const cJSON *v)
{
    const cJSON *items[MOK_MAX_ROUTINGS];
    char p[PATHLEN];
    bool list;
    ps->cfg->nroutings = 1; /* default: uniform, seed 1 */
    ps->cfg->routings[0].dist = MOK_ROUTING_UNIFORM;
    ps->cfg->routings[0].seed = 1;
    if (!v)
        return;
    int n = cfg_as_list(ps->e, v, "routing", MOK_MAX_ROUTINGS, items, &list);
    for (int i = 0; i < n; i++) {
        const char *path = list ? cfg_indexed(p, "routing", i) : "routing";
        if (!cJSON_IsObject(items[i]))
            cfg_fail(ps->e, path, items[i], list ? "must be an object" : "must be an object or a list of objects");
        else
            parse_routing(ps, items[i], path, &ps->cfg->routings[i]);
    }
    ps->cfg->nroutings = n > 0 ? n : 1;
}

/* One "inputs" object; false when a value of it is wrong (the duplicate check then leaves it out). */
static bool parse_inputs_item(struct mok_errors *e, const cJSON *obj, const char *path, struct mok_inputs *in)
{
    char p[PATHLEN];
    int before = e->count;
    cfg_check_keys(e, obj, path, inputs_keys, COUNT(inputs_keys));
    const cJSON *dv = cJSON_GetObjectItemCaseSensitive(obj, "distribution");
    int dist = dv ? cfg_choice(e, dv, cfg_join(p, path, "distribution"), mok_cfg_input_dist_names,
                           COUNT(mok_cfg_input_dist_names), COUNT(mok_cfg_input_dist_names))
                  : MOK_INPUTS_UNIFORM;
    in->dist = dist < 0 ? MOK_INPUTS_UNIFORM : (enum mok_input_dist)dist;
    in->scale = 1.0;
    in->mantissa_bits = 7;
    cfg_get_num(e, obj, path, "scale", false, 0, true, MOK_MAX_INPUT_SCALE, &in->scale);
    cfg_get_int(e, obj, path, "mantissa_bits", false, 0, 7, 1, &in->mantissa_bits);
    return e->count == before;
}

/* "inputs": one object or a list of distinct ones (default: uniform, scale 1, 7 mantissa bits). */
static void parse_inputs(struct parser *ps, const cJSON *v)
{
    const cJSON *items[MOK_MAX_INPUTS];
    char p[PATHLEN];
    bool list, valid[MOK_MAX_INPUTS] = {false};
    ps->cfg->ninputs = 1;
    ps->cfg->inputs[0] = (struct mok_inputs){MOK_INPUTS_UNIFORM, 1.0, 7};
    if (!v)
        return;
    int n = cfg_as_list(ps->e, v, "inputs", MOK_MAX_INPUTS, items, &list);
    for (int i = 0; i < n; i++) {
        const char *path = list ? cfg_indexed(p, "inputs", i) : "inputs";
        if (!cJSON_IsObject(items[i])) {
            cfg_fail(ps->e, path, items[i], list ? "must be an object" : "must be an object or a list of objects");
            continue;
        }
        struct mok_inputs *in = &ps->cfg->inputs[i];
        valid[i] = parse_inputs_item(ps->e, items[i], path, in);
        for (int j = 0; j < i && valid[i]; j++) /* the same tensors twice: twice the run for nothing */
            if (valid[j] && ps->cfg->inputs[j].dist == in->dist && ps->cfg->inputs[j].scale == in->scale &&
                ps->cfg->inputs[j].mantissa_bits == in->mantissa_bits) {
                char q[PATHLEN];
                cfg_fail(ps->e, path, items[i], "the same distribution, scale and mantissa_bits as %s (list each once)",
                     cfg_indexed(q, "inputs", j));
                break;
            }
    }
    ps->cfg->ninputs = n > 0 ? n : 1;
}

/* dtype and pass: one name or a list of distinct names; out[] gets indexes into names[]. */
#define MOK_NAMES_MAX 3
_Static_assert(MOK_NPASSES <= MOK_NAMES_MAX && MOK_NDTYPES <= MOK_NAMES_MAX, "parse_names holds every pass and dtype");
static int parse_names(struct mok_errors *e, const cJSON *v, const char *key, const char *const *names, int n,
                       int implemented, int *out)
{
    const cJSON *items[MOK_NAMES_MAX]; /* n <= MOK_NAMES_MAX: dtype 3, pass 3, mode 3 names */
    char p[PATHLEN];
    bool list;
    out[0] = 0; /* default: names[0] */
    if (!v)
        return 1;
    int count = cfg_as_list(e, v, key, n, items, &list);
    for (int i = 0; i < count; i++) {
        const char *path = list ? cfg_indexed(p, key, i) : key;
        int k = cfg_choice(e, items[i], path, names, n, implemented);
        for (int j = 0; j < i; j++)
            if (k >= 0 && out[j] == k) {
                cfg_fail(e, path, items[i], "duplicate value");
                break;
            }
        out[i] = k < 0 ? 0 : k;
    }
    return count > 0 ? count : 1;
}

static void parse_impls(struct parser *ps, const cJSON *v)
{
    struct mok_config *cfg = ps->cfg;
    const char *names[MOK_MAX_IMPLS] = {NULL};
    const cJSON *items[MOK_MAX_IMPLS];
    char p[PATHLEN], allowed[256];
    int nreg = mok_impl_desc_count(); /* <= MOK_MAX_IMPLS: desc.c asserts it at compile time */
    bool list;
    const char *mode = mok_mode_name(cfg->mode);
    const char *of_mode[MOK_MAX_IMPLS] = {NULL};
    int nmode = 0;
    for (int i = 0; i < nreg; i++) {
        names[i] = mok_impl_desc_at(i)->name;
        if (strcmp(mok_impl_desc_at(i)->mode, mode) == 0)
            of_mode[nmode++] = names[i];
    }
    cfg_list_names(allowed, sizeof allowed, of_mode, nmode, true);
    if (!v) { /* default: every implementation of the mode */
        for (int i = 0; i < nmode; i++)
            snprintf(cfg->impls[cfg->nimpls++], MOK_NAME_LEN, "%s", of_mode[i]);
        return;
    }
    int n = cfg_as_list(ps->e, v, "impls", MOK_MAX_IMPLS, items, &list);
    for (int i = 0; i < n; i++) {
        const char *path = list ? cfg_indexed(p, "impls", i) : "impls";
        int k = cJSON_IsString(items[i]) ? cfg_find_name(items[i]->valuestring, names, nreg) : -1;
        bool dup = false;
        for (int j = 0; k >= 0 && j < cfg->nimpls; j++)
            dup = dup || strcmp(cfg->impls[j], names[k]) == 0;
        ps->impls_refused = ps->impls_refused || k < 0 || strcmp(mok_impl_desc_at(k)->mode, mode) != 0;
        if (k < 0)
            cfg_fail(ps->e, path, items[i], "unknown implementation (allowed: %s)", allowed);
        else if (strcmp(mok_impl_desc_at(k)->mode, mode) != 0)
            cfg_fail(ps->e, path, items[i], "belongs to mode \"%s\", the config's mode is \"%s\" (allowed: %s)",
                 mok_impl_desc_at(k)->mode, mode, allowed);
        else if (dup)
            cfg_fail(ps->e, path, items[i], "duplicate value");
        else /* only valid names are kept, so tune can look them up */
            snprintf(cfg->impls[cfg->nimpls++], MOK_NAME_LEN, "%s", names[k]);
    }
}

/* tune.IMPL.PARAM: one value or a list of distinct values; enumerated params hold choice indexes. */
static void parse_param(struct mok_errors *e, const cJSON *v, const char *path, const struct mok_param_def *def,
                        struct mok_tune *t, int pi)
{
    const cJSON *items[MOK_MAX_VALUES];
    bool valid[MOK_MAX_VALUES] = {false};
    char p[PATHLEN];
    bool list;
    int n = cfg_as_list(e, v, path, MOK_MAX_VALUES, items, &list);
    if (n < 0)
        return;
    for (int i = 0; i < n; i++) {
        const char *ip = list ? cfg_indexed(p, path, i) : path;
        long long x;
        if (def->choices)
            valid[i] = (x = cfg_choice(e, items[i], ip, (const char *const *)def->choices, def->nchoices,
                                   def->nchoices)) >= 0;
        else
            valid[i] = cfg_int_value(e, items[i], ip, def->min, def->max, 1, &x);
        const int *set = NULL;
        const int nset = def->choices ? 0 : mok_param_value_set(def->name, &set);
        bool in_set = nset == 0;
        for (int k = 0; valid[i] && k < nset; k++)
            in_set |= set[k] == x;
        if (valid[i] && !in_set) {
            char allowed[64] = "";
            for (int k = 0; k < nset; k++)
                snprintf(allowed + strlen(allowed), sizeof allowed - strlen(allowed), "%s%d", k ? ", " : "", set[k]);
            cfg_fail(e, ip, items[i], "not a size the kernels run (allowed: %s)", allowed);
            valid[i] = false;
        }
        for (int j = 0; valid[i] && j < i; j++)
            if (valid[j] && t->values[pi][j] == x) {
                cfg_fail(e, ip, items[i], "duplicate value");
                break;
            }
        t->values[pi][i] = valid[i] ? (int)x : def->default_value;
    }
    t->nvalues[pi] = n;
}

/* Names of the params of d, for "allowed: ..." lists. */
static const char *param_names(const struct mok_impl_desc *d, char *buf, size_t len)
{
    const char *names[MOK_MAX_PARAMS];
    int n = d->nparams; /* <= MOK_MAX_PARAMS: desc.c asserts it at compile time */
    for (int k = 0; k < n; k++)
        names[k] = d->params[k].name;
    return cfg_list_names(buf, len, names, n, false);
}

static void parse_tune(struct parser *ps, const cJSON *v)
{
    struct mok_config *cfg = ps->cfg;
    struct mok_errors *e = ps->e;
    char p[PATHLEN], pp[PATHLEN], impls[256], params[256];
    const char *names[MOK_MAX_IMPLS];
    bool seen[MOK_MAX_IMPLS] = {false};

    for (int i = 0; i < cfg->nimpls; i++) { /* defaults first: a param not tuned runs at its default */
        const struct mok_impl_desc *d = mok_impl_desc_find(cfg->impls[i]);
        for (int k = 0; k < d->nparams; k++) {
            cfg->tune[i].nvalues[k] = 1;
            cfg->tune[i].values[k][0] = d->params[k].default_value;
        }
        names[i] = cfg->impls[i];
    }
    if (!v)
        return;
    if (!cJSON_IsObject(v)) {
        cfg_fail(e, "tune", v, "must be an object");
        return;
    }
    cfg_list_names(impls, sizeof impls, names, cfg->nimpls, true);
    for (const cJSON *c = v->child; c; c = c->next) {
        const struct mok_impl_desc *d = mok_impl_desc_find(c->string);
        int ii = cfg_find_name(c->string, names, cfg->nimpls);
        cfg_join(p, "tune", c->string);
        if (ii < 0 && d && ps->impls_refused) { /* likely the refused impls entry's block: that error says it */
            continue;
        } else if (ii < 0) {
            cfg_fail(e, p, c, "%s (allowed: the names in impls: %s)",
                 d ? "implementation not in impls" : "unknown implementation", impls);
            continue;
        } else if (seen[ii]) {
            cfg_fail(e, p, NULL, "duplicate key");
            continue;
        }
        seen[ii] = true;
        if (!cJSON_IsObject(c)) {
            cfg_fail(e, p, c, "must be an object of %s parameters (allowed: %s)", d->name,
                 param_names(d, params, sizeof params));
            continue;
        }
        bool pseen[MOK_MAX_PARAMS] = {false};
        for (const cJSON *pc = c->child; pc; pc = pc->next) {
            int pi = mok_impl_param_index(d, pc->string);
            cfg_join(pp, p, pc->string);
            const char *renamed = pi < 0 ? mok_impl_param_renamed(d->name, pc->string) : NULL;
            const char *removed = pi < 0 ? mok_impl_param_removed(d->name, pc->string) : NULL;
            if (renamed)
                cfg_fail(e, pp, NULL, "renamed to \"%s\" (a parameter name means one thing in every implementation)",
                     renamed);
            else if (removed)
                cfg_fail(e, pp, NULL, "removed: %s", removed);
            else if (pi < 0)
                cfg_fail(e, pp, pc, "unknown parameter of %s (allowed: %s)", d->name,
                     param_names(d, params, sizeof params));
            else if (pseen[pi])
                cfg_fail(e, pp, NULL, "duplicate key");
            else
                parse_param(e, pc, pp, &d->params[pi], &cfg->tune[ii], pi);
            if (pi >= 0)
                pseen[pi] = true;
        }
        double n = 1; /* the sweep's size, in a double: 16^24 at most, where an int wraps */
        for (int k = 0; k < d->nparams; k++)
            n *= cfg->tune[ii].nvalues[k] > 0 ? cfg->tune[ii].nvalues[k] : 1;
        if (n > MOK_MAX_CANDIDATES)
            cfg_fail(e, p, NULL, "%.0f candidates (the product of its lists' lengths), more than the %d one "
                     "implementation's sweep may hold: shorten its lists, or split them over several configs", n,
                     MOK_MAX_CANDIDATES);
    }
}

/* Valid output names keep report file names portable: [A-Za-z0-9._-]. */
static bool name_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
}

/* Default output name: the source's basename without ".json", other characters made '_'. */
static void default_output_name(const char *source, char *out)
{
    const char *base = strrchr(source, '/') ? strrchr(source, '/') + 1 : source;
    size_t n = strlen(base);
    if (n > 5 && strcmp(base + n - 5, ".json") == 0)
        n -= 5;
    if (n >= MOK_NAME_LEN)
        n = MOK_NAME_LEN - 1;
    for (size_t i = 0; i < n; i++)
        out[i] = name_char_ok(base[i]) ? base[i] : '_';
    out[n] = '\0';
    if (n == 0)
        snprintf(out, MOK_NAME_LEN, "mok-bench");
}

/* timing, check and output: optional objects of scalars. */
static void parse_scalars(struct parser *ps, const cJSON *root)
{
    struct mok_config *cfg = ps->cfg;
    struct mok_errors *e = ps->e;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "timing");
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "check");
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "output");
    cfg->warmup = 5;
    cfg->warmup_ms = 0;
    cfg->iters = 20;
    cfg->timed_ms = 0;
    cfg->input_sets = 0;
    cfg->check_enabled = true;
    cfg->rtol = 0.01;
    cfg->capacity_factor = 2.0;
    if (cfg_get_num(e, root, "", "capacity_factor", false, 0, true, 64, &cfg->capacity_factor)) {
        /* the receive buffer of the smallest problem must hold at least one route (factor x tokens x topk >= 1) */
        long long routes = 0;
        for (int mi = 0; mi < cfg->nmodels; mi++)
            for (int ti = 0; ti < cfg->ntokens; ti++) {
                long long r = (long long)cfg->models[mi].topk * cfg->tokens_per_rank[ti];
                routes = r > 0 && (routes == 0 || r < routes) ? r : routes;
            }
        if (routes > 0 && cfg->capacity_factor * (double)routes < 1.0)
            cfg_fail(e, "capacity_factor", cJSON_GetObjectItemCaseSensitive(root, "capacity_factor"),
                 "must be at least %.3g: the smallest problem has %lld routes per rank (tokens x topk), and its "
                 "receive buffers must hold at least one",
                 1.0 / (double)routes, routes);
    }
    cfg->search_strategy = 0;
    cfg->search_seed = 1;
    cfg->moe_layers = 1;
    const cJSON *sv = cJSON_GetObjectItemCaseSensitive(root, "search");
    if (sv && !cJSON_IsObject(sv)) {
        cfg_fail(e, "search", sv, "must be an object");
    } else if (sv) {
        cfg_check_keys(e, sv, "search", search_keys, COUNT(search_keys));
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(sv, "strategy");
        if (st) {
            int k = cfg_choice(e, st, "search.strategy", mok_cfg_search_names, COUNT(mok_cfg_search_names), COUNT(mok_cfg_search_names));
            if (k >= 0)
                cfg->search_strategy = k;
        }
        cfg_get_int(e, sv, "search", "max_measurements", false, 0, 1000000, 1, &cfg->search_max_measurements);
        cfg_get_num(e, sv, "search", "budget_s", false, 0, false, 86400, &cfg->search_budget_s);
        int seed = 1;
        if (cfg_get_int(e, sv, "search", "seed", false, 0, 2147483647, 1, &seed))
            cfg->search_seed = (uint64_t)seed;
    }
    const cJSON *pv = cJSON_GetObjectItemCaseSensitive(root, "planning");
    if (pv && !cJSON_IsObject(pv)) {
        cfg_fail(e, "planning", pv, "must be an object");
    } else if (pv) {
        cfg_check_keys(e, pv, "planning", planning_keys, COUNT(planning_keys));
        cfg_get_int(e, pv, "planning", "moe_layers", false, 1, 100000, 1, &cfg->moe_layers);
    }
    snprintf(cfg->output_dir, sizeof cfg->output_dir, "results/local");
    default_output_name(cfg->source, cfg->output_name);

    if (t && !cJSON_IsObject(t)) {
        cfg_fail(e, "timing", t, "must be an object");
    } else if (t) {
        cfg_check_keys(e, t, "timing", timing_keys, COUNT(timing_keys));
        cfg_get_int(e, t, "timing", "warmup", false, 0, 10000, 1, &cfg->warmup);
        cfg_get_int(e, t, "timing", "warmup_ms", false, 0, 60000, 1, &cfg->warmup_ms);
        cfg_get_int(e, t, "timing", "iters", false, 1, 100000, 1, &cfg->iters);
        cfg_get_int(e, t, "timing", "timed_ms", false, 0, 60000, 1, &cfg->timed_ms);
        cfg_get_int(e, t, "timing", "input_sets", false, 0, MOK_MAX_SETS, 1, &cfg->input_sets);
    }
    if (c && !cJSON_IsObject(c)) {
        cfg_fail(e, "check", c, "must be an object");
    } else if (c) {
        cfg_check_keys(e, c, "check", check_keys_list, COUNT(check_keys_list));
        const cJSON *en = cJSON_GetObjectItemCaseSensitive(c, "enabled");
        if (en && !cJSON_IsBool(en))
            cfg_fail(e, "check.enabled", en, "must be true or false");
        else if (en)
            cfg->check_enabled = cJSON_IsTrue(en);
        cfg_get_num(e, c, "check", "rtol", false, 0, true, 1, &cfg->rtol);
    }
    if (o && !cJSON_IsObject(o)) {
        cfg_fail(e, "output", o, "must be an object");
    } else if (o) {
        cfg_check_keys(e, o, "output", output_keys, COUNT(output_keys));
        cfg_get_str(e, o, "output", "dir", cfg->output_dir, sizeof cfg->output_dir);
        const cJSON *nv = cJSON_GetObjectItemCaseSensitive(o, "name");
        bool ok = nv && cJSON_IsString(nv) && nv->valuestring[0] && strlen(nv->valuestring) < MOK_NAME_LEN;
        for (const char *s = ok ? nv->valuestring : ""; *s; s++)
            ok = ok && name_char_ok(*s);
        if (nv && !ok)
            cfg_fail(e, "output.name", nv, "must be a non-empty string of at most %d characters from [A-Za-z0-9._-]",
                 MOK_NAME_LEN - 1);
        else if (nv)
            cfg_set_str(cfg->output_name, sizeof cfg->output_name, nv->valuestring);
    }
}

/* ---- entry points --------------------------------------------------------------------------------------- */

int mok_config_parse(const char *text, const char *source_name, struct mok_config *cfg, struct mok_errors *errs)
{
    int before = errs->count;
    const char *label = source_name && *source_name ? source_name : "<string>";
    memset(cfg, 0, sizeof(*cfg));
    if (source_name)
        snprintf(cfg->source, sizeof cfg->source, "%s", source_name);
    if (!text || !text[strspn(text, " \t\r\n")]) {
        mok_errors_add(errs, "%s: empty config (expected a JSON object)", label);
        return errs->count - before;
    }
    int depth = cfg_json_depth(text);
    if (depth > MOK_CONFIG_MAX_DEPTH) {
        mok_errors_add(errs, "%s: JSON nested %d levels deep: at most %d levels are allowed (a config needs 4)",
                       label, depth, MOK_CONFIG_MAX_DEPTH);
        return errs->count - before;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        cfg_malformed(errs, label, text, end ? end : text);
        return errs->count - before;
    }
    if (!cJSON_IsObject(root)) {
        mok_errors_add(errs, "%s: the top level must be an object, not %s", label,
                       cJSON_IsArray(root) ? "an array" : "a scalar");
        cJSON_Delete(root);
        return errs->count - before;
    }
    struct parser ps = {errs, cfg, false, false};
    int d[MOK_NDTYPES], p[MOK_NPASSES];
    cfg_check_keys(errs, root, "", top_keys, COUNT(top_keys));
    parse_models(&ps, cJSON_GetObjectItemCaseSensitive(root, "model"));
    parse_tokens(&ps, cJSON_GetObjectItemCaseSensitive(root, "tokens_per_rank"));
    parse_routings(&ps, cJSON_GetObjectItemCaseSensitive(root, "routing"));
    parse_inputs(&ps, cJSON_GetObjectItemCaseSensitive(root, "inputs"));
    cfg->ndtypes = parse_names(errs, cJSON_GetObjectItemCaseSensitive(root, "dtype"), "dtype", mok_cfg_dtype_names,
                               MOK_NDTYPES, MOK_DTYPES_IMPLEMENTED, d);
    cfg->npasses = parse_names(errs, cJSON_GetObjectItemCaseSensitive(root, "pass"), "pass", mok_cfg_pass_names,
                               MOK_NPASSES, MOK_NPASSES, p);
    for (int i = 0; i < MOK_NDTYPES; i++)
        cfg->dtypes[i] = (enum mok_dtype)(i < cfg->ndtypes ? d[i] : 0);
    for (int i = 0; i < MOK_NPASSES; i++)
        cfg->passes[i] = (enum mok_pass)(i < cfg->npasses ? p[i] : 0);
    int w[MOK_NWGRADS];
    cfg->nwgrads = parse_names(errs, cJSON_GetObjectItemCaseSensitive(root, "wgrad"), "wgrad", mok_cfg_wgrad_names,
                               MOK_NWGRADS, MOK_NWGRADS, w);
    for (int i = 0; i < MOK_NWGRADS; i++)
        cfg->wgrads[i] = (enum mok_wgrad)(i < cfg->nwgrads ? w[i] : 0);
    /* mode first: it decides which implementations are allowed and which are the default */
    const cJSON *mv = cJSON_GetObjectItemCaseSensitive(root, "mode");
    int mode[3] = {0, 0, 0};
    if (mv && !cJSON_IsString(mv))
        cfg_fail(errs, "mode", mv, "must be one string: \"layer\", \"comm\" or \"gemm\"");
    else if (parse_names(errs, mv, "mode", mok_cfg_mode_names, 3, 3, mode) == 1)
        cfg->mode = (enum mok_mode)mode[0];
    for (int i = 0; i < cfg->npasses; i++) /* comm mode moves rows and computes nothing to differentiate */
        if (mok_pass_has_bwd(cfg->passes[i]) && cfg->mode == MOK_MODE_COMM)
            cfg_fail(errs, "pass", cJSON_GetObjectItemCaseSensitive(root, "pass"),
                     "\"%s\" needs mode \"layer\" or \"gemm\" (mode \"comm\" has no expert compute)",
                     mok_cfg_pass_names[cfg->passes[i]]);
    parse_impls(&ps, cJSON_GetObjectItemCaseSensitive(root, "impls"));
    parse_tune(&ps, cJSON_GetObjectItemCaseSensitive(root, "tune"));
    parse_scalars(&ps, root);
    cJSON_Delete(root);
    return errs->count - before;
}

int mok_config_load(const char *path, struct mok_config *cfg, struct mok_errors *errs)
{
    int before = errs->count;
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->source, sizeof cfg->source, "%s", path);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        mok_errors_add(errs, "%s: is a directory (expected a JSON config file, e.g. configs/quick.json)", path);
        return errs->count - before;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        mok_errors_add(errs, "%s: cannot read: %s", path, strerror(errno));
        return errs->count - before;
    }
    /* Read one byte past the limit instead of trusting a file size: pipes and /proc files have none. */
    char *text = malloc(MAX_FILE_BYTES + 2);
    size_t n = text ? fread(text, 1, MAX_FILE_BYTES + 1, f) : 0;
    int read_errno = errno;
    bool bad = !text || ferror(f);
    fclose(f);
    if (bad)
        mok_errors_add(errs, "%s: cannot read: %s", path, strerror(text ? read_errno : ENOMEM));
    else if (n > MAX_FILE_BYTES)
        mok_errors_add(errs, "%s: too large (more than %d bytes)", path, MAX_FILE_BYTES);
    else if (memchr(text, '\0', n))
        mok_errors_add(errs, "%s: contains a NUL byte (not a JSON text file)", path);
    if (errs->count > before) {
        free(text);
        return errs->count - before;
    }
    text[n] = '\0';
    mok_config_parse(text, path, cfg, errs);
    free(text);
    return errs->count - before;
}

int mok_config_check_ranks(const struct mok_config *cfg, int nranks, struct mok_errors *errs)
{
    int before = errs->count;
    if (nranks < 1) {
        mok_errors_add(errs, "number of ranks %d: must be at least 1", nranks);
        return errs->count - before;
    }
    for (int i = 0; i < cfg->nmodels; i++) {
        char path[32];
        snprintf(path, sizeof path, cfg->nmodels > 1 ? "model[%d].experts" : "model.experts", i);
        if (cfg->models[i].experts % nranks != 0)
            mok_errors_add(errs, "%s = %d: must be divisible by the number of ranks (%d)", path,
                           cfg->models[i].experts, nranks);
    }
    return errs->count - before;
}

