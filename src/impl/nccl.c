/* nccl: the standard host-orchestrated expert-parallel layer, one chunk on one stream (nccl_common.h). */
#include <stdio.h>

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
    struct mok_nccl_opts opts = {.chunks = 1, .expert_groups = 1, .gemm = (enum mok_gemm_mode)params[PARAM_GEMM],
                                 .gemm_streams = params[PARAM_GEMM_STREAMS]};
    return mok_nccl_impl_setup(state, p, cl, &opts, max_slots, err, err_len);
}

const struct mok_impl_ops mok_impl_nccl = {
    .name = "nccl",
    .supports = nccl_supports,
    .setup = nccl_setup,
    .run = mok_nccl_impl_run,
    .phase_ms = mok_nccl_impl_phase_ms,
    .extras = mok_nccl_impl_extras,
    .teardown = mok_nccl_impl_teardown,
};
