/* summary: what a capacity planner reads. Per problem, the best passed candidate of each implementation, its
 * speedup over the mode's NCCL baseline, tokens per second per GPU, milliseconds per layer and, for a configured
 * number of MoE layers, the time those layers take per training step (forward only until backward exists) and
 * the energy they take on all GPUs (where the run measured it: report column energy_j). */
#ifndef MOK_SUMMARY_H
#define MOK_SUMMARY_H

#include <stdio.h>

#include "report.h"

struct mok_summary_item {
    int problem;
    const struct mok_row *best; /* the row (params, times, verdict) */
    double speedup;             /* best baseline time / this time, same problem and run */
    double tokens_per_s_per_gpu;
    double ms_per_layer;
    double ms_per_step; /* moe_layers x ms_per_layer */
    double j_per_step;  /* moe_layers x energy_j (every GPU's joules), NaN where not measured */
};

/* Fills out (at most max items, problem order then implementation order of first appearance); returns the
 * count. baseline: "nccl" or "nccl-p2p". */
int mok_summary_build(const struct mok_row *rows, int nrows, const char *baseline, int moe_layers,
                      struct mok_summary_item *out, int max);
void mok_summary_print(FILE *out, const struct mok_summary_item *items, int n, int moe_layers);
/* {"moe_layers": N, "items": [...]}, malloc'ed. */
char *mok_summary_json(const struct mok_summary_item *items, int n, int moe_layers);

#endif
