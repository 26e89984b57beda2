/* check: verdicts of implementation outputs against the fp32 reference (see kernels/reference/check.cu for the metric). */
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
    cudaFree(c->part);
    cudaFree(c->dev_sums);
    cudaFreeHost(c->host_sums);
    memset(c, 0, sizeof(*c));
}

/* One output against its reference, combined over ranks into *v. Returns 0, or -1 on a CUDA error anywhere. */
struct out_verdict {
    double max_rel, norm_rel;
    long long bad, nan;
};

/* The same metric against a reference in host memory: its statistics as taken at build time, then the errors part
 * by part, each part copied into the checker's scratch first (the stream orders the copy after the previous
 * part's kernel). Returns a cudaError_t. */
static int check_host_ref(struct mok_checker *c, const struct mok_output *o, float tol, cudaStream_t stream)
{
    struct mok_check_sums *h = c->host_sums;
    int rc;
    if (!c->part && (rc = (int)cudaMalloc((void **)&c->part, MOK_REF_PART_ELEMS * sizeof(float))))
        return rc;
    memset(h, 0, sizeof *h);
    h->ref_sq = o->ref_sq;
    h->ref_amax = o->ref_amax;
    if ((rc = (int)cudaMemcpyAsync(c->dev_sums, h, sizeof *h, cudaMemcpyHostToDevice, stream)))
        return rc;
    for (size_t at = 0; at < o->elems; at += MOK_REF_PART_ELEMS) {
        const size_t n = o->elems - at < MOK_REF_PART_ELEMS ? o->elems - at : MOK_REF_PART_ELEMS;
        if ((rc = (int)cudaMemcpyAsync(c->part, o->ref_host + at, n * sizeof(float), cudaMemcpyHostToDevice, stream)))
            return rc;
        rc = o->type == MOK_OUT_F32
                 ? mok_check_errors_f32((const float *)o->data + at, c->part, n, tol, c->dev_sums, (mok_stream_t)stream)
                 : mok_check_errors_bf16((const uint16_t *)o->data + at, c->part, n, tol, c->dev_sums,
                                         (mok_stream_t)stream);
        if (rc)
            return rc;
    }
    if ((rc = (int)cudaMemcpyAsync(h, c->dev_sums, sizeof *h, cudaMemcpyDeviceToHost, stream)))
        return rc;
    return (int)cudaStreamSynchronize(stream);
}

static int check_one(struct mok_checker *c, const struct mok_output *o, double rtol, cudaStream_t stream,
                     struct out_verdict *v, char *err, int err_len)
{
    struct mok_check_sums *h = c->host_sums;
    float tol = (float)(o->rtol > 0 ? o->rtol : rtol);
    int rc = o->ref_host ? check_host_ref(c, o, tol, stream)
             : o->type == MOK_OUT_F32
                 ? mok_check_f32_vs_f32(o->data, o->ref, o->elems, tol, c->dev_sums, h, (mok_stream_t)stream)
                 : mok_check_bf16_vs_f32(o->data, o->ref, o->elems, tol, c->dev_sums, h, (mok_stream_t)stream);
    /* every rank joins the reductions, also after a local failure, so no rank is left waiting */
    double local[2] = {rc ? 1.0 : 0.0, rc ? 0.0 : h->max_rel};
    double sums[4] = {rc ? 0.0 : h->ref_sq, rc ? 0.0 : h->diff_sq, rc ? 0.0 : (double)h->bad,
                      rc ? 0.0 : (double)h->nan};
    MPI_Allreduce(MPI_IN_PLACE, local, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, sums, 4, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (local[0] != 0.0) {
        snprintf(err, (size_t)err_len, "check of %s failed on a rank: %s", o->name,
                 rc ? cudaGetErrorString((cudaError_t)rc) : "(another rank)");
        return -1;
    }
    *v = (struct out_verdict){local[1], sums[0] > 0 ? sqrt(sums[1] / sums[0]) : NAN, (long long)sums[2],
                              (long long)sums[3]};
    return 0;
}

int mok_check_outputs(struct mok_checker *c, const struct mok_problem *p, double rtol, bool written_only,
                      cudaStream_t stream, struct mok_row *row, char *err, int err_len)
{
    int all_pass = 1;
    if (!written_only) { /* written_only keeps the accumulated outputs' verdicts and the sums they went into */
        row->max_rel_err = row->norm_rel_err = NAN;
        row->bad_count = row->nan_count = 0;
    }
    for (int i = 0; i < p->out.n; i++) {
        const struct mok_output *o = &p->out.o[i];
        struct out_verdict v;
        if (written_only && o->init_id)
            continue;
        if (!o->ref && !o->ref_host) {
            snprintf(err, (size_t)err_len, "output %s has no reference (checks need one for every output)", o->name);
            return -1;
        }
        if (check_one(c, o, rtol, stream, &v, err, err_len))
            return -1;
        int pass = v.bad == 0 && v.nan == 0;
        all_pass &= pass;
        if (mok_row_set_output(row, o->name, pass ? MOK_DISPOSITION_PASSED : MOK_DISPOSITION_INCORRECT, v.max_rel)) {
            snprintf(err, (size_t)err_len, "output %s: the report has no columns for it (report.h)", o->name);
            return -1;
        }
        row->max_rel_err = !(v.max_rel <= row->max_rel_err) ? v.max_rel : row->max_rel_err; /* NaN: the first */
        row->norm_rel_err = !(v.norm_rel <= row->norm_rel_err) ? v.norm_rel : row->norm_rel_err;
        row->bad_count += v.bad;
        row->nan_count += v.nan;
    }
    if (p->y_ref_bf16 && !written_only) {
        /* an FP8 layer's y against the bf16 reference: the format's own error, information (no verdict) */
        const struct mok_output y_bf16 = {.name = "y", .type = MOK_OUT_BF16, .data = p->y, .ref = p->y_ref_bf16,
                                          .elems = p->y_elems, .rtol = 1.0};
        struct out_verdict v;
        if (check_one(c, &y_bf16, rtol, stream, &v, err, err_len))
            return -1;
        row->y_bf16_ref_err = v.max_rel;
    }
    return all_pass;
}
