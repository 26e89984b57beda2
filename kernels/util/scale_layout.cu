/* scale_layout: the contract's fp8_block scale tensors into cuBLASLt's layouts, and mxfp8's weight scales into mok's
 * GEMM tile layout (mok_kernels.h says what each writes). Setup-time calls over scales only (1/32 of the e4m3 bytes
 * at most): one thread per destination element, writes coalesced, reads strided; no tuning. */
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

/* dst byte i: matrix, block (in the tile order), k block, and within the 256 bytes kk * 64 + q * 16 + 2 c + p, from
 * row 8 c + 2 q + p of the block at k32 step 4 kb + kk (src/fp8.c's mok_mxfp8_tile_index, inverted) */
__global__ void scale_mx_tiles_kernel(const uint8_t *src, long long mats, int rows, int k, int pair_halves,
                                      uint8_t *dst)
{
    const int nb = k / 32, kblocks = k / 128, blocks = rows / 64;
    const long long per_mat = (long long)rows * nb, total = mats * per_mat;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total; i += stride) {
        const long long m = i / per_mat;
        const int in = (int)(i % per_mat), t = in / 256, byte = in % 256;
        const int slot_block = t / kblocks, kb = t % kblocks;
        const int kk = byte / 64, q = byte % 64 / 16, c = byte % 16 / 2, p = byte % 2;
        const int j = !pair_halves ? slot_block : slot_block % 2 ? blocks / 2 + slot_block / 2 : slot_block / 2;
        const int row = j * 64 + 8 * c + 2 * q + p;
        dst[i] = src[(m * rows + row) * nb + 4 * kb + kk];
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

extern "C" int mok_scale_mx_tiles(const uint8_t *src, long long mats, int rows, int k, int pair_halves, uint8_t *dst,
                                  mok_stream_t stream)
{
    if (mats < 0 || rows < 0 || k < 0 || rows % (pair_halves ? 128 : 64) || k % 128 || !dst || ((uintptr_t)dst & 15))
        return (int)cudaErrorInvalidValue;
    long long total = mats * rows * (long long)(k / 32);
    if (total == 0)
        return 0;
    if (!src)
        return (int)cudaErrorInvalidValue;
    scale_mx_tiles_kernel<<<mok_blocks_for((size_t)total, 256, 4096), 256, 0, mok_cuda_stream(stream)>>>(
        src, mats, rows, k, pair_halves, dst);
    return MOK_LAUNCH_RESULT();
}
