/* fp8_mlp: what the layers' FP8 forwards share (dtype fp8_block or mxfp8, src/fp8.h): the size of a wire row (a
 * token row's e4m3 values and scales as one transfer, kernels/util/fp8_rows.cu), the format's row quantizer
 * (kernels/util/quant.cu), and the expert MLP on mok's GEMM core in the format's policy over expert-major rows:
 * GEMM1 + SwiGLU into bf16 h, h quantized by the same quantizer, GEMM2 into bf16. Its users: the NCCL baselines'
 * gemm=mok (nccl_fp8.c) and lsa-layer (lsa_layer_fp8.c), so both time the same GEMMs. */
#ifndef MOK_IMPL_FP8_MLP_H
#define MOK_IMPL_FP8_MLP_H

#include <cuda_runtime.h>
#include <stdbool.h>
#include <stdint.h>

#include "mok_gemm.h"
#include "problem.h"

/* Bytes of a wire row for this hidden size (either format): hidden e4m3 bytes + hidden / 32 bytes of scales,
 * padded to 16. */
int mok_fp8_wire_bytes(int hidden);
/* The FP8 GEMMs' configuration on a bf16 configuration's CTAs, for dtype (enum mok_dtype): fp8_block 128 x 256
 * tiles, fp8_n 128; mxfp8 128 x 128, fp8_n 64, or with mx_scheme 1, 2, 3 expanded to bf16 on 128 x 256; the deepest
 * ring. */
struct mok_gemm_sm90_config mok_fp8_mok_config(const struct mok_gemm_sm90_config *bf16, int dtype, int mx_scheme);
/* bf16 rows [rows][k] into e4m3 q and the problem's format's scales (k / 32 bytes per row in both formats), with
 * the problem's quantizer flag; rows_dev (NULL: all rows) bounds them on the device (mok_quant_*_upto). */
int mok_fp8_quant_rows(const struct mok_problem *p, const uint16_t *x, int rows, const int32_t *rows_dev, int k,
                       uint8_t *q, void *scale, cudaStream_t st);

/* One expert MLP over expert-major rows: groups local experts from e0 on, rows [offset[g], offset[g + 1]) each
 * (offset a device array indexed from the first of them), rows_capacity rows in every buffer. */
struct mok_fp8_mlp {
    const uint8_t *aq;      /* [rows][hidden] e4m3: the dispatched rows */
    const void *as;         /* their scales */
    uint16_t *h;            /* [rows][inter] bf16: GEMM1 + SwiGLU */
    uint8_t *hq;            /* [rows][inter] e4m3: h quantized, GEMM2's A */
    void *hs;               /* its scales */
    uint16_t *out;          /* [rows][hidden] bf16: GEMM2 */
    const int32_t *offset;  /* device [groups + 1] */
    int e0, groups, rows_capacity;
    const int32_t *rows_dev; /* NULL, or a device count of the rows h's quantization needs (<= rows_capacity) */
    const uint16_t *w13x, *w2x; /* mxfp8 mx_scheme 2, 3: the set's local experts' MX values in bf16
                                 * (mok_fp8_weights_bf16); NULL: the e4m3 weights */
};
/* mxfp8 with mx_scheme 2 or 3 (mok-gemm's, kernels/mok_gemm.h): every input set's local expert weights as their MX
 * values in bf16 (exact; 3: K permuted within each 64-K block), allocated into w13x[set] and w2x[set] (the caller
 * frees them); the problem's quantized weights expanded, not timed. 0, or -1 with err. */
int mok_fp8_weights_bf16(const struct mok_problem *p, int mx_scheme, uint16_t **w13x, uint16_t **w2x,
                         cudaStream_t st, char *err, int err_len);
/* GEMM1 + SwiGLU, h quantized, GEMM2 on st, with input set `set`'s quantized weights. 0, or -1 with err. */
int mok_fp8_mok_mlp(const struct mok_problem *p, int set, const struct mok_fp8_mlp *m,
                    const struct mok_gemm_sm90_config *cfg, cudaStream_t st, char *err, int err_len);
/* Whether mok_fp8_mok_mlp runs the problem's shapes in configuration cfg (why says why not). */
int mok_fp8_mok_supports(const struct mok_problem *p, const struct mok_gemm_sm90_config *cfg, char *why, int why_len);

#endif
