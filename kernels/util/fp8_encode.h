/* util/fp8_encode.h: the arithmetic of the GPU's activation quantizers (kernels/util/fp8_quant.cuh) that decides
 * their bytes without a division per value, in plain C for the device and the host: tests/test_fp8.c runs it on the
 * CPU for every bf16 amax against src/fp8.c's quantizers, with a model of the device's reciprocal (rcp.approx.ftz:
 * within 1 ulp, subnormals flushed) and src/fp8.c's e4m3 rounding for its cvt, so the CI holds the window and the
 * reciprocal's range check. Moving them here left the kernels' machine code as it was (scripts/cubin_text_cmp.py).
 *   fp8_block  q = x * r, r = 448 x (1 / amax) within 2^-22 of 1 / s (s = amax / 448, correctly rounded), so q is
 *              within 5.5 ulps of the correctly rounded quotient (11 across a power of two). e4m3 rounding is
 *              monotonic in an fp32's bits: where |q|'s bits - MOK_FP8_WINDOW and + MOK_FP8_WINDOW give one byte,
 *              every fp32 between them does, the quotient's included, and that byte with x's sign is x / s's.
 *              Elsewhere (near an e4m3 rounding boundary: 0.5% of tests/test_gpu_quant.c's every-amax values, the
 *              same ones at a window of 8, 16 or 32 in a host emulation: ties of the quotient) the caller divides;
 *              and for a whole block where r is no positive finite fp32 (amax below ~2^-119: 448 / amax overflows,
 *              or amax is subnormal and flushed; amax at or above 2^126: its reciprocal is subnormal, flushed to 0).
 *   mxfp8      the e8m0 exponent from amax's bf16 bits in integer operations, for every GPU mxfp8 quantizer (the
 *              values are then x * 2^-e, or x / 2^e in the unaligned-rows kernel: the same bytes, no check needed). */
#ifndef MOK_UTIL_FP8_ENCODE_H
#define MOK_UTIL_FP8_ENCODE_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define MOK_FP8_HD __host__ __device__
#else
#define MOK_FP8_HD
#endif

enum { MOK_FP8_WINDOW = 32 }; /* ulps either side of q: over twice the 11 the error can reach */

static inline MOK_FP8_HD float mok_fp8_float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The probes around q, from |q|'s bits a (a finite non-negative fp32): below (never under 0) and above. */
static inline MOK_FP8_HD float mok_fp8_probe_lo(uint32_t a)
{
    return mok_fp8_float_of((a > (uint32_t)MOK_FP8_WINDOW ? a : (uint32_t)MOK_FP8_WINDOW) - (uint32_t)MOK_FP8_WINDOW);
}
static inline MOK_FP8_HD float mok_fp8_probe_hi(uint32_t a) { return mok_fp8_float_of(a + (uint32_t)MOK_FP8_WINDOW); }

/* Whether r serves: a positive finite fp32 (else the block divides every value). A macro: as a function returning
 * its test, ptxas made other choices in the quantize kernel (2 to 530 of its 640 instructions differed). */
#define MOK_FP8_RECIP_OK(r) ((r) > 0.0f && (r) <= mok_fp8_float_of(0x7F7FFFFFu))

/* mok_e8m0_scale_for's rule (the smallest e with amax / 2^e <= 448, clamped to [-127, 127]; 0 for amax 0) on amax's
 * bf16 bits m (sign clear), in integer operations. A normal amax = (1 + f / 128) x 2^E: amax / 2^(E - 8) = (1 + f /
 * 128) x 256 is at most 448 = 1.75 x 256 exactly when f <= 0x60, and amax / 2^(E - 9) >= 512 never is, so e = E - 8,
 * or E - 7 where f > 0x60 (then amax / 2^(E - 7) < 256). A subnormal amax (below 2^-126) clamps to -127 (amax x 2^127
 * < 2). Bits of inf or NaN (>= 0x7F80: inputs the callers refuse) give 120 or 121. The loops of 5b1f522..a5dfada
 * (log2f and up to four divisions) were the longest chain of the mxfp8 quantizers. */
static inline MOK_FP8_HD int mok_fp8_e8m0_exponent_bits(uint32_t m)
{
    if (m == 0)
        return 0;
    const int E = (int)(m >> 7) - 127, e = E - 8 + ((m & 0x7Fu) > 0x60u ? 1 : 0);
    return (m >> 7) == 0 || e < -127 ? -127 : e;
}

#endif
