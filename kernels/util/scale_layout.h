/* scale_layout: fp8_block scale tensors from the data contract's layout (src/fp8.h, kernels/util/quant.cu: row-major
 * [rows][K / 128] for activations, [N / 128][K / 128] for weights) into the layouts cuBLASLt's block-scaled FP8 matmul
 * reads (cuBLAS 13 docs, "128-element 1D and 128x128 2D Block Scaling For FP8 Data Types", "Scaling factors layouts":
 * https://docs.nvidia.com/cuda/cublas/#scaling-factors-layouts). cuBLASLt takes no leading dimension for a scale
 * tensor, so the padding below is the stride it assumes. src/impl/gemm_cublaslt_fp8.c is the caller. */
#ifndef MOK_SCALE_LAYOUT_H
#define MOK_SCALE_LAYOUT_H

#include "mok_kernels.h" /* mok_stream_t */

#ifdef __cplusplus
extern "C" {
#endif

/* VEC128_32F (1 x 128 activations): outer-dimension-major, dst[kb][ld] with dst[kb * ld + r] = src[r * kblocks + kb]
 * for r < rows, 0 for rows <= r < ld (cuBLASLt's stride is the GEMM's outer size: ld rows of which rows are real).
 * src any 4-byte alignment (one expert's slice of a bigger tensor), dst 16-byte aligned. */
int mok_scale_vec128_lt(const float *src, int rows, int kblocks, int ld, float *dst, mok_stream_t stream);

/* BLK128x128_32F (128 x 128 weights): K-block-major per 128 output rows with the K-block count padded to a multiple
 * of 4, dst[nb][ld4] with ld4 = roundup(kblocks, 4): dst[nb * ld4 + kb] = src[nb * kblocks + kb], pads 0. nblocks
 * counts 128-row blocks over all stacked matrices (E experts of N rows: E * N / 128). dst 16-byte aligned. */
int mok_scale_blk128_lt(const float *src, long long nblocks, int kblocks, float *dst, mok_stream_t stream);

#ifdef __cplusplus
}
#endif

#endif
