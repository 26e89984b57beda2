/* nccl-p2p (comm mode): what the nccl baseline spends on moving rows, without its GEMMs. Counts to the host,
 * grouped ncclSend/ncclRecv of one row per (token, k) to the experts' ranks, the same rows straight back, and the
 * fixed-order weighted sum: the NCCL reference the LSA path is measured against, moving the same logical data. */
#include <stdio.h>

#include "nccl_common.h"

static int p2p_supports(const struct mok_problem *p, const struct mok_cluster *cl, const int *params, char *why,
                        int why_len)
{
    (void)p, (void)cl, (void)params, (void)why, (void)why_len; /* all decided without the GPU (host_supports.c) */
    return 1;
}

static int p2p_setup(void **state, struct mok_problem *p, struct mok_cluster *cl, const int *params, int max_slots,
                     char *err, int err_len)
{
    (void)params;
    struct mok_nccl_opts opts = {.chunks = 1, .expert_groups = 1, .no_compute = true, .gemm = MOK_GEMM_PER_EXPERT,
                                 .gemm_streams = 1};
    return mok_nccl_impl_setup(state, p, cl, &opts, max_slots, err, err_len);
}

const struct mok_impl_ops mok_impl_nccl_p2p = {
    .name = "nccl-p2p",
    .supports = p2p_supports,
    .setup = p2p_setup,
    .run = mok_nccl_impl_run,
    .phase_ms = mok_nccl_impl_phase_ms,
    .extras = mok_nccl_impl_extras,
    .teardown = mok_nccl_impl_teardown,
};
