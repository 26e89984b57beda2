/* quant: FP8 quantization of bf16 rows on the GPU, bit for bit the host reference's (src/fp8.h: the formats, the
 * scale rules, the rounding): the separate quantize step the NCCL baselines run before their dispatch, and what the
 * megakernel's dispatch is to match when it quantizes rows as it sends them. One thread per scale block (32 values
 * for mxfp8, 128 for fp8_block): simple and exact; not yet tuned for bandwidth. A non-finite input sets *status to 1
 * (the host reference refuses it). */
#include <cuda_fp8.h>

#include "common/common.cuh"

namespace {

constexpr float kE4m3Max = 448.0f;

__device__ __forceinline__ uint8_t e4m3(float v)
{
    return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); /* nearest even, saturating */
}

/* mok_e8m0_scale_for's rule, with the same exact corrections (log2f's last bit may differ from the host's; the loops
 * land on the one power of two either way) */
__device__ __forceinline__ int e8m0_exponent(float amax)
{
    if (!(amax > 0.0f))
        return 0;
    int e = (int)ceilf(log2f(amax / kE4m3Max));
    while (e > -127 && amax / ldexpf(1.0f, e - 1) <= kE4m3Max)
        e--;
    while (amax / ldexpf(1.0f, e) > kE4m3Max)
        e++;
    return e < -127 ? -127 : e > 127 ? 127 : e;
}

template <int kBlock>
__device__ __forceinline__ float block_amax(const uint16_t *x, int32_t *status)
{
    float amax = 0.0f;
    for (int i = 0; i < kBlock; i++) {
        float v = mok_bf16_to_f32(x[i]);
        if (!isfinite(v))
            atomicExch(status, 1);
        amax = fmaxf(amax, fabsf(v));
    }
    return amax;
}

__global__ void quant_mxfp8_kernel(const uint16_t *x, long long blocks, uint8_t *q, uint8_t *scale, int32_t *status)
{
    for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < blocks; b += (long long)gridDim.x * blockDim.x) {
        const uint16_t *in = x + b * 32;
        float amax = block_amax<32>(in, status);
        int e = e8m0_exponent(amax);
        scale[b] = (uint8_t)(e + 127);
        float s = ldexpf(1.0f, e);
        for (int i = 0; i < 32; i++)
            q[b * 32 + i] = e4m3(mok_bf16_to_f32(in[i]) / s);
    }
}

__global__ void quant_fp8_block_kernel(const uint16_t *x, long long blocks, uint8_t *q, float *scale, int32_t *status)
{
    for (long long b = blockIdx.x * (long long)blockDim.x + threadIdx.x; b < blocks; b += (long long)gridDim.x * blockDim.x) {
        const uint16_t *in = x + b * 128;
        float amax = block_amax<128>(in, status);
        float s = amax > 0.0f ? amax / kE4m3Max : 1.0f;
        scale[b] = s;
        for (int i = 0; i < 128; i++)
            q[b * 128 + i] = e4m3(mok_bf16_to_f32(in[i]) / s);
    }
}

} // namespace

/* Blocks are consecutive K elements of a row-major [rows][k] matrix: with k a multiple of the block, block b covers
 * elements [32 b, 32 b + 32) of the flat array, so scale[r][k / 32] is scale[b] in order. */
extern "C" int mok_quant_mxfp8_bf16(const uint16_t *x, int rows, int k, uint8_t *q, uint8_t *scale, int32_t *status,
                                    mok_stream_t stream)
{
    if (rows < 0 || k < 0 || k % 32 || !status)
        return (int)cudaErrorInvalidValue;
    long long blocks = (long long)rows * (k / 32);
    if (blocks == 0)
        return 0;
    quant_mxfp8_kernel<<<mok_blocks_for((size_t)blocks, 256, 4096), 256, 0, mok_cuda_stream(stream)>>>(
        x, blocks, q, scale, status);
    return MOK_LAUNCH_RESULT();
}

extern "C" int mok_quant_fp8_block_bf16(const uint16_t *x, int rows, int k, uint8_t *q, float *scale,
                                        int32_t *status, mok_stream_t stream)
{
    if (rows < 0 || k < 0 || k % 128 || !status)
        return (int)cudaErrorInvalidValue;
    long long blocks = (long long)rows * (k / 128);
    if (blocks == 0)
        return 0;
    quant_fp8_block_kernel<<<mok_blocks_for((size_t)blocks, 256, 4096), 256, 0, mok_cuda_stream(stream)>>>(
        x, blocks, q, scale, status);
    return MOK_LAUNCH_RESULT();
}
