/* power: the energy, mean power and power-capped time of this rank's GPU over a timed window, read through NVML.
 * Why: on the H200 machines the megakernel's dense GEMMs run into the 700 W limit and the driver lowers the SM
 * clock (clock-event reason "SW power cap"), so a forward's time depends on its energy; a report that says how
 * much energy a forward took and how long the GPU was capped tells a clock-bound result from a code-bound one,
 * and gives capacity planning its J per forward. NVML is opened with dlopen (the build needs no NVML; a machine
 * without it reports NaN). Read-only queries: nothing here sets clocks, limits or application clocks. */
#ifndef MOK_POWER_H
#define MOK_POWER_H

/* Readings of one rank's counters while a run of iterations is on the GPU. NVML's energy counter moves in steps
 * (tens of ms apart), so a reading between steps is off by up to a step: the meter keeps the first and the last
 * step it saw while polling, and the power is the energy between those two steps over the time between them:
 * the steady state of back-to-back iterations (warm-ups or timed ones alike), without an idle gap that would let
 * the GPU cool or clock up before the timed iterations. */
struct mok_power_meter {
    int ok, steps;
    unsigned long long seen_mj;                     /* the counter's last value seen (total since the driver loaded) */
    unsigned long long first_mj, last_mj;           /* at the first and last step seen */
    unsigned long long first_capped_ns, last_capped_ns; /* time under the power policy, ~0: unknown */
    double first_s, last_s;                         /* host monotonic clock at those steps */
};

/* This rank's GPU over one run, reduced over ranks by mok_power_reduce (NaN where unknown). */
struct mok_power_window {
    double energy_j;    /* per iteration, summed over ranks: the job's energy per forward */
    double power_w;     /* mean power between the first and last counter steps, the highest of the ranks */
    double capped_frac; /* share of that time under the power cap, the highest of the ranks */
};

/* Opens NVML for the current CUDA device once per process (ok = 0 without it) and notes the counter. */
void mok_power_begin(struct mok_power_meter *m);
/* Call often while the iterations run (the host's wait loop): records a step of the counter when it moved. */
void mok_power_poll(struct mok_power_meter *m);
/* energy per iteration = the power between the steps x ms_per_iter (this rank's mean iteration time). Spans
 * between the first and last step under MOK_POWER_MIN_SPAN_S give NaN. Collective (MPI): every rank calls it. */
#define MOK_POWER_MIN_SPAN_S 0.2
void mok_power_reduce(const struct mok_power_meter *m, double ms_per_iter, struct mok_power_window *out);

#endif
