/* lsa_state: what the two implementations built on mok's LSA transfers share (src/impl/lsa.c: `lsa` and the
 * state, phases and checks; lsa_layer.c: `lsa-layer`). Internal to src/impl. (`megakernel` runs on libmok.) */
#ifndef MOK_IMPL_LSA_STATE_H
#define MOK_IMPL_LSA_STATE_H

#include <stdbool.h>

#include "cluster.h"
#include "impl.h"
#include "mok_gemm.h"
#include "mok_kernels.h"
#include "params.h"
#include "phased_run.h"
#include "problem.h"
#include "schedule.h"


struct lsa_state {
    struct mok_problem *p;
    struct mok_cluster *cl;
    struct mok_symmem win;
    struct mok_lsa_args a;
    int sms, nchunks;
    struct phased_run run; /* dispatch, experts (lsa-layer only), combine; launch=graph replays them */
    /* dispatch=push: the schedule does not depend on the push (nor the push on it), so it runs on a side stream
     * beside it instead of after it; fork/join by events, which a CUDA graph capture turns into edges */
    cudaStream_t side;
    cudaEvent_t fork, join;
    /* lsa-layer: the expert GEMMs between dispatch and combine (unfused: stream-ordered kernels, no host sync) */
    bool layer, gemm_portable;
    /* overlap=gemm1: GEMM1 beside the dispatch (ready counters); the dispatch phase's time then covers both */
    bool overlap_gemm1;
    int gemm_sms_fed; /* GEMM1's CTAs beside the dispatch: the GPU's SMs less the dispatch's */
    struct mok_gemm_sm90_config gemm_cfg;
    uint16_t *h, *out; /* [capacity][I], [capacity][H] */
    struct mok_schedule host; /* the same schedule built on the host from the gathered routing */
    struct lsa_bwd *bwd; /* lsa-layer with pass bwd / fwd_bwd (lsa_layer_bwd.c); NULL otherwise */
};

/* The `lsa` implementation's operations, which lsa-layer reuses around its own setup and extras.
 * params are lsa's values in params.h's order (mok_params_lsa reads them). */
int lsa_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why, int why_len);
int lsa_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots, char *err,
              int err_len);
int lsa_run(void *state, int set, const struct mok_outputs *out, int slot, char *err, int err_len);
/* The forward's phase `phase` (dispatch, experts, combine + the owner's sum) of input set `set` into y on st. */
int lsa_forward_phase(struct lsa_state *s, int phase, int set, uint16_t *y, cudaStream_t st, char *err, int err_len);

/* lsa-layer's backward (lsa_layer_bwd.c): its buffers after lsa_setup (and, for pass bwd, the one saved forward);
 * the training passes' phases (fwd_bwd: the forward | dy's dispatch and the expert GEMMs' backward | dx's combine
 * and the owner's sum; bwd: the last three); the run's outputs; teardown. */
int lsa_bwd_setup(struct lsa_state *s, char *err, int err_len);
int lsa_bwd_phase(struct lsa_state *s, int phase, int set, cudaStream_t st, char *err, int err_len);
int lsa_bwd_outputs(struct lsa_state *s, const struct mok_outputs *out, char *err, int err_len);
void lsa_bwd_teardown(struct lsa_state *s);
/* The forward's GEMM1 under a backward: gate and up into the saved buffer, then h by the SwiGLU kernel. */
int lsa_bwd_gemm1(struct lsa_state *s, int set, cudaStream_t st);
void lsa_phase_ms(void *state, int slot, double out[MOK_NPHASES]);
int lsa_extras(void *state, struct mok_row *row, int iters, char *err, int err_len);
void lsa_teardown(void *state);

#endif
