/* bench: the driver. For every problem: build inputs and the reference; for every implementation and
 * candidate: supports?, setup, poisoned check run, warm-up, timed iterations, a second check of the last
 * timed output, phase times, extras; print the row; at the end write the CSV and JSON reports. */
#ifndef MOK_BENCH_H
#define MOK_BENCH_H

#include "cluster.h"
#include <stdbool.h>

#include "config.h"

struct mok_bench_opts {
    const char *tuned_path; /* --tuned: tuning database to reuse and update, or NULL */
    bool resume;            /* --resume: reuse rows from the journal of the same config and machine */
};

/* Returns the process exit code: 0 all rows passed (or not_supported / not_verified), 1 otherwise. */
int mok_bench_run(const struct mok_config *cfg, const struct mok_bench_opts *opts, const char *config_json,
                  struct mok_cluster *cl, int argc, char **argv);

/* A failure inside a collective phase can leave peers blocked in NCCL: prints what failed (and, once open, the
 * journal that keeps the rows measured so far) and aborts the job rather than hang. */
void mok_bench_abort(const struct mok_cluster *cl, const char *what, const char *err);

#endif
