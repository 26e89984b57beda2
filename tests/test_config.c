/* test_config: unit tests of the config parser. Usage: test_config DIR (tests/configs).
 *
 * every DIR/valid/X.json must parse cleanly and round-trip through mok_config_to_json; DIR/invalid/X.json must fail
 * and every line of DIR/invalid/X.expect must appear in its error messages, so a test pins the path and the
 * reason of an error, not just that there was one. A name like X.ranks3.json also runs check_ranks with 3. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "desc.h"

#include "check.h"

/* All messages joined by newlines, for substring checks. */
static void joined(const struct mok_errors *e, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < e->count && i < MOK_MAX_ERRORS && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s\n", e->msg[i]);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted names of DIR's entries ending in suffix; returns the count, *names malloc'ed. */
static int list_dir(const char *dir, const char *suffix, char ***names)
{
    DIR *d = opendir(dir);
    int n = 0, cap = 0;
    *names = NULL;
    if (!d)
        return 0;
    for (struct dirent *de; (de = readdir(d));) {
        size_t l = strlen(de->d_name), s = strlen(suffix);
        if (l <= s || strcmp(de->d_name + l - s, suffix) != 0)
            continue;
        if (n == cap)
            *names = realloc(*names, (size_t)(cap = cap ? 2 * cap : 32) * sizeof(char *));
        (*names)[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(*names, (size_t)n, sizeof(char *), cmp_str);
    return n;
}

static void free_names(char **names, int n)
{
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* parse -> to_json -> parse -> to_json must give the same text and the same struct (source aside). */
static void check_round_trip(const char *label, const struct mok_config *cfg)
{
    char *j1 = mok_config_to_json(cfg);
    static struct mok_config again;
    struct mok_errors e;
    mok_errors_init(&e);
    int n = mok_config_parse(j1, NULL, &again, &e);
    CHECK(n == 0, "%s: canonical JSON does not parse: %s\n%s", label, e.msg[0], j1);
    char *j2 = mok_config_to_json(&again);
    CHECK(strcmp(j1, j2) == 0, "%s: round trip differs:\n  %s\n  %s", label, j1, j2);
    memcpy(again.source, cfg->source, sizeof again.source);
    CHECK(memcmp(&again, cfg, sizeof again) == 0, "%s: struct differs after round trip", label);
    free(j1);
    free(j2);
}

static void test_valid(const char *dir)
{
    char sub[1024], path[2048], **names;
    snprintf(sub, sizeof sub, "%s/valid", dir);
    int n = list_dir(sub, ".json", &names);
    CHECK(n >= 5, "only %d valid configs in %s", n, sub);
    for (int i = 0; i < n; i++) {
        static struct mok_config cfg;
        struct mok_errors e;
        mok_errors_init(&e);
        snprintf(path, sizeof path, "%s/%s", sub, names[i]);
        int errs = mok_config_load(path, &cfg, &e);
        CHECK(errs == 0 && e.count == 0, "%s: %d errors, first: %s", path, errs, e.msg[0]);
        CHECK(mok_config_check_ranks(&cfg, 1, &e) == 0, "%s: check_ranks(1) failed", path);
        CHECK(strcmp(cfg.source, path) == 0, "%s: source is '%s'", path, cfg.source);
        CHECK(mok_config_problem_count(&cfg) >= 1, "%s: no problems", path);
        check_round_trip(path, &cfg);
    }
    printf("valid: %d configs\n", n);
    free_names(names, n);
}

static void test_invalid(const char *dir)
{
    char sub[1024], path[2048], all[MOK_MAX_ERRORS * MOK_ERROR_LEN], **names;
    snprintf(sub, sizeof sub, "%s/invalid", dir);
    int n = list_dir(sub, ".json", &names);
    CHECK(n >= 24, "only %d invalid configs in %s", n, sub);
    for (int i = 0; i < n; i++) {
        static struct mok_config cfg;
        struct mok_errors e;
        mok_errors_init(&e);
        snprintf(path, sizeof path, "%s/%s", sub, names[i]);
        const char *r = strstr(names[i], ".ranks");
        int nranks = r ? atoi(r + 6) : 1;
        int parse_errs = mok_config_load(path, &cfg, &e);
        int rank_errs = mok_config_check_ranks(&cfg, nranks, &e);
        joined(&e, all, sizeof all);
        CHECK(parse_errs + rank_errs > 0, "%s: accepted", path);

        snprintf(path + strlen(path) - 5, 8, ".expect");
        char *expect = read_text(path);
        CHECK(expect != NULL, "%s: missing", path);
        int lines = 0;
        for (char *line = expect ? strtok(expect, "\n") : NULL; line; line = strtok(NULL, "\n"), lines++)
            CHECK(strstr(all, line) != NULL, "%s: expected '%s' in:\n%s", path, line, all);
        CHECK(lines > 0, "%s: no expectations", path);
        free(expect);
    }
    printf("invalid: %d configs\n", n);
    free_names(names, n);
}

/* Specific values and defaults of a few configs. */
static void test_values(const char *dir)
{
    static struct mok_config cfg;
    struct mok_errors e;
    char path[2048], label[64];
    struct mok_problem_spec ps;

    mok_errors_init(&e);
    snprintf(path, sizeof path, "%s/valid/minimal.json", dir);
    CHECK(mok_config_load(path, &cfg, &e) == 0, "minimal: %s", e.msg[0]);
    CHECK(cfg.nmodels == 1 && cfg.models[0].hidden == 7168 && cfg.models[0].topk == 8, "model");
    CHECK(strcmp(cfg.models[0].name, "H7168-I2048-E256-k8") == 0, "default name %s", cfg.models[0].name);
    CHECK(cfg.models[0].shared_experts == 0, "shared default");
    CHECK(cfg.ntokens == 1 && cfg.tokens_per_rank[0] == 4096, "tokens");
    CHECK(cfg.nroutings == 1 && cfg.routings[0].dist == MOK_ROUTING_UNIFORM && cfg.routings[0].seed == 1, "routing");
    CHECK(cfg.ndtypes == 1 && cfg.dtypes[0] == MOK_DTYPE_BF16, "dtype");
    CHECK(cfg.npasses == 1 && cfg.passes[0] == MOK_PASS_FWD, "pass");
    CHECK(cfg.warmup == 5 && cfg.warmup_ms == 0 && cfg.iters == 20 && cfg.timed_ms == 0 && cfg.input_sets == 0,
          "timing %d %d %d %d %d", cfg.warmup, cfg.warmup_ms, cfg.iters, cfg.timed_ms, cfg.input_sets);
    CHECK(cfg.check_enabled && cfg.rtol == 0.01, "check");
    CHECK(strcmp(cfg.output_dir, "results/local") == 0, "dir %s", cfg.output_dir);
    CHECK(strcmp(cfg.output_name, "minimal") == 0, "name %s", cfg.output_name);
    /* default: every implementation of the default mode ("layer"), in registry order */
    int layer_impls = 0;
    for (int i = 0; i < mok_impl_desc_count(); i++)
        layer_impls += strcmp(mok_impl_desc_at(i)->mode, "layer") == 0;
    CHECK(cfg.mode == MOK_MODE_LAYER && cfg.capacity_factor == 2.0, "mode and capacity_factor defaults");
    CHECK(cfg.nimpls == layer_impls, "nimpls %d", cfg.nimpls);
    for (int i = 0, next = 0; i < cfg.nimpls; i++) { /* the layer implementations, in registry order */
        while (next < mok_impl_desc_count() && strcmp(mok_impl_desc_at(next)->mode, "layer"))
            next++;
        const struct mok_impl_desc *d = mok_impl_desc_at(next++);
        CHECK(d && strcmp(cfg.impls[i], d->name) == 0, "impl %d %s", i, cfg.impls[i]);
        if (!d)
            break;
        for (int k = 0; k < d->nparams; k++)
            CHECK(cfg.tune[i].nvalues[k] == 1 && cfg.tune[i].values[k][0] == d->params[k].default_value,
                  "default of %s.%s", d->name, d->params[k].name);
    }
    CHECK(mok_config_problem_count(&cfg) == 1, "count");

    snprintf(path, sizeof path, "%s/valid/lists.json", dir);
    CHECK(mok_config_load(path, &cfg, &e) == 0, "lists: %s", e.msg[0]);
    CHECK(mok_config_problem_count(&cfg) == 3 * 3 * 2, "count %d", mok_config_problem_count(&cfg));
    CHECK(strcmp(cfg.models[1].name, "H4096-I1536-E64-k6") == 0, "name %s", cfg.models[1].name);
    CHECK(cfg.models[0].shared_experts == 1, "shared");
    /* model outermost, then tokens, then routing (dtype and pass have one value each) */
    mok_config_problem_at(&cfg, 0, &ps);
    CHECK(ps.index == 0 && strcmp(ps.model.name, "deepseek-v3") == 0 && ps.tokens_per_rank == 128 &&
              ps.routing.seed == 1, "problem 0");
    mok_config_problem_at(&cfg, 1, &ps);
    CHECK(ps.index == 1 && ps.tokens_per_rank == 128 && ps.routing.seed == 42, "problem 1");
    mok_config_problem_at(&cfg, 2, &ps);
    CHECK(ps.tokens_per_rank == 1024 && ps.routing.seed == 1 && ps.model.hidden == 7168, "problem 2");
    mok_config_problem_at(&cfg, 6, &ps);
    CHECK(ps.model.hidden == 4096 && ps.tokens_per_rank == 128, "problem 6");
    mok_config_problem_at(&cfg, 17, &ps);
    CHECK(ps.index == 17 && strcmp(ps.model.name, "tiny") == 0 && ps.tokens_per_rank == 4096 &&
              ps.routing.seed == 42 && ps.dtype == MOK_DTYPE_BF16 && ps.pass == MOK_PASS_FWD, "problem 17");
    mok_config_problem_at(&cfg, 18, &ps);
    CHECK(ps.index == -1, "out of range index");

    /* passes and the wgrad axis: fwd once, bwd and fwd_bwd once per wgrad mode, innermost (valid/gemm_bwd.json) */
    snprintf(path, sizeof path, "%s/valid/gemm_bwd.json", dir);
    CHECK(mok_config_load(path, &cfg, &e) == 0, "gemm_bwd: %s", e.msg[0]);
    CHECK(cfg.npasses == 3 && cfg.nwgrads == 2 && mok_config_problem_count(&cfg) == 2 * (1 + 2 + 2), "count %d",
          mok_config_problem_count(&cfg));
    static const enum mok_pass want_pass[5] = {MOK_PASS_FWD, MOK_PASS_BWD, MOK_PASS_BWD, MOK_PASS_FWD_BWD,
                                               MOK_PASS_FWD_BWD};
    static const enum mok_wgrad want_wgrad[5] = {MOK_WGRAD_FP32_ACCUMULATE, MOK_WGRAD_FP32_ACCUMULATE, MOK_WGRAD_BF16,
                                                 MOK_WGRAD_FP32_ACCUMULATE, MOK_WGRAD_BF16};
    for (int i = 0; i < 10; i++) {
        mok_config_problem_at(&cfg, i, &ps);
        CHECK(ps.pass == want_pass[i % 5] && ps.wgrad == want_wgrad[i % 5] && ps.tokens_per_rank == (i < 5 ? 7 : 1000),
              "gemm_bwd problem %d: %s %s %d", i, mok_pass_name(ps.pass), mok_wgrad_name(ps.wgrad), ps.tokens_per_rank);
    }

    snprintf(path, sizeof path, "%s/valid/routing_zipf_hot.json", dir);
    CHECK(mok_config_load(path, &cfg, &e) == 0, "routing: %s", e.msg[0]);
    CHECK(cfg.nroutings == 4, "nroutings");
    CHECK(strcmp(mok_routing_label(&cfg.routings[0], label, sizeof label), "zipf(s=1.2)") == 0, "%s", label);
    CHECK(strcmp(mok_routing_label(&cfg.routings[1], label, sizeof label), "hot(f=0.3,e=0)") == 0, "%s", label);
    CHECK(strcmp(mok_routing_label(&cfg.routings[2], label, sizeof label), "hot(f=1,e=127)") == 0, "%s", label);
    CHECK(cfg.routings[0].seed == 7 && cfg.routings[2].seed == 0 && cfg.routings[3].zipf_s == 4, "seeds");

    snprintf(path, sizeof path, "%s/valid/tune.json", dir);
    CHECK(mok_config_load(path, &cfg, &e) == 0, "tune: %s", e.msg[0]);
    CHECK(cfg.nimpls == 2 && strcmp(cfg.impls[0], "nccl-overlap") == 0 && strcmp(cfg.impls[1], "nccl") == 0,
          "impl order");
    CHECK(cfg.tune[1].nvalues[0] == 2 && cfg.tune[1].values[0][0] == 0 && cfg.tune[1].values[0][1] == 1, "gemm");
    CHECK(cfg.tune[0].nvalues[0] == 5 && cfg.tune[0].values[0][3] == 64 && cfg.tune[0].values[0][4] == 1, "chunks");
    /* params not given hold their default: expert_groups 4, gemm per_expert (1), gemm_streams 4 */
    CHECK(cfg.tune[0].nvalues[1] == 1 && cfg.tune[0].values[1][0] == 4, "nccl-overlap expert_groups default");
    CHECK(cfg.tune[0].nvalues[2] == 1 && cfg.tune[0].values[2][0] == 1, "nccl-overlap gemm default");
    CHECK(cfg.tune[0].nvalues[3] == 1 && cfg.tune[0].values[3][0] == 4, "nccl-overlap gemm_streams default");

    snprintf(path, sizeof path, "%s/valid/full.json", dir);
    CHECK(mok_config_load(path, &cfg, &e) == 0, "full: %s", e.msg[0]);
    CHECK(cfg.routings[0].seed == 9007199254740991ULL && cfg.routings[0].zipf_s == 0.1 + 0.2, "seed");
    CHECK(!cfg.check_enabled && cfg.rtol == 1 && cfg.warmup == 0 && cfg.warmup_ms == 60000 && cfg.iters == 100000 &&
              cfg.timed_ms == 60000 && cfg.input_sets == MOK_MAX_SETS,
          "timing/check");
    CHECK(strcmp(cfg.output_name, "dsv3_sweep-1.0") == 0 && strcmp(cfg.output_dir, "results/h200x8") == 0,
          "output");
    CHECK(cfg.tune[0].values[0][0] == 1 && cfg.tune[1].values[0][0] == 16 && cfg.tune[1].nvalues[2] == 2, "tune");
    CHECK(mok_config_check_ranks(&cfg, 8, &e) == 0 && mok_config_check_ranks(&cfg, 256, &e) == 0, "ranks");
    CHECK(cfg.search_strategy == 1 && cfg.search_max_measurements == 40 && cfg.search_budget_s == 120.5 &&
              cfg.search_seed == 7 && cfg.moe_layers == 61,
          "search and planning");
    CHECK(mok_config_check_ranks(&cfg, 0, &e) == 1, "nranks 0 must be an error");
}

static void test_misc(void)
{
    static struct mok_config cfg;
    struct mok_errors e;
    char all[MOK_MAX_ERRORS * MOK_ERROR_LEN];

    /* from a string with no source: default output name, "<string>" in messages */
    mok_errors_init(&e);
    CHECK(mok_config_parse("{\"model\":{\"hidden\":64,\"intermediate\":64,\"experts\":2,\"topk\":1},"
                           "\"tokens_per_rank\":1}",
                           NULL, &cfg, &e) == 0,
          "string: %s", e.msg[0]);
    CHECK(strcmp(cfg.output_name, "mok-bench") == 0 && cfg.source[0] == '\0', "name %s", cfg.output_name);
    CHECK(mok_config_parse("{\"model\":", NULL, &cfg, &e) == 1, "truncated");
    CHECK(strstr(e.msg[e.count - 1], "<string>:1:10: malformed JSON") != NULL, "%s", e.msg[e.count - 1]);
    CHECK(mok_config_parse(NULL, "x", &cfg, &e) == 1, "NULL text");

    /* a typo in impls is the one error: the tune block of the name meant is not blamed as well */
    mok_errors_init(&e);
    CHECK(mok_config_parse("{\"model\":{\"hidden\":64,\"intermediate\":64,\"experts\":2,\"topk\":1},"
                           "\"tokens_per_rank\":1,\"impls\":[\"nccl\",\"megakernl\"],"
                           "\"tune\":{\"megakernel\":{\"comm_sms\":8}}}",
                           NULL, &cfg, &e) == 1 && strstr(e.msg[0], "\"megakernl\": unknown implementation"),
          "typo: %d errors, first: %s", e.count, e.msg[0]);

    /* missing file */
    mok_errors_init(&e);
    const char *missing = "/nonexistent/dir/config.json";
    CHECK(mok_config_load(missing, &cfg, &e) == 1, "missing file");
    CHECK(strstr(e.msg[0], missing) && strstr(e.msg[0], "cannot read"), "%s", e.msg[0]);

    mok_errors_init(&e); /* a directory given as the config says so */
    CHECK(mok_config_load("/tmp", &cfg, &e) == 1 && strstr(e.msg[0], "/tmp: is a directory"), "dir: %s", e.msg[0]);

    /* a file over 1 MiB */
    char tmp[] = "/tmp/test_config_XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0, "mkstemp");
    FILE *f = fdopen(fd, "w");
    for (int i = 0; i < (1 << 20) + 10; i++)
        fputc(' ', f);
    fclose(f);
    mok_errors_init(&e);
    CHECK(mok_config_load(tmp, &cfg, &e) == 1 && strstr(e.msg[0], "too large"), "big file: %s", e.msg[0]);
    unlink(tmp);

    /* more errors than the list keeps: counted, the first kept, printing says how many were dropped */
    size_t cap = 200 * 32 + 64;
    char *text = malloc(cap);
    size_t used = (size_t)snprintf(text, cap, "{");
    for (int i = 0; i < 200; i++)
        used += (size_t)snprintf(text + used, cap - used, "%s\"bad%d\": %d", i ? "," : "", i, i);
    snprintf(text + used, cap - used, "}");
    mok_errors_init(&e);
    int n = mok_config_parse(text, "many", &cfg, &e);
    CHECK(n == 202 && e.count == 202, "count %d %d", n, e.count); /* 200 keys + model + tokens missing */
    joined(&e, all, sizeof all);
    CHECK(strstr(all, "bad0 = 0: unknown key") && strstr(all, "bad63 = 63: unknown key") && !strstr(all, "bad64"),
          "kept: %s", all);
    char *buf = NULL;
    size_t blen = 0;
    FILE *mem = open_memstream(&buf, &blen);
    mok_errors_print(&e, mem, "many");
    fclose(mem);
    CHECK(strstr(buf, "... and 138 more errors") != NULL, "print tail");
    free(buf);
    free(text);

    /* names and the hash */
    CHECK(strcmp(mok_dtype_name(MOK_DTYPE_MXFP8), "mxfp8") == 0 && strcmp(mok_pass_name(MOK_PASS_BWD), "bwd") == 0,
          "names");
    CHECK(strcmp(mok_routing_dist_name(MOK_ROUTING_HOT), "hot") == 0, "dist name");
    CHECK(mok_hash64("", 0) == 0xcbf29ce484222325ULL && mok_hash64("a", 1) == 0xaf63dc4c8601ec8cULL, "fnv1a");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (tests/configs)\n", argv[0]);
        return 2;
    }
    test_valid(argv[1]);
    test_invalid(argv[1]);
    test_values(argv[1]);
    test_misc();
    printf("%s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures ? 1 : 0;
}
