/* mok_gemm: the expert GEMMs of the megakernel, on their own (issue 4). Host C includes it next to mok_kernels.h.
 *
 * A grouped GEMM over expert-major rows whose group sizes are known only on the device:
 *   C[r][n] = sum_k A[r][k] * B[g][n][k]  for rows r in [offset[g], offset[g+1]) of group g,
 * bf16 (or fp8_block: dtype below) in, fp32 accumulation, bf16 out. With swiglu set, B[g] holds 2*n_out rows (gate
 * rows [0, n_out), then up rows [n_out, 2*n_out)) and C[r][j] = silu(gate_j) * up_j, j < n_out: GEMM1 with SwiGLU in
 * its epilogue. Without it, n_out = N: GEMM2. Row-major everything, K contiguous in A and B. */
#ifndef MOK_GEMM_H
#define MOK_GEMM_H

#include <stdint.h>

#include "mok_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Operand precision. fp8_block (Hopper's block-scaled FP8, the DeepSeek-V3 recipe; src/fp8.h defines it): A and B
 * are e4m3 (a_fp8, b_fp8 instead of a, b), A with one fp32 scale per row per 128 K (a_scale [rows_capacity][k/128]),
 * B with one per 128 x 128 block (b_scale [B rows / 128][k/128]); fp32 accumulation promoted per 128 K; C bf16.
 * mxfp8 (OCP MX v1.0): A and B e4m3 (a_fp8, b_fp8) with one e8m0 scale byte per row per 32 K each: a_mx_scale
 * [rows_capacity][k/32] as the quantizer writes it, b_mx_scale in the GEMM's tile layout (mok_scale_mx_tiles in
 * mok_kernels.h: [B rows / 64][k / 128][256 bytes]); C bf16. The Hopper kernel runs it one of four ways
 * (mok_gemm_sm90_config.mx_scheme): every 32 K's e4m3 product promoted into fp32 with both scales, or the operands
 * expanded to bf16 (e4m3 x 2^scale) in shared memory and multiplied by bf16 wgmma; or (mx_scheme 2) A expanded so
 * and B given as the weights' MX values already in bf16 (b, [groups][B rows][k]: mok_dequant_mxfp8_bf16 of b_fp8,
 * exact), b_fp8 and b_mx_scale unused; or (mx_scheme 3) A expanded into the consumer threads' registers and B so,
 * K permuted within each 64-K block (mok_expand_mxfp8_bf16_k64perm). */
enum mok_gemm_dtype { MOK_GEMM_BF16 = 0, MOK_GEMM_FP8_BLOCK = 1, MOK_GEMM_MXFP8 = 2 };

struct mok_gemm_args {
    const uint16_t *a;          /* [rows][k] */
    const uint16_t *b;          /* [groups][swiglu ? 2 * n_out : n_out][k] */
    uint16_t *c;                /* [rows][n_out] */
    const int32_t *offset;      /* device, [groups + 1]: first row of each group; offset[groups] = rows */
    int groups, rows_capacity;  /* rows_capacity: rows allocated in a and c (>= offset[groups]) */
    int n_out, k;
    int swiglu;
    /* Optional (NULL: the rows are all there at launch): per-chunk ready counters of A's rows, as the LSA
     * dispatch publishes them while this GEMM runs beside it. Chunk c covers rows [c * ready_rows, +ready_rows);
     * before loading a tile's rows the Hopper kernel waits until ready[c] >= ready_target[c] for every chunk the
     * tile's real rows touch (acquire at GPU scope, then a proxy fence so TMA sees the rows). The portable
     * kernel rejects them: its rows must be complete at launch. */
    const int32_t *ready, *ready_target;
    int ready_rows;
    enum mok_gemm_dtype dtype;  /* MOK_GEMM_BF16 (0, what a zeroed struct means), _FP8_BLOCK or _MXFP8 */
    const uint8_t *a_fp8, *b_fp8; /* fp8_block and mxfp8: the e4m3 operands, shaped as a and b */
    const float *a_scale, *b_scale; /* fp8_block */
    const uint8_t *a_mx_scale, *b_mx_scale; /* mxfp8 (above) */
    /* The backward's dgrad (bf16, no SwiGLU; Hopper kernel, 128-row tiles, no clusters): B[g] is the forward's
     * weight read transposed, row-major [k][n_out], so C[r][n] = sum_k A[r][k] * B[g][k][n]: dh' = dy W2 (k = H,
     * n_out = I) and dx = [dg, du] W13 (k = 2I, n_out = H). */
    int b_transposed;
};

/* Tile and pipeline of the Hopper kernel: the tuning parameters the bench sweeps. */
struct mok_gemm_sm90_config {
    int tile_m;  /* 128 (two consumer warpgroups of 64 rows), 256 (with tile_n 128), or 64 (with tile_n 256: the
                    warpgroups split the columns; for groups of 64 rows or fewer) */
    int tile_n;  /* output columns per tile before SwiGLU: 128 or 256 */
    int stages;  /* shared-memory pipeline depth, 2..8; 0: the deepest that fits */
    int sms;     /* persistent CTAs (0: every SM) */
    int cluster_m; /* 1 (or 0), or 2: pairs of CTAs on vertically adjacent tiles multicast their shared B tile */
    int lockstep;  /* N > 0: the CTAs' loads meet at a grid barrier every N k blocks (L2 reuse between CTAs that
                      share tiles); 0: off. Needs every CTA resident at once: sms <= the SM count, nothing else
                      occupying the SMs it needs */
    int raster;    /* tile order within an expert: 0 m-major (consecutive CTAs share A rows), 1 n-major (share B) */
    int fp8_n;     /* fp8_block (mxfp8 scheme 0): columns of each wgmma product promoted per 128 K (32 K), 64 or 128
                      (0: 128) */
    int mx_scheme; /* mxfp8: 0 promotes each 32 K's e4m3 product into fp32 (128 x 128 tiles); 1 expands the
                      operands to bf16 in shared memory for bf16 wgmma (tile_n 128 or 256); 2 expands A so, B read in
                      bf16 (the weights expanded at setup); 3 expands A into the consumers' registers, B read in bf16
                      with K permuted within each 64-K block (mok_expand_mxfp8_bf16_k64perm). 0 for the other
                      dtypes */
    int land_stages; /* mx_scheme 1 and 2: the e4m3 landing ring's depth, 2..4 (0: as deep as fits beside two bf16
                        slots, or beside `stages`); 0 otherwise */
    int lean;        /* fp8_block's 128 x 256 tiles: 1 the lean layout (two consumer warpgroups, 256 threads, one
                        thread issuing the loads), 0 the producer warpgroup's (384 threads); 0 otherwise */
    int cluster_n;   /* 1 (or 0), or 2: pairs of CTAs on horizontally adjacent tiles (the same rows) multicast their
                        shared A tile, each loading half its rows (bf16, 128-row tiles, not with cluster_m 2; the
                        output's column tiles an even count) */
};

/* 1 when the configuration fits (shared memory, registers, divisibility of n_out and k), else 0 with the
 * reason in why. Checked before any launch. */
int mok_gemm_sm90_supports(const struct mok_gemm_args *g, const struct mok_gemm_sm90_config *c, char *why,
                           int why_len);
/* wgmma + TMA, warp-specialized, persistent (sm_90a only; returns cudaErrorNotSupported elsewhere). */
int mok_gemm_sm90(const struct mok_gemm_args *g, const struct mok_gemm_sm90_config *c, mok_stream_t stream);
/* Allocates the Hopper kernel's failure record now (mapped host memory; it cannot be allocated while a stream is
 * being captured, so a caller that will capture launches into graphs calls this first). */
void mok_gemm_sm90_prepare(mok_stream_t stream);
/* The backward's weight gradients on the GEMM core (Hopper): for every group g (rows [offset[g], offset[g+1]))
 *   C[g][m][n] (+)= sum over the group's rows r of A[r][m] * B[r][n]
 * with A [rows][m] and B [rows][n] row-major bf16 (K = the group's rows, read MN-major), fp32 accumulation:
 * dW2 += dy^T (w h) (m = H, n = I) and dW13 += [dg, du]^T x (m = 2I, n = H). c_f32 (accumulate: C += the sum, the
 * fp32 gradient buffers of fp32_accumulate) or c_bf16 (C = the sum in bf16; a group without rows gets zeros).
 * Each output tile is one CTA's, summed over its rows in order: deterministic. m % 128 == 0, n % tile_n == 0. */
struct mok_wgrad_args {
    const uint16_t *a, *b;      /* [rows_capacity][m], [rows_capacity][n] */
    float *c_f32;               /* [groups][m][n], or NULL */
    uint16_t *c_bf16;           /* [groups][m][n], or NULL (exactly one of the two) */
    const int32_t *offset;      /* device, [groups + 1] */
    int groups, rows_capacity, m, n;
};
int mok_wgrad_sm90_supports(const struct mok_wgrad_args *w, const struct mok_gemm_sm90_config *c, char *why,
                            int why_len);
/* Tiles tile_m 128 x c->tile_n (128 or 256), c->stages (0: as many as fit), c->sms CTAs (0: every SM); the other
 * fields must be 0 / 1. */
int mok_wgrad_sm90(const struct mok_wgrad_args *w, const struct mok_gemm_sm90_config *c, mok_stream_t stream);
/* The same function on mma.sync (any sm_80+ GPU, and the Blackwell builds until a tcgen05 path exists). */
int mok_gemm_portable(const struct mok_gemm_args *g, mok_stream_t stream);


#ifdef __cplusplus
}
#endif
#endif
