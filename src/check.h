/* check: compares an implementation's output with the problem's fp32 reference, over all ranks. */
#ifndef MOK_CHECK_H
#define MOK_CHECK_H

#include "cluster.h"
#include "problem.h"
#include "report.h"

struct mok_checker {
    void *dev_sums;  /* struct mok_check_sums on the device */
    void *host_sums; /* pinned */
};

int mok_checker_init(struct mok_checker *c);
void mok_checker_destroy(struct mok_checker *c);

/* Collective. Compares p->y with p->y_ref; on return every rank holds the combined verdict: max_rel_err (max
 * over ranks), norm_rel_err (over all ranks' elements), bad_count and nan_count (sums) in row. Returns 1 when
 * the output passes (no element over rtol, no NaN), 0 when it does not, -1 on a CUDA error. */
int mok_check_output(struct mok_checker *c, const struct mok_problem *p, double rtol, cudaStream_t stream,
                     struct mok_row *row, char *err, int err_len);

#endif
