/* timing: the measurement loop. CUDA events around each full layer call on the stream, warm-up first,
 * per-iteration times reduced to their max over ranks (a layer is as slow as its slowest rank), then median,
 * p10 and p90 (stats.h). */
#ifndef MOK_TIMING_H
#define MOK_TIMING_H

#include <cuda_runtime.h>

#include "power.h"
#include "stats.h"

/* One layer call; iter counts from 0 over warm-up then timed iterations; slot is the timed index or -1. */
typedef int (*mok_layer_fn)(void *ctx, int iter, int slot, char *err, int err_len);

/* The most timed iterations timed_ms can ask for (the config's own iters go to 100000 as well). */
#define MOK_TIMED_ITERS_MAX 100000

/* warmup iterations first, then more in batches of max(warmup, 1) until warmup_ms have passed since the warm-up
 * began on every rank (0: no minimum); then min_iters timed iterations, or with timed_ms > 0 as many more as make
 * the timed part last about timed_ms (estimated from one more untimed batch; the same count on every rank).
 * *iter_ms_out (malloc'd, stats->n entries; the caller frees it, also after a failure) receives the per-iteration
 * max over ranks; power (or NULL) the energy, power and power-capped share of the timed iterations (power.h).
 * Collective. Returns 0 or -1 with err. */
int mok_time_layer(cudaStream_t stream, int warmup, int warmup_ms, int min_iters, int timed_ms, mok_layer_fn fn,
                   void *ctx, double **iter_ms_out, struct mok_stats *stats, struct mok_power_window *power, char *err,
                   int err_len);

/* One run of something timed alone (a breakdown's variant, a baseline's transfers or GEMMs by themselves); iter
 * counts -2, -1 (warm-ups, repeated in that order while the warm-up lasts), then 0..iters-1. Returns 0, or -1 with
 * err. */
typedef int (*mok_alone_fn)(void *ctx, int iter, char *err, int err_len);

/* How a row's parts are timed alone (the implementations' extras): as many iterations as the layer's timed ones,
 * after untimed runs that last at least warmup_ms (the config's timing.warmup_ms) */
struct mok_alone_timing {
    int iters;
    int warmup_ms;
};

/* Times fn back to back on stream, an event between runs and one wait at the end, after 2 warm-ups and, with
 * t->warmup_ms, more pairs of them until that long has passed on every rank (the layer's warm-up: a GPU at its
 * power cap settles its clocks over some tenth of a second); *median_ms gets the median over t->iters iterations
 * of each iteration's max over ranks (as mok_time_layer reduces). Collective when every run succeeds; after a
 * failed run it returns -1 at once (a peer may be waiting inside a collective the failed run never reached: the
 * caller aborts the job). */
int mok_time_alone(cudaStream_t stream, const struct mok_alone_timing *t, mok_alone_fn fn, void *ctx,
                   double *median_ms, char *err, int err_len);

#endif
