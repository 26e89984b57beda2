/* scale_layout: the contract's fp8_block scale tensors into cuBLASLt's layouts (mok_kernels.h says what each writes). A few
 * thousand floats per call: one thread per destination element, writes coalesced, reads strided; no tuning. */
#include "common/common.cuh"
#include "mok_kernels.h"

namespace {

__global__ void scale_vec128_kernel(const float *src, int rows, int kblocks, int ld, float *dst)
{
    const long long total = (long long)kblocks * ld;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += stride) {
        int kb = (int)(i / ld), r = (int)(i % ld);
        dst[i] = r < rows ? src[(long long)r * kblocks + kb] : 0.0f;
    }
}

__global__ void scale_blk128_kernel(const float *src, long long nblocks, int kblocks, int ld4, float *dst)
{
    const long long total = nblocks * ld4;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += stride) {
        long long nb = i / ld4;
        int kb = (int)(i % ld4);
        dst[i] = kb < kblocks ? src[nb * kblocks + kb] : 0.0f;
    }
}

} // namespace

extern "C" int mok_scale_vec128_lt(const float *src, int rows, int kblocks, int ld, float *dst, mok_stream_t stream)
{
    if (rows < 0 || kblocks < 1 || ld < rows || (rows > 0 && !src) || !dst || ((uintptr_t)dst & 15))
        return (int)cudaErrorInvalidValue;
    long long total = (long long)kblocks * ld;
    if (total == 0)
        return 0;
    scale_vec128_kernel<<<mok_blocks_for((size_t)total, 256, 1024), 256, 0, mok_cuda_stream(stream)>>>(
        src, rows, kblocks, ld, dst);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_scale_blk128_lt(const float *src, long long nblocks, int kblocks, float *dst, mok_stream_t stream)
{
    if (nblocks < 0 || kblocks < 1 || (nblocks > 0 && !src) || !dst || ((uintptr_t)dst & 15))
        return (int)cudaErrorInvalidValue;
    const int ld4 = (kblocks + 3) / 4 * 4;
    long long total = nblocks * ld4;
    if (total == 0)
        return 0;
    scale_blk128_kernel<<<mok_blocks_for((size_t)total, 256, 1024), 256, 0, mok_cuda_stream(stream)>>>(
        src, nblocks, kblocks, ld4, dst);
    return MOK_LAUNCH_RESULT();
}
