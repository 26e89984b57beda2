/* test_fp8: the host reference of the FP8 formats (src/fp8.h), on cases worked by hand: every e4m3 code round
 * trips, ties go to even (normals and subnormals), saturation at 448, the mxfp8 scale rounds up so nothing
 * saturates, a block of zeros gets scale 1, non-finite input is refused. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "fp8.h"

#include "check.h"

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
    printf("%s\n", failures ? "test_fp8: FAILED" : "test_fp8: all passed");
    return failures ? 1 : 0;
}
