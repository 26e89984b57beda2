/* nccl-overlap: the NCCL baseline in stages (token chunks x local expert groups) over a comm and a compute
 * stream, so the all-to-all of one stage overlaps the GEMMs of another (Megatron-style overlap; nccl_common.h). */
#include <stdio.h>

#include "nccl_common.h"
#include "params.h"

/* What needs no GPU is decided in host_supports.c; here the SMs and, for gemm=mok, whether mok's GEMM runs here. */
static int overlap_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                            int why_len)
{
    struct mok_params_nccl_overlap op = mok_params_nccl_overlap(params);
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cl->device);
    if (op.reserve_sms >= sms) {
        snprintf(why, (size_t)why_len, "reserve_sms %d >= the GPU's %d SMs", op.reserve_sms, sms);
        return 0;
    }
    return op.gemm != 2 || mok_nccl_mok_gemm_supports(p, cl, op.reserve_sms, op.mx_scheme, why, why_len);
}

static int overlap_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params,
                         int max_slots, char *err, int err_len)
{
    struct mok_params_nccl_overlap op = mok_params_nccl_overlap(params);
    struct mok_nccl_opts opts = {.chunks = op.chunks, .expert_groups = op.expert_groups, .overlap = true,
                                 .gemm = (enum mok_gemm_mode)(op.gemm == 2 ? 0 : op.gemm), .mok_gemm = op.gemm == 2,
                                 .gemm_streams = op.gemm_streams,
                                 .reserve_sms = op.reserve_sms, .mx_scheme = op.mx_scheme};
    return mok_nccl_impl_setup(state, p, cl, &opts, max_slots, err, err_len);
}

const struct mok_impl_ops mok_impl_nccl_overlap = {
    .name = "nccl-overlap",
    .supports = overlap_supports,
    .setup = overlap_setup,
    .run = mok_nccl_impl_run,
    .export_outputs = mok_nccl_impl_export,
    .phase_ms = mok_nccl_impl_phase_ms,
    .extras = mok_nccl_impl_extras,
    .teardown = mok_nccl_impl_teardown,
};
