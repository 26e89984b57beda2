/* nccl_fp8: the NCCL baselines' FP8 forward, dtype fp8_block or mxfp8 (src/fp8.h defines both). What the pipeline
 * adds to its bf16 forward (nccl_common.c):
 *   before the dispatch  x quantized by a separate kernel (fp8_block 1 x 128, mxfp8 per 32), its rows scattered into
 *                        the send layout as wire rows (e4m3 values then the row's scales, kernels/util/fp8_rows.cu):
 *                        FP8 rows and their scales cross NCCL in one message;
 *   after it             the received wire rows gathered into expert-major e4m3 rows and scales;
 *   the expert MLP       gemm=mok: mok's grouped GEMM with the format's policy (GEMM1 + SwiGLU into bf16 h, h
 *                        quantized by a separate kernel, GEMM2 into bf16; fp8_mlp.h, shared with lsa-layer);
 *                        fp8_block, gemm=per_expert: cuBLASLt's block-scaled FP8 GEMMs per expert
 *                        (gemm_fp8_experts.h), the same h quantization;
 *                        mxfp8, gemm=per_expert or grouped: emulated, as PyTorch's MX emulation runs it (no Hopper
 *                        library runs MX GEMMs): the rows dequantized to bf16, the bf16 cuBLAS GEMMs (weights
 *                        dequantized at setup, as gemm_mx_emulated.h argues), h quantized and dequantized between
 *                        them; the report's note says so (MOK_NCCL_MX_EMULATED_NOTE);
 *   the combine          bf16, as the bf16 forward's (an FP8 combine costs accuracy).
 * Every path leaves bf16 h in the pipeline's hbuf, expert-major: mok_nccl_pipe_export_h (nccl_common.c) brings it to
 * the token's rank in route order for the check (src/problem_fp8_layer.c). The weights are the problem's (quantized
 * once at setup: problem_fp8.c, problem_mxfp8.c). */
#ifndef MOK_NCCL_FP8_H
#define MOK_NCCL_FP8_H

#include <stdbool.h>
#include <stdint.h>

#include "gemm_fp8_experts.h"
#include "mok_gemm.h"

struct mok_nccl_pipe;

#define MOK_NCCL_MX_EMULATED_NOTE "mxfp8 emulated: dequantize + bf16 cuBLAS (weights dequantized at setup)"

struct mok_nccl_fp8 {
    bool mx;               /* mxfp8; else fp8_block */
    int wire_bytes;        /* a wire row (mok_fp8_wire_bytes) */
    uint8_t *xq;           /* [tokens][hidden] x quantized */
    void *xs;              /* its scales: hidden / 32 bytes per row in both formats */
    uint8_t *aq, *hq;      /* [cap rows][hidden], [cap rows][inter]: the GEMMs' e4m3 A operands, expert-major */
    void *as, *hs;         /* their scales */
    bool lt;               /* fp8_block, gemm=per_expert: cuBLASLt's block-scaled GEMMs in experts */
    struct mok_fp8_experts experts;
    bool emulated;         /* mxfp8, gemm=per_expert or grouped: dequantize + bf16 GEMMs */
    uint16_t *w13_deq[MOK_MAX_SETS], *w2_deq[MOK_MAX_SETS]; /* emulated, or gemm=mok with mx_scheme 2 / 3: every
                                                             * set's local weights in bf16 (3: K permuted) */
    uint16_t *h_deq;       /* emulated: [cap rows][inter], GEMM2's A */
};

/* The pointer-array batches the bf16 GEMMs need per stage: 2 for the mxfp8 emulation (its GEMM1 and GEMM2 calls pass
 * different rows: gemm_mx_emulated.c says why they cannot share a batch), else 1. */
int mok_nccl_fp8_batches_per_stage(const struct mok_problem *p, bool mok_gemm);
/* Setup after the pipeline's own (its capacity and routing known; not timed). Returns 0 or -1 with err. */
int mok_nccl_fp8_setup(struct mok_nccl_pipe *s, char *err, int err_len);
void mok_nccl_fp8_teardown(struct mok_nccl_pipe *s);
/* x of `set` quantized and scattered into the send buffer as wire rows, on stream st. */
int mok_nccl_fp8_dispatch_rows(struct mok_nccl_pipe *s, int set, cudaStream_t st, char *err, int err_len);
/* Stage rows [base, base + rows) of the receive buffer gathered into the expert-major operands, on the compute
 * stream. */
int mok_nccl_fp8_gather(struct mok_nccl_pipe *s, int base, int rows, char *err, int err_len);
/* Stage st's expert MLP from the expert-major fp8 rows into em_out (bf16), h into hbuf, on the compute stream. */
int mok_nccl_fp8_gemms(struct mok_nccl_pipe *s, int set, int st, char *err, int err_len);

#endif
