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

struct mok_alone_timing; /* timing.h */

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
    int mx_scheme;     /* lsa-layer with mxfp8: mok-gemm's mx_scheme for its GEMMs (fp8_mlp.h mok_fp8_mok_config) */
    uint16_t *h, *out; /* [capacity][I], [capacity][H] */
    struct mok_schedule host; /* the same schedule built on the host from the gathered routing */
    struct lsa_bwd *bwd; /* lsa-layer with pass bwd / fwd_bwd (lsa_layer_bwd.c); NULL otherwise */
    struct lsa_fp8 *fp8; /* lsa-layer with dtype fp8_block or mxfp8 (lsa_layer_fp8.c); NULL otherwise */
    size_t off_h;        /* window: past the layout, where the FP8 export lands h per route (with an output h) */
};

/* The `lsa` implementation's operations, which lsa-layer reuses around its own setup and extras.
 * params are lsa's values in params.h's order (mok_params_lsa reads them). */
int lsa_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why, int why_len);
int lsa_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots, char *err,
              int err_len);
int lsa_run(void *state, int set, const struct mok_outputs *out, int slot, char *err, int err_len);
/* The forward's phase `phase` (dispatch, experts, combine + the owner's sum) of input set `set` into y on st. */
int lsa_forward_phase(struct lsa_state *s, int phase, int set, uint16_t *y, cudaStream_t st, char *err, int err_len);
/* The dispatch phase's transfers (publish, schedule, the rows into the slots; overlap=gemm1: GEMM1 beside them) on
 * a: the state's args, or the FP8 forward's copy whose rows are wire rows. */
int lsa_dispatch(struct lsa_state *s, const struct mok_lsa_args *a, int set, cudaStream_t st, char *err, int err_len);

/* lsa-layer's backward (lsa_layer_bwd.c): its buffers after lsa_setup (and, for pass bwd, the one saved forward);
 * the training passes' phases (fwd_bwd: the forward | dy's dispatch and the expert GEMMs' backward | dx's combine
 * and the owner's sum; bwd: the last three); the run's outputs; teardown. */
int lsa_bwd_setup(struct lsa_state *s, char *err, int err_len);
int lsa_bwd_phase(struct lsa_state *s, int phase, int set, cudaStream_t st, char *err, int err_len);
int lsa_bwd_outputs(struct lsa_state *s, const struct mok_outputs *out, char *err, int err_len);
void lsa_bwd_teardown(struct lsa_state *s);
/* The forward's GEMM1 under a backward: gate and up into the saved buffer, then h by the SwiGLU kernel. */
int lsa_bwd_gemm1(struct lsa_state *s, int set, cudaStream_t st);

/* lsa-layer's FP8 forward (lsa_layer_fp8.c; dtype fp8_block or mxfp8, pass fwd, kernel=sm90, overlap=none):
 *   dispatch  x quantized (the format's quantizer) into wire rows in the set's x slot of the window, then the
 *             transfers on a copy of the args whose hidden is wire_bytes / 2: they only copy bytes, and every
 *             region they address by hidden (x slots, expert slots) is sized for bf16 rows, which are larger;
 *   experts   the slots' wire rows unpacked into e4m3 rows and scales, then fp8_mlp.h's GEMMs over the schedule's
 *             padded expert-major rows (the row count stays on the device);
 *   combine   bf16, unchanged.
 * window_bytes: the window's room past the layout for export's h rows (0 without an output h). supports: the GPU's
 * half (host_supports.c has the rest). export: impl.h's export_outputs (h per route, to the token's rank). */
size_t lsa_fp8_window_bytes(const struct mok_problem *p, int t_max);
int lsa_fp8_supports(const struct mok_problem *p, int mx_scheme, char *why, int why_len);
int lsa_fp8_setup(struct lsa_state *s, char *err, int err_len);
int lsa_fp8_dispatch(struct lsa_state *s, int set, cudaStream_t st, char *err, int err_len);
int lsa_fp8_experts(struct lsa_state *s, int set, cudaStream_t st, char *err, int err_len);
int lsa_fp8_export(void *state, const struct mok_outputs *out, char *err, int err_len);
/* After lsa_extras: the dispatch's bytes as wire rows, and the note. */
void lsa_fp8_extras(const struct lsa_state *s, struct mok_row *row);
void lsa_fp8_teardown(struct lsa_state *s);

void lsa_phase_ms(void *state, int slot, double out[MOK_NPHASES]);
int lsa_extras(void *state, struct mok_row *row, const struct mok_alone_timing *t, char *err, int err_len);
void lsa_teardown(void *state);

#endif
