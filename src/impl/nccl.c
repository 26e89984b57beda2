/* nccl: the standard host-orchestrated expert-parallel layer, one chunk on one stream (nccl_common.h). */
#include <stdio.h>
#include <stdlib.h>

#include "nccl_common.h"

enum { PARAM_GEMM = 0, PARAM_GEMM_STREAMS = 1 };

static int nccl_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                         int why_len)
{
    if (params[PARAM_GEMM] == MOK_GEMM_GROUPED && params[PARAM_GEMM_STREAMS] != 1) {
        snprintf(why, (size_t)why_len, "gemm=grouped is one call per GEMM: gemm_streams must be 1");
        return 0;
    }
    if (p->spec.dtype != MOK_DTYPE_BF16 || p->spec.pass != MOK_PASS_FWD) {
        snprintf(why, (size_t)why_len, "bf16 forward only");
        return 0;
    }
    if (p->experts % cl->nranks) {
        snprintf(why, (size_t)why_len, "experts not divisible by ranks");
        return 0;
    }
    return 1;
}

static int nccl_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots,
                      char *err, int err_len)
{
    struct mok_nccl_pipe *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, (size_t)err_len, "out of host memory");
        return -1;
    }
    *state = s;
    struct mok_nccl_opts opts = {.chunks = 1, .expert_groups = 1, .gemm = (enum mok_gemm_mode)params[PARAM_GEMM],
                                 .gemm_streams = params[PARAM_GEMM_STREAMS]};
    return mok_nccl_pipe_setup(s, p, cl, &opts, max_slots, err, err_len);
}

static int nccl_run(void *state, int set, uint16_t *y, int slot, char *err, int err_len)
{
    return mok_nccl_pipe_run(state, set, y, slot, err, err_len);
}

static void nccl_phase_ms(void *state, int slot, double out[MOK_NPHASES]) { mok_nccl_pipe_phase_ms(state, slot, out); }

static int nccl_extras(void *state, struct mok_row *row, int iters, char *err, int err_len)
{
    return mok_nccl_pipe_extras(state, row, iters, err, err_len);
}

static void nccl_teardown(void *state)
{
    if (state)
        mok_nccl_pipe_teardown(state);
    free(state);
}

const struct mok_impl_ops mok_impl_nccl = {
    .name = "nccl",
    .supports = nccl_supports,
    .setup = nccl_setup,
    .run = nccl_run,
    .phase_ms = nccl_phase_ms,
    .extras = nccl_extras,
    .teardown = nccl_teardown,
};
