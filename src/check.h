/* check: compares an implementation's output with the problem's fp32 reference, over all ranks. */
#ifndef MOK_CHECK_H
#define MOK_CHECK_H

#include <stdbool.h>

#include "cluster.h"
#include "problem.h"
#include "report.h"

struct mok_checker {
    void *dev_sums;  /* struct mok_check_sums on the device */
    void *host_sums; /* pinned */
    float *part;     /* device, MOK_REF_PART_ELEMS: a host-held reference's part; allocated at its first check */
};

int mok_checker_init(struct mok_checker *c);
void mok_checker_destroy(struct mok_checker *c);

/* Collective. Compares every output of the problem (p->out) with its reference; on return every rank holds the
 * combined verdicts: each output's in its own columns (<name>_check, <name>_max_rel_err), and the row's worst:
 * max_rel_err (max over ranks and outputs), norm_rel_err (over all ranks' elements, the largest over outputs),
 * bad_count and nan_count (sums). An output's tolerance is its own rtol, or the config's rtol. Returns 1 when every
 * output passes (no element over its tolerance, no NaN), 0 when one does not, -1 on a CUDA error. written_only:
 * the outputs an implementation overwrites only (after timed runs, which added to the accumulated ones), the
 * row's other verdicts and sums left as they are. */
int mok_check_outputs(struct mok_checker *c, const struct mok_problem *p, double rtol, bool written_only,
                      cudaStream_t stream, struct mok_row *row, char *err, int err_len);

#endif
