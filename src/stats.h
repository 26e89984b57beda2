/* stats: order statistics of per-iteration times (pure, unit tested). */
#ifndef MOK_STATS_H
#define MOK_STATS_H

struct mok_stats {
    int n;
    double median, p10, p90, min, max, mean;
};

/* Percentiles by linear interpolation between closest ranks (numpy's default). samples is not modified.
 * n == 0 gives all fields NaN. */
void mok_stats_compute(const double *samples, int n, struct mok_stats *out);
/* q in [0, 1] over an ascending-sorted array. */
double mok_percentile_sorted(const double *sorted, int n, double q);

#endif
