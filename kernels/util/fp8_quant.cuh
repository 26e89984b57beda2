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
#include "util/fp8_encode.h"

namespace mok_fp8 {

constexpr float kE4m3Max = 448.0f;

__device__ __forceinline__ uint8_t e4m3(float v)
{
    return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3); /* nearest even, saturating */
}

/* The 8 bf16 values of v (little endian: the lower half of each word first) divided by s, as e4m3 bytes in order:
 * the IEEE division the host runs, value by value (the exact path of encode8_block below). */
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

/* Two floats as e4m3 bytes (a in the low byte), nearest even, saturating: one cvt for the pair. */
__device__ __forceinline__ uint32_t e4m3x2(float a, float b)
{
    return (uint32_t)__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

/* The bf16 pair of a word (the lower half first) as floats: exact. */
__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

/* The sign bits of a word's bf16 pair where the pair's e4m3 bytes keep theirs (bits 7 and 15). */
__device__ __forceinline__ uint32_t pair_signs(uint32_t w) { return ((w >> 8) & 0x80u) | ((w >> 16) & 0x8000u); }

/* mxfp8's encode: the 8 values of v times inv = 2^-e, as e4m3 bytes in order. x * 2^-e is x / 2^e exactly (one
 * rounding of the same real number: 2^-e is an fp32 for every e8m0 exponent, e in [-127, 127], and the product is
 * rounded once as the quotient is), so it is the host's x / s bit for bit without a division. */
__device__ __forceinline__ uint2 encode8_pow2(uint4 v, float inv)
{
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    uint32_t out[2];
#pragma unroll
    for (int i = 0; i < 2; i++)
        out[i] = e4m3x2(bf16_lo(words[2 * i]) * inv, bf16_hi(words[2 * i]) * inv) |
                 e4m3x2(bf16_lo(words[2 * i + 1]) * inv, bf16_hi(words[2 * i + 1]) * inv) << 16;
    return make_uint2(out[0], out[1]);
}

/* 1 / a, approximately (within 1 ulp: the PTX ISA's bound for rcp.approx), subnormal inputs and results flushed to
 * zero (an infinite or zero result: MOK_FP8_RECIP_OK says no). */
__device__ __forceinline__ float rcp_approx(float a)
{
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(a));
    return r;
}

/* fp8_block's encode: the 8 values of v divided by s (the block's amax / 448, correctly rounded), as e4m3 bytes in
 * order, bit for bit encode8's (the host's IEEE x / s, then e4m3), dividing only where util/fp8_encode.h's check
 * says it must. r comes from amax beside s, not from s after it: ff94329's r = 1 / s made the separate quantize
 * kernels 10-12% slower (ncu; likely the longer chain, each of their threads has one load in flight). 4e2d366 took
 * an r flushed to 0 (amax at or above 2^126) for usable and wrote those blocks as zeros (tests/test_gpu_quant.c
 * test_every_amax found it). */
__device__ __forceinline__ uint2 encode8_block(uint4 v, float s, float amax)
{
    const float r = amax > 0.0f ? kE4m3Max * rcp_approx(amax) : 1.0f;
    if (!MOK_FP8_RECIP_OK(r))
        return encode8(v, s);
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    uint32_t out[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const float x0 = bf16_lo(words[i]), x1 = bf16_hi(words[i]);
        const uint32_t a0 = __float_as_uint(x0 * r) & 0x7FFFFFFFu, a1 = __float_as_uint(x1 * r) & 0x7FFFFFFFu;
        const uint32_t lo = e4m3x2(mok_fp8_probe_lo(a0), mok_fp8_probe_lo(a1));
        const uint32_t hi = e4m3x2(mok_fp8_probe_hi(a0), mok_fp8_probe_hi(a1));
        const uint32_t pair = lo == hi ? lo | pair_signs(words[i]) : e4m3x2(x0 / s, x1 / s);
        out[i / 2] |= pair << (i % 2 * 16);
    }
    return make_uint2(out[0], out[1]);
}

/* Lane hl = lane % 16 of each half warp holds v, values [8 hl, 8 hl + 8) of its block (little endian: the lower
 * half of each word first). Returns their e4m3 bytes (8, in order) and sets *scale to the block's scale; *amax_bits
 * gets the block's largest |bf16| bits (>= 0x7F80: inf or NaN somewhere in it). Both half warps call it together
 * (full-warp shuffles that stay within each half); a lane with no block passes zeros. amax on the bits: |bf16| orders
 * like its bits with the sign cleared, so a 16-bit SIMD max gives the exact amax. The values are the host's IEEE x / s
 * either way: by encode8_block, or (kDivide) by encode8's divisions, whose fewer registers the fused forward's own push
 * needs (kernels/megakernel/fp8_comm.cuh). */
template <bool kDivide = false>
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
    return kDivide ? encode8(v, s) : encode8_block(v, s, amax);
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
    const int e = mok_fp8_e8m0_exponent_bits(m);
    *scale = (uint8_t)(e + 127);
    return encode8_pow2(v, __uint_as_float((uint32_t)(127 - e) << 23)); /* 2^-e: e in [-127, 121], a normal */
}

} // namespace mok_fp8
