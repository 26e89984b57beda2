/* candidate: one candidate of one problem, start to end: supports? (on every rank), setup, a poisoned check run,
 * warm-up and timed iterations, a second check of the last timed output, phase times, extras and the row's derived
 * figures. bench.c runs the sweep, the search and the reports around it. */
#ifndef MOK_CANDIDATE_H
#define MOK_CANDIDATE_H

#include "check.h"
#include "cluster.h"
#include "config.h"
#include "impl.h"
#include "problem.h"
#include "report.h"

/* Fills row's measured fields and disposition. Returns the row's disposition class: 0 fine (passed, not verified,
 * not supported), 1 a failure to report. A failure that leaves the ranks out of step aborts the job
 * (mok_bench_abort). Collective. */
int mok_candidate_run(const struct mok_config *cfg, struct mok_cluster *cl, struct mok_problem *p,
                      struct mok_checker *checker, const struct mok_impl_ops *ops, const int *params,
                      struct mok_row *row);

/* --probe's GEMM rate for the problem's operand precision: cuBLAS bf16, or cuBLASLt's block-scaled FP8 for
 * fp8_block and mxfp8 (0 / NaN where not probed) */
double mok_gemm_rate_for(const struct mok_env *env, enum mok_dtype dtype);

#endif
