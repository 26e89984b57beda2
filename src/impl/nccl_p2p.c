/* nccl-p2p (comm mode): what the nccl baseline spends on moving rows, without its GEMMs. Counts to the host,
 * grouped ncclSend/ncclRecv of one row per (token, k) to the experts' ranks, the same rows straight back, and the
 * fixed-order weighted sum: the NCCL reference the LSA path is measured against, moving the same logical data. */
#include <stdio.h>
#include <stdlib.h>

#include "nccl_common.h"

static int p2p_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                        int why_len)
{
    (void)params;
    if (p->experts % cl->nranks) {
        snprintf(why, (size_t)why_len, "experts not divisible by ranks");
        return 0;
    }
    return 1;
}

static int p2p_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots,
                     char *err, int err_len)
{
    (void)params;
    struct mok_nccl_pipe *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, (size_t)err_len, "out of host memory");
        return -1;
    }
    *state = s;
    struct mok_nccl_opts opts = {.chunks = 1, .expert_groups = 1, .no_compute = true, .gemm = MOK_GEMM_PER_EXPERT,
                                 .gemm_streams = 1};
    return mok_nccl_pipe_setup(s, p, cl, &opts, max_slots, err, err_len);
}

static int p2p_run(void *state, int set, uint16_t *y, int slot, char *err, int err_len)
{
    return mok_nccl_pipe_run(state, set, y, slot, err, err_len);
}

static void p2p_phase_ms(void *state, int slot, double out[MOK_NPHASES]) { mok_nccl_pipe_phase_ms(state, slot, out); }

static int p2p_extras(void *state, struct mok_row *row, int iters, char *err, int err_len)
{
    return mok_nccl_pipe_extras(state, row, iters, err, err_len);
}

static void p2p_teardown(void *state)
{
    if (state)
        mok_nccl_pipe_teardown(state);
    free(state);
}

const struct mok_impl_ops mok_impl_nccl_p2p = {
    .name = "nccl-p2p",
    .supports = p2p_supports,
    .setup = p2p_setup,
    .run = p2p_run,
    .phase_ms = p2p_phase_ms,
    .extras = p2p_extras,
    .teardown = p2p_teardown,
};
