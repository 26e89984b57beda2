/* gemm/mx_expand.h: mxfp8's e4m3 x 2^scale -> bf16 conversion, as scheme (b) of the grouped GEMM runs it
 * (kernels/gemm/sm90_mx_expand.cuh: the producer warpgroup expands each k block into the bf16 slot the bf16
 * consumers read). Plain C, included by the kernel and by the host: the device's instructions under __CUDA_ARCH__,
 * their exact models elsewhere (mok_mx_expand_bf16 below on the host: checked by tests/test_fp8.c against src/fp8.c's
 * e4m3 decoder for every code and scale, and by tests/test_gpu_mxfp8.c device against host), so both run the same bit
 * operations.
 *
 * Not cvt: F2F conversions run at 16 per clock per SM, and a 128 x 256 tile's k block holds 24K values; integer ops
 * run at 64 and packed bf16 FMAs at 128. Two steps:
 *   bits   an e4m3 code b = s.eeee.mmm becomes the bf16 bits s.0000eeee.mmm0000, ((b & 0x80) << 8) |
 *          ((b & 0x7f) << 4), which read as bf16 is exactly e4m3(b) x 2^-120, subnormals included: exponent field
 *          e >= 1 gives bf16's 2^(e - 127) x 1.mmm against e4m3's 2^(e - 7) x 1.mmm; e = 0 gives bf16's subnormal
 *          2^-126 x 0.mmm against e4m3's 2^-6 x 0.mmm. Four codes of a word in 6 integer ops (mok_mx_e4m3x4_bits).
 *   scale  times 2^(s - 7), s the e8m0 byte (value = e4m3 x 2^(s - 127)), by fma.rn.bf16x2 with addend -0.0 (so -0 x f
 *          stays -0; bf16 FMA has no flush-to-zero form, subnormal inputs and outputs are kept). 2^(s - 7) is a normal
 *          bf16 while s <= 134; above, two multiplies: 2^127 (exact: the product is at most 448 x 2^7), then
 *          2^(s - 134).
 * So at most the last multiply rounds, once, to nearest even: the result is the correctly rounded bf16 of
 * e4m3 x 2^(s - 127). That is the value itself wherever bf16 holds it, i.e. where it is a multiple of 2^-133 (bf16's
 * smallest subnormal) and below 2^128: every code for s >= 3. At s <= 2 (scales of at most 2^-125: blocks whose
 * largest magnitude is at most 448 x 2^-125, ~2^-116) codes with bits under 2^-133 round; 2^128 and above (only at
 * s >= 247) is inf, as it is in fp32. The NaN codes 0x7f / 0xff come out as finite values (1.875 x 2^-112 x
 * 2^(s - 7)): the quantizer never writes them (src/fp8.c refuses non-finite input). */
#ifndef MOK_GEMM_MX_EXPAND_H
#define MOK_GEMM_MX_EXPAND_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define MOK_MX_HD __host__ __device__
#else
#define MOK_MX_HD
#endif

/* prmt.b32 d, a, b, sel (the default mode): byte i of d is byte (nibble i of sel) & 7 of the 8 bytes {b, a}, a's
 * bytes being 0..3, or, where the nibble's bit 3 is set, that byte's top bit copied into all 8 bits (sign mode).
 * Inline PTX on the device: __byte_perm is documented for the 3-bit selectors only. */
static inline MOK_MX_HD uint32_t mok_mx_prmt(uint32_t a, uint32_t b, uint32_t sel)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
#else
    const uint64_t x = (uint64_t)b << 32 | a;
    uint32_t d = 0;
    for (int i = 0; i < 4; i++) {
        const uint32_t nib = (sel >> (4 * i)) & 0xFu;
        uint32_t byte = (uint32_t)(x >> (8 * (nib & 7u))) & 0xFFu;
        if (nib & 8u)
            byte = byte & 0x80u ? 0xFFu : 0u;
        d |= byte << (8 * i);
    }
    return d;
#endif
}

struct mok_mx_pair {
    uint32_t lo, hi; /* bf16 pairs, K order: lo holds the first two values (the first in its low half) */
};

/* The four codes of w (the first K element in the low byte) as bf16 bits of e4m3 x 2^-120, 3 integer ops per pair:
 * one prmt puts two codes into the two 16-bit halves, each sign-extended (its byte, then its sign in all 8 bits of
 * the next: prmt's sign mode), a shift by 4 takes the magnitude eeee.mmm to bits 4..10 with sign copies above it,
 * and the and keeps bit 15 of those (the sign) and the magnitude, clearing bits 11..14 and the low half's spill
 * into the high one's bits 0..3. */
static inline MOK_MX_HD struct mok_mx_pair mok_mx_e4m3x4_bits(uint32_t w)
{
    struct mok_mx_pair r;
    r.lo = (mok_mx_prmt(w, 0, 0x9180u) << 4) & 0x87F087F0u; /* b0, sign(b0), b1, sign(b1) */
    r.hi = (mok_mx_prmt(w, 0, 0xB3A2u) << 4) & 0x87F087F0u; /* b2, sign(b2), b3, sign(b3) */
    return r;
}

/* The e8m0 byte s as bf16x2 factors of those bits: mok_mx_factor is 2^(s - 7) while s <= 134 and 2^127 above, where
 * mok_mx_factor_hi, 2^(s - 134), follows it (bf16 exponent field e at bits 7..14 of each half, value 2^(e - 127)). */
static inline MOK_MX_HD uint32_t mok_mx_factor(uint32_t s) { return ((s <= 134u ? s : 134u) + 120u) * 0x00800080u; }
static inline MOK_MX_HD uint32_t mok_mx_factor_hi(uint32_t s) { return (s - 7u) * 0x00800080u; }
/* The second factor of a block whose multiplies all run twice (sm90_mx_expand.cuh's blocks with a scale above
 * 134): mok_mx_factor_hi(s) where s > 134, else 1.0 (x 1.0 is exact in bf16 FMA, subnormals included: the same
 * bits as one multiply). */
static inline MOK_MX_HD uint32_t mok_mx_factor_two(uint32_t s) { return s > 134u ? mok_mx_factor_hi(s) : 0x3F803F80u; }

/* a x f per bf16 half, rounded to nearest even: fma.rn.bf16x2 with addend -0.0 on the device. The model: a bf16 times
 * a power of two is exact in fp32 (8 significant bits, at least 2^-136 in magnitude here: above fp32's smallest
 * subnormal), or inf where it reaches 2^128 (as the bf16 result does), so one rounding of the fp32 product to bf16
 * (nearest even, subnormals included: bf16 is fp32's upper half) is the fma's. */
static inline MOK_MX_HD uint32_t mok_mx_mul(uint32_t a, uint32_t f)
{
#ifdef __CUDA_ARCH__
    uint32_t d;
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(f), "r"(0x80008000u));
    return d;
#else
    uint32_t d = 0;
    for (int i = 0; i < 2; i++) {
        const uint32_t ab = (a >> (16 * i)) << 16, fb = (f >> (16 * i)) << 16;
        float x, y;
        memcpy(&x, &ab, 4);
        memcpy(&y, &fb, 4);
        x *= y;
        uint32_t u;
        memcpy(&u, &x, 4);
        d |= ((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16) << (16 * i);
    }
    return d;
#endif
}

/* Four codes under one scale's factors, f = mok_mx_factor(s) and, where two, f2 = mok_mx_factor_two(s): four bf16
 * values e4m3 x 2^(s - 127), K order. The kernel (sm90_mx_expand.cuh mx_expand_chunk) computes the factors once per
 * 16 codes and passes two as a constant: 1 in a block with any scale above 134 (f2 is then 1.0 for the others: the
 * same bits), so it has no branch; the host model passes s > 134. */
static inline MOK_MX_HD struct mok_mx_pair mok_mx_expand4_f(uint32_t w, uint32_t f, uint32_t f2, int two)
{
    struct mok_mx_pair r = mok_mx_e4m3x4_bits(w);
    r.lo = mok_mx_mul(r.lo, f);
    r.hi = mok_mx_mul(r.hi, f);
    if (two) {
        r.lo = mok_mx_mul(r.lo, f2);
        r.hi = mok_mx_mul(r.hi, f2);
    }
    return r;
}

static inline MOK_MX_HD struct mok_mx_pair mok_mx_expand4(uint32_t w, uint32_t s)
{
    return mok_mx_expand4_f(w, mok_mx_factor(s), mok_mx_factor_two(s), s > 134u);
}

/* One code: the bf16 bits of e4m3 code x 2^(s - 127), rounded to nearest even. */
static inline MOK_MX_HD uint16_t mok_mx_expand_bf16(uint8_t code, uint8_t s)
{
    return (uint16_t)mok_mx_expand4(code, s).lo;
}

/* mx_scheme 3's K order within each 64-K block (kernels/gemm/sm90_mx_rega.cuh): the logical place of natural K n
 * (0..63). A consumer thread's A fragment of wgmma step kk (0..3) holds the K pairs {2q, 2q + 1} and {2q + 8, 2q + 9}
 * (q = lane % 4) of its rows; filled from one 16-byte chunk of the e4m3 row (natural K [16 q, 16 q + 16)), word kk of
 * it (natural 16 q + 4 kk + j, j = 0..3) gives {2q, 2q + 1} the codes j = 0, 1 and {2q + 8, 2q + 9} the codes j = 2,
 * 3. So natural 16 q + 4 kk + j sits at 16 kk + 2 q + (j & 1) + 8 (j >> 1); B's rows are stored in that order (any
 * one order of K for both operands gives the same products). */
static inline MOK_MX_HD int mok_mx_k64_pos(int n)
{
    const int q = n >> 4, kk = (n >> 2) & 3, j = n & 3;
    return 16 * kk + 2 * q + (j & 1) + 8 * (j >> 1);
}

#endif
