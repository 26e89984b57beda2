/* timing: event-timed layer iterations, max over ranks, order statistics. */
#include "timing.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int mok_time_layer(cudaStream_t stream, int warmup, int iters, mok_layer_fn fn, void *ctx, double *iter_ms,
                   struct mok_stats *stats, struct mok_power_window *power, char *err, int err_len)
{
    int it = 0;
    for (; it < warmup; it++)
        if (fn(ctx, it, -1, err, err_len))
            return -1;
    struct mok_power_sampler sampler; /* reads power on a thread of its own while the timed iterations run */
    mok_power_start(&sampler);
    /* iters + 1 events: event i marks the start of iteration i and the end of iteration i - 1, so the stream
     * timeline is measured without gaps, host-side work between launches included */
    cudaEvent_t *ev = calloc((size_t)iters + 1, sizeof(cudaEvent_t));
    if (!ev) {
        mok_power_halt(&sampler);
        snprintf(err, (size_t)err_len, "out of host memory");
        return -1;
    }
    int rc = 0;
    for (int i = 0; i <= iters && !rc; i++)
        if (cudaEventCreate(&ev[i]) != cudaSuccess)
            rc = -1;
    if (!rc)
        rc = cudaEventRecord(ev[0], stream) == cudaSuccess ? 0 : -1;
    for (int i = 0; i < iters && !rc; i++, it++) {
        rc = fn(ctx, it, i, err, err_len);
        if (!rc && cudaEventRecord(ev[i + 1], stream) != cudaSuccess)
            rc = -1;
    }
    if (!rc) {
        cudaError_t ce = cudaEventSynchronize(ev[iters]);
        if (ce != cudaSuccess) {
            snprintf(err, (size_t)err_len, "timed iterations: %s", cudaGetErrorString(ce));
            rc = -1;
        }
    }
    double my_ms = 0; /* this rank's own time of the timed iterations, for its energy per iteration */
    for (int i = 0; i < iters && !rc; i++) {
        float ms = 0;
        cudaEventElapsedTime(&ms, ev[i], ev[i + 1]);
        iter_ms[i] = ms;
        my_ms += ms;
    }
    for (int i = 0; i <= iters; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    free(ev);
    if (rc) {
        mok_power_halt(&sampler); /* not collective: the caller aborts the job after a failure */
        return -1;
    }
    MPI_Allreduce(MPI_IN_PLACE, iter_ms, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    mok_stats_compute(iter_ms, iters, stats);
    struct mok_power_window pw;
    mok_power_stop(&sampler, iters > 0 ? my_ms / iters : 0, power ? power : &pw);
    return 0;
}

int mok_time_alone(cudaStream_t stream, int iters, mok_alone_fn fn, void *ctx, double *median_ms, char *err,
                   int err_len)
{
    *median_ms = NAN;
    cudaEvent_t a = NULL, b = NULL;
    double *ms = calloc((size_t)(iters > 0 ? iters : 1), sizeof(double));
    int rc = ms && cudaEventCreate(&a) == cudaSuccess && cudaEventCreate(&b) == cudaSuccess ? 0 : -1;
    if (rc)
        snprintf(err, (size_t)err_len, "timing alone: out of host memory or events");
    for (int it = -2; it < iters && !rc; it++) {
        cudaError_t ce = cudaEventRecord(a, stream);
        if (ce == cudaSuccess && (rc = fn(ctx, it, err, err_len)) == 0) {
            ce = cudaEventRecord(b, stream);
            if (ce == cudaSuccess)
                ce = cudaEventSynchronize(b);
        }
        if (!rc && ce != cudaSuccess) {
            snprintf(err, (size_t)err_len, "timing alone: %s", cudaGetErrorString(ce));
            rc = -1;
        }
        float f = 0;
        if (!rc && it >= 0 && cudaEventElapsedTime(&f, a, b) == cudaSuccess)
            ms[it] = f;
    }
    if (!rc && iters > 0) {
        MPI_Allreduce(MPI_IN_PLACE, ms, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        struct mok_stats st;
        mok_stats_compute(ms, iters, &st);
        *median_ms = st.median;
    }
    free(ms);
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    return rc;
}
