/* search: which candidates of one implementation to measure on one problem, under a budget.
 *
 * A candidate is a vector of indices, params[j] in [0, nvalues[j]), into the j-th parameter's value list (the
 * tune lists of struct mok_tune). The search never measures anything itself: it calls back, so it runs the
 * same in the benchmark and in unit tests on synthetic landscapes. Every point is measured at most once (a
 * measurement is a median of many timed iterations on a GPU, so re-measuring only costs time), and for a given
 * seed the sequence of calls is deterministic unless the wall-clock budget cuts it short. */
#ifndef MOK_SEARCH_H
#define MOK_SEARCH_H

#include <stdint.h>

#include "config.h"

/* Returns 0: *time_us is valid; 1: not supported (no time, costs nothing); 2: failed or incorrect (never
 * chosen, costs one measurement). Any other value counts as 2. */
typedef int (*mok_measure_fn)(void *ctx, const int *value_index, double *time_us);

#define MOK_MEASURE_OK 0
#define MOK_MEASURE_UNSUPPORTED 1
#define MOK_MEASURE_FAILED 2

enum mok_search_strategy {
    MOK_SEARCH_EXHAUSTIVE, /* every combination, last parameter fastest (the order of sweep.c) */
    MOK_SEARCH_COORDINATE, /* coarse grid (or the median point), then coordinate descent */
    MOK_SEARCH_HALVING,    /* seeded random sample, then coordinate descent from its best point */
};

struct mok_search_opts {
    enum mok_search_strategy strategy;
    int max_measurements; /* 0: no cap; counts measurements that returned 0 or 2 */
    double budget_s;      /* 0: none; wall clock per problem, checked between measurements */
    uint64_t seed;        /* halving's sample */
};

struct mok_search_result {
    int best[MOK_MAX_PARAMS]; /* value indices of the fastest point; -1 when none was found */
    double best_time_us;      /* NaN when none was found */
    int found;                /* a point returned 0 */
    int measured;             /* callbacks that returned 0 */
    int unsupported;          /* callbacks that returned 1 */
    int failed;               /* callbacks that returned 2 (or anything else) */
    int total;                /* the number of candidates (product of nvalues) */
    int stopped;              /* 1: max_measurements or budget_s ended the search before it was done */
};

/* Runs the strategy. nparams in [0, MOK_MAX_PARAMS] (0: a single candidate with no parameters), every
 * nvalues[j] >= 1, the product at most INT_MAX. Returns 0 (out is filled, found may be 0), or -1 on invalid
 * arguments or out of memory. */
int mok_search_run(int nparams, const int *nvalues, const struct mok_search_opts *opts, mok_measure_fn fn,
                   void *ctx, struct mok_search_result *out);

/* "exhaustive", "coordinate", "halving". */
const char *mok_search_strategy_name(enum mok_search_strategy s);
/* The enum value of a name above, or -1. */
int mok_search_strategy_parse(const char *name);

#endif
