/* gemm_mok_bwd: the expert MLP's backward on mok's GEMM core (kernels/mok_gemm.h), grouped: one launch per GEMM
 * over every expert's rows, the group sizes read on the device (no host synchronization).
 *   dgrad  dh' = dy W2 (the weight read transposed: mok_gemm_args.b_transposed), the SwiGLU backward over all
 *          rows (dgu, w h, d_router: mok_swiglu_bwd_bf16), dx = dgu W13 (transposed likewise);
 *   wgrad  dW2 (+)= dy^T (w h), dW13 (+)= dgu^T x (mok_wgrad_sm90: K = each expert's rows, one CTA per output
 *          tile, rows summed in order: deterministic). fp32 accumulated, or with dw_bf16 written in bf16 (an
 *          expert without rows gets zeros from the kernel itself).
 * The same operands and outputs as the cuBLAS path (gemm_cublas.h: struct mok_expert_bwd), so gemm mode and the
 * layer baselines can run either. */
#ifndef MOK_GEMM_MOK_BWD_H
#define MOK_GEMM_MOK_BWD_H

#include <cuda_runtime.h>
#include <stdint.h>

#include "gemm_cublas.h"
#include "mok_gemm.h"

/* The GEMMs' configurations: dgrad 128-row tiles of tile_n columns; wgrad 128 x tile_n output tiles. */
struct mok_core_bwd_config {
    struct mok_gemm_sm90_config dgrad, wgrad;
};

/* The configuration from mok-gemm's parameters (tile_n, stages, ctas, raster): the dgrad GEMMs take all four as the
 * forward does; wgrad takes tile_n, stages and ctas. */
struct mok_core_bwd_config mok_core_bwd_config(int tile_n, int stages, int ctas, int raster);

/* Whether the four GEMMs run at this shape on this GPU (1), or why not (0). */
int mok_core_bwd_supports(const struct mok_core_bwd_config *c, int groups, int hidden, int inter, char *why,
                          int why_len);

/* The backward over `rows` expert-major rows in `groups` groups (offset: device, [groups + 1], offset[0] = 0, the
 * rows of b's operands). b->parts selects dgrad and / or wgrad (0: both); b->dw_accumulate must be NULL (every
 * call makes or adds the step's whole gradient). Returns 0, or -1 with the failing call in err. */
int mok_core_expert_backward(const struct mok_core_bwd_config *c, cudaStream_t stream, const int32_t *offset,
                             int groups, int rows, int hidden, int inter, const struct mok_expert_bwd *b, char *err,
                             int err_len);

#endif
