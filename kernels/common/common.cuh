/* common: small device helpers shared by the kernels: bf16 bit conversions, the counter-based hash behind
 * every seeded tensor, and the launch-error return every launcher ends with. */
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "mok_kernels.h"

#define MOK_LAUNCH_RESULT() ((int)cudaGetLastError())

static inline cudaStream_t mok_cuda_stream(mok_stream_t s) { return (cudaStream_t)s; }

__device__ __forceinline__ float mok_bf16_to_f32(uint16_t bits)
{
    return __uint_as_float(((uint32_t)bits) << 16);
}

/* Round to nearest even, NaN kept NaN: the same rounding as __float2bfloat16_rn. */
__device__ __forceinline__ uint16_t mok_f32_to_bf16(float v)
{
    __nv_bfloat16 b = __float2bfloat16_rn(v);
    return *reinterpret_cast<uint16_t *>(&b);
}

__device__ __forceinline__ float mok_silu(float v) { return v / (1.0f + __expf(-v)); }

/* splitmix64 finalizer: a good 64-bit mix, cheap on the GPU. */
__host__ __device__ __forceinline__ uint64_t mok_mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* An attribute of the current device through *cache: asked once per process (one device per process) and kept
 * once known; 0 while the query fails (asked again next time). */
static inline int mok_cached_device_attribute(int *cache, cudaDeviceAttr attr)
{
    if (*cache < 0) {
        int dev = 0, v = 0;
        if (cudaGetDevice(&dev) == cudaSuccess && cudaDeviceGetAttribute(&v, attr, dev) == cudaSuccess)
            *cache = v;
        else
            cudaGetLastError(); /* a failed query must not linger as a later launch's error */
    }
    return *cache < 0 ? 0 : *cache;
}

/* The current device's SM count, and the shared memory one block may opt in to (227 KiB on Hopper). */
static inline int mok_sm_count(void)
{
    static int sms = -1;
    return mok_cached_device_attribute(&sms, cudaDevAttrMultiProcessorCount);
}
static inline int mok_smem_optin(void)
{
    static int optin = -1;
    return mok_cached_device_attribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin);
}

static inline unsigned mok_blocks_for(size_t n, unsigned threads, unsigned cap)
{
    size_t b = (n + threads - 1) / threads;
    if (b < 1)
        b = 1;
    return (unsigned)(b > cap ? cap : b);
}

/* A cooperative launch: every block resident at once, or the launch fails. For kernels whose blocks wait on each
 * other (flags, counters): a plain launch could leave some queued behind spinning ones. */
template <typename... KernelArgs, typename... Args>
static inline cudaError_t mok_launch_cooperative(void (*kernel)(KernelArgs...), unsigned grid, unsigned block,
                                                 size_t smem, cudaStream_t stream, Args &&...args)
{
    cudaLaunchAttribute coop;
    coop.id = cudaLaunchAttributeCooperative;
    coop.val.cooperative = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = &coop;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, static_cast<Args &&>(args)...);
}
