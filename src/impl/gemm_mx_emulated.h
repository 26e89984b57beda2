/* gemm_mx_emulated: cublas-gemm's mxfp8 baseline. No Hopper library runs MX GEMMs, so it runs them as PyTorch's MX
 * emulation does: the operands dequantized to bf16 (exactly: e4m3 x 2^(e - 127) fits bf16), then bf16 GEMMs, here
 * cublas-gemm's own (grouped or per expert). Per run, timed: the x rows dequantized (GEMM1's phase), GEMM1 + SwiGLU,
 * h quantized to mxfp8 (as mok-gemm quantizes it, by the same quantizer), h dequantized (GEMM2's phase), GEMM2.
 * The weights are dequantized once per input set at setup, not per run (the emulation dequantizes both operands
 * per call): weights are constant across calls, so a baseline that converts them every call would charge it
 * ~2 x 3HIE bytes of traffic per run that any deployment hoists out (about doubling DeepSeek-V3's GEMM time); with
 * them at setup it is the stronger baseline. */
#ifndef MOK_GEMM_MX_EMULATED_H
#define MOK_GEMM_MX_EMULATED_H

#include "gemm_cublas.h"
#include "problem.h"

struct mok_mx_emulated {
    uint16_t *w13[MOK_MAX_SETS], *w2[MOK_MAX_SETS]; /* every set's weights dequantized to bf16 */
    uint16_t *a;                                    /* [rows][H]: the x rows dequantized */
    uint16_t *g1, *h;                               /* [rows][2I], [rows][I] (h: when the problem has none) */
    uint8_t *h_q, *h_s;                             /* h in mxfp8: [rows][I], [rows][I / 32] */
    uint16_t *h_deq;                                /* [rows][I]: GEMM2's A */
};

/* The label reports carry in their note (what the figure is: not an MX GEMM). */
#define MOK_MX_EMULATED_NOTE "mxfp8 emulated: dequantize + bf16 cuBLAS (weights dequantized at setup)"

/* Setup (not timed): buffers, every set's weights dequantized. Returns 0 or -1 with err. */
int mok_mx_emulated_init(struct mok_mx_emulated *m, const struct mok_problem *p, cudaStream_t stream, char *err,
                         int err_len);
void mok_mx_emulated_destroy(struct mok_mx_emulated *m);
/* part 1: rows dequantized, GEMM1 + SwiGLU into h [rows][I] (NULL: m's own), h quantized; part 2: h dequantized,
 * GEMM2 into y [rows][H]; input set `set`, on stream, through g (its mode and streams; g->parts is set here;
 * grouped mode: part 1 uses g's pointer-array batch 0, part 2 batch 1, so g needs 2 batches). */
int mok_mx_emulated_run(struct mok_mx_emulated *m, struct mok_expert_gemms *g, cudaStream_t stream, int part,
                        const struct mok_problem *p, int set, const struct mok_gemm_group *groups, int ngroups,
                        uint16_t *h, uint16_t *y, char *err, int err_len);

#endif
