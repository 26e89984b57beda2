/* power: NVML energy and power-cap counters through dlopen (see power.h). */
#include "power.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The few NVML declarations used (nvml.h's ABI: return codes are ints, 0 success; handles are pointers). */
typedef void *nvml_device;
struct nvml_violation_time {
    unsigned long long reference_time; /* host timestamp, us */
    unsigned long long violation_time; /* ns under the policy since the driver loaded */
};
enum { NVML_PERF_POLICY_POWER = 0, NVML_CLOCK_SM = 1 };

static struct {
    int tried, ready;
    nvml_device dev;
    int (*energy)(nvml_device, unsigned long long *);
    int (*violation)(nvml_device, int, struct nvml_violation_time *);
    int (*clock)(nvml_device, int, unsigned *);
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
    nv.energy = (int (*)(nvml_device, unsigned long long *))dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption");
    nv.violation = (int (*)(nvml_device, int, struct nvml_violation_time *))dlsym(lib, "nvmlDeviceGetViolationStatus");
    nv.clock = (int (*)(nvml_device, int, unsigned *))dlsym(lib, "nvmlDeviceGetClockInfo");
    char bus[32] = "";
    int dev = 0;
    if (!init || !by_bus || !nv.energy || init() != 0 || cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetPCIBusId(bus, (int)sizeof bus, dev) != cudaSuccess || by_bus(bus, &nv.dev) != 0) {
        cudaGetLastError(); /* a failed query must not linger as a later launch's error */
        return;
    }
    nv.ready = 1;
}

void mok_power_sample_now(struct mok_power_sample *s)
{
    memset(s, 0, sizeof *s);
    power_open();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s->wall_s = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    if (!nv.ready || nv.energy(nv.dev, &s->energy_mj) != 0)
        return;
    struct nvml_violation_time v = {0, 0};
    if (nv.violation && nv.violation(nv.dev, NVML_PERF_POLICY_POWER, &v) == 0)
        s->capped_ns = v.violation_time;
    else
        s->capped_ns = ~0ull; /* unknown */
    if (!nv.clock || nv.clock(nv.dev, NVML_CLOCK_SM, &s->sm_mhz) != 0)
        s->sm_mhz = 0;
    s->ok = 1;
}

void mok_power_reduce(const struct mok_power_sample *start, const struct mok_power_sample *mid,
                      const struct mok_power_sample *end, int iters, struct mok_power_window *out)
{
    double window = end->wall_s - start->wall_s;
    int ok = start->ok && end->ok && iters > 0 && window >= MOK_POWER_MIN_WINDOW_S &&
             end->energy_mj >= start->energy_mj;
    /* [0] energy per iteration (summed), [1] power (max), [2] capped share (max), [3] minus the clock (max: the
     * lowest clock); NaN where this rank has no figure */
    double mine[4] = {NAN, NAN, NAN, NAN};
    if (ok) {
        double joules = 1e-3 * (double)(end->energy_mj - start->energy_mj);
        mine[0] = joules / iters;
        mine[1] = joules / window;
        if (start->capped_ns != ~0ull && end->capped_ns != ~0ull && end->capped_ns >= start->capped_ns)
            mine[2] = 1e-9 * (double)(end->capped_ns - start->capped_ns) / window;
    }
    if (mid && mid->ok && mid->sm_mhz > 0)
        mine[3] = -(double)mid->sm_mhz;
    /* NaN through MPI_SUM / MPI_MAX is not portable: reduce a stand-in (0, -inf) and a valid flag (min: all ranks) */
    double val[4], flag[4], sum_val[4], max_val[4], min_flag[4];
    for (int i = 0; i < 4; i++) {
        flag[i] = isnan(mine[i]) ? 0.0 : 1.0;
        val[i] = isnan(mine[i]) ? (i == 0 ? 0.0 : -INFINITY) : mine[i];
    }
    MPI_Allreduce(val, sum_val, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(val + 1, max_val + 1, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(flag, min_flag, 4, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    out->energy_j = min_flag[0] > 0 ? sum_val[0] : NAN; /* every rank's energy, or none: a partial sum misleads */
    out->power_w = min_flag[1] > 0 ? max_val[1] : NAN;
    out->capped_frac = min_flag[2] > 0 ? max_val[2] : NAN;
    out->sm_mhz = min_flag[3] > 0 ? -max_val[3] : NAN;
}
