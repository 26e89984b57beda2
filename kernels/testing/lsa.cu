/* testing/lsa: kernels only the GPU tests call, kept out of the product library (meson: moktestkernels): a device
 * communicator create/destroy and the smallest use of a symmetric window, a store through ncclGetLsaPointer into a
 * peer's window (tests/test_gpu_symmem.c), and the comm path's reference on a rank's own data (tests/test_gpu_lsa.c). */
#include <nccl.h>
#include <nccl_device.h>

#include <new>

#include "comm/lsa_device.cuh" /* vec8 */
#include "common/common.cuh"
#include "testing/mok_test_kernels.h"

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

/* Reference for the comm benchmark: the same sums, on this rank's own x, without any communication. */
__global__ void lsa_reference_kernel(const uint4 *x, const int32_t *ids, const float *w, int tokens, int topk,
                                     int vecs, int local_experts, int nranks, int per_rank, uint4 *y)
{
    for (int t = blockIdx.x; t < tokens; t += gridDim.x)
        for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
            vec8 in;
            in.v = x[(size_t)t * vecs + v];
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (per_rank) {
                for (int q = 0; q < nranks; q++) {
                    float part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                    bool any = false;
                    for (int j = 0; j < topk; j++)
                        if (ids[t * topk + j] / local_experts == q) {
                            any = true;
#pragma unroll
                            for (int i = 0; i < 8; i++)
                                part[i] += w[t * topk + j] * mok_bf16_to_f32(in.h[i]);
                        }
                    if (any)
#pragma unroll
                        for (int i = 0; i < 8; i++)
                            acc[i] += mok_bf16_to_f32(mok_f32_to_bf16(part[i]));
                }
            } else {
                for (int j = 0; j < topk; j++)
#pragma unroll
                    for (int i = 0; i < 8; i++)
                        acc[i] += w[t * topk + j] * mok_bf16_to_f32(in.h[i]);
            }
            vec8 out;
#pragma unroll
            for (int i = 0; i < 8; i++)
                out.h[i] = mok_f32_to_bf16(acc[i]);
            y[(size_t)t * vecs + v] = out.v;
        }
}

extern "C" int mok_lsa_reference(const uint16_t *x, const int32_t *ids, const float *w, int tokens, int topk,
                                 int hidden, int local_experts, int nranks, int per_rank, uint16_t *y,
                                 mok_stream_t stream)
{
    if (tokens <= 0)
        return 0;
    lsa_reference_kernel<<<tokens < 4096 ? tokens : 4096, 256, 0, mok_cuda_stream(stream)>>>(
        (const uint4 *)x, ids, w, tokens, topk, hidden / 8, local_experts, nranks, per_rank, (uint4 *)y);
    return MOK_LAUNCH_RESULT();
}
