/* power: the energy, mean power and power-capped time of this rank's GPU over a timed window, read through NVML.
 * Why: on the H200 machines the megakernel's dense GEMMs run into the 700 W limit and the driver lowers the SM
 * clock (clock-event reason "SW power cap"), so a forward's time depends on its energy; a report that says how
 * much energy a forward took and how long the GPU was capped tells a clock-bound result from a code-bound one,
 * and gives capacity planning its J per forward. NVML is opened with dlopen (the build needs no NVML; a machine
 * without it reports NaN). Read-only queries: nothing here sets clocks, limits or application clocks. */
#ifndef MOK_POWER_H
#define MOK_POWER_H

/* One reading of the counters; ok = 0 where NVML or a counter is unavailable. */
struct mok_power_sample {
    int ok;
    unsigned long long energy_mj; /* total energy since the driver loaded */
    unsigned long long capped_ns; /* total time the power policy held the clocks down */
    double wall_s;                /* host monotonic clock */
    unsigned sm_mhz;              /* SM clock at this moment (0: unknown) */
};

/* This rank's GPU over one window, reduced over ranks by mok_power_reduce (NaN where unknown). */
struct mok_power_window {
    double energy_j;     /* per iteration, summed over ranks: the job's energy per forward */
    double power_w;      /* mean power over the window, the highest of the ranks */
    double capped_frac;  /* share of the window under the power cap, the highest of the ranks */
    double sm_mhz;       /* SM clock sampled once inside the window, the lowest of the ranks */
};

/* Reads the counters of the current CUDA device now (NVML is opened once per process; ok = 0 without it). */
void mok_power_sample_now(struct mok_power_sample *s);
/* From samples at the window's start and end (mid: a sample inside it, for the clock) over iters iterations.
 * Windows under MOK_POWER_MIN_WINDOW_S give NaN energy and power: NVML's energy counter is not updated often
 * enough to divide a short window by. Collective (MPI): every rank calls it. */
#define MOK_POWER_MIN_WINDOW_S 0.1
void mok_power_reduce(const struct mok_power_sample *start, const struct mok_power_sample *mid,
                      const struct mok_power_sample *end, int iters, struct mok_power_window *out);

#endif
