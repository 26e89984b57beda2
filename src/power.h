/* power: the energy, mean power and power-capped time of this rank's GPU over the timed iterations, read through
 * NVML. Why: on the H200 machines the megakernel's dense GEMMs run into the 700 W limit and the driver lowers the
 * SM clock (clock-event reason "SW power cap"), so a forward's time depends on its energy; a report that says how
 * much energy a forward took and how long the GPU was capped tells a clock-bound result from a code-bound one,
 * and gives capacity planning its J per forward. NVML is opened with dlopen (the build needs no NVML; a machine
 * without it reports NaN). Read-only queries: nothing here sets clocks, limits or application clocks.
 *
 * A sampler thread reads while the timed iterations run: the mean of NVML's power readings (the driver's figure,
 * as nvidia-smi's power.draw) and the time the power policy held the clocks down (the violation counter, over its
 * own host timestamps). A thread of its own: NVML calls made between launches on the launching thread delayed
 * them (the p90 of a 1 ms forward went to 6 ms). The H200's power reading behaves as an average over about the last
 * second (candidates after an idle setup read 470, then 600, 660, 690 W), so readings in the sampler's first
 * MOK_POWER_AVERAGE_S are dropped: power and energy need timed iterations that keep the GPU busy longer than that.
 * NVML's total-energy counter was tried first: differences of it over sub-second spans (taken where the counter
 * changed value) read 740-860 W where the limit (and nvidia-smi's readings) are 700 W.
 * MOK_POWER=0 in the environment turns the sampler off (every figure NaN). */
#ifndef MOK_POWER_H
#define MOK_POWER_H

#include <pthread.h>

/* NVML's nvmlViolationTime_t (the same layout: power.c hands it to nvmlDeviceGetViolationStatus). */
struct mok_power_violation {
    unsigned long long reference_time; /* host timestamp, us */
    unsigned long long violation_ns;   /* time under the power policy since the driver loaded */
};

/* One rank's sampler; its fields are the thread's until mok_power_stop returns. */
struct mok_power_sampler {
    int ok, running, samples;
    int stop; /* set by mok_power_stop, read by the thread (__atomic builtins) */
    pthread_t thread;
    double sum_mw; /* of the power readings counted */
    struct mok_power_violation first, last;
};

/* This rank's GPU over one run, reduced over ranks by mok_power_stop (NaN where unknown). */
struct mok_power_window {
    double energy_j;    /* per iteration, summed over ranks: the job's energy per forward (mean power x time) */
    double power_w;     /* mean power reading, the highest of the ranks */
    double capped_frac; /* share of the sampled time under the power cap, the highest of the ranks */
};

#define MOK_POWER_PERIOD_MS 5     /* between readings */
#define MOK_POWER_AVERAGE_S 1.0   /* the power reading's own averaging: readings before this are dropped */
#define MOK_POWER_MIN_SAMPLES 20  /* fewer counted readings: NaN power and energy */
#define MOK_POWER_MIN_SPAN_S 0.05 /* a shorter violation span: NaN capped share */

/* Starts sampling the current CUDA device (NVML opened once per process; without it, or with MOK_POWER=0, the
 * sampler does nothing). */
void mok_power_start(struct mok_power_sampler *s);
/* Stops and joins the thread (not collective: for error paths). */
void mok_power_halt(struct mok_power_sampler *s);
/* mok_power_halt, then reduces over ranks into out: energy per iteration = mean power x ms_per_iter (this rank's
 * mean iteration time). Collective (MPI): every rank calls it. */
void mok_power_stop(struct mok_power_sampler *s, double ms_per_iter, struct mok_power_window *out);

#endif
