/* symmem: NCCL device-API pieces the host needs from a CUDA translation unit (nccl_device.h is C++): device
 * communicator create/destroy, the LSA team size, and the smallest use of a symmetric window, a store
 * through ncclGetLsaPointer into a peer's window, which the symmetric-memory GPU test checks. */
#include <nccl.h>
#include <nccl_device.h>

#include <new>

#include "common.cuh"

extern "C" int mok_devcomm_create(void *nccl_comm, int lsa_barrier_count, void **out_devcomm)
{
    ncclDevCommRequirements_t reqs = {}; // zero: no GIN, no multimem (NVLS stays off)
    reqs.lsaBarrierCount = lsa_barrier_count;
    ncclDevComm_t *dev = new (std::nothrow) ncclDevComm_t();
    if (!dev)
        return (int)ncclSystemError;
    ncclResult_t r = ncclDevCommCreate((ncclComm_t)nccl_comm, &reqs, dev);
    if (r != ncclSuccess) {
        delete dev;
        return (int)r;
    }
    *out_devcomm = dev;
    return 0;
}

extern "C" int mok_devcomm_destroy(void *nccl_comm, void *devcomm)
{
    if (!devcomm)
        return 0;
    ncclResult_t r = ncclDevCommDestroy((ncclComm_t)nccl_comm, (ncclDevComm_t *)devcomm);
    delete (ncclDevComm_t *)devcomm;
    return (int)r;
}

extern "C" int mok_nccl_lsa_size(void *nccl_comm)
{
    return ncclTeamLsa((ncclComm_t)nccl_comm).nRanks;
}

__global__ void lsa_write_peer_kernel(ncclWindow_t window, size_t offset_bytes, int peer, uint32_t value, size_t n)
{
    uint32_t *dst = (uint32_t *)ncclGetLsaPointer(window, offset_bytes, peer);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = value + (uint32_t)i;
}

extern "C" int mok_lsa_write_peer(void *window, size_t offset_bytes, int lsa_peer, uint32_t value, size_t n,
                                  mok_stream_t stream)
{
    if (n == 0)
        return 0;
    lsa_write_peer_kernel<<<mok_blocks_for(n, 256, 1024), 256, 0, mok_cuda_stream(stream)>>>(
        (ncclWindow_t)window, offset_bytes, lsa_peer, value, n);
    return MOK_LAUNCH_RESULT();
}
