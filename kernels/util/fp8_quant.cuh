/* fp8_quant: activations quantized by groups of lanes, bit for bit src/fp8.h's host rules: one 1 x 128 fp8_block
 * block by a half warp (scale = amax / 448, or 1 for a block of zeros; each value x / scale, correctly rounded, to
 * e4m3 to nearest even, saturating), one 32-value mxfp8 block by a quad (scale 2^e, e the smallest with amax / 2^e
 * <= 448: an e8m0 byte e + 127; values x / 2^e to e4m3). The one definition of the activations' quantization on the
 * GPU: the separate quantize kernels (kernels/util/quant.cu) and the megakernel's dispatch and GEMM1 epilogue
 * (kernels/megakernel/fp8_*.cuh) call it, so what the fused kernel sends is what the check's reference quantizes. */
#pragma once
#include <cuda_fp8.h>
#include <stdint.h>

#include "common/common.cuh"

namespace mok_fp8 {

constexpr float kE4m3Max = 448.0f;

__device__ __forceinline__ uint8_t e4m3(float v)
{
    return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); /* nearest even, saturating */
}

/* The 8 bf16 values of v (little endian: the lower half of each word first) divided by s, as e4m3 bytes in order. */
__device__ __forceinline__ uint2 encode8(uint4 v, float s)
{
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    uint32_t out[2] = {0, 0};
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const uint16_t bits = (uint16_t)(words[j / 2] >> (j % 2 * 16));
        out[j / 4] |= (uint32_t)e4m3(mok_bf16_to_f32(bits) / s) << (j % 4 * 8);
    }
    return make_uint2(out[0], out[1]);
}

/* Lane hl = lane % 16 of each half warp holds v, values [8 hl, 8 hl + 8) of its block (little endian: the lower
 * half of each word first). Returns their e4m3 bytes (8, in order) and sets *scale to the block's scale; *amax_bits
 * gets the block's largest |bf16| bits (>= 0x7F80: inf or NaN somewhere in it). Both half warps call it together
 * (full-warp shuffles that stay within each half); a lane with no block passes zeros. amax on the bits: |bf16| orders
 * like its bits with the sign cleared, so a 16-bit SIMD max gives the exact amax. The division is IEEE (x / s), as
 * the host's: a reciprocal multiply can differ in the last bit. */
__device__ __forceinline__ uint2 quant_block128(uint4 v, float *scale, uint32_t *amax_bits)
{
    uint32_t m2 = __vmaxu2(__vmaxu2(v.x & 0x7FFF7FFFu, v.y & 0x7FFF7FFFu),
                           __vmaxu2(v.z & 0x7FFF7FFFu, v.w & 0x7FFF7FFFu));
    uint32_t m = max(m2 & 0xFFFFu, m2 >> 16);
#pragma unroll
    for (int off = 8; off; off >>= 1) /* within the half warp */
        m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
    const float amax = mok_bf16_to_f32((uint16_t)m);
    const float s = amax > 0.0f ? amax / kE4m3Max : 1.0f;
    *scale = s;
    *amax_bits = m;
    return encode8(v, s);
}

/* mok_e8m0_scale_for's rule, with the same exact corrections (log2f's last bit may differ from the host's; the loops
 * land on the one power of two either way). */
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

/* The mxfp8 block of the quad (lanes 4j .. 4j + 3, 8 values each, in order) this lane holds v of: its 8 e4m3 bytes;
 * *scale gets the block's e8m0 byte. Every lane of the warp calls it together (shuffles within each quad). */
__device__ __forceinline__ uint2 quant_block32(uint4 v, uint8_t *scale)
{
    uint32_t m2 = __vmaxu2(__vmaxu2(v.x & 0x7FFF7FFFu, v.y & 0x7FFF7FFFu),
                           __vmaxu2(v.z & 0x7FFF7FFFu, v.w & 0x7FFF7FFFu));
    uint32_t m = max(m2 & 0xFFFFu, m2 >> 16);
    m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 1));
    m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, 2));
    const int e = e8m0_exponent(mok_bf16_to_f32((uint16_t)m));
    const float s = ldexpf(1.0f, e);
    *scale = (uint8_t)(e + 127);
    return encode8(v, s);
}

} // namespace mok_fp8
