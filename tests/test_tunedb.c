/* Unit test of tunedb: exact save/load round trips, replace and merge rules, lookups that miss on any key
 * field, rejection of malformed files with a message naming the path and the field, stale entries against the
 * real implementation registry, and the params label round trip. Usage: test_tunedb [SCRATCH_DIR] (default
 * /tmp). Everything is written under SCRATCH_DIR/test_tunedb.<pid>, removed at the end. Exit 0 pass, 1 fail. */
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h" /* MOK_MAX_PARAMS */
#include "desc.h"
#include "tunedb.h"

#include "check.h"

static char dir[1024];

static void path_of(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", dir, name); }

static void write_text(const char *name, const char *text)
{
    char p[1200];
    path_of(p, sizeof p, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(1);
    }
}

/* Entry i: a distinct key, real lsa params, and times chosen to catch any printing that loses a bit. */
static struct mok_tune_entry make_entry(int i)
{
    static const double times[] = {1241.856038570404, 0.1 + 0.2, 4.9406564584124654e-324, DBL_MAX, 1e-7 / 3.0,
                                   -0.0};
    struct mok_tune_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.key.gpu, sizeof e.key.gpu, i == 2 ? "GPU \"quoted\" \\ tab\t ü %d" : "NVIDIA H200", i);
    e.key.sm_count = 132;
    e.key.ranks = 2 + i;
    e.key.lsa_size = 2;
    e.key.hidden = 7168;
    e.key.intermediate = 2048;
    e.key.experts = 256;
    e.key.topk = 8;
    e.key.shared_experts = i % 2;
    e.key.tokens_per_rank = 8192 >> i;
    snprintf(e.key.routing, sizeof e.key.routing, i % 2 ? "zipf(s=1.2)" : "uniform");
    strcpy(e.key.dtype, "bf16");
    strcpy(e.key.pass, "fwd");
    strcpy(e.key.mode, "comm");
    strcpy(e.key.inputs, i % 3 ? "normal(scale=0.5)" : "uniform");
    strcpy(e.impl, "lsa");
    const struct mok_impl_desc *d = mok_impl_desc_find("lsa");
    int v[16];
    for (int j = 0; j < d->nparams; j++)
        v[j] = d->params[j].default_value;
    v[0] = 8 << (i % 3);
    mok_impl_params_label(d, v, e.params, sizeof e.params);
    e.time_us = times[i % 6];
    snprintf(e.measured_utc, sizeof e.measured_utc, "2026-11-%02dT12:00:00Z", 10 + i);
    snprintf(e.commit, sizeof e.commit, "cf18d1d371a5%d", i);
    return e;
}

static int same_entry(const struct mok_tune_entry *a, const struct mok_tune_entry *b)
{
    const struct mok_tune_key *x = &a->key, *y = &b->key;
    return !strcmp(x->gpu, y->gpu) && x->sm_count == y->sm_count && x->ranks == y->ranks &&
           x->lsa_size == y->lsa_size && x->hidden == y->hidden && x->intermediate == y->intermediate &&
           x->experts == y->experts && x->topk == y->topk && x->shared_experts == y->shared_experts &&
           x->tokens_per_rank == y->tokens_per_rank && !strcmp(x->routing, y->routing) &&
           !strcmp(x->dtype, y->dtype) && !strcmp(x->pass, y->pass) && !strcmp(x->mode, y->mode) &&
           !strcmp(x->inputs, y->inputs) &&
           !strcmp(a->impl, b->impl) && !strcmp(a->params, b->params) &&
           memcmp(&a->time_us, &b->time_us, sizeof(double)) == 0 && /* bitwise: -0 and denormals included */
           !strcmp(a->measured_utc, b->measured_utc) && !strcmp(a->commit, b->commit);
}

static void test_round_trip(void)
{
    struct mok_tunedb db = {0}, back = {0};
    char p[1200], err[512];
    for (int i = 0; i < 6; i++) {
        struct mok_tune_entry e = make_entry(i);
        CHECK(mok_tunedb_put(&db, &e) == 0, "put %d", i);
    }
    struct mok_tune_entry other = make_entry(0); /* same key, another impl: a separate entry */
    strcpy(other.impl, "nccl-p2p");
    other.params[0] = '\0';
    CHECK(mok_tunedb_put(&db, &other) == 0 && db.n == 7, "put other impl: n %d", db.n);
    path_of(p, sizeof p, "db.json");
    CHECK(mok_tunedb_save(p, &db, err, sizeof err) == 0, "save: %s", err);
    CHECK(mok_tunedb_load(p, &back, err, sizeof err) == 0, "load: %s", err);
    CHECK(back.n == db.n, "loaded %d of %d", back.n, db.n);
    for (int i = 0; i < db.n && i < back.n; i++)
        CHECK(same_entry(&db.e[i], &back.e[i]), "entry %d differs after the round trip (time %.17g vs %.17g)", i,
              db.e[i].time_us, back.e[i].time_us);

    /* Replace in place: same key and impl, new params and time. */
    struct mok_tune_entry e = make_entry(1);
    strcpy(e.params, "sms=32,combine=per_rank,tile_rows=128,chunk_rows=256,copy=warp,layout=landing,dispatch=push,launch=stream,small=auto,reduce=after,reduce_chunk=64");
    e.time_us = 1089.8240208625793;
    CHECK(mok_tunedb_put(&db, &e) == 0 && db.n == 7, "replace grew the db to %d", db.n);
    const struct mok_tune_entry *f = mok_tunedb_find(&db, &e.key, "lsa");
    CHECK(f == &db.e[1] && same_entry(f, &e), "replace: find gives the new entry in place");

    /* Saving over an existing database is intended, and leaves no temporary file behind. */
    CHECK(mok_tunedb_save(p, &db, err, sizeof err) == 0, "overwrite: %s", err);
    CHECK(mok_tunedb_load(p, &back, err, sizeof err) == 0 && back.n == 7 && same_entry(&back.e[1], &e),
          "overwrite: load gives the new content (%s)", err);
    char bad[1300];
    snprintf(bad, sizeof bad, "%s/no-such-dir/db.json", dir);
    CHECK(mok_tunedb_save(bad, &db, err, sizeof err) == -1 && strstr(err, bad), "save into a missing dir: '%s'",
          err);
    DIR *dh = opendir(dir);
    for (struct dirent *de; dh && (de = readdir(dh));)
        CHECK(!strstr(de->d_name, ".tmp."), "temporary file left: %s", de->d_name);
    if (dh)
        closedir(dh);

    /* Lookups miss on any difference of any key field or of the impl. */
    struct mok_tune_key k = db.e[0].key;
    CHECK(mok_tunedb_find(&db, &k, "lsa") == &db.e[0], "find: exact key");
    CHECK(!mok_tunedb_find(&db, &k, "nccl"), "find: other impl");
    int *ints[] = {&k.sm_count, &k.ranks, &k.lsa_size, &k.hidden, &k.intermediate, &k.experts, &k.topk,
                   &k.shared_experts, &k.tokens_per_rank};
    for (int i = 0; i < 9; i++) {
        (*ints[i])++;
        CHECK(!mok_tunedb_find(&db, &k, "lsa"), "find: hit with int key field %d changed", i);
        (*ints[i])--;
    }
    char *strs[] = {k.gpu, k.routing, k.dtype, k.pass, k.mode, k.inputs};
    for (int i = 0; i < 6; i++) {
        char keep = strs[i][0];
        strs[i][0] = 'X';
        CHECK(!mok_tunedb_find(&db, &k, "lsa"), "find: hit with string key field %d changed", i);
        strs[i][0] = keep;
    }
    CHECK(mok_tunedb_find(&db, &k, "lsa") == &db.e[0], "find: restored key");

    /* put refuses what save could not write faithfully. */
    e = make_entry(0);
    e.time_us = NAN;
    CHECK(mok_tunedb_put(&db, &e) == -1, "put accepted a NaN time");
    e = make_entry(0);
    memset(e.commit, 'a', sizeof e.commit);
    CHECK(mok_tunedb_put(&db, &e) == -1, "put accepted an unterminated string");
    mok_tunedb_free(&db);
    mok_tunedb_free(&back);
    unlink(p);
}

static void test_merge(void)
{
    struct mok_tunedb a = {0}, b = {0};
    struct mok_tune_entry x = make_entry(0), y = make_entry(1), z = make_entry(2);
    mok_tunedb_put(&a, &x);
    mok_tunedb_put(&a, &z);
    struct mok_tune_entry x2 = x, z2 = z;
    strcpy(x2.measured_utc, "2026-12-01T00:00:00Z"); /* newer: wins */
    x2.time_us = 1.5;
    strcpy(z2.measured_utc, "2026-01-01T00:00:00Z"); /* older: loses */
    z2.time_us = 2.5;
    mok_tunedb_put(&b, &x2);
    mok_tunedb_put(&b, &y);
    mok_tunedb_put(&b, &z2);
    int changed = mok_tunedb_merge(&a, &b);
    CHECK(changed == 2 && a.n == 3, "merge: changed %d, n %d", changed, a.n);
    CHECK(same_entry(mok_tunedb_find(&a, &x.key, "lsa"), &x2), "merge: newer entry did not win");
    CHECK(same_entry(mok_tunedb_find(&a, &z.key, "lsa"), &z), "merge: older entry replaced a newer one");
    CHECK(same_entry(mok_tunedb_find(&a, &y.key, "lsa"), &y), "merge: new key not added");
    CHECK(mok_tunedb_merge(&a, &b) == 0, "merge twice changed something");
    CHECK(mok_tunedb_merge(&a, &a) == 0 && a.n == 3, "merge into itself");
    mok_tunedb_free(&a);
    mok_tunedb_free(&b);
}

/* Each bad file must be rejected, the db left empty, and the message name the path and the field. */
static void expect_reject(const char *name, const char *text, const char *field)
{
    char p[1200], err[512] = "";
    struct mok_tunedb db = {0};
    write_text(name, text);
    path_of(p, sizeof p, name);
    int rc = mok_tunedb_load(p, &db, err, sizeof err);
    CHECK(rc == -1 && db.n == 0, "%s: accepted (rc %d, n %d)", name, rc, db.n);
    CHECK(strstr(err, p) && strstr(err, field), "%s: message '%s' does not name %s and %s", name, err, p, field);
    printf("  rejected %-22s %s\n", name, err);
    mok_tunedb_free(&db);
    unlink(p);
}

#define HEAD "{\"schema_version\": 1, \"tool\": \"mok-bench\", \"entries\": [{\"key\": {"
#define KEY_REST                                                                                             \
    "\"ranks\": 2, \"lsa_size\": 2, \"hidden\": 7168, \"intermediate\": 2048, \"experts\": 256, \"topk\": 8, " \
    "\"shared_experts\": 0, \"tokens_per_rank\": 8192, \"routing\": \"uniform\", \"dtype\": \"bf16\", "       \
    "\"pass\": \"fwd\", \"mode\": \"comm\"}, \"impl\": \"nccl-p2p\", \"params\": \"\", "
#define TAIL "\"measured_utc\": \"2026-11-29T00:00:00Z\", \"commit\": \"abc\"}]}"

static void test_bad_files(void)
{
    char p[1200], err[512] = "";
    struct mok_tunedb db = {0};
    path_of(p, sizeof p, "missing.json");
    CHECK(mok_tunedb_load(p, &db, err, sizeof err) == 0 && db.n == 0, "missing file: %s", err);
    /* The well-formed base of the broken variants loads. */
    write_text("good.json", HEAD "\"gpu\": \"H200\", \"sm_count\": 132, " KEY_REST "\"time_us\": 12.5, " TAIL);
    path_of(p, sizeof p, "good.json");
    CHECK(mok_tunedb_load(p, &db, err, sizeof err) == 0 && db.n == 1 && db.e[0].time_us == 12.5, "good: %s", err);
    /* a file from before the inputs key: its entries were measured on uniform inputs */
    CHECK(db.n == 1 && strcmp(db.e[0].key.inputs, "uniform") == 0, "missing inputs key read as '%s'",
          db.n == 1 ? db.e[0].key.inputs : "");
    CHECK(mok_tunedb_check(&db.e[0], err, sizeof err) == 0, "good entry is stale: %s", err);
    mok_tunedb_free(&db);
    unlink(p);
    expect_reject("truncated.json", "{\"schema_version\": 1, \"entries\": [", "malformed JSON");
    expect_reject("newer.json", "{\"schema_version\": 2, \"tool\": \"mok-bench\", \"entries\": []}",
                  "schema_version");
    expect_reject("noversion.json", "{\"tool\": \"mok-bench\", \"entries\": []}", "schema_version");
    expect_reject("tool.json", "{\"schema_version\": 1, \"tool\": \"other\", \"entries\": []}", "tool");
    expect_reject("entries.json", "{\"schema_version\": 1, \"tool\": \"mok-bench\", \"entries\": {}}", "entries");
    expect_reject("sm_string.json", HEAD "\"gpu\": \"H200\", \"sm_count\": \"132\", " KEY_REST
                  "\"time_us\": 12.5, " TAIL, "entries[0].key.sm_count");
    expect_reject("sm_frac.json", HEAD "\"gpu\": \"H200\", \"sm_count\": 13.5, " KEY_REST "\"time_us\": 12.5, " TAIL,
                  "entries[0].key.sm_count");
    expect_reject("gpu_number.json", HEAD "\"gpu\": 200, \"sm_count\": 132, " KEY_REST "\"time_us\": 12.5, " TAIL,
                  "entries[0].key.gpu");
    expect_reject("no_gpu.json", HEAD "\"sm_count\": 132, " KEY_REST "\"time_us\": 12.5, " TAIL,
                  "entries[0].key.gpu");
    expect_reject("time_string.json", HEAD "\"gpu\": \"H200\", \"sm_count\": 132, " KEY_REST
                  "\"time_us\": \"fast\", " TAIL, "entries[0].time_us");
    expect_reject("long_gpu.json", HEAD "\"gpu\": \"" "0123456789012345678901234567890123456789012345678901234567890123"
                  "\", \"sm_count\": 132, " KEY_REST "\"time_us\": 1, " TAIL, "entries[0].key.gpu");
}

static void expect_stale(const char *impl, const char *mode, const char *params, const char *what)
{
    struct mok_tune_entry e = make_entry(0);
    char why[256] = "";
    snprintf(e.impl, sizeof e.impl, "%s", impl);
    snprintf(e.key.mode, sizeof e.key.mode, "%s", mode);
    snprintf(e.params, sizeof e.params, "%s", params);
    int rc = mok_tunedb_check(&e, why, sizeof why);
    CHECK(rc == -1 && strstr(why, "stale") && strstr(why, what), "%s [%s]: rc %d, '%s' (want '%s')", impl, params,
          rc, why, what);
    printf("  %-66.66s %s\n", params, why);
}

#define LSA_OK "sms=16,combine=per_rank,tile_rows=128,chunk_rows=256,copy=warp,layout=landing,dispatch=push,launch=graph,small=off,reduce=after,reduce_chunk=64"

static void test_stale(void)
{
    struct mok_tune_entry e = make_entry(0);
    char why[256] = "";
    CHECK(mok_tunedb_check(&e, why, sizeof why) == 0, "fresh lsa entry is stale: %s", why);
    snprintf(e.params, sizeof e.params, "%s", LSA_OK);
    CHECK(mok_tunedb_check(&e, why, sizeof why) == 0, "fresh lsa entry is stale: %s", why);
    strcpy(e.key.mode, "layer");
    strcpy(e.impl, "nccl-overlap");
    strcpy(e.params, "chunks=4,expert_groups=4,gemm=grouped,gemm_streams=1,mx_scheme=0,reserve_sms=0");
    CHECK(mok_tunedb_check(&e, why, sizeof why) == 0, "fresh nccl-overlap entry is stale: %s", why);
    strcpy(e.impl, "nccl");
    strcpy(e.params, "gemm_streams=4,mx_scheme=0,gemm=per_expert"); /* any order */
    CHECK(mok_tunedb_check(&e, why, sizeof why) == 0, "fresh nccl entry is stale: %s", why);
    expect_stale("megakernel", "layer", "", "megakernel");
    expect_stale("lsa", "layer", LSA_OK, "mode");
    expect_stale("lsa", "comm", LSA_OK ",warp_size=32", "unknown param 'warp_size'");
    expect_stale("lsa", "comm", "sms=0,combine=per_rank,tile_rows=128,chunk_rows=256,copy=warp,layout=slots,"
                 "dispatch=pull", "sms=0 is out of [1, 132]");
    expect_stale("lsa", "comm", "sms=133,combine=per_rank,tile_rows=128,chunk_rows=256,copy=warp,layout=slots,"
                 "dispatch=pull", "out of");
    expect_stale("lsa", "comm", "sms=16,combine=per_token,tile_rows=128,chunk_rows=256,copy=warp,layout=slots,"
                 "dispatch=pull", "combine=per_token");
    expect_stale("lsa", "comm", "sms=16x,combine=per_rank,tile_rows=128,chunk_rows=256,copy=warp,layout=slots,"
                 "dispatch=pull", "not an integer");
    expect_stale("lsa", "comm", "sms=16,combine=per_rank,tile_rows=128,copy=warp,layout=slots,dispatch=pull",
                 "missing param chunk_rows");
    /* an entry tuned before a parameter existed (here: launch) must be re-tuned, not half-applied */
    expect_stale("lsa", "comm", "sms=16,combine=per_rank,tile_rows=128,chunk_rows=256,copy=warp,layout=landing,"
                 "dispatch=push,small=auto", "missing param launch");
    expect_stale("lsa", "comm", LSA_OK ",sms=8", "twice");
    expect_stale("lsa", "comm", LSA_OK ",", "comma");
    expect_stale("nccl", "layer", "gemm=grouped,gemm_streams=99", "out of");
    expect_stale("nccl-p2p", "comm", "chunks=1", "unknown param");
    /* a removed parameter says so (an entry tuned when it existed is searched again) */
    expect_stale("mok-gemm", "gemm", "kernel=sm90,tile_n=256,wgrad_pingpong=0", "param wgrad_pingpong was removed");
}

/* Labels written by mok_impl_params_label parse back to the same values, for every registered impl and a
 * spread of values (defaults, minima, maxima, every choice). */
static void test_params_round_trip(void)
{
    for (int i = 0; i < mok_impl_desc_count(); i++) {
        const struct mok_impl_desc *d = mok_impl_desc_at(i);
        for (int variant = 0; variant < 4; variant++) {
            int v[MOK_MAX_PARAMS], back[MOK_MAX_PARAMS];
            char label[MOK_PARAMS_LABEL_LEN], why[256] = "";
            for (int j = 0; j < d->nparams; j++) {
                const struct mok_param_def *p = &d->params[j];
                int hi = p->choices ? p->nchoices - 1 : p->max, lo = p->choices ? 0 : p->min;
                v[j] = variant == 0 ? p->default_value : variant == 1 ? lo : variant == 2 ? hi : (lo + hi) / 2;
                back[j] = -12345;
            }
            mok_impl_params_label(d, v, label, sizeof label);
            int rc = mok_tunedb_params_parse(d, label, back, why, sizeof why);
            CHECK(rc == 0 && memcmp(v, back, sizeof(int) * (size_t)d->nparams) == 0, "%s '%s': rc %d %s", d->name,
                  label, rc, why);
        }
    }
}

int main(int argc, char **argv)
{
    const char *base = argc > 1 ? argv[1] : "/tmp";
    mkdir(base, 0755); /* the build directory's scratch folder may not exist yet */
    snprintf(dir, sizeof dir, "%s/test_tunedb.%ld", base, (long)getpid());
    if (mkdir(dir, 0755) != 0) {
        fprintf(stderr, "cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    test_round_trip();
    test_merge();
    test_bad_files();
    test_stale();
    test_params_round_trip();
    if (rmdir(dir) != 0) /* every test removes its files: a leftover is a failure too */
        CHECK(0, "cannot remove %s: %s", dir, strerror(errno));
    if (failures) {
        fprintf(stderr, "test_tunedb: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_tunedb: all passed\n");
    return 0;
}
