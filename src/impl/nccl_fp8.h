/* nccl_fp8: the NCCL baselines' fp8_block forward (dtype fp8_block, src/fp8.h). What the pipeline adds to its bf16
 * forward (nccl_common.c):
 *   before the dispatch  x quantized 1 x 128 by a separate kernel (mok_quant_fp8_block_bf16), its rows scattered
 *                        into the send layout as wire rows (e4m3 values then the row's fp32 scales,
 *                        kernels/util/fp8_rows.cu): FP8 rows and their scales cross NCCL in one message;
 *   after it             the received wire rows gathered into expert-major e4m3 rows and scales;
 *   the expert MLP       gemm=mok: mok's grouped GEMM with its fp8_block policy (GEMM1 + SwiGLU into bf16 h, h
 *                        quantized 1 x 128 by a separate kernel, GEMM2 into bf16); gemm=per_expert: cuBLASLt's
 *                        block-scaled FP8 GEMMs per expert (gemm_fp8_experts.h), the same h quantization;
 *   the combine          bf16, as the bf16 forward's (an FP8 combine costs accuracy).
 * The weights are the problem's (quantized once at setup, problem_fp8.c). */
#ifndef MOK_NCCL_FP8_H
#define MOK_NCCL_FP8_H

#include <stdbool.h>
#include <stdint.h>

#include "gemm_fp8_experts.h"
#include "mok_gemm.h"

struct mok_nccl_pipe;

struct mok_nccl_fp8 {
    int wire_bytes;        /* a wire row: hidden e4m3 bytes + hidden / 128 fp32 scales, padded to 16 */
    uint8_t *xq;           /* [tokens][hidden] x quantized */
    float *xs;             /* [tokens][hidden / 128] */
    uint8_t *aq, *hq;      /* [cap rows][hidden], [cap rows][inter]: the GEMMs' e4m3 A operands, expert-major */
    float *as, *hs;        /* their scales */
    bool lt;               /* gemm=per_expert: cuBLASLt's block-scaled GEMMs in experts */
    struct mok_fp8_experts experts;
};

/* gemm=mok's fp8_block configuration, on the bf16 configuration's CTAs. */
struct mok_gemm_sm90_config mok_nccl_fp8_mok_config(const struct mok_gemm_sm90_config *bf16);
/* Bytes of a wire row for this hidden size. */
int mok_nccl_fp8_wire_bytes(int hidden);
/* Setup after the pipeline's own (its capacity and routing known; not timed). Returns 0 or -1 with err. */
int mok_nccl_fp8_setup(struct mok_nccl_pipe *s, char *err, int err_len);
void mok_nccl_fp8_teardown(struct mok_nccl_pipe *s);
/* x of `set` quantized and scattered into the send buffer as wire rows, on stream st. */
int mok_nccl_fp8_dispatch_rows(struct mok_nccl_pipe *s, int set, cudaStream_t st, char *err, int err_len);
/* Stage rows [base, base + rows) of the receive buffer gathered into the expert-major operands, on the compute
 * stream. */
int mok_nccl_fp8_gather(struct mok_nccl_pipe *s, int base, int rows, char *err, int err_len);
/* Stage st's expert MLP from the expert-major fp8 rows into em_out (bf16), on the compute stream. */
int mok_nccl_fp8_gemms(struct mok_nccl_pipe *s, int set, int st, char *err, int err_len);

#endif
