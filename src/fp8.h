/* fp8: the host reference of mok-bench's two FP8 formats (issue 22), against which the GPU quantizers are tested:
 *   e4m3          OCP FP8 E4M3 (fn): 1 sign, 4 exponent (bias 7), 3 mantissa bits; largest finite 448, smallest
 *                 normal 2^-6, smallest subnormal 2^-9; no infinities, S.1111.111 is NaN. Encoding rounds to nearest,
 *                 ties to even, and saturates at +-448 (a block's scale keeps its values inside, so saturation
 *                 only catches the last rounding step).
 *   fp8_block     (Hopper's fast FP8, the DeepSeek-V3 recipe) e4m3 values with one fp32 scale per block: 1 x 128
 *                 (a row's 128 consecutive K elements) for activations, 128 x 128 for weights; scale = amax / 448,
 *                 so the block's largest magnitude maps to 448.
 *   mxfp8         (OCP MX v1.0) e4m3 values with one e8m0 scale (a power of two, byte = exponent + 127) per 32
 *                 consecutive K elements; scale = 2^ceil(log2(amax / 448)), rounded up so no value saturates.
 * A block of zeros gets scale 1 (fp8_block 1.0f, mxfp8 byte 127) and zero values. NaN or infinity in the input is
 * refused (-1): nothing downstream could represent it, and a silent NaN would poison a whole block's scale. */
#ifndef MOK_FP8_H
#define MOK_FP8_H

#include <stddef.h>
#include <stdint.h>

#define MOK_E4M3_MAX 448.0f
#define MOK_FP8_BLOCK 128 /* fp8_block: K elements per activation scale, and the weight blocks' side */
#define MOK_MX_BLOCK 32   /* mxfp8: K elements per scale */

/* x to e4m3, round to nearest even, saturating to +-448; NaN/inf give the NaN code 0x7F (callers refuse them first). */
uint8_t mok_e4m3_from_f32(float x);
float mok_e4m3_to_f32(uint8_t v);

/* 2^ceil(log2(amax / 448)) as an e8m0 byte (clamped to 2^-127 .. 2^127); amax 0: 127 (scale 1). */
uint8_t mok_e8m0_scale_for(float amax);
float mok_e8m0_to_f32(uint8_t e);

/* Quantizes a [rows][k] row-major matrix (k a multiple of the block) into q (same shape) and scales:
 * fp8_block rows: scale[r][k / 128] (fp32); fp8_block weights: scale[rows / 128][k / 128] (rows a multiple of 128);
 * mxfp8: scale[r][k / 32] (e8m0 bytes). Returns 0, or -1 at the first non-finite input (q, scale incomplete). */
int mok_quant_fp8_block_rows(const float *x, size_t rows, size_t k, uint8_t *q, float *scale);
int mok_quant_fp8_block_weights(const float *w, size_t rows, size_t k, uint8_t *q, float *scale);
int mok_quant_mxfp8(const float *x, size_t rows, size_t k, uint8_t *q, uint8_t *scale);

/* mxfp8 dequantized, exactly: e4m3 value x 2^(e - 127) in fp32 (q [rows][k], scale [rows][k / 32]). */
void mok_dequant_mxfp8(const uint8_t *q, const uint8_t *scale, size_t rows, size_t k, float *x);

/* mxfp8's B-operand scale tiles: the layout mok's GEMM kernel (kernels/gemm, consume_tile_mxfp8) reads the weights'
 * scales in, so a slot's scales are one TMA box and each consumer lane's columns 16 consecutive bytes.
 * From scale [mats * rows][k / 32] (the quantizer's layout; mats stacked [rows][k] matrices) into
 * out[mats * rows / 64][k / 128][256]: 64-row blocks, per block and 128-K block 256 bytes, byte kk * 64 + q * 16 +
 * 2 c + p holding the scale of the block's row 8 c + 2 q + p (the wgmma fragment's column order) at k32 step
 * 4 kb + kk. Block order within a matrix: j, or with pair_halves (GEMM1's W13, gate rows then up rows) gate block j
 * at 2 j and up block j at 2 j + 1, so the two blocks of one SwiGLU tile are adjacent. rows a multiple of 64 (128
 * with pair_halves), k of 128. mok_mxfp8_tile_index is where scale[row][k32] of one matrix lands. */
size_t mok_mxfp8_tile_index(size_t row, size_t k32, size_t rows, size_t k, int pair_halves);
void mok_mxfp8_scale_tiles(const uint8_t *scale, size_t mats, size_t rows, size_t k, int pair_halves, uint8_t *out);

#endif
