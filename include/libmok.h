/* libmok: mok's fused MoE forward layer as a library, outside the benchmark.
 *
 * One rank per GPU, all ranks in one NVLink (NCCL LSA) domain. Per layer shape, once: a workspace, created and
 * destroyed collectively over an NCCL communicator (symmetric window for token rows, routing tables and flags;
 * schedule arrays; expert-slot, intermediate and output buffers). Per forward, every rank in the same order:
 *   1. write its tokens' rows into mok_workspace_input(ws, slot) (bf16 [tokens][hidden], in the window);
 *   2. mok_route: publishes its routing and builds the shared schedule on the GPU (no host synchronization);
 *   3. mok_forward: the megakernel (dispatch, GEMM1 + SwiGLU, GEMM2, combine sends in one persistent kernel) and
 *      the fixed-order weighted top-k sum into y (bitwise reproducible).
 * Everything is enqueued on the caller's stream; nothing waits on the host. Hopper (sm_90a) only for now.
 * Functions return MOK_OK or an error code, with a message in err when err_len > 0. */
#ifndef LIBMOK_H
#define LIBMOK_H

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum mok_status {
    MOK_OK = 0,
    MOK_ERR_ARGUMENT = 1,    /* a field of the description or a call argument is out of range */
    MOK_ERR_UNSUPPORTED = 2, /* this GPU, build or communicator cannot run it (not sm_90a, not one LSA domain) */
    MOK_ERR_CUDA = 3,
    MOK_ERR_NCCL = 4,
    MOK_ERR_MEMORY = 5,
    MOK_ERR_OVERFLOW = 6     /* mok_workspace_check: an expert received more rows than the capacity */
};

struct mok_layer_desc {
    int hidden, intermediate; /* hidden a multiple of 256, intermediate of 128 */
    int experts, topk;        /* routed experts over all ranks (a multiple of the rank count), top-k <= 32 */
    int max_tokens;           /* tokens per rank per forward, at most; the same on every rank */
    double capacity_factor;   /* rows a rank can receive = factor x max_tokens x topk (+ padding); 2 is ample for
                                 balanced routing, skewed routing needs more (mok_workspace_check reports overflow) */
    int input_slots;          /* token buffers in the window (>= 1): e.g. 2 to fill one while the other is in use */
    /* tuning; 0 picks the default (the best measured on 2 x H200: 16, per route, 512, as many as fit, pull) */
    int comm_sms;             /* SMs that dispatch and combine; the others run the expert GEMMs */
    int combine_per_rank;     /* 0: one row per (token, k) back as soon as it is computed; 1: one partial per rank */
    int chunk_rows;           /* dispatched rows per ready counter */
    int stages;               /* GEMM pipeline depth */
    int dispatch_push;        /* 0: destinations pull rows; 1: owners push them */
};

typedef struct mok_workspace mok_workspace;

/* Collective over comm. stream: where the setup work is enqueued (it is synchronized before returning). */
int mok_workspace_create(ncclComm_t comm, const struct mok_layer_desc *desc, cudaStream_t stream,
                         mok_workspace **out, char *err, int err_len);
/* Collective; waits for the device to finish. NULL is a no-op. */
void mok_workspace_destroy(mok_workspace *ws);
/* bf16 [max_tokens][hidden] of input slot `slot` (device memory in the symmetric window); NULL if out of range. */
uint16_t *mok_workspace_input(mok_workspace *ws, int slot);
/* This forward reads input slot `slot`, `tokens` rows; ids [tokens][topk] (global expert ids, distinct per token)
 * and weights [tokens][topk] are device pointers that must stay valid until mok_forward's work is done. */
int mok_route(mok_workspace *ws, int slot, int tokens, const int32_t *ids, const float *weights, cudaStream_t stream,
              char *err, int err_len);
/* w13: [experts / ranks][2 * intermediate][hidden] (gate rows, then up rows), w2: [experts / ranks][hidden]
 * [intermediate], this rank's experts, bf16; y: bf16 [tokens][hidden]. */
int mok_forward(mok_workspace *ws, const uint16_t *w13, const uint16_t *w2, uint16_t *y, cudaStream_t stream,
                char *err, int err_len);
/* Synchronizes stream and reports an overflow of the last schedule (MOK_ERR_OVERFLOW, naming the expert), a
 * kernel failure (MOK_ERR_CUDA) or MOK_OK. */
int mok_workspace_check(mok_workspace *ws, cudaStream_t stream, char *err, int err_len);
const char *mok_status_string(int status);

#ifdef __cplusplus
}
#endif
#endif
