/* host_supports: what each implementation can be asked to run, decided without a GPU (see desc.h). The
 * implementations' own supports() add only what needs the device (its SMs, shared memory, the LSA team). */
#ifndef MOK_IMPL_HOST_SUPPORTS_H
#define MOK_IMPL_HOST_SUPPORTS_H

#include "config.h"

#define MOK_HOST_SUPPORTS(impl)                                                                                  \
    int impl##_host_supports(const struct mok_problem_spec *spec, int nranks, const int *params, char *why,     \
                             int why_len);
MOK_HOST_SUPPORTS(nccl)
MOK_HOST_SUPPORTS(nccl_overlap)
MOK_HOST_SUPPORTS(nccl_p2p)
MOK_HOST_SUPPORTS(cublas_gemm)
MOK_HOST_SUPPORTS(lsa)
MOK_HOST_SUPPORTS(mok_gemm)
MOK_HOST_SUPPORTS(lsa_layer)
MOK_HOST_SUPPORTS(megakernel)
#undef MOK_HOST_SUPPORTS

#endif
