/* impl: the interface every implementation fills in (one file each), and the lookup by name. The driver
 * (bench.c) owns buffers, warm-up, timing, checking and printing; an implementation only knows how to set
 * itself up for a problem and run one full layer forward on the cluster's stream. */
#ifndef MOK_IMPL_H
#define MOK_IMPL_H

#include <stdbool.h>

#include "cluster.h"
#include "desc.h"
#include "problem.h"
#include "report.h"

struct mok_alone_timing; /* timing.h */

/* Phases an implementation may time inside its run; the ones it does not have stay NaN (bench.c fills them
 * with NaN before asking). GEMM1/GEMM2: the two expert GEMMs on their own, in gemm mode. */
enum mok_phase {
    MOK_PHASE_DISPATCH = 0,
    MOK_PHASE_GEMM = 1,
    MOK_PHASE_COMBINE = 2,
    MOK_PHASE_GEMM1 = 3,
    MOK_PHASE_GEMM2 = 4,
    MOK_NPHASES = 5
};

struct mok_impl_ops {
    const char *name; /* matches a mok_impl_desc */
    /* Pure check (no GPU work), same answer on every rank: 1 = runnable, 0 = not (why says so). */
    int (*supports)(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                    int why_len);
    /* Collective. max_slots: the most timed iterations whose phase times run() must keep. */
    int (*setup)(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots,
                 char *err, int err_len);
    /* One full layer: input set `set` of the problem, its outputs (out: the problem's list, by name; the
     * forward writes "y") on cl->stream. slot >= 0 asks the implementation to keep that iteration's phase times;
     * -1 for untimed runs. */
    int (*run)(void *state, int set, const struct mok_outputs *out, int slot, char *err, int err_len);
    /* After a checked run (untimed; collective): the outputs that live in the implementation's own buffers until
     * then, written into out on cl->stream. Layer mode's FP8 forward has one: "h", each route's SwiGLU output in
     * route order (src/problem_fp8_layer.c), which sits expert-major at the expert's rank during the run. NULL when
     * run writes every output itself. */
    int (*export_outputs)(void *state, const struct mok_outputs *out, char *err, int err_len);
    /* Whether the runs enqueued after it write what export_outputs brings (on after setup) where nothing else reads
     * it: the driver turns it off for warm-up, timing and extras, so that those run as a trained layer would, and
     * for the check after the timed iterations runs two forwards with it on, back to back, checking the second
     * (candidate.c). NULL: every run writes it. 0, or -1 with err. */
    int (*keep_exports)(void *state, bool on, char *err, int err_len);
    /* Phase times (ms) of a slot after the stream synchronized; NaN for phases it does not have. NULL ok. */
    void (*phase_ms)(void *state, int slot, double out[MOK_NPHASES]);
    /* Collective measurements after timing that fill row fields (gemm_alone_us, a2a_ref_us, notes); what they time
     * alone, they time as t says (timing.h mok_time_alone). NULL ok. */
    int (*extras)(void *state, struct mok_row *row, const struct mok_alone_timing *t, char *err, int err_len);
    void (*teardown)(void *state);
};

const struct mok_impl_ops *mok_impl_find(const char *name);

/* The forward's output y of out, or NULL with "the problem has no bf16 output y" in err: what every forward's run
 * writes. */
uint16_t *mok_impl_forward_y(const struct mok_outputs *out, char *err, int err_len);

/* Gemm mode's backward (src/problem_gemm_bwd.c): the operands and outputs of a struct mok_expert_bwd
 * (gemm_cublas.h) from input set `set`, the gate/up rows gu its forward saved and an implementation's scratch
 * (dh', [dg, du], w h), both parts over every expert; 0, or -1 with `who`'s message in err when the problem lacks
 * an output or has a weight gradient of the other wgrad mode's type. */
struct mok_expert_bwd;
int mok_impl_gemm_bwd_operands(const struct mok_problem *p, int set, const uint16_t *gu, uint16_t *dhp, uint16_t *dgu,
                               uint16_t *hw, const struct mok_outputs *out, const char *who, struct mok_expert_bwd *b,
                               char *err, int err_len);

#endif
