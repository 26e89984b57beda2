/* summary: what a capacity planner reads. Per problem, the best passed candidate of each implementation, its
 * speedup over the mode's baseline, tokens per second per GPU, milliseconds per layer and, for a configured
 * number of MoE layers, the time those layers take per training step (forward only until backward exists) and
 * the energy they take on all GPUs (where the run measured it: report column energy_j). Printed, embedded in the
 * JSON report and written as <name>.summary.csv (columns: docs/report-columns.md).
 *
 * Also the baseline every speedup is against, for the rows (bench.c) and the summary alike. */
#ifndef MOK_SUMMARY_H
#define MOK_SUMMARY_H

#include <stdio.h>

#include "report.h"

/* The baseline of a problem: the fastest usable (passed or not_verified) candidate, among the problem's rows, of
 * the mode's baseline implementations: layer mode nccl or nccl-overlap (whichever is faster, named exactly), comm
 * mode nccl-p2p, gemm mode cublas-gemm. */
struct mok_baseline {
    const char *mode;
    double time_us; /* NaN until a baseline candidate was offered */
    char impl[32];  /* the baseline's implementation, "" until then */
};

/* 1 if impl is one of mode's baseline implementations ("layer", "comm", "gemm"; anything else: layer's). */
int mok_baseline_impl(const char *mode, const char *impl);
void mok_baseline_init(struct mok_baseline *b, const char *mode);
/* Keeps row as the baseline when it is a faster usable candidate of a baseline implementation. */
void mok_baseline_offer(struct mok_baseline *b, const struct mok_row *row);
/* row->speedup = baseline time / row time, row->speedup_baseline = its implementation; NaN and "" where either
 * time is missing. */
void mok_baseline_apply(const struct mok_baseline *b, struct mok_row *row);
/* Both over rows[0..n), the rows of one problem: their final speedups. */
void mok_baseline_fill(struct mok_row *rows, int n, const char *mode);

struct mok_summary_item {
    int problem;
    const struct mok_row *best; /* the row (params, times, verdict) */
    double speedup;             /* the problem's baseline time / this time, same problem and run */
    char speedup_baseline[32];  /* the baseline's implementation, "" where speedup is NaN */
    double tokens_per_s_per_gpu;
    double ms_per_layer;
    double ms_per_step; /* moe_layers x what a step of `step` takes */
    double j_per_step;  /* moe_layers x energy_j (every GPU's joules), NaN where not measured */
    /* what the step is: the row's pass ("fwd", "bwd", "fwd_bwd"), or "fwd+bwd" on a backward row whose forward
     * (same problem but the pass, same implementation) this run also measured: the training step is then their sum,
     * each at its own best candidate */
    char step[12];
    /* An FP8 item against its problem's bf16 twin (the same problem in bf16, same run; NaN and "" without one, and
     * on bf16 items): the same implementation's best bf16 time / this time, and the bf16 problem's baseline time /
     * this time, with that baseline's implementation */
    double speedup_vs_bf16;
    double speedup_vs_bf16_baseline;
    char bf16_baseline[32];
};

/* Fills out (at most max items, problem order then implementation order of first appearance); returns the
 * count. mode: the run's mode ("layer", "comm", "gemm"), which names the baseline (mok_baseline). */
int mok_summary_build(const struct mok_row *rows, int nrows, const char *mode, int moe_layers,
                      struct mok_summary_item *out, int max);
void mok_summary_print(FILE *out, const struct mok_summary_item *items, int n, int moe_layers);
/* {"moe_layers": N, "items": [...]}, malloc'ed. */
char *mok_summary_json(const struct mok_summary_item *items, int n, int moe_layers);

/* The summary CSV's columns, in order, NULL-terminated. */
extern const char *const mok_summary_csv_columns[];
/* The summary as CSV text (header, one line per item), malloc'ed; NULL when out of memory. Times as in the
 * report CSV: to 0.1 us or 4 significant digits. */
char *mok_summary_csv(const struct mok_summary_item *items, int n, int moe_layers);
/* Writes it to path atomically, never over an existing file; 0, or -1 with a message in err. */
int mok_summary_write_csv(const char *path, const struct mok_summary_item *items, int n, int moe_layers, char *err,
                          int err_len);

#endif
