/* Unit test of stats and report: percentiles against numpy, exact CSV/JSON round trips, never overwriting a
 * report, path choice, the console table, schema 1 files (tests/data's samples, a journal), the speedups' baselines,
 * the summary CSV, and that docs/report-columns.md names every field. Usage: test_report SCRATCH_DIR SOURCE_ROOT.
 * Exit 0 pass, 1 fail.
 * Everything is written under SCRATCH_DIR/test_report.<pid>, removed at the end. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "journal.h"
#include "report.h"
#include "report_fields.h"
#include "stats.h"
#include "summary.h"

#include "check.h"

/* Bitwise equality, NaN equal to NaN: a round trip must give back the very same double, -0 included. */
static int same_double(double a, double b)
{
    if (isnan(a) && isnan(b))
        return 1;
    return memcmp(&a, &b, sizeof a) == 0;
}

/* ---- stats ------------------------------------------------------------------------------------------ */

/* Expected values are numpy's: np.percentile(x, [50, 10, 90]) and np.mean(x), printed with %.17g. */
static void check_stats(const char *name, const double *x, int n, double med, double p10, double p90, double mn,
                        double mx, double mean)
{
    double copy[16];
    if (n > 0)
        memcpy(copy, x, (size_t)n * sizeof *x);
    struct mok_stats s;
    mok_stats_compute(x, n, &s);
    CHECK(s.n == n, "%s: n %d != %d", name, s.n, n);
    CHECK(same_double(s.median, med), "%s: median %.17g != %.17g", name, s.median, med);
    CHECK(same_double(s.p10, p10), "%s: p10 %.17g != %.17g", name, s.p10, p10);
    CHECK(same_double(s.p90, p90), "%s: p90 %.17g != %.17g", name, s.p90, p90);
    CHECK(same_double(s.min, mn), "%s: min %.17g != %.17g", name, s.min, mn);
    CHECK(same_double(s.max, mx), "%s: max %.17g != %.17g", name, s.max, mx);
    CHECK(same_double(s.mean, mean), "%s: mean %.17g != %.17g", name, s.mean, mean);
    CHECK(n == 0 || memcmp(copy, x, (size_t)n * sizeof *x) == 0, "%s: samples were modified", name);
}

static void test_stats(void)
{
    double one[] = {5.0};
    check_stats("n=1", one, 1, 5, 5, 5, 5, 5, 5);
    double two[] = {3.0, 1.0};
    check_stats("n=2", two, 2, 2, 1.2, 2.7999999999999998, 1, 3, 2);
    double ten[] = {9.5, 1.25, 7.0, 3.0, 3.0, 100.0, 0.5, 42.0, 7.0, 12.75};
    check_stats("n=10", ten, 10, 7, 1.175, 47.799999999999983, 0.5, 100, 18.600000000000001);
    double dup[] = {2.0, 2.0, 2.0, 1.0, 1.0};
    check_stats("dups", dup, 5, 2, 1, 2, 1, 2, 1.6000000000000001);
    /* p90 sits at weight 0.8, where numpy interpolates from the upper sample (b - (b-a)*(1-t)); the naive
     * a + (b-a)*t gives 2.7799999999999994 here. */
    double lerp[] = {3.3, 0.1, 0.7};
    check_stats("lerp", lerp, 3, 0.69999999999999996, 0.22, 2.7800000000000002, 0.1, 3.3, 1.3666666666666665);
    check_stats("n=0", NULL, 0, NAN, NAN, NAN, NAN, NAN, NAN);

    double sorted[] = {0, 10, 20, 30};
    CHECK(same_double(mok_percentile_sorted(sorted, 4, 0.0), 0), "percentile q=0");
    CHECK(same_double(mok_percentile_sorted(sorted, 4, 1.0), 30), "percentile q=1");
    CHECK(same_double(mok_percentile_sorted(sorted, 4, 0.5), 15), "percentile q=0.5");
    CHECK(isnan(mok_percentile_sorted(sorted, 0, 0.5)), "percentile n=0 not NaN");
}

/* ---- fixtures --------------------------------------------------------------------------------------- */

static void make_env(struct mok_env *env)
{
    memset(env, 0, sizeof *env);
    snprintf(env->mok_version, sizeof env->mok_version, "0.1.0");
    snprintf(env->commit, sizeof env->commit, "abc123def456-dirty");
    snprintf(env->cuda_runtime, sizeof env->cuda_runtime, "13.0");
    snprintf(env->cuda_driver, sizeof env->cuda_driver, "13.1");
    snprintf(env->nccl, sizeof env->nccl, "2.28.3");
    snprintf(env->mpi, sizeof env->mpi, "Open MPI v5.0.3, package: \"Open MPI\" distribution");
    snprintf(env->gpu, sizeof env->gpu, "NVIDIA H200");
    env->sm_count = 132;
    env->nranks = 2;
    env->lsa_size = 2;
    env->nrank_info = 2;
    for (int i = 0; i < 2; i++) {
        env->ranks[i].rank = i;
        env->ranks[i].pid = 1000 + i;
        env->ranks[i].device = i;
        env->ranks[i].sm_count = 132;
        snprintf(env->ranks[i].host, sizeof env->ranks[i].host, "node%d", i);
        snprintf(env->ranks[i].gpu, sizeof env->ranks[i].gpu, "NVIDIA H200");
    }
}

static void make_rows(struct mok_row rows[3])
{
    struct mok_row *r = &rows[0];
    mok_row_init(r);
    r->problem = 0;
    snprintf(r->model, sizeof r->model, "DeepSeek-V3, \"full\"");
    r->hidden = 7168;
    r->intermediate = 2048;
    r->experts = 256;
    r->topk = 8;
    r->shared_experts = 1;
    r->tokens_per_rank = 4096;
    snprintf(r->routing, sizeof r->routing, "hot(f=0.3,e=0)");
    snprintf(r->dtype, sizeof r->dtype, "bf16");
    snprintf(r->pass, sizeof r->pass, "fwd");
    snprintf(r->impl, sizeof r->impl, "fused");
    snprintf(r->params, sizeof r->params, "chunks=4,gemm=\"grouped\",x=\"\"");
    snprintf(r->disposition, sizeof r->disposition, MOK_DISPOSITION_PASSED);
    r->max_rel_err = 1.2345678901234567e-300;
    r->norm_rel_err = 0.1 + 0.2; /* 0.30000000000000004: cJSON's own printing would turn it into 0.3 */
    r->bad_count = 1234567890123LL;
    r->nan_count = 0;
    r->iters = 100;
    r->time_med_us = 123.456;
    r->time_p10_us = -0.0;
    r->time_p90_us = 1.7976931348623157e308;
    r->flops = 4.9406564584124654e-324; /* the smallest subnormal */
    r->tflops = 1.0 / 3.0;
    r->dispatch_bytes = 9007199254740993.0;
    r->combine_bytes = 1e15;
    r->comm_gbps = 2.0 / 3.0;
    r->speedup = 1.0;
    snprintf(r->speedup_baseline, sizeof r->speedup_baseline, "nccl-overlap");
    r->exposed_comm_us = 12.25;
    snprintf(r->mode, sizeof r->mode, "layer");
    r->capacity_factor = 1.5;
    r->warmup = 5;
    r->warmup_ms = 200;
    r->seed = 9007199254740991.0; /* 2^53 - 1, the config's largest */
    snprintf(r->run_start, sizeof r->run_start, "2026-12-01T21:30:00Z");
    /* phase fields stay NaN */
    snprintf(r->note, sizeof r->note, "he said \"hi\"\nsecond line, with comma\r\nthird");

    r = &rows[1];
    mok_row_init(r); /* every double NaN, every string empty */
    r->problem = 1;
    snprintf(r->impl, sizeof r->impl, "nccl");

    r = &rows[2];
    mok_row_init(r);
    r->problem = INT_MAX;
    snprintf(r->model, sizeof r->model, "m");
    r->hidden = INT_MIN;
    r->intermediate = -1;
    r->tokens_per_rank = 1;
    snprintf(r->routing, sizeof r->routing, "zipf(s=1.2)");
    snprintf(r->dtype, sizeof r->dtype, "mxfp8");
    snprintf(r->pass, sizeof r->pass, "bwd");
    snprintf(r->impl, sizeof r->impl, "pipelined");
    snprintf(r->params, sizeof r->params, "\"");
    snprintf(r->disposition, sizeof r->disposition, MOK_DISPOSITION_FAILED);
    r->bad_count = -9007199254740992LL;
    r->nan_count = 9007199254740992LL;
    r->time_med_us = -42.5;
    r->dispatch_us = 1e-310;
    r->gemm_us = 6.02214076e23;
    r->gemm_alone_us = -1e-5;
    r->a2a_ref_us = 0.0;
    r->a2a_ref_gbps = 123456789.125;
    r->energy_j = 7.25;
    r->power_w = 612.5;
    r->power_capped_share = 0.875;
    snprintf(r->mode, sizeof r->mode, "gemm");
    r->capacity_factor = 0.0;
    r->warmup = 0;
    r->seed = 1;
    snprintf(r->note, sizeof r->note, ",");
}

/* The value a time comes back as from the rounded CSV (to 0.1 us or 4 significant digits). */
static double csv_time(double v)
{
    char buf[64];
    mok_report_fmt_time(buf, sizeof buf, v, 1);
    return buf[0] ? strtod(buf, NULL) : NAN;
}

/* rounded: b was read from a report CSV, whose times are rounded; everything else comes back exactly. */
static void compare_rows(const char *what, int idx, const struct mok_row *a, const struct mok_row *b, int rounded)
{
#define CI(f) CHECK(a->f == b->f, "%s row %d: " #f " %lld != %lld", what, idx, (long long)a->f, (long long)b->f)
#define CD(f) CHECK(same_double(a->f, b->f), "%s row %d: " #f " %.17g != %.17g", what, idx, a->f, b->f)
#define CT(f) CHECK(same_double(rounded ? csv_time(a->f) : a->f, b->f), "%s row %d: " #f " %.17g != %.17g", what, idx, \
                    rounded ? csv_time(a->f) : a->f, b->f)
#define CS(f) CHECK(strcmp(a->f, b->f) == 0, "%s row %d: " #f " [%s] != [%s]", what, idx, a->f, b->f)
    CI(problem); CS(model); CI(hidden); CI(intermediate); CI(experts); CI(topk); CI(shared_experts);
    CI(tokens_per_rank); CS(routing); CS(dtype); CS(pass); CS(impl); CS(params); CS(disposition);
    CD(max_rel_err); CD(norm_rel_err); CI(bad_count); CI(nan_count); CI(iters); CT(time_med_us);
    CT(time_p10_us); CT(time_p90_us); CD(flops); CD(tflops); CD(dispatch_bytes); CD(combine_bytes);
    CD(comm_gbps); CD(speedup); CT(dispatch_us); CD(dispatch_gbps); CT(dispatch_alone_us); CT(combine_us); CD(comm_sms);
    CD(peer_frac); CT(gemm_us); CT(gemm1_us); CT(gemm2_us); CD(gemm_frac); CT(gemm_alone_us);
    CT(a2a_ref_us); CD(a2a_ref_gbps); CD(energy_j); CD(power_w); CD(power_capped_share); CS(note); CS(inputs);
    CS(speedup_baseline); CT(exposed_comm_us); CS(mode); CD(capacity_factor); CD(warmup); CD(warmup_ms); CD(seed);
    CS(run_start);
#undef CI
#undef CD
#undef CT
#undef CS
}

/* dir + rest into out; a scratch path too long for PATH_MAX is a usage error, not a test failure. */
static void join(char *out, size_t len, const char *dir, const char *rest)
{
    if (snprintf(out, len, "%s%s", dir, rest) >= (int)len) {
        fprintf(stderr, "scratch path too long: %s%s\n", dir, rest);
        exit(1);
    }
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* ---- tests ------------------------------------------------------------------------------------------ */

static void test_round_trip(const char *dir)
{
    struct mok_env env;
    make_env(&env);
    struct mok_row rows[3], back[4];
    make_rows(rows);
    char csv[PATH_MAX], json[PATH_MAX], err[512] = "";
    int rc = mok_report_choose_paths(dir, "rt", csv, json, PATH_MAX, err, sizeof err);
    CHECK(rc == 0, "choose_paths: %s", err);
    if (rc)
        return;

    char *argv[] = {"mok-bench", "--config", "a b,\"c\".json", NULL};
    const char *cfg = "{\"iters\": 20, \"model\": [{\"hidden\": 7168}]}";
    CHECK(setenv("NCCL_TEST_VAR", "x", 1) == 0, "setenv");
    CHECK(mok_report_write_csv(csv, &env, rows, 3, err, sizeof err) == 0, "write_csv: %s", err);
    CHECK(mok_report_write_json(json, 3, argv, cfg, &env, rows, 3, "{\"items\": []}", err, sizeof err) == 0,
          "write_json: %s", err);
    { /* the summary is embedded as an object */
        FILE *f = fopen(json, "r");
        char text[65536] = "";
        size_t got = f ? fread(text, 1, sizeof text - 1, f) : 0;
        if (f)
            fclose(f);
        text[got] = '\0';
        CHECK(strstr(text, "\"summary\"") && strstr(text, "\"items\""), "summary not in the JSON report");
    }
    { /* header once, then rows appended one by one (the journal's way) read back as one CSV */
        char *head = mok_report_csv_text(&env, rows, 0, MOK_CSV_HEADER);
        char *r0 = mok_report_csv_text(&env, rows, 1, MOK_CSV_EXACT);
        char *r1 = mok_report_csv_text(&env, rows + 1, 1, MOK_CSV_EXACT), path3[PATH_MAX];
        snprintf(path3, sizeof path3, "%s/appended.csv", dir);
        FILE *f = fopen(path3, "w");
        CHECK(head && r0 && r1 && f, "csv_text");
        if (head && r0 && r1 && f) {
            fputs(head, f), fputs(r0, f), fputs(r1, f);
            fclose(f);
            int m = mok_report_read_csv(path3, back, 4, err, sizeof err);
            CHECK(m == 2, "appended rows read back: %d %s", m, err);
            if (m == 2) {
                compare_rows("appended", 0, &rows[0], &back[0], 0);
                compare_rows("appended", 1, &rows[1], &back[1], 0);
            }
            unlink(path3);
        }
        free(head), free(r0), free(r1);
    }

    int n = mok_report_read_csv(csv, back, 4, err, sizeof err);
    CHECK(n == 3, "read_csv returned %d: %s", n, err);
    for (int i = 0; i < n && i < 3; i++)
        compare_rows("csv", i, &rows[i], &back[i], 1);
    n = mok_report_read_json(json, back, 4, err, sizeof err);
    CHECK(n == 3, "read_json returned %d: %s", n, err);
    for (int i = 0; i < n && i < 3; i++)
        compare_rows("json", i, &rows[i], &back[i], 0);
    n = mok_report_read_csv(csv, back, 2, err, sizeof err);
    CHECK(n == -1 && strstr(err, "more than 2 rows"), "read_csv max_rows: %d [%s]", n, err);

    /* The CSV header is a public format. */
    const char *text = slurp(csv);
    const char *head = "problem,model,hidden,intermediate,experts,topk,shared_experts,tokens_per_rank,routing,"
                       "dtype,pass,impl,params,disposition,max_rel_err,norm_rel_err,bad_count,nan_count,iters,"
                       "time_med_us,time_p10_us,time_p90_us,flops,tflops,dispatch_bytes,combine_bytes,comm_gbps,"
                       "speedup,dispatch_us,dispatch_gbps,dispatch_alone_us,combine_us,comm_sms,peer_frac,gemm_us,gemm_alone_us,a2a_ref_us,a2a_ref_gbps,"
                       "note,gemm1_us,gemm2_us,gemm_frac,energy_j,power_w,power_capped_share,inputs,"
                       "speedup_baseline,exposed_comm_us,mode,capacity_factor,warmup,warmup_ms,seed,run_start,"
                       "y_check,y_max_rel_err,dx_check,dx_max_rel_err,dw13_check,dw13_max_rel_err,dw2_check,"
                       "dw2_max_rel_err,d_router_check,d_router_max_rel_err,roofline_bytes,roofline_mem_us,"
                       "roofline_gemm_us,roofline_us,time_over_roofline,wgrad,h_check,h_max_rel_err,"
                       "roofline_grad_bytes,y_bf16_ref_err,gpu,sm_count,ranks,lsa_size,cuda_runtime,cuda_driver,nccl,mpi,"
                       "mok_version,commit\n";
    CHECK(text && strncmp(text, head, strlen(head)) == 0, "CSV header differs:\n%.600s", text ? text : "(none)");
    CHECK(text && strstr(text, "\"chunks=4,gemm=\"\"grouped\"\",x=\"\"\"\"\""), "params not RFC 4180 quoted");
    /* times to 0.1 us or 4 significant digits (123.456 us: 123.5; -0 stays -0.0), other
     * figures exact; the schema 2 columns as written */
    CHECK(text && strstr(text, ",100,123.5,-0.0,"), "time_med_us / time_p10_us not rounded:\n%.2000s", text ? text : "");
    CHECK(text && strstr(text, ",0.3333333333333333,"), "tflops not exact");
    CHECK(text && strstr(text, ",nccl-overlap,12.25,layer,1.5,5,200,9007199254740991,2026-12-01T21:30:00Z,"),
          "schema 2 columns of row 0:\n%.2000s", text ? text : "");
    CHECK(text && strstr(text, ",\"Open MPI v5.0.3, package: \"\"Open MPI\"\" distribution\","),
          "env mpi not quoted");

    /* JSON structure. */
    text = slurp(json);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK(root, "JSON does not parse");
    if (root) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "schema_version");
        CHECK(cJSON_IsNumber(v) && v->valueint == MOK_REPORT_SCHEMA_VERSION, "schema_version");
        v = cJSON_GetObjectItemCaseSensitive(root, "tool");
        CHECK(cJSON_IsString(v) && strcmp(v->valuestring, "mok-bench") == 0, "tool");
        v = cJSON_GetObjectItemCaseSensitive(root, "argv");
        CHECK(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 3, "argv not an array of 3");
        for (int i = 0; cJSON_IsArray(v) && i < 3; i++) {
            const cJSON *a = cJSON_GetArrayItem(v, i);
            CHECK(cJSON_IsString(a) && strcmp(a->valuestring, argv[i]) == 0, "argv[%d]", i);
        }
        v = cJSON_GetObjectItemCaseSensitive(root, "config");
        CHECK(cJSON_IsObject(v), "config is not an object");
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(v, "iters");
        CHECK(cJSON_IsNumber(it) && it->valueint == 20, "config.iters");
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "env");
        v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "nccl_environment"),
                                             "NCCL_TEST_VAR");
        CHECK(cJSON_IsString(v) && strcmp(v->valuestring, "x") == 0, "env.nccl_environment.NCCL_TEST_VAR");
        v = cJSON_GetObjectItemCaseSensitive(e, "ranks");
        CHECK(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2, "env.ranks");
        v = cJSON_GetObjectItemCaseSensitive(e, "nccl");
        CHECK(cJSON_IsString(v) && strcmp(v->valuestring, "2.28.3") == 0, "env.nccl");
        v = cJSON_GetObjectItemCaseSensitive(root, "created_utc");
        CHECK(cJSON_IsString(v) && strlen(v->valuestring) == 20 && v->valuestring[19] == 'Z', "created_utc");
        const cJSON *r1 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "rows"), 1);
        CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r1, "time_med_us")), "NaN not written as null");
        const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "rows"), 0);
        v = cJSON_GetObjectItemCaseSensitive(r0, "time_med_us"); /* the JSON keeps times exact */
        CHECK(cJSON_IsNumber(v) && v->valuedouble == 123.456, "JSON time_med_us not exact");
        CHECK(!cJSON_GetObjectItemCaseSensitive(r0, "speedup_vs_nccl") &&
                  cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(r0, "speedup")),
              "JSON rows carry speedup, not speedup_vs_nccl");
        cJSON_Delete(root);
    }

    /* A config text that is not JSON is kept as a string. */
    char json2[PATH_MAX + 16];
    join(json2, sizeof json2, dir, "/badcfg.json");
    CHECK(mok_report_write_json(json2, 0, NULL, "{not json", &env, rows, 1, NULL, err, sizeof err) == 0, "write: %s",
          err);
    text = slurp(json2);
    root = text ? cJSON_Parse(text) : NULL;
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, "config");
    CHECK(cJSON_IsString(c) && strcmp(c->valuestring, "{not json") == 0, "unparsable config not kept as string");
    cJSON_Delete(root);
    unlink(json2);
    unlink(csv);
    unlink(json);
}

static void test_csv_reader(const char *dir)
{
    char path[PATH_MAX], err[512] = "";
    struct mok_row rows[4];
    join(path, sizeof path, dir, "/hand.csv");

    /* Reordered columns, an unknown one, CRLF endings, a quoted cell spanning lines, empty cells. */
    write_text(path, "extra,time_med_us,params,impl,problem,note\r\n"
                     "zzz,1.5,\"a=1,b=2\",fused,7,\"line1\r\nline2 \"\"q\"\"\"\r\n"
                     ",,,nccl,8,\r\n");
    int n = mok_report_read_csv(path, rows, 4, err, sizeof err);
    CHECK(n == 2, "hand CSV: %d [%s]", n, err);
    if (n == 2) {
        CHECK(rows[0].problem == 7 && rows[0].time_med_us == 1.5, "hand CSV row 0 numbers");
        CHECK(strcmp(rows[0].params, "a=1,b=2") == 0, "hand CSV params [%s]", rows[0].params);
        CHECK(strcmp(rows[0].note, "line1\r\nline2 \"q\"") == 0, "hand CSV note [%s]", rows[0].note);
        CHECK(isnan(rows[0].flops) && isnan(rows[1].time_med_us), "absent/empty not NaN");
        CHECK(strcmp(rows[1].impl, "nccl") == 0 && rows[1].params[0] == '\0', "hand CSV row 1");
    }
    unlink(path);

    write_text(path, "problem,impl,time_med_us\n1,x,2\n");
    n = mok_report_read_csv(path, rows, 4, err, sizeof err);
    CHECK(n == -1 && strstr(err, "params"), "missing params column accepted: %d [%s]", n, err);
    unlink(path);

    write_text(path, "problem,impl,params,time_med_us\n1,x,\"unterminated,2\n");
    n = mok_report_read_csv(path, rows, 4, err, sizeof err);
    CHECK(n == -1 && strstr(err, "never closed"), "unterminated quote: %d [%s]", n, err);
    unlink(path);

    write_text(path, "problem,impl,params,time_med_us\n1,x,y,fast\n");
    n = mok_report_read_csv(path, rows, 4, err, sizeof err);
    CHECK(n == -1 && strstr(err, "time_med_us") && strstr(err, path), "bad number: %d [%s]", n, err);
    unlink(path);

    write_text(path, "problem,impl,params,time_med_us\n1,x,y\n");
    n = mok_report_read_csv(path, rows, 4, err, sizeof err);
    CHECK(n == -1, "short row accepted");
    unlink(path);
}

static int count_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    if (!d)
        return -1;
    for (struct dirent *e; (e = readdir(d));)
        if (strstr(e->d_name, ".tmp."))
            n++;
    closedir(d);
    return n;
}

static void test_no_overwrite(const char *dir)
{
    char path[PATH_MAX], err[512] = "";
    join(path, sizeof path, dir, "/once.txt");
    CHECK(mok_write_file_atomic(path, "first\n", 6, err, sizeof err) == 0, "first write: %s", err);
    err[0] = '\0';
    CHECK(mok_write_file_atomic(path, "second\n", 7, err, sizeof err) == -1, "second write succeeded");
    CHECK(strstr(err, "refusing to overwrite") && strstr(err, path), "message [%s]", err);
    const char *text = slurp(path);
    CHECK(text && strcmp(text, "first\n") == 0, "first content changed: [%s]", text ? text : "(none)");

    struct mok_row row;
    mok_row_init(&row);
    err[0] = '\0';
    CHECK(mok_report_write_csv(path, NULL, &row, 1, err, sizeof err) == -1 && strstr(err, "refusing"),
          "write_csv over an existing file: [%s]", err);
    CHECK(mok_report_write_json(path, 0, NULL, "{}", NULL, &row, 1, NULL, err, sizeof err) == -1 &&
              strstr(err, "refusing"),
          "write_json over an existing file: [%s]", err);
    text = slurp(path);
    CHECK(text && strcmp(text, "first\n") == 0, "content changed by report writers");

    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0444) == 0444, "report not readable by all: %o",
          (unsigned)st.st_mode);

    char missing[PATH_MAX + 16];
    join(missing, sizeof missing, dir, "/no/such/dir/x.csv");
    CHECK(mok_write_file_atomic(missing, "x", 1, err, sizeof err) == -1 && strstr(err, missing),
          "write into a missing dir: [%s]", err);
    CHECK(count_temp_files(dir) == 0, "temp files left in %s", dir);
    unlink(path);
}

static void test_choose_paths(const char *dir)
{
    char base[PATH_MAX], csv[PATH_MAX], json[PATH_MAX], err[512] = "", want[PATH_MAX + 32];
    join(base, sizeof base, dir, "/a/b/c/");
    int rc = mok_report_choose_paths(base, "run", csv, json, PATH_MAX, err, sizeof err);
    join(want, sizeof want, dir, "/a/b/c/run.csv");
    CHECK(rc == 0 && strcmp(csv, want) == 0, "nested: %d %s [%s]", rc, csv, err);
    struct stat st;
    CHECK(stat(base, &st) == 0 && S_ISDIR(st.st_mode), "nested dir not created");

    write_text(csv, "x");
    rc = mok_report_choose_paths(base, "run", csv, json, PATH_MAX, err, sizeof err);
    join(want, sizeof want, dir, "/a/b/c/run-1.csv");
    CHECK(rc == 0 && strcmp(csv, want) == 0, "with run.csv: %s", csv);
    join(want, sizeof want, dir, "/a/b/c/run-1.json");
    CHECK(strcmp(json, want) == 0, "json path %s", json);

    write_text(json, "x"); /* only run-1.json: run-1 is still taken */
    rc = mok_report_choose_paths(base, "run", csv, json, PATH_MAX, err, sizeof err);
    join(want, sizeof want, dir, "/a/b/c/run-2.csv");
    CHECK(rc == 0 && strcmp(csv, want) == 0, "with run-1.json: %s", csv);

    char file[PATH_MAX + 16];
    join(file, sizeof file, dir, "/a/b/c/run.csv");
    err[0] = '\0';
    rc = mok_report_choose_paths(file, "run", csv, json, PATH_MAX, err, sizeof err);
    CHECK(rc == -1 && strstr(err, file), "dir is a file: %d [%s]", rc, err);
    join(file, sizeof file, dir, "/a/b/c/run.csv/sub");
    rc = mok_report_choose_paths(file, "run", csv, json, PATH_MAX, err, sizeof err);
    CHECK(rc == -1, "dir below a file accepted");

    join(file, sizeof file, dir, "/a/b/c/run.csv");
    unlink(file);
    join(file, sizeof file, dir, "/a/b/c/run-1.json");
    unlink(file);
    const char *sub[] = {"/a/b/c", "/a/b", "/a"};
    for (int i = 0; i < 3; i++) {
        join(file, sizeof file, dir, sub[i]);
        CHECK(rmdir(file) == 0, "rmdir %s: %s (leftover files?)", file, strerror(errno));
    }
}

static void test_console(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct mok_env env;
    make_env(&env);
    mok_report_print_header(f, &env, "configs/x.json");
    mok_report_print_table_head(f);
    struct mok_row rows[3];
    make_rows(rows);
    struct mok_row nan_row;
    mok_row_init(&nan_row);
    long before = ftell(f);
    mok_report_print_row(f, &nan_row);
    long after = ftell(f);
    mok_report_print_row(f, &rows[0]);
    fclose(f);

    CHECK(strncmp(buf, "# mok-bench 0.1.0 (commit abc123def456-dirty)\n", 46) == 0, "first line: %.80s", buf);
    CHECK(strstr(buf, "# CUDA runtime 13.0 driver 13.1 | NCCL 2.28.3 | MPI Open MPI"), "versions line");
    CHECK(strstr(buf, "# config configs/x.json\n"), "config line");
    CHECK(strstr(buf, "# ranks 2 | LSA team size 2\n"), "ranks line");
    CHECK(strstr(buf, "#  rank 1 pid 1001 host node1 device 1 [NVIDIA H200] 132 SMs\n"), "rank line");
    char nanline[512];
    snprintf(nanline, sizeof nanline, "%.*s", (int)(after - before), buf + before);
    CHECK(strstr(nanline, " - ") && !strstr(nanline, "nan"), "NaN row: [%s]", nanline);
    /* The table head and a row of ordinary widths fit in about 200 columns (oversized cells, like the fixture
     * row's, push their row wider rather than being cut). */
    char *head = strstr(buf, "# prob");
    CHECK(head && strchr(head, '\n') - head <= 200, "table head wider than 200 columns");
    CHECK(strlen(nanline) <= 201, "NaN row of %zu columns", strlen(nanline));
    CHECK(!strstr(buf + after, "\nsecond line"), "note newline not flattened");
    if (failures)
        fputs(buf, stderr);
    free(buf);
}


/* ---- schema 2: times, baselines, schema 1 files, the summary CSV, the column dictionary -------------------- */

static void check_time(double v, int min_decimals, const char *want)
{
    char buf[64];
    mok_report_fmt_time(buf, sizeof buf, v, min_decimals);
    CHECK(strcmp(buf, want) == 0, "fmt_time(%.17g, %d) = [%s], want [%s]", v, min_decimals, buf, want);
}

static void test_fmt_time(void)
{
    check_time(6898.543834686279, 1, "6898.5"); /* 0.1 us is the finer */
    check_time(123.456, 1, "123.5");
    check_time(12.3456, 1, "12.35"); /* 4 significant digits are */
    check_time(5.12345, 1, "5.123");
    check_time(0.0123456, 1, "0.01235");
    check_time(-42.5, 1, "-42.50");
    check_time(0.0, 1, "0.0");
    check_time(1e-310, 1, "1.000e-310");
    check_time(NAN, 1, "");
    check_time(1.7976931348623157e308, 1, "1.7976931348623157e+308");
    check_time(6.898543834686279, 4, "6.8985"); /* in ms: 0.1 us is 4 decimals */
    check_time(0.0512345, 4, "0.05123");
}

static void test_note_prepend(void)
{
    struct mok_row r;
    mok_row_init(&r);
    mok_row_note_prepend(&r, "first");
    CHECK(strcmp(r.note, "first") == 0, "empty note: [%s]", r.note);
    snprintf(r.note, sizeof r.note, "old");
    mok_row_note_prepend(&r, "first");
    CHECK(strcmp(r.note, "first; old") == 0, "[%s]", r.note);
    char big[sizeof r.note];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    snprintf(r.note, sizeof r.note, "%s", big); /* a full note loses its end */
    mok_row_note_prepend(&r, "first");
    CHECK(strlen(r.note) == sizeof r.note - 1 && strncmp(r.note, "first; xxx", 10) == 0, "full: %zu", strlen(r.note));
    snprintf(r.note, sizeof r.note, "old");
    big[sizeof big - 3] = '\0'; /* first fills all but "; ": the old note goes, no dangling separator */
    mok_row_note_prepend(&r, big);
    CHECK(strlen(r.note) == sizeof r.note - 3 && r.note[strlen(r.note) - 1] == 'x', "no room: %zu", strlen(r.note));
    big[sizeof big - 3] = 'x';
    snprintf(r.note, sizeof r.note, "old"); /* first longer than the field: the note stays */
    char huge[2 * sizeof r.note];
    memset(huge, 'y', sizeof huge - 1);
    huge[sizeof huge - 1] = '\0';
    mok_row_note_prepend(&r, huge);
    CHECK(strcmp(r.note, "old") == 0, "too long: [%.10s]", r.note);
}

static struct mok_row base_row(int problem, const char *impl, double t, const char *disp)
{
    struct mok_row r;
    mok_row_init(&r);
    r.problem = problem;
    r.tokens_per_rank = 1000;
    snprintf(r.impl, sizeof r.impl, "%s", impl);
    snprintf(r.disposition, sizeof r.disposition, "%s", disp);
    snprintf(r.mode, sizeof r.mode, "layer");
    r.time_med_us = t;
    return r;
}

static void test_baseline(void)
{
    /* layer mode: the faster of nccl and nccl-overlap, named; a faster but incorrect candidate is no baseline */
    struct mok_row rows[] = {
        base_row(0, "nccl", 2000, MOK_DISPOSITION_PASSED),
        base_row(0, "nccl-overlap", 1600, MOK_DISPOSITION_NOT_VERIFIED),
        base_row(0, "nccl-overlap", 100, MOK_DISPOSITION_INCORRECT),
        base_row(0, "megakernel", 800, MOK_DISPOSITION_PASSED),
        base_row(0, "lsa", NAN, MOK_DISPOSITION_NOT_SUPPORTED),
    };
    mok_baseline_fill(rows, 5, "layer");
    CHECK(rows[3].speedup == 2.0 && !strcmp(rows[3].speedup_baseline, "nccl-overlap"), "megakernel: %g vs [%s]",
          rows[3].speedup, rows[3].speedup_baseline);
    CHECK(rows[0].speedup == 0.8 && !strcmp(rows[0].speedup_baseline, "nccl-overlap"), "nccl: %g", rows[0].speedup);
    CHECK(isnan(rows[4].speedup) && !rows[4].speedup_baseline[0], "a row without a time names no baseline");
    /* the live value: the best baseline so far */
    struct mok_baseline b;
    mok_baseline_init(&b, "layer");
    mok_baseline_offer(&b, &rows[0]);
    mok_baseline_apply(&b, &rows[3]);
    CHECK(rows[3].speedup == 2.5 && !strcmp(rows[3].speedup_baseline, "nccl"), "live: %g", rows[3].speedup);
    /* comm mode: nccl-p2p only; gemm mode: cublas-gemm only; no baseline: NaN and "" */
    struct mok_row comm[] = {base_row(0, "nccl", 100, MOK_DISPOSITION_PASSED), base_row(0, "nccl-p2p", 300, MOK_DISPOSITION_PASSED),
                             base_row(0, "lsa", 150, MOK_DISPOSITION_PASSED)};
    mok_baseline_fill(comm, 3, "comm");
    CHECK(comm[2].speedup == 2.0 && !strcmp(comm[2].speedup_baseline, "nccl-p2p"), "comm: %g [%s]", comm[2].speedup,
          comm[2].speedup_baseline);
    struct mok_row gemm[] = {base_row(0, "cublas-gemm", 90, MOK_DISPOSITION_PASSED), base_row(0, "mok-gemm", 60, MOK_DISPOSITION_PASSED)};
    mok_baseline_fill(gemm, 2, "gemm");
    CHECK(gemm[1].speedup == 1.5 && !strcmp(gemm[1].speedup_baseline, "cublas-gemm"), "gemm: %g", gemm[1].speedup);
    struct mok_row alone[] = {base_row(0, "megakernel", 60, MOK_DISPOSITION_PASSED)};
    mok_baseline_fill(alone, 1, "layer");
    CHECK(isnan(alone[0].speedup) && !alone[0].speedup_baseline[0], "no baseline ran: %g [%s]", alone[0].speedup,
          alone[0].speedup_baseline);
}

/* Schema 1 files: the committed samples (tests/data, written by a schema 1 build) and a hand-made CSV with the
 * later schema 1 columns. */
static void test_schema1(const char *src, const char *dir)
{
    char path[PATH_MAX], err[512] = "";
    static struct mok_row rows[64];
    const char *ext[] = {"json", "csv"};
    for (int e = 0; e < 2; e++) {
        snprintf(path, sizeof path, "%s/tests/data/sample-report.%s", src, ext[e]);
        int n = e ? mok_report_read_csv(path, rows, 64, err, sizeof err)
                  : mok_report_read_json(path, rows, 64, err, sizeof err);
        CHECK(n == (e ? 51 : 14), "%s: %d rows [%s]", path, n, err);
        if (n < 14)
            continue;
        /* row 0: nccl, speedup_vs_nccl 0.5881932270990761 in the file; row 1 not supported (no speedup) */
        CHECK(rows[0].speedup == 0.5881932270990761 && !strcmp(rows[0].speedup_baseline, "nccl"),
              "%s: row 0 speedup %.17g [%s]", path, rows[0].speedup, rows[0].speedup_baseline);
        CHECK(isnan(rows[1].speedup) && !rows[1].speedup_baseline[0], "%s: row 1 [%s]", path, rows[1].speedup_baseline);
        int overlap = 0;
        /* schema 1 layer speedups, nccl-overlap's too, are against nccl; the CSV's comm-mode run's (nccl-p2p and
         * lsa rows, from row 32) against nccl-p2p */
        for (int i = 0; i < n; i++) {
            int comm = !strcmp(rows[i].impl, "nccl-p2p") || !strcmp(rows[i].impl, "lsa");
            overlap += !strcmp(rows[i].impl, "nccl-overlap") && !isnan(rows[i].speedup);
            CHECK(!strcmp(rows[i].speedup_baseline, isnan(rows[i].speedup) ? "" : comm ? "nccl-p2p" : "nccl"),
                  "%s: row %d %s [%s]", path, i, rows[i].impl, rows[i].speedup_baseline);
        }
        CHECK(overlap > 0, "%s: no nccl-overlap row with a speedup", path);
        CHECK(!rows[0].mode[0] && !rows[0].run_start[0] && isnan(rows[0].warmup) && isnan(rows[0].seed) &&
                  isnan(rows[0].exposed_comm_us) && isnan(rows[0].power_capped_share),
              "%s: columns schema 1 lacks are not empty", path);
    }
    join(path, sizeof path, dir, "/v1.csv");
    write_text(path, "problem,impl,params,time_med_us,speedup_vs_nccl,power_capped\n"
                     "0,lsa,sms=16,10,2.5,0.25\n0,cublas-gemm,,12,1,\n0,no-such-impl,,12,1,\n");
    int n = mok_report_read_csv(path, rows, 4, err, sizeof err);
    CHECK(n == 3, "v1 CSV: %d [%s]", n, err);
    if (n == 3) {
        CHECK(rows[0].speedup == 2.5 && !strcmp(rows[0].speedup_baseline, "nccl-p2p") &&
                  rows[0].power_capped_share == 0.25,
              "v1 comm row: %g [%s] %g", rows[0].speedup, rows[0].speedup_baseline, rows[0].power_capped_share);
        CHECK(!strcmp(rows[1].speedup_baseline, "cublas-gemm") && isnan(rows[1].power_capped_share), "v1 gemm row");
        CHECK(!rows[2].speedup_baseline[0], "an unknown implementation's baseline is not guessed");
    }
    write_text(path, "problem,impl,params,time_med_us,speedup,speedup_vs_nccl\n0,x,,1,1,1\n");
    n = mok_report_read_csv(path, rows, 4, err, sizeof err);
    CHECK(n == -1 && strstr(err, "speedup appears twice"), "both names: %d [%s]", n, err);
    join(path, sizeof path, dir, "/v1.json");
    write_text(path, "{\"schema_version\": 1, \"rows\": [{\"problem\": 0, \"impl\": \"nccl-p2p\", \"params\": \"\", "
                     "\"time_med_us\": 5, \"speedup_vs_nccl\": 1, \"power_capped\": 0.5}]}");
    n = mok_report_read_json(path, rows, 4, err, sizeof err);
    CHECK(n == 1 && rows[0].speedup == 1 && rows[0].power_capped_share == 0.5 &&
              !strcmp(rows[0].speedup_baseline, "nccl-p2p"),
          "v1 JSON: %d [%s]", n, err);
    write_text(path, "{\"schema_version\": 2, \"rows\": [{\"problem\": 0, \"impl\": \"nccl\", \"params\": \"\", "
                     "\"time_med_us\": 5, \"speedup_vs_nccl\": 1, \"power_capped\": 0.5}]}");
    n = mok_report_read_json(path, rows, 4, err, sizeof err);
    CHECK(n == 1 && isnan(rows[0].speedup) && isnan(rows[0].power_capped_share),
          "schema 1 names in a schema 2 file are not read: %d [%s]", n, err);
    char newer[64];
    snprintf(newer, sizeof newer, "{\"schema_version\": %d, \"rows\": []}", MOK_REPORT_SCHEMA_VERSION + 1);
    write_text(path, newer);
    n = mok_report_read_json(path, rows, 4, err, sizeof err);
    CHECK(n == -1 && strstr(err, "newer"), "a newer schema: %d [%s]", n, err);
    unlink(path);
    join(path, sizeof path, dir, "/v1.csv");
    unlink(path);
}

/* A journal a schema 1 build wrote, resumed by this one: its rows read, and the rows appended after them too. */
static void test_journal_v1(const char *dir)
{
    char path[PATH_MAX], err[512] = "", note[1024];
    join(path, sizeof path, dir, "/old.journal.id");
    write_text(path, "id");
    join(path, sizeof path, dir, "/old.journal.csv");
    write_text(path, "problem,model,impl,params,disposition,time_med_us,speedup_vs_nccl,power_capped,gpu\n"
                     "0,m,nccl,gemm=grouped,passed,100.123456,1,0.5,H200\n");
    struct mok_env env;
    make_env(&env);
    struct mok_journal j;
    struct mok_row *back = NULL;
    int n = 0;
    CHECK(mok_journal_open(&j, dir, "old", "id", true, &env, &back, &n, note, sizeof note, err, sizeof err) == 0 &&
              n == 1,
          "resume a schema 1 journal: n=%d [%s] [%s]", n, note, err);
    CHECK(strstr(note, "rewritten"), "note [%s]", note);
    struct mok_row r = base_row(1, "megakernel", 50.0000001, MOK_DISPOSITION_PASSED);
    CHECK(mok_journal_append(&j, &env, &r, err, sizeof err) == 0, "append: %s", err);
    mok_journal_close(&j);
    free(back);
    back = NULL;
    CHECK(mok_journal_open(&j, dir, "old", "id", true, &env, &back, &n, note, sizeof note, err, sizeof err) == 0 &&
              n == 2,
          "resume again: n=%d [%s] [%s]", n, note, err);
    if (n == 2) {
        CHECK(back[0].time_med_us == 100.123456 && back[0].speedup == 1 && !strcmp(back[0].speedup_baseline, "nccl") &&
                  back[0].power_capped_share == 0.5,
              "schema 1 journal row: %.17g %g", back[0].time_med_us, back[0].speedup);
        CHECK(back[1].time_med_us == 50.0000001, "the journal keeps exact times: %.17g", back[1].time_med_us);
    }
    CHECK(!strstr(note, "rewritten"), "a current journal is not rewritten [%s]", note);
    mok_journal_close(&j);
    free(back);
    unlink(path);
    join(path, sizeof path, dir, "/old.journal.id");
    unlink(path);
}

/* A training step from separate passes: a backward row's step is its forward's time plus its own where the same
 * implementation ran the same problem's forward; a fwd_bwd row and an unpaired backward are their own step. */
static void test_summary_step(void)
{
    struct mok_row rows[] = {
        base_row(0, "nccl", 2000, MOK_DISPOSITION_PASSED),   base_row(1, "nccl", 5000, MOK_DISPOSITION_PASSED),
        base_row(1, "nccl", 4500, MOK_DISPOSITION_PASSED),   base_row(2, "megakernel", 6000, MOK_DISPOSITION_PASSED),
        base_row(3, "nccl", 7000, MOK_DISPOSITION_PASSED),   base_row(4, "nccl", 9000, MOK_DISPOSITION_PASSED),
    };
    for (int i = 0; i < 6; i++)
        snprintf(rows[i].model, sizeof rows[i].model, "m"), snprintf(rows[i].routing, sizeof rows[i].routing, "uniform");
    snprintf(rows[0].pass, sizeof rows[0].pass, "fwd");
    snprintf(rows[1].pass, sizeof rows[1].pass, "bwd"), snprintf(rows[2].pass, sizeof rows[2].pass, "bwd");
    snprintf(rows[3].pass, sizeof rows[3].pass, "bwd"); /* another implementation: no forward of its own ran */
    snprintf(rows[4].pass, sizeof rows[4].pass, "fwd_bwd");
    snprintf(rows[5].pass, sizeof rows[5].pass, "bwd");
    rows[5].tokens_per_rank = 2000; /* another problem: not paired */
    rows[0].energy_j = 1.0, rows[2].energy_j = 2.0;
    struct mok_summary_item items[8];
    int n = mok_summary_build(rows, 6, "layer", 10, items, 8);
    CHECK(n == 5, "items %d", n);
    if (n != 5)
        return;
    CHECK(!strcmp(items[0].step, "fwd") && fabs(items[0].ms_per_step - 20.0) < 1e-9, "fwd step %s %g", items[0].step,
          items[0].ms_per_step);
    /* problem 1's best candidate (4.5 ms) plus the forward's 2 ms, ten layers; energies add */
    CHECK(!strcmp(items[1].step, "fwd+bwd") && fabs(items[1].ms_per_step - 65.0) < 1e-9 &&
              fabs(items[1].j_per_step - 30.0) < 1e-9,
          "bwd step %s %g ms %g J", items[1].step, items[1].ms_per_step, items[1].j_per_step);
    CHECK(!strcmp(items[2].step, "bwd") && fabs(items[2].ms_per_step - 60.0) < 1e-9, "unpaired bwd %s %g",
          items[2].step, items[2].ms_per_step);
    CHECK(!strcmp(items[3].step, "fwd_bwd") && fabs(items[3].ms_per_step - 70.0) < 1e-9, "fwd_bwd %s %g",
          items[3].step, items[3].ms_per_step);
    CHECK(!strcmp(items[4].step, "bwd"), "other problem's bwd paired: %s", items[4].step);
}

static void test_summary_csv(const char *dir)
{
    struct mok_row rows[] = {
        base_row(0, "nccl", 2000, MOK_DISPOSITION_PASSED),
        base_row(0, "nccl-overlap", 1600.04, MOK_DISPOSITION_PASSED),
        base_row(0, "megakernel", 800.123456, MOK_DISPOSITION_PASSED),
    };
    snprintf(rows[2].model, sizeof rows[2].model, "a,b");
    snprintf(rows[2].params, sizeof rows[2].params, "sms=16,combine=per_route");
    rows[2].energy_j = 2.5;
    struct mok_summary_item items[4];
    int n = mok_summary_build(rows, 3, "layer", 61, items, 4);
    CHECK(n == 3 && items[2].speedup == 1600.04 / 800.123456 && !strcmp(items[2].speedup_baseline, "nccl-overlap"),
          "summary speedup %g [%s]", n == 3 ? items[2].speedup : 0, n == 3 ? items[2].speedup_baseline : "");
    char *text = mok_summary_csv(items, n, 61);
    char head[1024] = "";
    for (int i = 0; mok_summary_csv_columns[i]; i++)
        snprintf(head + strlen(head), sizeof head - strlen(head), "%s%s", i ? "," : "", mok_summary_csv_columns[i]);
    CHECK(text && !strncmp(text, head, strlen(head)) && text[strlen(head)] == '\n', "summary CSV header:\n%s",
          text ? text : "");
    /* 800.123456 us: 800.1 us, 0.8001 ms (0.1 us), 61 layers 48.8075 ms; the speedup exact */
    char want[512];
    char exact[64];
    mok_report_fmt_exact(exact, sizeof exact, 1600.04 / 800.123456);
    snprintf(want, sizeof want, "\n0,\"a,b\",1000,,,,,layer,megakernel,\"sms=16,combine=per_route\",800.1,%s,"
                                "nccl-overlap,",
             exact);
    CHECK(text && strstr(text, want) && strstr(text, ",0.8001,61,48.8075,152.5,,fwd,,,\n"), "summary CSV line, want "
          "[%s]:\n%s", want, text ? text : "");
    char path[PATH_MAX], err[512] = "";
    join(path, sizeof path, dir, "/s.summary.csv");
    CHECK(mok_summary_write_csv(path, items, n, 61, err, sizeof err) == 0, "write: %s", err);
    CHECK(mok_summary_write_csv(path, items, n, 61, err, sizeof err) == -1 && strstr(err, "refusing"),
          "summary CSV overwritten [%s]", err);
    unlink(path);
    free(text);

    /* a summary CSV alone takes its name too */
    char csv[PATH_MAX], json[PATH_MAX];
    join(path, sizeof path, dir, "/taken.summary.csv");
    write_text(path, "x");
    CHECK(mok_report_choose_paths(dir, "taken", csv, json, PATH_MAX, err, sizeof err) == 0 &&
              strstr(csv, "/taken-1.csv"),
          "choose_paths beside taken.summary.csv: %s [%s]", csv, err);
    unlink(path);

    char out[64];
    CHECK(mok_report_summary_path("d/run-1.csv", out, sizeof out) == 0 && !strcmp(out, "d/run-1.summary.csv"),
          "summary path [%s]", out);
    CHECK(mok_report_summary_path("d/run-1.csv", out, 10) == -1, "summary path too long accepted");
}

/* docs/report-columns.md names every field a report carries: a table line "| `name` |" for each CSV column and
 * JSON key the writers produce, found here from the field table and from a report written now. */
static const char *doc_text;
static void doc_has(const char *what, const char *name)
{
    char needle[160];
    snprintf(needle, sizeof needle, "| `%s` |", name);
    CHECK(doc_text && strstr(doc_text, needle), "docs/report-columns.md lacks %s %s (a line starting \"%s\")", what,
          name, needle);
}

static void doc_has_keys(const char *what, const cJSON *obj)
{
    const cJSON *k;
    cJSON_ArrayForEach(k, obj) doc_has(what, k->string);
}

static void test_columns_doc(const char *src, const char *dir)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/docs/report-columns.md", src);
    static char buf[1 << 17];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    CHECK(n > 0, "cannot read %s", path);
    doc_text = n ? buf : NULL;
    for (int i = 0; i < mok_report_nfields; i++) {
        doc_has("row field", mok_report_fields[i].name);
        if (mok_report_fields[i].v1_name)
            doc_has("schema 1 name", mok_report_fields[i].v1_name);
    }
    for (int i = 0; mok_report_env_columns[i]; i++)
        doc_has("CSV environment column", mok_report_env_columns[i]);
    for (int i = 0; mok_summary_csv_columns[i]; i++)
        doc_has("summary CSV column", mok_summary_csv_columns[i]);

    /* the JSON: every key of the header, env (with a probe), a rank, and the summary with an item */
    struct mok_env env;
    make_env(&env);
    env.probe_bidir_gbps = 1, env.probe_gemm_tflops = 1;
    struct mok_row rows[3];
    make_rows(rows);
    struct mok_summary_item items[3];
    int ni = mok_summary_build(rows, 3, "layer", 1, items, 3);
    char *sum = mok_summary_json(items, ni, 1), json[PATH_MAX + 16], err[512] = "";
    snprintf(json, sizeof json, "%s/doc.json", dir);
    CHECK(ni == 1 && sum && mok_report_write_json(json, 0, NULL, "{}", &env, rows, 1, sum, err, sizeof err) == 0,
          "write: %s", err);
    free(sum);
    const char *text = slurp(json);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    CHECK(root, "doc.json does not parse");
    if (root) {
        doc_has_keys("JSON key", root);
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "env");
        doc_has_keys("JSON env key", e);
        doc_has_keys("JSON env.probe key", cJSON_GetObjectItemCaseSensitive(e, "probe"));
        doc_has_keys("JSON env.ranks[] key", cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(e, "ranks"), 0));
        doc_has_keys("JSON rows[] key", cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "rows"), 0));
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "summary");
        doc_has_keys("JSON summary key", s);
        doc_has_keys("JSON summary.items[] key", cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(s, "items"), 0));
        cJSON_Delete(root);
    }
    unlink(json);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SCRATCH_DIR SOURCE_ROOT\n", argv[0]);
        return 1;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", argv[1]);
    for (char *s = dir + 1;; s++) { /* mkdir -p SCRATCH_DIR */
        char c = *s;
        if (c != '/' && c != '\0')
            continue;
        *s = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "cannot create %s: %s\n", dir, strerror(errno));
            return 1;
        }
        *s = c;
        if (!c)
            break;
    }
    snprintf(dir, sizeof dir, "%s/test_report.%ld", argv[1], (long)getpid());
    if (mkdir(dir, 0777) != 0) {
        fprintf(stderr, "cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }

    test_stats();
    test_round_trip(dir);
    test_csv_reader(dir);
    test_no_overwrite(dir);
    test_choose_paths(dir);
    test_console();
    test_fmt_time();
    test_note_prepend();
    test_baseline();
    test_schema1(argv[2], dir);
    test_journal_v1(dir);
    test_summary_step();
    test_summary_csv(dir);
    test_columns_doc(argv[2], dir);

    /* Each test removed what it wrote; a failing rmdir means something was left behind. */
    CHECK(count_temp_files(dir) == 0, "temp files left");
    CHECK(rmdir(dir) == 0, "rmdir %s: %s (files left behind?)", dir, strerror(errno));
    if (failures) {
        fprintf(stderr, "test_report: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_report: all passed\n");
    return 0;
}
