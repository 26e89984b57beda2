/* test_fp8: the host reference of the FP8 formats (src/fp8.h), on cases worked by hand: every e4m3 code round
 * trips, ties go to even (normals and subnormals), saturation at 448, the mxfp8 scale rounds up so nothing
 * saturates, a block of zeros gets scale 1, non-finite input is refused; mxfp8's dequantization and the scale tile
 * layout of mok's GEMM; scheme (b)'s bf16 conversion (kernels/gemm/mx_expand.h) for every code and scale;
 * mx_scheme 3's K order (mok_mx_k64_pos) a permutation placing each pair where the register fragment wants it;
 * the GPU quantizers' division-free arithmetic (kernels/util/fp8_encode.h) for every bf16 amax. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fp8.h"
#include "gemm/mx_expand.h"
#include "util/fp8_encode.h"

#include "bf16.h"
#include "check.h"

static uint32_t bits_of_f(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* v (a finite double) rounded to bf16, nearest even, subnormals included (steps of 2^-133 below 2^-126), inf from
 * 2^128 on: written from the format's definition, apart from the conversion's own bit operations */
static uint16_t bf16_of_double(double v)
{
    const uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs(v);
    if (a == 0)
        return sign;
    int e;
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    const double step = ldexp(1.0, e - 1 < -126 ? -133 : e - 1 - 7);
    a = rint(a / step) * step; /* an exact scaling, then nearest even */
    if (a >= ldexp(1.0, 128))
        return sign | 0x7F80;
    const float f = (float)a; /* a bf16 value: exact in fp32, whose upper half it is */
    return sign | (uint16_t)(bits_of_f(f) >> 16);
}

/* mxfp8 scheme (b)'s conversion: the bits step alone is exactly e4m3 x 2^-120 for every code; with the scale, every
 * code (but the NaN codes, which the quantizer never writes) and every e8m0 byte 0..254 against the decoder's value
 * x 2^(s - 127) rounded to bf16: equal bit for bit everywhere, and equal to the value itself (exact) except at
 * s <= 2 (rounded below 2^-133) and at s >= 247 (inf from 2^128 on), as mx_expand.h says. */
static void test_mx_expand(void)
{
    for (int c = 0; c < 256; c++) {
        if ((c & 0x7F) == 0x7F)
            continue;
        const uint32_t bits = mok_mx_e4m3x4_bits((uint32_t)c).lo & 0xFFFF;
        const uint32_t u = bits << 16;
        float f;
        memcpy(&f, &u, 4);
        const double want = ldexp((double)mok_e4m3_to_f32((uint8_t)c), -120);
        CHECK(f == want && !signbit(f) == !signbit(want), "code %02x: bits %04x = %g, want %g", c, bits, f, want);
        /* each of the four bytes of a word lands in its own half, in K order */
        const struct mok_mx_pair p = mok_mx_e4m3x4_bits((uint32_t)c << 24 | 0x00380000u | (uint32_t)c << 8 | 0x08u);
        const uint32_t one = mok_mx_e4m3x4_bits(0x38).lo & 0xFFFF, min_normal = mok_mx_e4m3x4_bits(0x08).lo & 0xFFFF;
        CHECK((p.lo >> 16) == bits && (p.hi >> 16) == bits && (p.hi & 0xFFFF) == one && (p.lo & 0xFFFF) == min_normal,
              "code %02x: a word's four codes out of order", c);
    }
    long exact = 0, rounded = 0, inf = 0, bad = 0;
    for (int s = 0; s <= 254; s++)
        for (int c = 0; c < 256; c++) {
            if ((c & 0x7F) == 0x7F)
                continue;
            const double v = (double)mok_e4m3_to_f32((uint8_t)c) * ldexp(1.0, s - 127);
            const uint16_t want = bf16_of_double(v), got = mok_mx_expand_bf16((uint8_t)c, (uint8_t)s);
            if (got != want && bad++ < 5)
                printf("code %02x scale %d: %04x, want %04x\n", c, s, got, want);
            const uint32_t u = (uint32_t)want << 16;
            float f;
            memcpy(&f, &u, 4);
            if (isinf(f)) {
                inf++;
                CHECK(s >= 247, "code %02x scale %d: inf below s 247", c, s);
            } else if ((double)f == v) {
                exact++;
            } else {
                rounded++;
                CHECK(s <= 2, "code %02x scale %d: rounded above s 2", c, s);
            }
        }
    CHECK(bad == 0, "scheme (b)'s conversion: %ld of %ld (code, scale) pairs differ from the rounded value", bad,
          exact + rounded + inf);
    CHECK(rounded > 0 && inf > 0, "the cases that round (%ld) and overflow (%ld) are exercised", rounded, inf);
    printf("mxfp8 expand: %ld exact, %ld rounded (s <= 2), %ld inf (s >= 247) of %ld\n", exact, rounded, inf,
           exact + rounded + inf);
    /* the signed zeros: -0 x 2^k stays -0 (the -0.0 addend), +0 stays +0 */
    CHECK(mok_mx_expand_bf16(0x80, 127) == 0x8000 && mok_mx_expand_bf16(0x00, 200) == 0x0000, "signed zeros");
    /* worked by hand: 1.0 (0x38) at scale 2^0 is bf16 1.0; the smallest subnormal code 2^-9 at 2^-120 is bf16's
     * subnormal 2^-129 (0x0010); at s 135 (two multiplies) 448 x 2^8 = 0x47E0 */
    CHECK(mok_mx_expand_bf16(0x38, 127) == 0x3F80 && mok_mx_expand_bf16(0x01, 7) == 0x0010 &&
              mok_mx_expand_bf16(0x7E, 135) == 0x47E0,
          "hand cases: %04x %04x %04x", mok_mx_expand_bf16(0x38, 127), mok_mx_expand_bf16(0x01, 7),
          mok_mx_expand_bf16(0x7E, 135));
    /* mx_scheme 3's K order: a permutation of the 64 places, each word's pairs where the register fragment wants
     * them (natural 16 q + 4 kk + {0, 1} at 16 kk + 2q + {0, 1}, + {2, 3} at 16 kk + 2q + 8 + {0, 1}) */
    int seen[64] = {0}, wrong = 0;
    for (int n = 0; n < 64; n++) {
        const int pos = mok_mx_k64_pos(n), q = n / 16, kk = n % 16 / 4, j = n % 4;
        if (pos >= 0 && pos < 64)
            seen[pos]++;
        wrong += pos != 16 * kk + 2 * q + (j < 2 ? j : 8 + j - 2);
    }
    int twice = 0;
    for (int i = 0; i < 64; i++)
        twice += seen[i] != 1;
    CHECK(twice == 0 && wrong == 0, "mok_mx_k64_pos: %d places not hit exactly once, %d off the fragment's", twice,
          wrong);
}

/* The device's rcp.approx.ftz.f32 of a, modelled: 1 / a moved by ulps (-1, 0, +1: the PTX ISA's 1-ulp bound),
 * subnormal input or result flushed to zero. */
static float rcp_model(float a, int ulps)
{
    if (a < 0x1p-126f)
        return INFINITY;
    float r = 1.0f / a;
    if (r < 0x1p-126f)
        return 0.0f;
    return mok_fp8_float_of(bits_of_f(r) + (uint32_t)ulps);
}

/* kernels/util/fp8_encode.h on the host, as kernels/util/fp8_quant.cuh composes it: for every positive finite bf16 as
 * a block's amax, that amax (both signs) and 62 values below it (uniform draws times amax, rounded to bf16, random
 * signs), each under the three reciprocal models; a value's byte is the probes' where they agree (with x's sign),
 * else x / s's, and must be src/fp8.c's e4m3(x / s) every time. Also mok_fp8_e8m0_exponent_bits against
 * mok_e8m0_scale_for for every bf16 amax. */
static void test_encode_window(void)
{
    uint32_t st = 2463534242u;
    long bad = 0, divided = 0, values = 0, e8_bad = 0;
    for (uint32_t m = 0; m < 0x7F80u; m++) {
        const float amax = mok_fp8_float_of(m << 16);
        e8_bad += mok_fp8_e8m0_exponent_bits(m) + 127 != (int)mok_e8m0_scale_for(amax);
        if (m == 0)
            continue;
        const float s = amax / 448.0f;
        for (int ulps = -1; ulps <= 1; ulps++) {
            const float r = 448.0f * rcp_model(amax, ulps); /* kernels/util/fp8_quant.cuh encode8_block's r */
            if (!MOK_FP8_RECIP_OK(r))
                continue; /* the whole block divides */
            for (int i = 0; i < 64; i++) {
                st ^= st << 13, st ^= st >> 17, st ^= st << 5;
                const float u = (float)(st >> 8) / 16777216.0f; /* [0, 1) */
                float x = i < 2 ? amax : bf16_to_f32(f32_to_bf16(amax * u));
                if (i % 2 || (st & 1))
                    x = -x;
                const uint32_t a = bits_of_f(x * r) & 0x7FFFFFFFu;
                const uint8_t lo = mok_e4m3_from_f32(mok_fp8_probe_lo(a)), hi = mok_e4m3_from_f32(mok_fp8_probe_hi(a));
                const uint8_t ref = mok_e4m3_from_f32(x / s);
                const uint8_t got = lo == hi ? (uint8_t)(lo | (signbit(x) ? 0x80 : 0)) : ref;
                divided += lo != hi;
                values++;
                if (got != ref && bad++ < 3)
                    printf("encode window: amax %a x %a (rcp %+d ulp): %02x, not %02x\n", (double)amax, (double)x, ulps,
                           got, ref);
            }
        }
    }
    printf("fp8_block encode window: %ld values, %ld divided\n", values, divided);
    CHECK(bad == 0, "fp8_block's division-free encode: %ld of %ld values differ from x / s", bad, values);
    CHECK(divided * 50 < values, "fp8_block's encode divided %ld of %ld values (over 2%%)", divided, values);
    CHECK(e8_bad == 0, "mxfp8's e8m0 exponent from the bits: %ld amax differ from mok_e8m0_scale_for", e8_bad);
}

int main(void)
{
    /* every code decodes and encodes back to itself (the two NaN codes to the canonical 0x7F) */
    for (int c = 0; c < 256; c++) {
        float v = mok_e4m3_to_f32((uint8_t)c);
        uint8_t back = mok_e4m3_from_f32(v);
        if ((c & 0x7F) == 0x7F)
            CHECK(isnan(v) && back == 0x7F, "code %02x: NaN", c);
        else
            CHECK(back == c, "code %02x = %g encodes back to %02x", c, v, back);
    }
    CHECK(mok_e4m3_to_f32(0x7E) == 448.0f && mok_e4m3_to_f32(0x08) == 0.015625f && mok_e4m3_to_f32(0x01) == 0.001953125f,
          "max 448, min normal 2^-6, min subnormal 2^-9");
    /* ties to even: 1.0625 between 1.0 (0x38, mantissa 0) and 1.125 (0x39) -> 1.0; 1.1875 between 1.125 and 1.25
     * (0x3A, mantissa 2) -> 1.25; below, the nearest */
    CHECK(mok_e4m3_from_f32(1.0625f) == 0x38 && mok_e4m3_from_f32(1.1875f) == 0x3A, "normal ties to even");
    CHECK(mok_e4m3_from_f32(1.07f) == 0x39 && mok_e4m3_from_f32(-1.05f) == 0xB8, "nearest");
    /* subnormals: 1.5 x 2^-9 -> 2 x 2^-9 (even), 0.5 x 2^-9 -> 0 (even), 2.5 x 2^-9 -> 2 x 2^-9 */
    CHECK(mok_e4m3_from_f32(1.5f * 0.001953125f) == 0x02 && mok_e4m3_from_f32(0.5f * 0.001953125f) == 0x00 &&
              mok_e4m3_from_f32(2.5f * 0.001953125f) == 0x02,
          "subnormal ties to even");
    CHECK(mok_e4m3_from_f32(7.5f * 0.001953125f) == 0x08, "the largest subnormal step rounds up into the normals");
    /* saturation */
    CHECK(mok_e4m3_from_f32(460.0f) == 0x7E && mok_e4m3_from_f32(1e6f) == 0x7E && mok_e4m3_from_f32(-500.0f) == 0xFE,
          "saturates at +-448");
    CHECK(mok_e4m3_from_f32(-0.0f) == 0x80 && mok_e4m3_from_f32(1e-9f) == 0x00, "signed zero, underflow to zero");

    /* e8m0 scales: the smallest power of two that brings amax to <= 448 */
    CHECK(mok_e8m0_scale_for(448.0f) == 127 && mok_e8m0_scale_for(449.0f) == 128 && mok_e8m0_scale_for(224.0f) == 126,
          "448 -> 2^0, 449 -> 2^1, 224 -> 2^-1");
    CHECK(mok_e8m0_scale_for(1.0f) == 119, "1 -> 2^-8 (1.75 x ... : 1 / 2^-8 = 256 <= 448, 1 / 2^-9 = 512 > 448)");
    CHECK(mok_e8m0_scale_for(0.0f) == 127 && mok_e8m0_to_f32(127) == 1.0f, "amax 0: scale 1");
    CHECK(mok_e8m0_scale_for(1e-40f) == 0 && mok_e8m0_scale_for(3e38f) == 127 + 120, "clamped range");

    /* mxfp8 on one row of 64 (two blocks): nothing saturates, errors within e4m3's half step */
    float x[64];
    uint8_t q[64], s8[2];
    for (int i = 0; i < 64; i++)
        x[i] = (i < 32 ? 0.01f : 30.0f) * sinf(0.7f * (float)i + 0.3f);
    CHECK(mok_quant_mxfp8(x, 1, 64, q, s8) == 0, "mxfp8");
    for (int b = 0; b < 2; b++) {
        float s = mok_e8m0_to_f32(s8[b]);
        for (int i = b * 32; i < b * 32 + 32; i++) {
            float back = mok_e4m3_to_f32(q[i]) * s;
            CHECK((q[i] & 0x7F) != 0x7E || fabsf(x[i] / s) == 448.0f, "mxfp8 element %d saturated", i);
            CHECK(fabsf(back - x[i]) <= fabsf(x[i]) / 16.0f + s * 0.001953125f / 2, "mxfp8 element %d: %g vs %g", i,
                  back, x[i]);
        }
    }
    /* mxfp8 dequantized: e4m3 x 2^(e - 127), exactly (the quantize-dequantize error above is the encode's alone) */
    float dx[64];
    mok_dequant_mxfp8(q, s8, 1, 64, dx);
    for (int i = 0; i < 64; i++)
        CHECK(dx[i] == mok_e4m3_to_f32(q[i]) * ldexpf(1.0f, (int)s8[i / 32] - 127), "mxfp8 dequant %d", i);

    /* mxfp8 scale tiles (mok's GEMM B layout): spot checks worked by hand, then every byte lands once */
    CHECK(mok_mxfp8_tile_index(0, 0, 128, 256, 0) == 0, "row 0, k32 0 first");
    CHECK(mok_mxfp8_tile_index(1, 0, 128, 256, 0) == 1, "row 1: p 1");
    CHECK(mok_mxfp8_tile_index(2, 0, 128, 256, 0) == 16, "row 2: q 1 (16 bytes per lane quad position)");
    CHECK(mok_mxfp8_tile_index(8, 0, 128, 256, 0) == 2, "row 8: c 1 (the next fragment chunk, 2 bytes on)");
    CHECK(mok_mxfp8_tile_index(0, 1, 128, 256, 0) == 64 && mok_mxfp8_tile_index(0, 4, 128, 256, 0) == 256,
          "k32 step 1: +64; the next k block: +256");
    CHECK(mok_mxfp8_tile_index(64, 0, 128, 256, 0) == 2 * 256, "row 64: block 1, after block 0's two k blocks");
    CHECK(mok_mxfp8_tile_index(64, 0, 128, 256, 1) == 2 * 256, "128 rows paired: gate 0 then up 0, the plain order");
    /* paired: rows 256 (gate 0..127, up 128..255): gate block 1 at 2, up block 0 at 1, up block 1 at 3 */
    CHECK(mok_mxfp8_tile_index(64, 0, 256, 128, 1) == 2 * 256 && mok_mxfp8_tile_index(128, 0, 256, 128, 1) == 256 &&
              mok_mxfp8_tile_index(192, 0, 256, 128, 1) == 3 * 256,
          "paired gate and up blocks");
    enum { TR = 256, TK = 256, TNB = TK / 32, TM = 2 };
    static uint8_t ts[TM * TR * TNB], tt[TM * TR * TNB];
    for (int pair = 0; pair < 2; pair++) {
        for (int i = 0; i < TM * TR * TNB; i++)
            ts[i] = (uint8_t)(i * 7 + i / 251);
        memset(tt, 0, sizeof tt);
        mok_mxfp8_scale_tiles(ts, TM, TR, TK, pair, tt);
        static int hits[TR * TNB];
        memset(hits, 0, sizeof hits);
        for (int r = 0; r < TR; r++)
            for (int b = 0; b < TNB; b++)
                hits[mok_mxfp8_tile_index((size_t)r, (size_t)b, TR, TK, pair)]++;
        int once = 0;
        for (int i = 0; i < TR * TNB; i++)
            once += hits[i] == 1;
        CHECK(once == TR * TNB, "pair_halves %d: %d of %d places taken exactly once", pair, once, TR * TNB);
        for (int m = 0; m < TM; m++)
            for (int r = 0; r < TR; r += 37)
                for (int b = 0; b < TNB; b++)
                    CHECK(tt[(size_t)m * TR * TNB + mok_mxfp8_tile_index((size_t)r, (size_t)b, TR, TK, pair)] ==
                              ts[((size_t)m * TR + (size_t)r) * TNB + (size_t)b],
                          "pair_halves %d: matrix %d row %d k32 %d", pair, m, r, b);
    }

    /* fp8_block rows: the block's amax maps to 448 exactly; a block of zeros gets scale 1 */
    float r[256];
    uint8_t qr[256];
    float sr[2];
    for (int i = 0; i < 256; i++)
        r[i] = i < 128 ? 0.0f : (float)(i - 128) / 7.0f - 5.0f;
    CHECK(mok_quant_fp8_block_rows(r, 1, 256, qr, sr) == 0, "fp8_block rows");
    CHECK(sr[0] == 1.0f && qr[0] == 0 && qr[127] == 0, "zero block: scale 1, zeros");
    CHECK(sr[1] == (127.0f / 7.0f - 5.0f) / 448.0f && qr[255] == 0x7E, "amax maps to 448: scale %g, code %02x", sr[1],
          qr[255]);
    /* fp8_block weights: one scale per 128 x 128 */
    static float w[128 * 256];
    static uint8_t qw[128 * 256];
    float sw[2];
    for (int i = 0; i < 128 * 256; i++)
        w[i] = (i % 256 < 128 ? 1.0f : 0.5f) * cosf((float)i);
    CHECK(mok_quant_fp8_block_weights(w, 128, 256, qw, sw) == 0 && sw[0] > 2 * sw[1] * 0.99f, "weights: %g %g", sw[0],
          sw[1]);
    /* non-finite input is refused */
    x[40] = NAN;
    CHECK(mok_quant_mxfp8(x, 1, 64, q, s8) == -1, "NaN refused (mxfp8)");
    r[200] = INFINITY;
    CHECK(mok_quant_fp8_block_rows(r, 1, 256, qr, sr) == -1, "inf refused (fp8_block)");
    w[5] = NAN;
    CHECK(mok_quant_fp8_block_weights(w, 128, 256, qw, sw) == -1, "NaN refused (weights)");
    test_mx_expand();
    test_encode_window();
    printf("%s\n", failures ? "test_fp8: FAILED" : "test_fp8: all passed");
    return failures ? 1 : 0;
}
