/* fp8: the e4m3 / e8m0 codecs and the two block quantizers, bit-exact by construction (see fp8.h). */
#include "fp8.h"

#include <math.h>
#include <string.h>

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

uint8_t mok_e4m3_from_f32(float x)
{
    uint32_t u = bits_of(x);
    uint8_t sign = (uint8_t)((u >> 24) & 0x80);
    if (!isfinite(x))
        return 0x7F;
    float a = fabsf(x);
    if (a >= MOK_E4M3_MAX)
        return sign | 0x7E; /* 448 = 1.75 x 2^8: exponent field 15, mantissa 110 */
    /* The e4m3 grid below 448: for |x| in [2^e, 2^(e+1)) with e >= -6 the step is 2^(e-3); below 2^-6 (subnormal)
     * it is 2^-9. Rounding |x| to a multiple of the step with rintf (nearest, ties to even in the current mode,
     * which is the default) is exact: |x| / step is an exact binary scaling. */
    int e;
    frexpf(a, &e); /* a = m 2^e, m in [0.5, 1): a in [2^(e-1), 2^e) */
    int exp = e - 1;
    if (exp < -6)
        exp = -6;
    float step = ldexpf(1.0f, exp - 3);
    float r = rintf(a / step) * step; /* may round up to 2^(exp+1): still on the grid */
    if (r == 0.0f)
        return sign;
    if (r >= MOK_E4M3_MAX)
        return sign | 0x7E;
    int re;
    float rm = frexpf(r, &re); /* r = rm 2^re */
    int rexp = re - 1;
    if (rexp < -6) { /* subnormal: exponent field 0, mantissa r / 2^-9 */
        return sign | (uint8_t)(int)(r / ldexpf(1.0f, -9));
    }
    int mant = (int)((rm * 2.0f - 1.0f) * 8.0f + 0.5f); /* 3 bits of 1.mmm */
    return sign | (uint8_t)((rexp + 7) << 3) | (uint8_t)mant;
}

float mok_e4m3_to_f32(uint8_t v)
{
    int sign = v & 0x80, ef = (v >> 3) & 0xF, m = v & 7;
    if (ef == 0xF && m == 7)
        return NAN;
    float a = ef == 0 ? ldexpf((float)m, -9) : ldexpf(1.0f + m / 8.0f, ef - 7);
    return sign ? -a : a;
}

uint8_t mok_e8m0_scale_for(float amax)
{
    if (!(amax > 0.0f))
        return 127;
    /* the smallest power of two s with amax / s <= 448 */
    int e = (int)ceilf(log2f(amax / MOK_E4M3_MAX));
    /* log2f may be off by one ulp near powers of two: settle on the exact power */
    while (e > -127 && amax / ldexpf(1.0f, e - 1) <= MOK_E4M3_MAX)
        e--;
    while (amax / ldexpf(1.0f, e) > MOK_E4M3_MAX)
        e++;
    if (e < -127)
        e = -127;
    if (e > 127)
        e = 127;
    return (uint8_t)(e + 127);
}

float mok_e8m0_to_f32(uint8_t e) { return e == 0xFF ? NAN : ldexpf(1.0f, (int)e - 127); }

/* amax of n values with stride 1; -1 at a non-finite one. */
static int amax_of(const float *x, size_t n, float *amax)
{
    float a = 0.0f;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(x[i]))
            return -1;
        a = fabsf(x[i]) > a ? fabsf(x[i]) : a;
    }
    *amax = a;
    return 0;
}

/* fp8_block's scale: the block's amax maps to 448 (a block of zeros: 1). */
static float block_scale(float amax) { return amax > 0.0f ? amax / MOK_E4M3_MAX : 1.0f; }

/* n consecutive values divided by the block's scale, to e4m3. */
static void encode_run(const float *x, size_t n, float s, uint8_t *q)
{
    for (size_t i = 0; i < n; i++)
        q[i] = mok_e4m3_from_f32(x[i] / s);
}

int mok_quant_fp8_block_rows(const float *x, size_t rows, size_t k, uint8_t *q, float *scale)
{
    const size_t nb = k / MOK_FP8_BLOCK;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++) {
            const float *blk = x + r * k + b * MOK_FP8_BLOCK;
            float amax;
            if (amax_of(blk, MOK_FP8_BLOCK, &amax))
                return -1;
            scale[r * nb + b] = block_scale(amax);
            encode_run(blk, MOK_FP8_BLOCK, scale[r * nb + b], q + r * k + b * MOK_FP8_BLOCK);
        }
    return 0;
}

int mok_quant_fp8_block_weights(const float *w, size_t rows, size_t k, uint8_t *q, float *scale)
{
    const size_t nbk = k / MOK_FP8_BLOCK, nbr = rows / MOK_FP8_BLOCK;
    for (size_t br = 0; br < nbr; br++)
        for (size_t bk = 0; bk < nbk; bk++) {
            float amax = 0.0f;
            for (size_t r = 0; r < MOK_FP8_BLOCK; r++) {
                float a;
                if (amax_of(w + (br * MOK_FP8_BLOCK + r) * k + bk * MOK_FP8_BLOCK, MOK_FP8_BLOCK, &a))
                    return -1;
                amax = a > amax ? a : amax;
            }
            scale[br * nbk + bk] = block_scale(amax);
            for (size_t r = 0; r < MOK_FP8_BLOCK; r++) {
                size_t at = (br * MOK_FP8_BLOCK + r) * k + bk * MOK_FP8_BLOCK;
                encode_run(w + at, MOK_FP8_BLOCK, scale[br * nbk + bk], q + at);
            }
        }
    return 0;
}

int mok_quant_mxfp8(const float *x, size_t rows, size_t k, uint8_t *q, uint8_t *scale)
{
    const size_t nb = k / MOK_MX_BLOCK;
    for (size_t r = 0; r < rows; r++)
        for (size_t b = 0; b < nb; b++) {
            const float *blk = x + r * k + b * MOK_MX_BLOCK;
            float amax;
            if (amax_of(blk, MOK_MX_BLOCK, &amax))
                return -1;
            uint8_t e = mok_e8m0_scale_for(amax);
            scale[r * nb + b] = e;
            /* dividing by a power of two is exact (until the quotient is subnormal in fp32, far below e4m3's) */
            encode_run(blk, MOK_MX_BLOCK, mok_e8m0_to_f32(e), q + r * k + b * MOK_MX_BLOCK);
        }
    return 0;
}

void mok_dequant_mxfp8(const uint8_t *q, const uint8_t *scale, size_t rows, size_t k, float *x)
{
    const size_t nb = k / MOK_MX_BLOCK;
    for (size_t r = 0; r < rows; r++)
        for (size_t i = 0; i < k; i++) /* 4 significant bits times a power of two: exact in fp32's range */
            x[r * k + i] = mok_e4m3_to_f32(q[r * k + i]) * mok_e8m0_to_f32(scale[r * nb + i / MOK_MX_BLOCK]);
}

size_t mok_mxfp8_tile_index(size_t row, size_t k32, size_t rows, size_t k, int pair_halves)
{
    size_t j = row / 64, r = row % 64, kb = k32 / 4, kk = k32 % 4;
    if (pair_halves) {
        size_t half = rows / 2 / 64; /* gate blocks */
        j = j < half ? 2 * j : 2 * (j - half) + 1;
    }
    size_t c = r / 8, q = r % 8 / 2, p = r % 2;
    return (j * (k / 128) + kb) * 256 + kk * 64 + q * 16 + 2 * c + p;
}

void mok_mxfp8_scale_tiles(const uint8_t *scale, size_t mats, size_t rows, size_t k, int pair_halves, uint8_t *out)
{
    const size_t nb = k / MOK_MX_BLOCK;
    for (size_t m = 0; m < mats; m++)
        for (size_t r = 0; r < rows; r++)
            for (size_t b = 0; b < nb; b++)
                out[m * rows * nb + mok_mxfp8_tile_index(r, b, rows, k, pair_halves)] = scale[(m * rows + r) * nb + b];
}
