/* check: verdicts of implementation outputs against the fp32 reference (see kernels/check.cu for the metric). */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mok_kernels.h"

int mok_checker_init(struct mok_checker *c)
{
    memset(c, 0, sizeof(*c));
    if (cudaMalloc(&c->dev_sums, sizeof(struct mok_check_sums)) != cudaSuccess)
        return -1;
    if (cudaMallocHost(&c->host_sums, sizeof(struct mok_check_sums)) != cudaSuccess)
        return -1;
    return 0;
}

void mok_checker_destroy(struct mok_checker *c)
{
    cudaFree(c->dev_sums);
    cudaFreeHost(c->host_sums);
    memset(c, 0, sizeof(*c));
}

int mok_check_output(struct mok_checker *c, const struct mok_problem *p, double rtol, cudaStream_t stream,
                     struct mok_row *row, char *err, int err_len)
{
    struct mok_check_sums *h = c->host_sums;
    size_t n = p->y_elems;
    int rc = mok_check_bf16_vs_f32(p->y, p->y_ref, n, (float)rtol, c->dev_sums, h, (mok_stream_t)stream);
    /* every rank joins the reductions, also after a local failure, so no rank is left waiting */
    double local[4] = {rc ? 1.0 : 0.0, rc ? 0.0 : h->max_rel, 0, 0};
    double sums[4] = {rc ? 0.0 : h->ref_sq, rc ? 0.0 : h->diff_sq, rc ? 0.0 : (double)h->bad,
                      rc ? 0.0 : (double)h->nan};
    MPI_Allreduce(MPI_IN_PLACE, local, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, sums, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (local[0] != 0.0) {
        snprintf(err, (size_t)err_len, "check failed on a rank: %s", rc ? cudaGetErrorString((cudaError_t)rc)
                                                                        : "(another rank)");
        return -1;
    }
    row->max_rel_err = local[1];
    row->norm_rel_err = sums[0] > 0 ? sqrt(sums[1] / sums[0]) : NAN;
    row->bad_count = (long long)sums[2];
    row->nan_count = (long long)sums[3];
    return row->bad_count == 0 && row->nan_count == 0;
}
