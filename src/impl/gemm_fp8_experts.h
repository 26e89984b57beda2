/* gemm_fp8_experts: the expert MLP of a gemm-mode problem in fp8_block on cuBLASLt, as a baseline runs it: per
 * expert a block-scaled FP8 GEMM1 (gemm_cublaslt_fp8.h), SwiGLU over all rows (bf16 h), h quantized 1 x 128 (the
 * separate quantize kernel a library user runs), per expert a block-scaled GEMM2 into bf16 y. Experts go round-robin
 * over the side streams of a per-expert mok_expert_gemms (one cuBLASLt handle each), or all on the caller's stream. */
#ifndef MOK_GEMM_FP8_EXPERTS_H
#define MOK_GEMM_FP8_EXPERTS_H

#include "gemm_cublas.h"
#include "gemm_cublaslt_fp8.h"
#include "problem.h"

struct mok_fp8_experts {
    struct mok_lt_fp8 *lt[MOK_MAX_GEMM_STREAMS];
    int nlt;
    float *w13_scale[MOK_MAX_SETS], *w2_scale[MOK_MAX_SETS]; /* the problem's weight scales in cuBLASLt's layout */
    uint16_t *g1, *h;                                         /* [rows][2I], [rows][I] */
    uint8_t *h_fp8;                                           /* [rows][I] */
    float *h_scale;                                           /* [rows][I / 128] */
};

/* Setup (not timed): handles with their scratch reserved for the largest group, buffers, the weight scales of every
 * input set converted. g: the streams to spread experts over (its nstreams). Returns 0 or -1 with err. */
int mok_fp8_experts_init(struct mok_fp8_experts *f, const struct mok_expert_gemms *g, const struct mok_problem *p,
                         const struct mok_gemm_group *groups, int ngroups, cudaStream_t stream, char *err,
                         int err_len);
/* The same for rows_capacity expert-major rows whose largest group has max_rows (a layer's receive capacity). */
int mok_fp8_experts_init_rows(struct mok_fp8_experts *f, const struct mok_expert_gemms *g,
                              const struct mok_problem *p, int rows_capacity, int max_rows, cudaStream_t stream,
                              char *err, int err_len);
void mok_fp8_experts_destroy(struct mok_fp8_experts *f);
/* part 1: GEMM1 + SwiGLU into h [rows][I] (NULL: f's own) + h's quantization; part 2: GEMM2 into y [rows][H];
 * input set `set`, on stream. */
int mok_fp8_experts_run(struct mok_fp8_experts *f, struct mok_expert_gemms *g, cudaStream_t stream, int part,
                        const struct mok_problem *p, int set, const struct mok_gemm_group *groups, int ngroups,
                        uint16_t *h, uint16_t *y, char *err, int err_len);

/* The same on given quantized rows (a [rows][H] e4m3, a_scale [rows][H / 128], indexed by the groups' absolute rows,
 * as f's buffers and y are), SwiGLU and h's quantization over rows [row0, row0 + rows) (a layer's stage). */
int mok_fp8_experts_run_rows(struct mok_fp8_experts *f, struct mok_expert_gemms *g, cudaStream_t stream, int part,
                             const struct mok_problem *p, int set, const struct mok_gemm_group *groups, int ngroups,
                             const uint8_t *a, const float *a_scale, int row0, int rows, uint16_t *h, uint16_t *y,
                             char *err, int err_len);

#endif
