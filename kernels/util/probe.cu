/* probe: the kernels behind `mok-bench --probe`, which measures on the machine at hand the ceilings that report
 * fractions are computed against. Here: a plain SM copy with 16-byte vectors, pointed by the host at local or
 * peer (LSA) memory, and the two small device-API helpers the host needs to get peer pointers.
 * Declared in kernels/mok_kernels.h. */
#include <nccl.h>
#include <nccl_device.h>

#include "common/common.cuh"

/* Per thread: UNROLL independent 16-byte loads issued before any store, so each SM keeps enough bytes in flight
 * to cover NVLink latency on the pull side (a remote load takes microseconds; one load per thread would leave
 * the link idle most of the time). The plain grid-stride order keeps a warp's accesses coalesced into 512 B. */
#define PROBE_UNROLL 4

/* No __restrict__: it would turn the loads into ld.global.nc (the read-only path), not wanted on peer memory. */
__global__ void __launch_bounds__(1024, 2) probe_copy_kernel(uint4 *dst, const uint4 *src, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    for (; i + (PROBE_UNROLL - 1) * stride < n; i += PROBE_UNROLL * stride) {
        uint4 v[PROBE_UNROLL];
#pragma unroll
        for (int u = 0; u < PROBE_UNROLL; u++)
            v[u] = src[i + u * stride];
#pragma unroll
        for (int u = 0; u < PROBE_UNROLL; u++)
            dst[i + u * stride] = v[u];
    }
    for (; i < n; i += stride) /* tail: fewer than PROBE_UNROLL strides left for this thread */
        dst[i] = src[i];
}

extern "C" int mok_probe_copy(void *dst, const void *src, size_t bytes, int blocks, int threads, mok_stream_t stream)
{
    if (bytes % 16 != 0 || ((uintptr_t)dst | (uintptr_t)src) % 16 != 0 || blocks < 1 || threads < 1 ||
        threads > 1024)
        return (int)cudaErrorInvalidValue;
    if (bytes == 0)
        return 0;
    probe_copy_kernel<<<(unsigned)blocks, (unsigned)threads, 0, mok_cuda_stream(stream)>>>(
        (uint4 *)dst, (const uint4 *)src, bytes / 16);
    return MOK_LAUNCH_RESULT();
}

/* DRAM read bandwidth: every thread streams PROBE_UNROLL independent 16-byte loads per step through a buffer far
 * larger than L2 and folds them into one word, which the block writes once (so the loads cannot be dropped). The
 * loads bypass nothing: this is what a GEMM's operand stream gets from DRAM. */
__global__ void __launch_bounds__(1024, 2) probe_read_kernel(const uint4 *src, size_t n, uint32_t *sink)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    uint32_t acc = 0;
    for (; i + (PROBE_UNROLL - 1) * stride < n; i += PROBE_UNROLL * stride) {
        uint4 v[PROBE_UNROLL];
#pragma unroll
        for (int u = 0; u < PROBE_UNROLL; u++)
            v[u] = src[i + u * stride];
#pragma unroll
        for (int u = 0; u < PROBE_UNROLL; u++)
            acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    for (; i < n; i += stride)
        acc ^= src[i].x ^ src[i].y ^ src[i].z ^ src[i].w;
    for (int off = 16; off; off >>= 1)
        acc ^= __shfl_xor_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0)
        atomicXor(sink, acc);
}

extern "C" int mok_probe_read(const void *src, size_t bytes, int blocks, int threads, uint32_t *sink,
                              mok_stream_t stream)
{
    if (bytes % 16 != 0 || (uintptr_t)src % 16 != 0 || !sink || blocks < 1 || threads < 1 || threads > 1024)
        return (int)cudaErrorInvalidValue;
    if (bytes == 0)
        return 0;
    probe_read_kernel<<<(unsigned)blocks, (unsigned)threads, 0, mok_cuda_stream(stream)>>>((const uint4 *)src,
                                                                                        bytes / 16, sink);
    return MOK_LAUNCH_RESULT();
}

/* One thread: the window's layout (flat LSA base, stride) lives in device memory, so only a kernel can read it. */
__global__ void probe_lsa_base_kernel(ncclWindow_t window, int peer, void **slot)
{
    *slot = ncclGetLsaPointer(window, 0, peer);
}

extern "C" int mok_probe_lsa_base(void *window, int lsa_peer, void **out_dev_ptr_slot, mok_stream_t stream)
{
    if (!window || !out_dev_ptr_slot || lsa_peer < 0)
        return (int)cudaErrorInvalidValue;
    probe_lsa_base_kernel<<<1, 1, 0, mok_cuda_stream(stream)>>>((ncclWindow_t)window, lsa_peer, out_dev_ptr_slot);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_probe_lsa_rank(void *nccl_comm)
{
    return ncclTeamLsa((ncclComm_t)nccl_comm).rank;
}
