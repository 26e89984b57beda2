/* gemm_cublaslt_fp8: the cuBLASLt baseline of one expert's FP8 GEMM, C[n][N] (bf16) = A[n][K] * W[N][K]^T with fp32
 * accumulation, in the two scalings the fp8 formats are compared in:
 *   block   fp8_block (src/fp8.h, the DeepSeek-V3 recipe): activations one fp32 scale per row per 128 K elements,
 *           weights one per 128 x 128 block; cuBLASLt's VEC128_32F / BLK128x128_32F modes (Hopper, cuBLAS >= 12.9);
 *   tensor  one fp32 scale per tensor (SCALAR_32F): the per-tensor FP8 rate block scaling is measured against.
 * Data contract (the mok GEMM reads the same arrays): e4m3 bytes A [rows][K] row-major, one expert's rows a contiguous
 * slice; W of one expert e4m3 [N][K] row-major (N, K multiples of 128); C bf16 [n][N] row-major.
 *
 * cuBLASLt's FP8 kernels take only the "TN" form, so in its column-major terms the call is C^T[N][n] = W(op T) A(op N):
 * its matrix A is our W (ld K), its B our activation rows (ld K), its D our C (ld N).
 *
 * Scale layouts cuBLASLt wants (https://docs.nvidia.com/cuda/cublas/#scaling-factors-layouts; the same strides as
 * PyTorch's _scaled_mm checks for 128x128 x 1x128, aten/src/ATen/native/cuda/ScaledBlas.cpp, and its fix for the
 * padded K-block stride, pytorch/pytorch#166752), with L = K / 128 and L4 = L rounded up to a multiple of 4:
 *   W (its A, BLK128x128_32F): K-major, [N / 128][L4], a 128-row block's L scales contiguous, then pads. Equal to the
 *     contract's [N / 128][K / 128] when L % 4 == 0; else mok_lt_fp8_prepare_weight_scales converts, once at setup.
 *   A rows (its B, VEC128_32F): outer-major, [L][n], one K block's n row scales contiguous: the contract's [n][L]
 *     transposed. Converted on every block GEMM call (kernels/util/scale_layout.cu, into the handle's scratch), timed
 *     as part of the baseline: a cuBLASLt user holding the contract's arrays pays it.
 * The same section says M and N must be multiples of 4 (presumably since the VEC128 tensor's column stride is the
 * outer size and scale columns must start 16-byte aligned; mok_lt_fp8_set_unpadded probes it), so rows n % 4 != 0
 * are not handed over in place. Such a call either runs all n rows through
 * padded scratch (rows copied in, roundup(n, 4) rows computed, n rows copied out) or the first n & ~3 rows in place
 * and the last 1-3 rows through a 4-row scratch (a second GEMM, which reads W again), whichever moves fewer bytes:
 * padding costs 2 n K + 4 n N bytes of copies, the split N K of weights read twice.
 *
 * Heuristics (cublasLtMatmulAlgoGetHeuristic, tens of microseconds on the host) run once per (scaling, GEMM rows, N, K,
 * operand alignments) and are cached in the handle (256 plans, oldest replaced); the first call of a shape pays them,
 * so time after a warm-up. The scratch grows on demand (a device synchronize and cudaMalloc): call mok_lt_fp8_reserve
 * at setup, before timing or graph capture. One handle per stream: calls share its scratch in stream order.
 *
 * The int functions return 0, or -1 with "file:line: call: status string" (or what was refused) in err. */
#ifndef MOK_GEMM_CUBLASLT_FP8_H
#define MOK_GEMM_CUBLASLT_FP8_H

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

struct mok_lt_fp8;

/* workspace_bytes: cuBLASLt's workspace (32 MiB is what cuBLAS documents for Hopper; 0: none). */
int mok_lt_fp8_create(struct mok_lt_fp8 **out, size_t workspace_bytes, char *err, int err_len);
void mok_lt_fp8_destroy(struct mok_lt_fp8 *lt);

/* Allocates the scratch every later block GEMM of up to max_rows rows, N <= max_N and K <= max_K needs. */
int mok_lt_fp8_reserve(struct mok_lt_fp8 *lt, int max_rows, int max_N, int max_K, char *err, int err_len);

/* Floats of one expert's weight scales in cuBLASLt's layout: (N / 128) * L4. Stacked experts lie this far apart
 * (a multiple of 4 floats: each expert's tensor stays 16-byte aligned). */
size_t mok_lt_fp8_weight_scale_floats(int N, int K);

/* Setup, once per weight tensor: experts stacked contract scales [experts][N / 128][K / 128] into lt_w_scale
 * [experts][N / 128][L4] (experts * mok_lt_fp8_weight_scale_floats(N, K) floats, 16-byte aligned), on stream. */
int mok_lt_fp8_prepare_weight_scales(cudaStream_t stream, int experts, int N, int K, const float *w_scale,
                                     float *lt_w_scale, char *err, int err_len);

/* Block-scaled GEMM of one expert's n_rows rows: a [n_rows][K] e4m3 and a_scale [n_rows][K / 128] in the contract's
 * layout (the slice's own pointers, any row offset), w [N][K] e4m3 and lt_w_scale in cuBLASLt's layout (from
 * mok_lt_fp8_prepare_weight_scales), c [n_rows][N] bf16. a, w, c 16-byte aligned; n_rows 0 is a no-op. */
int mok_lt_fp8_block_gemm(struct mok_lt_fp8 *lt, cudaStream_t stream, int n_rows, int N, int K, const uint8_t *a,
                          const float *a_scale, const uint8_t *w, const float *lt_w_scale, uint16_t *c, char *err,
                          int err_len);

/* The same GEMM with one scale per tensor: a_scale and w_scale point at one device float each (dequantized value =
 * e4m3 value * scale). Any n_rows: the tensorwide mode has no multiple-of-4 rule. */
int mok_lt_fp8_tensor_gemm(struct mok_lt_fp8 *lt, cudaStream_t stream, int n_rows, int N, int K, const uint8_t *a,
                           const float *a_scale, const uint8_t *w, const float *w_scale, uint16_t *c, char *err,
                           int err_len);

/* How many heuristic queries the handle has made (one per new plan): the cache's check. */
long long mok_lt_fp8_heuristic_calls(const struct mok_lt_fp8 *lt);

/* A probe of the multiple-of-4 rule above, not for measurements: with on, block GEMMs of n_rows % 4 != 0 go to
 * cuBLASLt in place (activation scales with stride n_rows), to see on a GPU whether it refuses or miscomputes them. */
void mok_lt_fp8_set_unpadded(struct mok_lt_fp8 *lt, int on);

#endif
