/* power: the energy, mean power and power-capped time of this rank's GPU over a timed window, read through NVML.
 * Why: on the H200 machines the megakernel's dense GEMMs run into the 700 W limit and the driver lowers the SM
 * clock (clock-event reason "SW power cap"), so a forward's time depends on its energy; a report that says how
 * much energy a forward took and how long the GPU was capped tells a clock-bound result from a code-bound one,
 * and gives capacity planning its J per forward. NVML is opened with dlopen (the build needs no NVML; a machine
 * without it reports NaN). Read-only queries: nothing here sets clocks, limits or application clocks. */
#ifndef MOK_POWER_H
#define MOK_POWER_H

/* Readings of one rank's counters while a run of iterations is on the GPU (the host's wait for the last event):
 * the mean of NVML's power readings (the driver's figure, as nvidia-smi's power.draw), and the time the power
 * policy held the clocks down over the violation counter's own host timestamps. Polled only while waiting, never
 * between launches: an NVML call there delays the next launch (measured: the p90 of a 1 ms forward went to 6 ms).
 * On the H200 the power reading is an average over the last second (candidates after an idle setup read 470 W,
 * then 600, 660, 690 W as the average filled): readings in the first MOK_POWER_AVERAGE_S of the polling are
 * dropped, so power and energy are reported only for runs that keep the GPU busy longer than that (time more
 * iterations for them); implementations whose iterations wait on the host (the nccl baselines) get little polling.
 * NVML's total-energy counter was tried first: it moves in steps tens of ms apart, and sub-second spans between
 * steps read 740-860 W where the limit (and nvidia-smi's readings) are 700 W. */
struct mok_power_violation {
    unsigned long long reference_time; /* host timestamp, us */
    unsigned long long violation_ns;   /* total time under the power policy */
};
struct mok_power_meter {
    int ok, samples;
    double first_poll_s; /* host monotonic clock */
    double sum_mw;       /* of the power readings counted */
    struct mok_power_violation first, last;
};

/* This rank's GPU over one run, reduced over ranks by mok_power_reduce (NaN where unknown). */
struct mok_power_window {
    double energy_j;    /* per iteration, summed over ranks: the job's energy per forward (mean power x time) */
    double power_w;     /* mean power reading, the highest of the ranks */
    double capped_frac; /* share of the polled time under the power cap, the highest of the ranks */
};

/* Opens NVML for the current CUDA device once per process (ok = 0 without it). */
void mok_power_begin(struct mok_power_meter *m);
/* One reading; call it every millisecond or so while the iterations run. */
void mok_power_poll(struct mok_power_meter *m);
/* energy per iteration = mean power x ms_per_iter (this rank's mean iteration time). Fewer than
 * MOK_POWER_MIN_SAMPLES readings give NaN power and energy, a violation span under MOK_POWER_MIN_SPAN_S a NaN
 * capped share. Collective (MPI): every rank calls it. */
#define MOK_POWER_MIN_SAMPLES 20
#define MOK_POWER_AVERAGE_S 1.0
#define MOK_POWER_MIN_SPAN_S 0.05
void mok_power_reduce(const struct mok_power_meter *m, double ms_per_iter, struct mok_power_window *out);

#endif
