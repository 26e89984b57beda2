/* symmem: the NCCL device-API piece the host needs from a CUDA translation unit (nccl_device.h is C++): the LSA
 * team size. (The tests' device-communicator and peer-store helpers are in kernels/testing/lsa.cu.) */
#include <nccl.h>
#include <nccl_device.h>

#include "common/common.cuh"

extern "C" int mok_nccl_lsa_size(void *nccl_comm)
{
    return ncclTeamLsa((ncclComm_t)nccl_comm).nRanks;
}
