/* nccl: the standard host-orchestrated expert-parallel layer, one chunk on one stream (nccl_common.h). */
#include <stdio.h>

#include "nccl_common.h"
#include "params.h"

/* What needs no GPU is decided in host_supports.c; gemm=mok asks the GPU whether mok's GEMM runs here. */
static int nccl_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                         int why_len)
{
    struct mok_params_nccl np = mok_params_nccl(params);
    return np.gemm != 2 || mok_nccl_mok_gemm_supports(p, cl, 0, np.mx_scheme, why, why_len);
}

static int nccl_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots,
                      char *err, int err_len)
{
    struct mok_params_nccl np = mok_params_nccl(params);
    struct mok_nccl_opts opts = {.chunks = 1, .expert_groups = 1, .gemm = (enum mok_gemm_mode)(np.gemm == 2 ? 0 : np.gemm),
                                 .mok_gemm = np.gemm == 2, .gemm_streams = np.gemm_streams,
                                 .mx_scheme = np.mx_scheme};
    return mok_nccl_impl_setup(state, p, cl, &opts, max_slots, err, err_len);
}

const struct mok_impl_ops mok_impl_nccl = {
    .name = "nccl",
    .supports = nccl_supports,
    .setup = nccl_setup,
    .run = mok_nccl_impl_run,
    .export_outputs = mok_nccl_impl_export,
    .phase_ms = mok_nccl_impl_phase_ms,
    .extras = mok_nccl_impl_extras,
    .teardown = mok_nccl_impl_teardown,
};
