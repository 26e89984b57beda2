/* gemm_cublas: the expert MLP (GEMM1 gate+up, SwiGLU, GEMM2 down) over expert-major rows with cuBLAS, as the
 * baselines run it: either one grouped call (cublasGemmGroupedBatchedEx) per GEMM or one cublasGemmEx per
 * expert. Per-expert GEMMs of a few hundred rows fill only a fraction of the SMs (a 256-row GEMM is 2 row tiles),
 * so they can be spread over several streams, each with its own cuBLAS handle and workspace, to run side by side.
 * Row-major [rows][K] activations times row-major [N][K] weights is cuBLAS's column-major "TN" case:
 * C^T[N][rows] = W[N][K] * X^T, the layout cuBLAS runs fastest. */
#ifndef MOK_GEMM_CUBLAS_H
#define MOK_GEMM_CUBLAS_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>

enum mok_gemm_mode { MOK_GEMM_GROUPED = 0, MOK_GEMM_PER_EXPERT = 1 };

/* One expert's rows in an expert-major buffer. */
struct mok_gemm_group {
    int expert; /* local expert index */
    int row;    /* first row */
    int rows;
};

#define MOK_MAX_GEMM_STREAMS 16

struct mok_expert_gemms {
    cublasHandle_t handle; /* grouped mode, and per-expert mode on one stream */
    enum mok_gemm_mode mode;
    int parts; /* 1: GEMM1 + SwiGLU only, 2: GEMM2 only, 3: both (the default; gemm mode times them apart) */
    int nstreams; /* per-expert mode: experts round-robin over this many streams (1 = the caller's stream) */
    cudaStream_t streams[MOK_MAX_GEMM_STREAMS];
    cublasHandle_t handles[MOK_MAX_GEMM_STREAMS];
    cudaEvent_t fork, joins[MOK_MAX_GEMM_STREAMS];
    int max_groups, batches; /* grouped calls keep one pointer-array set per batch (chunk) in flight */
    /* per batch: host (pinned) and device arrays of A, B, C pointers for GEMM1 and GEMM2 */
    const void **h_ptrs, **d_ptrs;
    int *h_m1, *h_n1, *h_k1, *h_lda1, *h_ldb1, *h_ldc1, *h_m2, *h_n2, *h_k2, *h_lda2, *h_ldb2, *h_ldc2, *h_size;
    cublasOperation_t *h_ta, *h_tb;
    float *h_alpha, *h_beta;
};

/* sm_target > 0 asks cuBLAS to size its grids for that many SMs (cublasSetSmCountTarget), leaving the rest to
 * the communication kernels that run beside the GEMMs. */
int mok_expert_gemms_init(struct mok_expert_gemms *g, enum mok_gemm_mode mode, int nstreams, int sm_target,
                          int max_groups, int batches);
void mok_expert_gemms_destroy(struct mok_expert_gemms *g);
/* Per-expert mode over side streams: they start after what `stream` has queued (fork), and `stream` goes on once
 * they are all done (join). */
cudaError_t mok_expert_gemms_fork(struct mok_expert_gemms *g, cudaStream_t stream);
cudaError_t mok_expert_gemms_join(struct mok_expert_gemms *g, cudaStream_t stream);

/* in [rows][H] -> g1 [rows][2I] -> h [rows][I] -> out [rows][H] for each group, on stream, using pointer-array
 * set `batch` (grouped mode: the caller must not reuse a batch while its previous use may still run).
 * w13 [E_local][2I][H], w2 [E_local][H][I]. Returns 0 or a cublasStatus_t / cudaError_t. */
int mok_expert_gemms_run(struct mok_expert_gemms *g, cudaStream_t stream, int batch,
                         const struct mok_gemm_group *groups, int ngroups, const uint16_t *w13, const uint16_t *w2,
                         int hidden, int inter, const uint16_t *in, uint16_t *g1, uint16_t *h, uint16_t *out);

/* The expert MLP's backward over the same expert-major rows (per-expert mode; the grouped call is not there yet):
 * per expert dh' = dy W2 (bf16), the SwiGLU backward (dgu, w h, d_router: mok_swiglu_bwd_bf16), dx = dgu W13
 * (bf16), and the weight gradients dW2 = dy^T (w h), dW13 = dgu^T x: accumulated in fp32 (beta = 1), or with
 * dw_bf16 written in bf16 (beta = 0). */
struct mok_expert_bwd {
    const uint16_t *x, *dy, *gu; /* rows: [rows][H], [rows][H], [rows][2I] (GEMM1's saved output) */
    const float *w;              /* [rows] router weights */
    const uint16_t *w13, *w2;    /* [E_local][2I][H], [E_local][H][I] */
    uint16_t *dhp, *dgu, *hw;    /* scratch [rows][I], [rows][2I], [rows][I] */
    uint16_t *dx;                /* [rows][H] */
    float *d_router;             /* [rows] */
    void *dw13, *dw2;            /* [E_local][2I][H], [E_local][H][I]: fp32, or bf16 with dw_bf16 */
    int dw_bf16;
    int experts; /* E_local: under dw_bf16 an expert no group names gets zero gradients (written, not skipped) */
    /* What to run (0: both): the layers' chunked backward runs each stage's dgrad first and its wgrad later,
     * beside the dx combine (Megatron's delayed wgrad). */
    int parts;
    /* NULL: one call makes the whole gradient (under dw_bf16 idle experts are zeroed here). Else per local expert
     * 1 = add into dw even under dw_bf16 (a later chunk of the same step), and the caller zeroes idle experts. */
    const uint8_t *dw_accumulate;
};
enum { MOK_BWD_DGRAD = 1, MOK_BWD_WGRAD = 2 };
int mok_expert_gemms_backward(struct mok_expert_gemms *g, cudaStream_t stream, const struct mok_gemm_group *groups,
                              int ngroups, int hidden, int inter, const struct mok_expert_bwd *b);

/* A dense MLP of intermediate `inter` (the shared experts): same math, one GEMM each. */
int mok_dense_mlp(cublasHandle_t handle, cudaStream_t stream, int rows, int hidden, int inter, const uint16_t *w13,
                  const uint16_t *w2, const uint16_t *in, uint16_t *g1, uint16_t *h, uint16_t *out);

#endif
