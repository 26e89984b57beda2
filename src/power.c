/* power: NVML power readings and power-cap counters through dlopen (see power.h). */
#include "power.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The few NVML declarations used (nvml.h's ABI: return codes are ints, 0 success; handles are pointers; the
 * violation time is struct mok_power_violation, power.h). */
typedef void *nvml_device;
enum { NVML_PERF_POLICY_POWER = 0 };

static struct {
    int tried, ready;
    nvml_device dev;
    int (*power)(nvml_device, unsigned *);
    int (*violation)(nvml_device, int, struct mok_power_violation *);
} nv;

static void power_open(void)
{
    if (nv.tried)
        return;
    nv.tried = 1;
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    int (*init)(void) = (int (*)(void))dlsym(lib, "nvmlInit_v2");
    int (*by_bus)(const char *, nvml_device *) =
        (int (*)(const char *, nvml_device *))dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    nv.power = (int (*)(nvml_device, unsigned *))dlsym(lib, "nvmlDeviceGetPowerUsage");
    nv.violation = (int (*)(nvml_device, int, struct mok_power_violation *))dlsym(lib, "nvmlDeviceGetViolationStatus");
    char bus[32] = "";
    int dev = 0;
    if (!init || !by_bus || !nv.power || init() != 0 || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev) != cudaSuccess || by_bus(bus, &nv.dev) != 0) {
        cudaGetLastError(); /* a failed query must not linger as a later launch's error */
        return;
    }
    nv.ready = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *sample_loop(void *arg)
{
    struct mok_power_sampler *s = arg;
    const double t0 = now_s();
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        unsigned mw = 0;
        /* the reading averages the last MOK_POWER_AVERAGE_S: only readings that lie wholly inside the run count */
        if (now_s() - t0 >= MOK_POWER_AVERAGE_S && nv.power(nv.dev, &mw) == 0) {
            s->samples++;
            s->sum_mw += mw;
        }
        struct mok_power_violation v = {0, 0};
        if (nv.violation && nv.violation(nv.dev, NVML_PERF_POLICY_POWER, &v) == 0 && v.reference_time) {
            if (!s->first.reference_time)
                s->first = v;
            s->last = v;
        }
        struct timespec nap = {0, MOK_POWER_PERIOD_MS * 1000000L};
        nanosleep(&nap, NULL);
    }
    return NULL;
}

void mok_power_start(struct mok_power_sampler *s)
{
    memset(s, 0, sizeof *s);
    const char *env = getenv("MOK_POWER");
    if (env && strcmp(env, "0") == 0)
        return;
    power_open();
    s->ok = nv.ready;
    if (s->ok)
        s->running = pthread_create(&s->thread, NULL, sample_loop, s) == 0;
    s->ok = s->running;
}

void mok_power_halt(struct mok_power_sampler *s)
{
    if (s->running) {
        __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
        pthread_join(s->thread, NULL);
        s->running = 0;
    }
}

void mok_power_stop(struct mok_power_sampler *m, double ms_per_iter, struct mok_power_window *out)
{
    mok_power_halt(m);
    /* [0] energy per iteration (summed over ranks), [1] power (max), [2] capped share (max); NaN where this rank
     * has no figure */
    double mine[3] = {NAN, NAN, NAN};
    if (m->ok && m->samples >= MOK_POWER_MIN_SAMPLES && ms_per_iter > 0) {
        double watts = 1e-3 * m->sum_mw / m->samples;
        mine[0] = watts * ms_per_iter * 1e-3;
        mine[1] = watts;
    }
    double span_us = (double)(m->last.reference_time - m->first.reference_time);
    if (m->ok && span_us >= 1e6 * MOK_POWER_MIN_SPAN_S && m->last.violation_ns >= m->first.violation_ns)
        /* the driver's violation counter and its reference clock drift apart by ~1e-5 over a run (it read
         * 1.00001 in results/h200x2/2026-11-30-qwen4096-exposed): a share of the span is at most all of it */
        mine[2] = fmin(1.0, 1e-3 * (double)(m->last.violation_ns - m->first.violation_ns) / span_us);
    /* NaN through MPI_SUM / MPI_MAX is not portable: reduce a stand-in (0, -inf) and a valid flag (min: all ranks) */
    double val[3], flag[3], sum_val[1], max_val[3], min_flag[3];
    for (int i = 0; i < 3; i++) {
        flag[i] = isnan(mine[i]) ? 0.0 : 1.0;
        val[i] = isnan(mine[i]) ? (i == 0 ? 0.0 : -INFINITY) : mine[i];
    }
    MPI_Allreduce(val, sum_val, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(val + 1, max_val + 1, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(flag, min_flag, 3, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    out->energy_j = min_flag[0] > 0 ? sum_val[0] : NAN; /* every rank's energy, or none: a partial sum misleads */
    out->power_w = min_flag[1] > 0 ? max_val[1] : NAN;
    out->capped_frac = min_flag[2] > 0 ? max_val[2] : NAN;
}
