/* stats: order statistics of per-iteration times. Percentiles follow numpy's default ("linear") method so a
 * figure in a report can be checked against np.percentile on the raw samples. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double mok_percentile_sorted(const double *sorted, int n, double q)
{
    if (n <= 0 || isnan(q))
        return NAN;
    if (q < 0.0)
        q = 0.0;
    if (q > 1.0)
        q = 1.0;
    /* numpy: virtual index (n-1)*q, neighbours floor and floor+1 (clipped), then its _lerp, which computes
     * from the upper neighbour when the weight is >= 0.5. Doing the same operations gives bitwise-equal
     * results, not just close ones. */
    double pos = (double)(n - 1) * q;
    double lo_f = floor(pos);
    int lo = (int)lo_f;
    int hi = lo + 1 < n ? lo + 1 : n - 1;
    double t = pos - lo_f;
    double a = sorted[lo], b = sorted[hi];
    double diff = b - a;
    return t >= 0.5 ? b - diff * (1.0 - t) : a + diff * t;
}

void mok_stats_compute(const double *samples, int n, struct mok_stats *out)
{
    out->n = n > 0 ? n : 0;
    out->median = out->p10 = out->p90 = out->min = out->max = out->mean = NAN;
    if (n <= 0)
        return;

    /* numpy propagates NaN through every statistic; a NaN sample also has no place in a total order, which
     * qsort needs. So one NaN makes every figure NaN rather than a silently wrong number. */
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        if (isnan(samples[i]))
            return;
        sum += samples[i];
    }

    double *s = malloc((size_t)n * sizeof *s);
    if (!s)
        return; /* out of memory on a handful of doubles: leave NaN rather than abort a long run */
    memcpy(s, samples, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);

    out->min = s[0];
    out->max = s[n - 1];
    out->mean = sum / n;
    /* np.percentile(x, 50), i.e. the lerp of the two middle samples; equals np.median for all but
     * last-bit rounding on even n. */
    out->median = mok_percentile_sorted(s, n, 0.5);
    out->p10 = mok_percentile_sorted(s, n, 0.1);
    out->p90 = mok_percentile_sorted(s, n, 0.9);
    free(s);
}
