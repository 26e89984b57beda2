/* test_journal: the resume journal (append, reopen, identity, torn lines) and the capacity-planning summary. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "journal.h"
#include "summary.h"

#include "check.h"

static struct mok_row make_row(int problem, const char *impl, const char *params, double t, const char *disp)
{
    struct mok_row r;
    mok_row_init(&r);
    r.problem = problem;
    snprintf(r.model, sizeof r.model, "m");
    r.hidden = 256, r.intermediate = 128, r.experts = 8, r.topk = 2, r.tokens_per_rank = 1000 * (problem + 1);
    snprintf(r.routing, sizeof r.routing, "uniform");
    snprintf(r.inputs, sizeof r.inputs, "uniform");
    snprintf(r.dtype, sizeof r.dtype, "bf16");
    snprintf(r.pass, sizeof r.pass, "fwd");
    snprintf(r.impl, sizeof r.impl, "%s", impl);
    snprintf(r.params, sizeof r.params, "%s", params);
    snprintf(r.disposition, sizeof r.disposition, "%s", disp);
    r.time_med_us = t;
    return r;
}

static void test_journal(const char *dir)
{
    struct mok_env env;
    memset(&env, 0, sizeof env);
    snprintf(env.gpu, sizeof env.gpu, "NVIDIA H200");
    struct mok_journal j;
    struct mok_row *back = NULL;
    int n = 0;
    char note[1024], err[512];
    struct mok_row a = make_row(0, "nccl", "gemm=per_expert,gemm_streams=4", 123.5, "passed");
    struct mok_row b = make_row(1, "lsa", "sms=16,combine=per_rank", 77.25, "incorrect");
    CHECK(mok_journal_open(&j, dir, "run", "config=1 gpu=x", false, &env, &back, &n, note, sizeof note, err,
                           sizeof err) == 0 && n == 0, "open fresh: %s", err);
    CHECK(mok_journal_append(&j, &env, &a, err, sizeof err) == 0, "append a: %s", err);
    CHECK(mok_journal_append(&j, &env, &b, err, sizeof err) == 0, "append b: %s", err);
    mok_journal_close(&j);

    CHECK(mok_journal_open(&j, dir, "run", "config=1 gpu=x", true, &env, &back, &n, note, sizeof note, err,
                           sizeof err) == 0, "reopen: %s", err);
    CHECK(n == 2 && back && mok_row_same_candidate(&back[0], &a) && mok_row_same_candidate(&back[1], &b) &&
              back[0].time_med_us == 123.5 && !strcmp(back[1].disposition, "incorrect"),
          "resumed rows differ (n=%d) [%s]", n, note);
    CHECK(!mok_row_same_candidate(&a, &b), "different candidates compare equal");
    struct mok_row a_normal = a; /* the same candidate on other inputs is another candidate */
    snprintf(a_normal.inputs, sizeof a_normal.inputs, "normal(bits=3)");
    CHECK(!mok_row_same_candidate(&a, &a_normal), "candidates on different inputs compare equal");
    struct mok_row c = make_row(2, "lsa", "sms=8", 50, "passed");
    CHECK(mok_journal_append(&j, &env, &c, err, sizeof err) == 0, "append after resume: %s", err);
    mok_journal_close(&j);
    free(back);

    /* another config or machine: nothing is reused, the journal restarts, and its 3 rows move aside, whole */
    CHECK(mok_journal_open(&j, dir, "run", "config=2 gpu=x", true, &env, &back, &n, note, sizeof note, err,
                           sizeof err) == 0 && n == 0 && strstr(note, "measuring everything") &&
              strstr(note, "run.journal.csv.old"),
          "identity mismatch must not resume and must keep the rows aside (n=%d, %s)", n, note);
    mok_journal_close(&j);
    free(back);
    char path[700];
    snprintf(path, sizeof path, "%s/run.journal.csv.old", dir);
    struct mok_row aside[4];
    CHECK(mok_report_read_csv(path, aside, 4, err, sizeof err) == 3, "the rows moved aside: %s", err);
    /* a plain rerun (no resume) over a journal of only its header moves nothing aside */
    CHECK(mok_journal_open(&j, dir, "run", "config=2 gpu=x", false, &env, &back, &n, note, sizeof note, err,
                           sizeof err) == 0 && !strstr(note, ".old"),
          "an empty journal moved aside: %s", note);
    mok_journal_close(&j);

    /* a torn last line (killed while writing): that line goes, the whole rows before it are resumed */
    CHECK(mok_journal_open(&j, dir, "torn", "id", false, &env, &back, &n, note, sizeof note, err, sizeof err) == 0,
          "open torn");
    mok_journal_append(&j, &env, &a, err, sizeof err);
    fputs("0,m,256,12", j.f);
    mok_journal_close(&j);
    CHECK(mok_journal_open(&j, dir, "torn", "id", true, &env, &back, &n, note, sizeof note, err, sizeof err) == 0 &&
              n == 1 && back && mok_row_same_candidate(&back[0], &a) && strstr(note, "cut off"),
          "torn journal: n=%d note=%s", n, note);
    CHECK(mok_journal_append(&j, &env, &b, err, sizeof err) == 0, "append after the torn line: %s", err);
    mok_journal_close(&j);
    free(back);
    CHECK(mok_journal_open(&j, dir, "torn", "id", true, &env, &back, &n, note, sizeof note, err, sizeof err) == 0 &&
              n == 2,
          "after the torn line's repair: n=%d note=%s", n, note);
    mok_journal_close(&j);
    free(back);
    /* damage inside the file: not resumed, and the file kept aside */
    snprintf(path, sizeof path, "%s/torn.journal.csv", dir);
    FILE *f = fopen(path, "a");
    fputs("garbage,\n", f);
    fclose(f);
    CHECK(mok_journal_open(&j, dir, "torn", "id", true, &env, &back, &n, note, sizeof note, err, sizeof err) == 0 &&
              n == 0 && strstr(note, "unreadable") && strstr(note, "torn.journal.csv.old"),
          "a damaged journal: n=%d note=%s", n, note);
    mok_journal_close(&j);
    free(back);
    const char *names[] = {"run.journal.csv", "run.journal.id", "torn.journal.csv", "torn.journal.id",
                           "run.journal.csv.old", "run.journal.id.old", "torn.journal.csv.old", "torn.journal.id.old"};
    for (int i = 0; i < 8; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
}

static void test_summary(void)
{
    struct mok_row rows[] = {
        make_row(0, "nccl", "gemm=grouped", 2000, "passed"),
        make_row(0, "nccl", "gemm=per_expert", 1000, "passed"),
        make_row(0, "nccl-overlap", "chunks=1", 800, "passed"),
        make_row(0, "nccl-overlap", "chunks=2", 100, "incorrect"), /* fastest but wrong: never chosen */
        make_row(1, "nccl", "gemm=per_expert", 4000, "passed"),
        make_row(1, "nccl-overlap", "chunks=1", 0, "not_supported"),
    };
    rows[2].energy_j = 0.5; /* measured for one candidate: J per step = layers x J per forward, NaN elsewhere */
    snprintf(rows[4].inputs, sizeof rows[4].inputs, "normal(bits=3)"); /* problem 1 on other inputs */
    struct mok_summary_item items[8];
    int n = mok_summary_build(rows, 6, "layer", 61, items, 8);
    CHECK(n == 3, "items %d", n);
    /* layer mode: the speedups are against the faster of nccl and nccl-overlap, here nccl-overlap's 800 us */
    CHECK(items[0].best == &rows[1] && items[0].speedup == 0.8 && !strcmp(items[0].speedup_baseline, "nccl-overlap"),
          "best nccl of problem 0");
    CHECK(items[1].best == &rows[2] && items[1].speedup == 1.0, "overlap speedup %g", items[1].speedup);
    CHECK(items[2].speedup == 1.0 && !strcmp(items[2].speedup_baseline, "nccl"), "problem 1: nccl alone");
    CHECK(fabs(items[1].ms_per_layer - 0.8) < 1e-12 && fabs(items[1].ms_per_step - 61 * 0.8) < 1e-9,
          "ms per layer/step");
    CHECK(fabs(items[0].tokens_per_s_per_gpu - 1000 / 1e-3) < 1e-6, "tokens/s %g", items[0].tokens_per_s_per_gpu);
    CHECK(items[2].problem == 1 && items[2].best == &rows[4], "problem 1 has only nccl");
    CHECK(fabs(items[1].j_per_step - 61 * 0.5) < 1e-9 && isnan(items[0].j_per_step), "J per step %g / %g",
          items[1].j_per_step, items[0].j_per_step);
    char *json = mok_summary_json(items, n, 61);
    CHECK(json && strstr(json, "\"moe_layers\":61") && strstr(json, "\"speedup_vs_baseline\":0.8") &&
              strstr(json, "\"j_per_step\":30.5") && strstr(json, "\"j_per_step\":null"), "json %s",
          json ? json : "(null)");
    CHECK(json && strstr(json, "\"inputs\":\"normal(bits=3)\"") && strstr(json, "\"inputs\":\"uniform\""),
          "json inputs %s", json ? json : "(null)");
    free(json);
    mok_summary_print(stdout, items, n, 61);
    /* the printed table names non-default inputs beside the routing, and only those */
    FILE *f = tmpfile();
    char text[4096] = "";
    if (f) {
        mok_summary_print(f, items, n, 61);
        rewind(f);
        text[fread(text, 1, sizeof text - 1, f)] = '\0';
        fclose(f);
    }
    CHECK(strstr(text, " uniform,normal(bits=3) ") && !strstr(text, "uniform,uniform"), "summary table:\n%s", text);
    CHECK(isnan(items[0].speedup_vs_bf16) && isnan(items[0].speedup_vs_bf16_baseline) && !items[0].bf16_baseline[0],
          "a bf16 item has no bf16 twin figures");

    /* an FP8 problem against its bf16 twin (same model, tokens, routing, inputs, pass): problem 2 is problem 0 in
     * fp8_block; problem 3 is fp8_block on other tokens (no twin) */
    struct mok_row fr[] = {
        make_row(0, "nccl", "gemm=per_expert", 1000, "passed"),
        make_row(0, "megakernel", "send=1", 700, "passed"),
        make_row(2, "nccl", "gemm=mok", 800, "passed"),
        make_row(2, "megakernel", "send=1", 500, "passed"),
        make_row(3, "nccl", "gemm=mok", 900, "passed"),
    };
    for (int i = 2; i < 5; i++)
        snprintf(fr[i].dtype, sizeof fr[i].dtype, "fp8_block");
    fr[2].tokens_per_rank = fr[3].tokens_per_rank = fr[0].tokens_per_rank;
    struct mok_summary_item fi[8];
    n = mok_summary_build(fr, 5, "layer", 1, fi, 8);
    CHECK(n == 5, "fp8 items %d", n);
    CHECK(fabs(fi[3].speedup_vs_bf16 - 1.4) < 1e-12 && fabs(fi[3].speedup_vs_bf16_baseline - 2.0) < 1e-12 &&
              !strcmp(fi[3].bf16_baseline, "nccl"),
          "fp8 megakernel: %g x its bf16, %g x the bf16 baseline [%s]", fi[3].speedup_vs_bf16,
          fi[3].speedup_vs_bf16_baseline, fi[3].bf16_baseline);
    CHECK(fabs(fi[2].speedup_vs_bf16 - 1.25) < 1e-12 && fabs(fi[2].speedup - 1.0) < 1e-12,
          "fp8 nccl: %g x bf16, %g x its own problem's baseline", fi[2].speedup_vs_bf16, fi[2].speedup);
    CHECK(isnan(fi[4].speedup_vs_bf16) && isnan(fi[4].speedup_vs_bf16_baseline), "no twin: %g",
          fi[4].speedup_vs_bf16);
    json = mok_summary_json(fi, n, 1);
    CHECK(json && strstr(json, "\"speedup_vs_bf16\":1.4") && strstr(json, "\"bf16_baseline\":\"nccl\""), "json %s",
          json ? json : "(null)");
    free(json);
    char *csv = mok_summary_csv(fi, n, 1);
    CHECK(csv && strstr(csv, ",speedup_vs_bf16,speedup_vs_bf16_baseline,bf16_baseline\n") && strstr(csv, ",1.4,2,nccl\n"),
          "csv %s", csv ? csv : "(null)");
    free(csv);
}

int main(int argc, char **argv)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/journal-%d", argc > 1 ? argv[1] : "/tmp", (int)getpid());
    test_journal(dir);
    test_summary();
    printf("test_journal: %s (%d failures)\n", failures ? "FAILED" : "all passed", failures);
    return failures ? 1 : 0;
}
