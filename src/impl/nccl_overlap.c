/* nccl-overlap: the NCCL baseline in stages (token chunks x local expert groups) over a comm and a compute
 * stream, so the all-to-all of one stage overlaps the GEMMs of another (Megatron-style overlap; nccl_common.h). */
#include <stdio.h>

#include "nccl_common.h"

enum { PARAM_CHUNKS = 0, PARAM_EXPERT_GROUPS = 1, PARAM_GEMM = 2, PARAM_GEMM_STREAMS = 3, PARAM_RESERVE_SMS = 4 };

static int overlap_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                            int why_len)
{
    if (p->spec.dtype != MOK_DTYPE_BF16 || p->spec.pass != MOK_PASS_FWD) {
        snprintf(why, (size_t)why_len, "bf16 forward only");
        return 0;
    }
    if (p->experts % cl->nranks) {
        snprintf(why, (size_t)why_len, "experts not divisible by ranks");
        return 0;
    }
    if (params[PARAM_GEMM] == MOK_GEMM_GROUPED && params[PARAM_GEMM_STREAMS] != 1) {
        snprintf(why, (size_t)why_len, "gemm=grouped is one call per GEMM: gemm_streams must be 1");
        return 0;
    }
    if (params[PARAM_EXPERT_GROUPS] > p->local_experts) {
        snprintf(why, (size_t)why_len, "expert_groups %d > local experts %d", params[PARAM_EXPERT_GROUPS],
                 p->local_experts);
        return 0;
    }
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, cl->device);
    if (params[PARAM_RESERVE_SMS] >= sms) {
        snprintf(why, (size_t)why_len, "reserve_sms %d >= the GPU's %d SMs", params[PARAM_RESERVE_SMS], sms);
        return 0;
    }
    if (params[PARAM_CHUNKS] > p->tokens) {
        snprintf(why, (size_t)why_len, "chunks %d > tokens per rank %d", params[PARAM_CHUNKS], p->tokens);
        return 0;
    }
    return 1;
}

static int overlap_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params,
                         int max_slots, char *err, int err_len)
{
    struct mok_nccl_opts opts = {.chunks = params[PARAM_CHUNKS], .expert_groups = params[PARAM_EXPERT_GROUPS],
                                 .overlap = true, .gemm = (enum mok_gemm_mode)params[PARAM_GEMM],
                                 .gemm_streams = params[PARAM_GEMM_STREAMS], .reserve_sms = params[PARAM_RESERVE_SMS]};
    return mok_nccl_impl_setup(state, p, cl, &opts, max_slots, err, err_len);
}

const struct mok_impl_ops mok_impl_nccl_overlap = {
    .name = "nccl-overlap",
    .supports = overlap_supports,
    .setup = overlap_setup,
    .run = mok_nccl_impl_run,
    .phase_ms = mok_nccl_impl_phase_ms,
    .extras = mok_nccl_impl_extras,
    .teardown = mok_nccl_impl_teardown,
};
