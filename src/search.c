/* search: exhaustive, coordinate-descent and sampled searches over a candidate grid (see search.h). */
#include "search.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A full pass of coordinate descent that gains less than this stops the search: measurements are medians with
 * about 1% run-to-run spread, so smaller gains are mostly noise and chasing them costs whole extra passes. */
#define MOK_SEARCH_MIN_GAIN 0.005

/* Memo of every point called back, keyed by its linear index (sweep order). Open addressing: the grid can be
 * far larger than what a budgeted search visits, so a dense array over the whole grid is not an option. */
struct memo_slot {
    uint64_t key1; /* linear index + 1; 0 marks an empty slot */
    double time_us;
    int status;
};

struct state {
    int np;
    const int *nv;
    long long total;
    mok_measure_fn fn;
    void *ctx;
    int limit;       /* measurements allowed (returned 0 or 2), 0: no limit */
    int user_limit;  /* the limit is the caller's max_measurements, so hitting it means "stopped early" */
    double deadline; /* CLOCK_MONOTONIC seconds, 0: none */
    int halted;      /* a limit refused a measurement: every loop ends */
    int oom;
    struct memo_slot *tab;
    size_t cap, used;
    struct mok_search_result *r;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t mix64(uint64_t x) /* splitmix64 finalizer: spreads consecutive indices over the table */
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static long long linear_index(const struct state *st, const int *p)
{
    long long i = 0;
    for (int j = 0; j < st->np; j++)
        i = i * st->nv[j] + p[j];
    return i;
}

/* Inverse of linear_index: the last parameter varies fastest, as in mok_sweep_at. */
static void decode(const struct state *st, long long i, int *p)
{
    for (int j = st->np - 1; j >= 0; j--) {
        p[j] = (int)(i % st->nv[j]);
        i /= st->nv[j];
    }
}

static struct memo_slot *memo_find(const struct state *st, long long key)
{
    size_t mask = st->cap - 1;
    for (size_t h = mix64((uint64_t)key) & mask;; h = (h + 1) & mask) {
        if (st->tab[h].key1 == (uint64_t)key + 1 || st->tab[h].key1 == 0)
            return &st->tab[h];
    }
}

/* Keeps the load under one half so probes stay short. */
static int memo_grow(struct state *st)
{
    if (2 * (st->used + 1) <= st->cap)
        return 0;
    struct state old = *st;
    st->cap = old.cap ? 2 * old.cap : 64;
    st->tab = calloc(st->cap, sizeof *st->tab);
    if (!st->tab) {
        st->tab = old.tab;
        st->cap = old.cap;
        st->oom = st->halted = 1;
        return -1;
    }
    for (size_t i = 0; i < old.cap; i++)
        if (old.tab[i].key1)
            *memo_find(st, (long long)old.tab[i].key1 - 1) = old.tab[i];
    free(old.tab);
    return 0;
}

/* Measures p once: a memoized point answers from the memo and costs nothing. Returns the status, or -1 when
 * a limit refused the measurement (then st->halted is set and the search winds down). */
static int measure(struct state *st, const int *p)
{
    long long key = linear_index(st, p);
    struct memo_slot *s = memo_find(st, key);
    if (s->key1)
        return s->status;
    struct mok_search_result *r = st->r;
    int spent = r->measured + r->failed;
    int over_cap = st->limit > 0 && spent >= st->limit;
    int over_time = st->deadline > 0 && now_s() >= st->deadline;
    if (st->halted || over_cap || over_time) {
        if (over_time || (over_cap && st->user_limit))
            r->stopped = 1;
        st->halted = 1;
        return -1;
    }
    if (memo_grow(st) != 0)
        return -1;
    double t = NAN;
    int status = st->fn(st->ctx, p, &t);
    if (status == MOK_MEASURE_OK && !isfinite(t))
        status = MOK_MEASURE_FAILED; /* a time that cannot be compared is no result */
    if (status != MOK_MEASURE_OK && status != MOK_MEASURE_UNSUPPORTED)
        status = MOK_MEASURE_FAILED;
    s = memo_find(st, key); /* the table may have moved in memo_grow */
    s->key1 = (uint64_t)key + 1;
    s->status = status;
    s->time_us = t;
    st->used++;
    if (status == MOK_MEASURE_OK) {
        r->measured++;
        /* Strictly faster only: on a tie the point measured first stays, so the result does not depend on
         * anything but the order of calls, which is deterministic. */
        if (!r->found || t < r->best_time_us) {
            memcpy(r->best, p, sizeof(int) * (size_t)st->np);
            r->best_time_us = t;
            r->found = 1;
        }
    } else if (status == MOK_MEASURE_UNSUPPORTED) {
        r->unsupported++;
    } else {
        r->failed++;
    }
    return status;
}

static void run_exhaustive(struct state *st)
{
    int p[MOK_MAX_PARAMS] = {0};
    for (long long i = 0; i < st->total && !st->halted; i++) {
        decode(st, i, p);
        measure(st, p);
    }
}

/* The median point, or when it is not supported (or fails), the nearest point that works: rings of growing
 * L1 distance in index space, each scanned in sweep order so the choice is deterministic. The scan decodes the
 * whole grid per ring, which is cheap next to a single GPU measurement. Returns 1 when a point worked. */
static int start_median(struct state *st)
{
    int mid[MOK_MAX_PARAMS] = {0}, p[MOK_MAX_PARAMS] = {0}, maxr = 0;
    for (int j = 0; j < st->np; j++) {
        mid[j] = (st->nv[j] - 1) / 2;
        maxr += st->nv[j] - 1;
    }
    if (measure(st, mid) == MOK_MEASURE_OK)
        return 1;
    for (int ring = 1; ring <= maxr && !st->halted; ring++) {
        for (long long i = 0; i < st->total && !st->halted; i++) {
            decode(st, i, p);
            int d = 0;
            for (int j = 0; j < st->np; j++)
                d += abs(p[j] - mid[j]);
            if (d == ring && measure(st, p) == MOK_MEASURE_OK)
                return 1;
        }
    }
    return 0;
}

/* Coordinate descent from the best point so far: each parameter in turn is swept with the others held at the
 * current best, and the search moves to the best of the line. Lines repeat whole passes until a pass gains
 * less than MOK_SEARCH_MIN_GAIN. Memoization makes revisited points free, so the cost of a pass is only the
 * points whose other coordinates moved. */
static void descend(struct state *st)
{
    struct mok_search_result *r = st->r;
    int cur[MOK_MAX_PARAMS];
    while (r->found && !st->halted) {
        double before = r->best_time_us;
        for (int j = 0; j < st->np && !st->halted; j++) {
            if (st->nv[j] < 2)
                continue;
            memcpy(cur, r->best, sizeof cur);
            for (int v = 0; v < st->nv[j] && !st->halted; v++) {
                cur[j] = v;
                measure(st, cur);
            }
        }
        if (before - r->best_time_us < MOK_SEARCH_MIN_GAIN * fabs(before))
            break;
    }
}

/* Coarse grid first: min, median and max of each long list (all values of lists of up to 3) find the right
 * region of a smooth landscape for 3^nparams measurements. When that grid is itself more than a third of all
 * candidates it saves nothing over descent, so the descent starts from the median point instead. */
static void run_coordinate(struct state *st)
{
    int vals[MOK_MAX_PARAMS][3], nval[MOK_MAX_PARAMS], p[MOK_MAX_PARAMS] = {0};
    long long coarse = 1;
    for (int j = 0; j < st->np; j++) {
        int n = st->nv[j];
        nval[j] = n > 3 ? 3 : n;
        for (int k = 0; k < nval[j]; k++)
            vals[j][k] = n > 3 ? (k == 0 ? 0 : k == 1 ? (n - 1) / 2 : n - 1) : k;
        coarse *= nval[j];
    }
    if (3 * coarse <= st->total) {
        for (long long i = 0; i < coarse && !st->halted; i++) {
            long long rest = i;
            for (int j = st->np - 1; j >= 0; j--) {
                p[j] = vals[j][rest % nval[j]];
                rest /= nval[j];
            }
            measure(st, p);
        }
    }
    if (!st->r->found && !start_median(st))
        return;
    descend(st);
}

static uint64_t xorshift64(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* A seeded random sample guards descent against starting in the wrong basin of a coupled landscape; then
 * descent from the sample's best point. Successive halving would re-measure the survivors, but a measurement
 * here is already a median of many iterations, so re-measuring buys nothing. Without a caller cap this is a
 * fixed-budget method: it spends at most max(8, total/3) measurements (the caller's cap otherwise), a third of
 * them (at least 8) on the sample, so descent keeps two thirds. */
static void run_halving(struct state *st, uint64_t seed)
{
    long long allow = st->limit > 0 ? st->limit : st->total / 3;
    if (allow < 8)
        allow = 8;
    if (allow > st->total)
        allow = st->total;
    if (st->limit == 0)
        st->limit = (int)allow; /* the strategy's own budget: reaching it is not "stopped early" */
    long long n = allow / 3 > 8 ? allow / 3 : 8;
    if (n > st->total)
        n = st->total;
    uint64_t rng = mix64(seed);
    if (rng == 0)
        rng = 0x9E3779B97F4A7C15ull; /* xorshift's one fixed point */
    int p[MOK_MAX_PARAMS] = {0};
    if (2 * n >= st->total) {
        /* A large share of the grid: a partial Fisher-Yates shuffle gives distinct points without retries. */
        long long *idx = malloc(sizeof(long long) * (size_t)st->total);
        if (!idx) {
            st->oom = st->halted = 1;
            return;
        }
        for (long long i = 0; i < st->total; i++)
            idx[i] = i;
        for (long long k = 0; k < n && !st->halted; k++) {
            long long j = k + (long long)(xorshift64(&rng) % (uint64_t)(st->total - k));
            long long t = idx[k];
            idx[k] = idx[j];
            idx[j] = t;
            decode(st, idx[k], p);
            measure(st, p);
        }
        free(idx);
    } else {
        /* A small share: draw and redraw points already in the memo (every drawn point is measured at once).
         * At most half the grid is taken, so a draw is new with probability >= 1/2. */
        for (long long k = 0; k < n && !st->halted;) {
            long long i = (long long)(xorshift64(&rng) % (uint64_t)st->total);
            if (memo_find(st, i)->key1)
                continue;
            decode(st, i, p);
            measure(st, p);
            k++;
        }
    }
    if (!st->r->found && !start_median(st))
        return;
    descend(st);
}

int mok_search_run(int nparams, const int *nvalues, const struct mok_search_opts *opts, mok_measure_fn fn,
                   void *ctx, struct mok_search_result *out)
{
    if (!opts || !fn || !out || nparams < 0 || nparams > MOK_MAX_PARAMS || (nparams > 0 && !nvalues) ||
        opts->max_measurements < 0 || !(opts->budget_s >= 0) || (int)opts->strategy < 0 ||
        (int)opts->strategy > (int)MOK_SEARCH_HALVING)
        return -1;
    long long total = 1;
    for (int j = 0; j < nparams; j++) {
        if (nvalues[j] < 1)
            return -1;
        total *= nvalues[j];
        if (total > INT_MAX)
            return -1;
    }
    memset(out, 0, sizeof *out);
    for (int j = 0; j < MOK_MAX_PARAMS; j++)
        out->best[j] = -1;
    out->best_time_us = NAN;
    out->total = (int)total;

    struct state st = {.np = nparams, .nv = nvalues, .total = total, .fn = fn, .ctx = ctx, .r = out,
                       .limit = opts->max_measurements, .user_limit = opts->max_measurements > 0};
    if (opts->budget_s > 0)
        st.deadline = now_s() + opts->budget_s;
    st.cap = 64;
    st.tab = calloc(st.cap, sizeof *st.tab);
    if (!st.tab)
        return -1;
    switch (opts->strategy) {
    case MOK_SEARCH_EXHAUSTIVE: run_exhaustive(&st); break;
    case MOK_SEARCH_COORDINATE: run_coordinate(&st); break;
    case MOK_SEARCH_HALVING: run_halving(&st, opts->seed); break;
    }
    free(st.tab);
    if (!out->found)
        for (int j = 0; j < MOK_MAX_PARAMS; j++)
            out->best[j] = -1;
    return st.oom ? -1 : 0;
}

static const char *const strategy_names[] = {"exhaustive", "coordinate", "halving"};

const char *mok_search_strategy_name(enum mok_search_strategy s)
{
    return ((int)s >= 0 && (int)s <= (int)MOK_SEARCH_HALVING) ? strategy_names[s] : "unknown";
}

int mok_search_strategy_parse(const char *name)
{
    for (int i = 0; name && i < 3; i++)
        if (strcmp(name, strategy_names[i]) == 0)
            return i;
    return -1;
}
