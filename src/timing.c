/* timing: event-timed layer iterations, max over ranks, order statistics. */
#include "timing.h"

#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Whether a warm-up begun at t0 (host seconds) goes on: 1 while any rank is short of warmup_ms once its stream has
 * drained, 0 when none is, -1 with err ("what: ...") when the stream failed. Collective. */
static int warm_up_more(cudaStream_t stream, int warmup_ms, double t0, const char *what, char *err, int err_len)
{
    cudaError_t ce = cudaStreamSynchronize(stream);
    if (ce != cudaSuccess) {
        snprintf(err, (size_t)err_len, "%s: %s", what, cudaGetErrorString(ce));
        return -1;
    }
    int more = (seconds_now() - t0) * 1e3 < (double)warmup_ms;
    MPI_Allreduce(MPI_IN_PLACE, &more, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return more;
}

/* The warm-up: `warmup` iterations, then, with warmup_ms, more batches until that long has passed on every rank.
 * Why a time: a GPU held at its power cap settles its clocks only after some tenth of a second of load; a candidate
 * that starts on an idle GPU (the first of a run) timed after a few short iterations ran partly uncapped and
 * faster (2 x H200, 10 warm-up iterations: uncapped for 2-3% of its timed iterations and 0.4-1.0% faster than with
 * warmup_ms 300, which kept it capped throughout; results/h200x2/2026-11-30-megakernel-v8). Every rank must call
 * fn equally often (the layers synchronize across ranks), so each batch ends in an agreement: another batch while
 * any rank is short of warmup_ms. */
static int warm_up(cudaStream_t stream, int warmup, int warmup_ms, mok_layer_fn fn, void *ctx, int *it, char *err,
                   int err_len)
{
    const double t0 = seconds_now();
    for (; *it < warmup; (*it)++)
        if (fn(ctx, *it, -1, err, err_len))
            return -1;
    const int batch = warmup > 0 ? warmup : 1;
    while (warmup_ms > 0) {
        const int more = warm_up_more(stream, warmup_ms, t0, "warm-up", err, err_len);
        if (more <= 0)
            return more;
        for (int b = 0; b < batch; b++, (*it)++)
            if (fn(ctx, *it, -1, err, err_len))
                return -1;
    }
    return 0;
}

/* timed_ms: how many timed iterations last that long, from one more batch of max(warmup, 1) untimed ones timed on
 * the host (after a wait, so the GPU's time is in it), at least iters and at most MOK_TIMED_ITERS_MAX, the largest
 * over ranks (every rank runs the same count). Why: at its power cap a GPU's clocks wander over about a second; a
 * layer of 3 ms timed over 30 iterations samples one phase of it (one H100: 2.75-3.08 ms medians of 100-iteration
 * windows of one candidate, results/h100x1/2026-12-06-fp8-push-all section 5). */
static int timed_count(cudaStream_t stream, int warmup, int iters, int timed_ms, mok_layer_fn fn, void *ctx, int *it,
                       int *count, char *err, int err_len)
{
    *count = iters;
    if (timed_ms <= 0)
        return 0;
    const int batch = warmup > 0 ? warmup : 1;
    cudaError_t ce = cudaStreamSynchronize(stream);
    const double t0 = seconds_now();
    for (int b = 0; b < batch && ce == cudaSuccess; b++, (*it)++)
        if (fn(ctx, *it, -1, err, err_len))
            return -1;
    if (ce == cudaSuccess)
        ce = cudaStreamSynchronize(stream);
    if (ce != cudaSuccess) {
        snprintf(err, (size_t)err_len, "timing the warm-up: %s", cudaGetErrorString(ce));
        return -1;
    }
    const double per_ms = (seconds_now() - t0) * 1e3 / batch;
    double want = per_ms > 0 ? ceil((double)timed_ms / per_ms) : (double)iters;
    int n = want > MOK_TIMED_ITERS_MAX ? MOK_TIMED_ITERS_MAX : want < iters ? iters : (int)want;
    MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    *count = n;
    return 0;
}

int mok_time_layer(cudaStream_t stream, int warmup, int warmup_ms, int min_iters, int timed_ms, mok_layer_fn fn,
                   void *ctx, double **iter_ms_out, struct mok_stats *stats, struct mok_power_window *power, char *err,
                   int err_len)
{
    int it = 0, iters = 0;
    *iter_ms_out = NULL;
    if (warm_up(stream, warmup, warmup_ms, fn, ctx, &it, err, err_len) ||
        timed_count(stream, warmup, min_iters, timed_ms, fn, ctx, &it, &iters, err, err_len))
        return -1;
    double *iter_ms = calloc((size_t)iters, sizeof(double));
    if (!iter_ms) {
        snprintf(err, (size_t)err_len, "out of host memory");
        return -1;
    }
    *iter_ms_out = iter_ms;
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

/* mok_time_alone's warm-up beyond its first pair: pairs (-2, -1) until warmup_ms has passed since t0 on every rank
 * (an agreement per pair, as warm_up's per batch: the parts may be collective). */
static int alone_warm_up(cudaStream_t stream, int warmup_ms, double t0, mok_alone_fn fn, void *ctx, char *err,
                         int err_len)
{
    while (warmup_ms > 0) {
        const int more = warm_up_more(stream, warmup_ms, t0, "timing alone, warm-up", err, err_len);
        if (more <= 0)
            return more;
        for (int it = -2; it < 0; it++)
            if (fn(ctx, it, err, err_len))
                return -1;
    }
    return 0;
}

int mok_time_alone(cudaStream_t stream, const struct mok_alone_timing *t, mok_alone_fn fn, void *ctx,
                   double *median_ms, char *err, int err_len)
{
    /* Back to back, one event between iterations and one wait at the end, as the layer is timed: the host runs
     * ahead, so no iteration waits for its own launches. (A wait per iteration, as before 68af6c0, timed the
     * parts with idle gaps between them; back to back, gemm=mok's GEMM phase alone measured 1-17% above mok-gemm's
     * own time where the waits gave 0-8%: results/h200x1/2026-12-01-groundwork section 5.) Two untimed iterations
     * first, then more for t->warmup_ms: with two alone, nccl gemm=mok's GEMM phase at Qwen3-235B 4096 took 1.10x
     * mok-gemm's own (which follows its own timed loop of the same GEMMs) on one H100, twice, while in the layer it
     * took 0.90x (results/h100x1/2026-12-07-defaults-baseline). */
    *median_ms = NAN;
    const int warm = 2, n = t->iters > 0 ? t->iters : 0;
    cudaEvent_t *ev = calloc((size_t)(n + warm + 1), sizeof(cudaEvent_t));
    double *ms = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    int rc = ev && ms ? 0 : -1, made = 0;
    while (!rc && made < n + warm + 1)
        if (cudaEventCreate(&ev[made]) == cudaSuccess)
            made++;
        else
            rc = -1;
    if (rc)
        snprintf(err, (size_t)err_len, "timing alone: out of host memory or events");
    const double t0 = seconds_now();
    cudaError_t ce = rc ? cudaSuccess : cudaEventRecord(ev[0], stream);
    for (int it = 0; it < n + warm && !rc && ce == cudaSuccess; it++) {
        if (it == warm && (rc = alone_warm_up(stream, t->warmup_ms, t0, fn, ctx, err, err_len)) == 0)
            ce = cudaEventRecord(ev[warm], stream); /* the timed iterations start after the warm-up */
        if (!rc && ce == cudaSuccess && (rc = fn(ctx, it - warm, err, err_len)) == 0)
            ce = cudaEventRecord(ev[it + 1], stream);
    }
    if (!rc && ce == cudaSuccess)
        ce = cudaEventSynchronize(ev[n + warm]);
    if (!rc && ce != cudaSuccess) {
        snprintf(err, (size_t)err_len, "timing alone: %s", cudaGetErrorString(ce));
        rc = -1;
    }
    for (int it = 0; it < n && !rc; it++) {
        float f = 0;
        if (cudaEventElapsedTime(&f, ev[warm + it], ev[warm + it + 1]) == cudaSuccess)
            ms[it] = f;
    }
    if (!rc && n > 0) {
        MPI_Allreduce(MPI_IN_PLACE, ms, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        struct mok_stats st;
        mok_stats_compute(ms, n, &st);
        *median_ms = st.median;
    }
    for (int i = 0; i < made; i++)
        cudaEventDestroy(ev[i]);
    free(ev);
    free(ms);
    return rc;
}
