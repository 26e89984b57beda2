/* probe: the kernels behind `mok-bench --probe`, which measures on the machine at hand the ceilings that report
 * fractions are computed against. Here: a plain SM copy with 16-byte vectors, pointed by the host at local or
 * peer (LSA) memory; DRAM reads two ways (plain loads, bulk copies); and the two small device-API helpers the host
 * needs to get peer pointers.
 * Declared in kernels/mok_kernels.h. */
#include <nccl.h>
#include <nccl_device.h>

#include "common/bulk.cuh"
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

/* DRAM read bandwidth, two ways: the probe times each and keeps the faster (src/probe.c), so that a roofline's DRAM
 * leg is a ceiling, not one load shape's figure: on H100s, read right after the probe's GEMMs, plain loads gave
 * 2.73-2.94 TB/s (a GEMM had streamed 2.89) and bulk copies up to 3.22; read first, plain 3.17-3.19 and bulk
 * 3.20-3.22 (results/h100x1/2026-12-06-probe-shapes, 2026-12-06-fp8-push-all).
 *
 * Plain loads: every thread streams PROBE_UNROLL independent 16-byte loads per step through a buffer far larger
 * than L2 and folds them into one word, which the block writes once (so the loads cannot be dropped). At 2048
 * threads per SM the registers allow no more loads in flight per thread. */
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

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define MOK_PROBE_NO_BULK 1 /* cp.async.bulk is SM90+ */
#endif

/* Bulk reads: how a GEMM's operands arrive (the copy engine, not the threads). One thread per block keeps `stages`
 * chunks of `chunk` bytes in flight into shared memory, chunks dealt round robin over the blocks so that at any
 * moment the grid reads one contiguous stretch; the bytes are never looked at (the mbarrier's transaction count
 * is what proves they arrived). A chunk whose wait runs past ~4 s (a lost completion) ends the kernel with an
 * error the host sees, not a hang. */
__global__ void __launch_bounds__(32, 1) probe_read_bulk_kernel(const uint8_t *src, size_t bytes, uint32_t chunk,
                                                                 int stages, int *timed_out)
{
#ifndef MOK_PROBE_NO_BULK
    extern __shared__ __align__(128) uint8_t ring[];
    uint64_t *bar = (uint64_t *)(ring + (size_t)stages * chunk);
    if (threadIdx.x != 0)
        return;
    for (int s = 0; s < stages; s++)
        mok_mbar_init(&bar[s], 1);
    mok_fence_mbar_init();
    const size_t nchunks = (bytes + chunk - 1) / chunk;
    /* this block's i-th chunk is blockIdx.x + i * gridDim.x */
    auto issue = [&](size_t i) {
        size_t c = blockIdx.x + i * gridDim.x;
        if (c >= nchunks)
            return false;
        size_t off = c * chunk;
        uint32_t n = (uint32_t)(bytes - off < chunk ? bytes - off : chunk);
        int s = (int)(i % (size_t)stages);
        mok_mbar_expect_tx(&bar[s], n);
        mok_bulk_load(ring + (size_t)s * chunk, src + off, n, &bar[s]);
        return true;
    };
    for (int s = 0; s < stages; s++)
        issue((size_t)s);
    for (size_t i = 0; blockIdx.x + i * gridDim.x < nchunks; i++) {
        int s = (int)(i % (size_t)stages);
        uint32_t parity = (uint32_t)((i / (size_t)stages) & 1);
        long long t0 = clock64();
        while (!mok_mbar_try_wait(mok_smem_addr(&bar[s]), parity)) {
            if (clock64() - t0 > 8000000000ll) { /* ~4 s at 2 GHz */
                atomicExch(timed_out, 1 + (int)blockIdx.x);
                return;
            }
        }
        issue(i + (size_t)stages);
    }
#endif
}

extern "C" int mok_probe_read_bulk(const void *src, size_t bytes, int blocks, int chunk_bytes, int stages,
                                   int *timed_out, mok_stream_t stream)
{
    if (bytes % 16 != 0 || (uintptr_t)src % 16 != 0 || blocks < 1 || chunk_bytes < 16 || chunk_bytes % 16 != 0 ||
        stages < 1 || !timed_out)
        return (int)cudaErrorInvalidValue;
    if (bytes == 0)
        return 0;
    size_t smem = (size_t)stages * (size_t)chunk_bytes + (size_t)stages * sizeof(uint64_t);
    static size_t smem_allowed = 0; /* raised once per size, not per launch: a timed call stays a bare launch */
    if (smem > smem_allowed) {
        cudaError_t e = cudaFuncSetAttribute(probe_read_bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             (int)smem);
        if (e != cudaSuccess)
            return (int)e;
        smem_allowed = smem;
    }
    probe_read_bulk_kernel<<<(unsigned)blocks, 32, smem, mok_cuda_stream(stream)>>>(
        (const uint8_t *)src, bytes, (uint32_t)chunk_bytes, stages, timed_out);
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
