/* mok_kernels: the only header host C includes from kernels/. extern "C" launchers with plain C types and a
 * stream; each returns the launch's cudaError_t (as int, 0 = success) so the caller can report file:line.
 * bf16 tensors travel as uint16_t pointers (their bit patterns); every row length is in elements. */
#ifndef MOK_KERNELS_H
#define MOK_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct CUstream_st *mok_stream_t; /* == cudaStream_t, without pulling CUDA headers into every file */

/* ---- fill (kernels/util/fill.cu) ---------------------------------------------------------------------------
 * Deterministic, counter-based: element i of a tensor identified by (seed, tensor_id) is a pure function of
 * those three, so any rank can regenerate any expert's weights (the reference does) and the same seed gives
 * the same problem. Values uniform in [-scale, scale], rounded to bf16. */
int mok_fill_uniform_bf16(uint16_t *dst, size_t n, uint64_t seed, uint64_t tensor_id, float scale,
                          mok_stream_t stream);
/* Either (normal 0: uniform in [-spread, spread); 1: normal with standard deviation spread, Box-Muller on two
 * 24-bit uniforms of the element's hash), each bf16 rounded to its top mant_bits of 7 mantissa bits (7: as is;
 * 3: the precision of fp8 e4m3 values), to nearest. */
int mok_fill_bf16(uint16_t *dst, size_t n, uint64_t seed, uint64_t tensor_id, int normal, float spread, int mant_bits,
                  mok_stream_t stream);
/* Writes a NaN bit pattern into every element, so any element an implementation fails to write is caught. */
int mok_poison_bf16(uint16_t *dst, size_t n, mok_stream_t stream);
/* fp32 uniform in [-scale, scale), element i a function of (seed, tensor_id, i) only, as mok_fill_bf16 */
int mok_fill_f32(float *dst, size_t n, uint64_t seed, uint64_t tensor_id, float scale, mok_stream_t stream);
/* Elements [first, first + n) of the same tensor into dst[0, n): a tensor filled in parts equals the whole */
int mok_fill_f32_part(float *dst, size_t n, size_t first, uint64_t seed, uint64_t tensor_id, float scale,
                      mok_stream_t stream);
/* out[i] = bf16(in[i]), round to nearest even */
int mok_convert_f32_bf16(const float *in, size_t n, uint16_t *out, mok_stream_t stream);
/* NaN into every element of an fp32 output (the backward's d_router and fp32 weight gradients). */
int mok_poison_f32(float *dst, size_t n, mok_stream_t stream);

/* ---- routing bookkeeping for the NCCL baselines (kernels/util/route.cu) ----------------------------------------
 * Routes are (token, k) pairs, r = t * topk + j. Tokens are split into nchunks consecutive chunks of
 * chunk_tokens (the last may be shorter). The send buffer is chunk-major; inside a chunk rows are sorted by
 * global expert, so the rows for each destination rank are contiguous (experts are assigned to ranks in
 * contiguous blocks). counts must be zeroed before mok_route_count. */
int mok_route_count(const int32_t *topk_ids, int tokens, int topk, int chunk_tokens, int experts,
                    int32_t *counts /* [nchunks][experts] */, mok_stream_t stream);
/* offsets[c][e] = first send row of (chunk c, expert e); cursor [nchunks][experts] scratch (zeroed inside);
 * send_pos[r] = send row of route r. Row order inside one expert is not fixed (atomics): every route's output
 * returns to its own slot, so y does not depend on it. */
int mok_route_positions(const int32_t *topk_ids, int tokens, int topk, int chunk_tokens, int experts,
                        const int32_t *counts, int32_t *offsets, int32_t *cursor, int32_t *send_pos,
                        mok_stream_t stream);

/* ---- row movement (kernels/util/permute.cu) -------------------------------------------------------------------*/
/* dst[send_pos[r]] = x[r / topk] for r in [route_begin, route_end). */
int mok_scatter_tokens(const uint16_t *x, int hidden, int topk, const int32_t *send_pos, int route_begin,
                       int route_end, uint16_t *dst, mok_stream_t stream);
/* dst[i] = src[src_row[i]] for i in [0, rows): a row gather, 16-byte vectors. */
int mok_gather_rows(const uint16_t *src, const int32_t *src_row, int rows, int width, uint16_t *dst,
                    mok_stream_t stream);
/* One fp32 per row (the backward's router weights and d_router partials): gather dst[i] = src[idx[i]], scatter
 * dst[idx[i]] = src[i], i in [0, n). */
int mok_gather_f32(const float *src, const int32_t *idx, int n, float *dst, mok_stream_t stream);
int mok_scatter_f32(const float *src, int n, const int32_t *idx, float *dst, mok_stream_t stream);

/* ---- SwiGLU (kernels/util/swiglu.cu): out[r][i] = silu(in[r][i]) * in[r][I + i], fp32 math, bf16 out ---------*/
/* SwiGLU backward of rows of the saved GEMM1 output gu [rows][2I] (gate | up, bf16) and dh' = dy W2 [rows][I]
 * (bf16, unscaled by the router weight), route weights w [rows]: d_router[r] = <dh'_r, h_r> (fp32, fixed order),
 * dgu[r] = w_r [dh' u silu'(g), dh' silu(g)] (bf16 [rows][2I]), hw[r] = w_r h_r (bf16 [rows][I], dW2's operand).
 * h = bf16(silu(g) u), as the forward stores it. */
int mok_swiglu_bwd_bf16(const uint16_t *gu, const uint16_t *dhp, const float *w, int rows, int intermediate,
                        uint16_t *dgu, uint16_t *hw, float *d_router, mok_stream_t stream);
int mok_swiglu_bf16(const uint16_t *in /* [rows][2I] */, int rows, int intermediate, uint16_t *out,
                    mok_stream_t stream);

/* ---- combine (kernels/util/combine.cu) ---------------------------------------------------------------------
 * y[t] = sum_j w[t][j] * rows[send_pos[t*k+j]] (+ shared[t] when shared != NULL), accumulated in fp32 in
 * the fixed order j = 0..k-1 (then shared), rounded once to bf16. */
int mok_weighted_combine(const uint16_t *rows, const int32_t *send_pos, const float *topk_w, int token_begin,
                         int token_end, int topk, int hidden, const uint16_t *shared, uint16_t *y,
                         mok_stream_t stream);

/* ---- reference (kernels/reference/reference.cu) --------------------------------------------------------------------
 * c[c_row[m]][n] = sum_k a[a_row[m]][k] * b[n][k] in fp32; a and b bf16 row-major with K contiguous; a NULL
 * row map means identity. Independent of cuBLAS and of every implementation: a plain tiled SIMT kernel. */
int mok_ref_gemm_f32(const uint16_t *a, const int32_t *a_row, int m, int k, const uint16_t *b, int n, float *c,
                     const int32_t *c_row, mok_stream_t stream);
/* fp8_block (kernels/reference/reference_fp8.cu): c[m][n] = sum_k A(i, kk) W(j, kk) in fp32 with the operands
 * dequantized in fp32, A(i, kk) = e4m3(a[i][kk]) * a_scale[i][kk / 128] (a e4m3 [m][k], a_scale [m][k / 128]) and
 * W(j, kk) = e4m3(w[j][kk]) * w_scale[j / 128][kk / 128] (w e4m3 [n][k], w_scale [n / 128][k / 128]); k and n
 * multiples of 128. Same SIMT GEMM as mok_ref_gemm_f32, its own e4m3 decoder. */
int mok_ref_gemm_fp8_block(const uint8_t *a, const float *a_scale, int m, int k, const uint8_t *w,
                           const float *w_scale, int n, float *c, mok_stream_t stream);
/* mxfp8 (reference_fp8.cu): the same with A(i, kk) = e4m3(a[i][kk]) * 2^(a_scale[i][kk / 32] - 127) and
 * W(j, kk) = e4m3(w[j][kk]) * 2^(w_scale[j][kk / 32] - 127) (a_scale [m][k / 32], w_scale [n][k / 32]: e8m0 bytes in
 * the quantizer's layout); k a multiple of 32. Its own e4m3 and e8m0 decoders. */
int mok_ref_gemm_mxfp8(const uint8_t *a, const uint8_t *a_scale, int m, int k, const uint8_t *w,
                       const uint8_t *w_scale, int n, float *c, mok_stream_t stream);
/* The FP8 layer reference's row moves (reference_fp8.cu): gather q_out[i] = q[idx[i]] (k e4m3 bytes) and
 * s_out[i] = scale[idx[i]] (k / 32 bytes of scales, either format's: fp8_block k / 128 fp32, mxfp8 k / 32 e8m0),
 * i in [0, n), k a multiple of 128; scatter dst[idx[i]] = src[i], rows of width floats. */
int mok_ref_fp8_gather(const uint8_t *q, const void *scale, int k, const int32_t *idx, int n, uint8_t *q_out,
                       void *s_out, mok_stream_t stream);
int mok_ref_scatter_rows_f32(const float *src, int n, int width, const int32_t *idx, float *dst, mok_stream_t stream);
/* out[i] = in[i] as fp32 (a bf16 reference tensor as the checks read references). */
int mok_ref_widen_bf16(const uint16_t *in, size_t n, float *out, mok_stream_t stream);
/* h[m][i] = bf16(silu(bf16(g[m][i])) * bf16(g[m][I+i])) from fp32 g [m][2I]: the same roundings the layer
 * makes (GEMM1 output and SwiGLU output stored in bf16). */
int mok_ref_swiglu(const float *g, int m, int intermediate, uint16_t *h, mok_stream_t stream);
/* y[t] = sum_j w[t][j] * route_out[t*k+j] (+ shared[t]) in fp32, fixed order, t in [0, tokens). */
int mok_ref_sum_routes(const float *route_out, const float *topk_w, int tokens, int topk, int hidden,
                       const float *shared, float *y, mok_stream_t stream);

/* Comm mode reference: y[t] = (sum_j w[t][j]) * x[t] in fp32 (experts return their input). */
int mok_ref_comm_f32(const uint16_t *x, const float *topk_w, int tokens, int topk, int hidden, float *y,
                     mok_stream_t stream);

/* ---- backward reference (kernels/reference/backward.cu), fp32, per expert -------------------------------
 * The expert's n routes: tok[r] their tokens (rows of x and dy, bf16 [T][hidden]), route[r] their route ids
 * (t * topk + j: rows of dx_route, entries of route_w and d_router). w13 [2I][hidden], w2 [hidden][I] the expert's
 * bf16 weights. Writes dx_route rows [routes][hidden] (w [dg, du] W13) and d_router[route] (<dy W2, h>), and adds
 * (w dy)^T h into dw2 [hidden][I] and [dg, du]^T x into dw13 [2I][hidden] (fp32, accumulated). round: 1 takes the
 * forward reference's bf16 roundings of gate, up and h, 0 stays fp32. scratch: n x 6 x I floats. dx_route NULL
 * skips the dx GEMM, dw13 NULL the two weight-gradient GEMMs (a layer's reference needs only some of them for
 * a given expert and source rank). Then
 * mok_ref_sum_dx: dx[t] = sum_j dx_route[t * topk + j] (+ shared[t]), in slot order. */
int mok_ref_bwd_expert_f32(const uint16_t *x, const uint16_t *dy, const float *route_w, const int32_t *tok,
                           const int32_t *route, int n, int hidden, int inter, const uint16_t *w13, const uint16_t *w2,
                           int round, float *scratch, float *dx_route, float *dw13, float *dw2, float *d_router,
                           mok_stream_t stream);
int mok_ref_sum_dx(const float *dx_route, int tokens, int topk, int hidden, const float *shared, float *dx,
                   mok_stream_t stream);

/* ---- check (kernels/reference/check.cu) ------------------------------------------------------------------------- */
struct mok_check_sums {
    double ref_sq;    /* sum ref^2 */
    double diff_sq;   /* sum (y - ref)^2 over finite y */
    float max_rel;    /* max |y - ref| / max|ref| */
    float ref_amax;   /* max |ref| */
    unsigned long long bad;  /* elements over rtol, NaN/inf included */
    unsigned long long nan;  /* non-finite y */
};
/* Two passes (rms, then errors); result copied into *host_out (synchronizes the stream). */
int mok_check_bf16_vs_f32(const uint16_t *y, const float *ref, size_t n, float rtol, struct mok_check_sums *dev_scratch,
                          struct mok_check_sums *host_out, mok_stream_t stream);
/* The same metric for an fp32 output. */
int mok_check_f32_vs_f32(const float *y, const float *ref, size_t n, float rtol, struct mok_check_sums *dev_scratch,
                         struct mok_check_sums *host_out, mok_stream_t stream);
/* The two passes apart, for a reference checked in parts (a reference held in host memory, copied back part by
 * part): the first adds a part's ref_sq and ref_amax into *dev_sums; the second adds a part's errors, relative to
 * the ref_amax already in *dev_sums (every part's, the whole reference's). Neither clears nor waits. */
int mok_check_ref_stats(const float *ref, size_t n, struct mok_check_sums *dev_sums, mok_stream_t stream);
int mok_check_errors_bf16(const uint16_t *y, const float *ref, size_t n, float rtol, struct mok_check_sums *dev_sums,
                          mok_stream_t stream);
int mok_check_errors_f32(const float *y, const float *ref, size_t n, float rtol, struct mok_check_sums *dev_sums,
                         mok_stream_t stream);

/* ---- symmetric memory (kernels/comm/symmem.cu) -------------------------------------------------------------
 * NCCL's device API is C++; these wrap it for host C. nccl_comm is an ncclComm_t, devcomm an ncclDevComm_t*
 * allocated here, window an ncclWindow_t. Return ncclResult_t / cudaError_t values (0 = success). */
int mok_nccl_lsa_size(void *nccl_comm);

/* ---- device-initiated dispatch and combine over NCCL symmetric memory (kernels/comm/lsa_*.cu) ------------------
 * Every rank publishes its routing table in its symmetric window; every rank builds the same global schedule on
 * its GPU (its local experts' rows in (source rank, token, k) order, each expert padded to tile_rows); dispatch
 * pulls each token row once per destination rank through LSA pointers and copies it locally to its other expert
 * slots, publishing per-chunk ready counters; combine pushes results to the token owner's window (one row per
 * route, or one fp32-summed bf16 partial per (token, rank)); the owner sums in a fixed order. Cross-rank
 * ordering uses epoch flags with system-scope release/acquire; no host round trip. See src/impl/lsa.c. */
#define MOK_LSA_MAX_RANKS 32
/* small_paths: OFF always the general kernels; V1 the first one-launch variants (table copy + publish, one-block
 * schedule placed by one warp, combine + sum on the `sms` blocks); FUSED: push dispatch in one launch (table,
 * schedule, push, landed), the one-block schedule placed by every warp, combine + sum on a block per token. */
enum { MOK_LSA_SMALL_OFF = 0, MOK_LSA_SMALL_V1 = 1, MOK_LSA_SMALL_FUSED = 2 };

struct mok_lsa_args {
    void *window;          /* ncclWindow_t of this rank's symmetric buffer (same layout on every rank) */
    size_t off_flags;      /* uint64 [3][MOK_LSA_MAX_RANKS]: published, combine-done, rows-landed epochs, per source */
    size_t off_table;      /* int32 T, then int32 ids [t_max*k], then float w [t_max*k] */
    size_t off_x;          /* bf16 [sets][t_max][H]: token rows peers pull */
    size_t x_set_bytes;
    size_t off_comb;       /* bf16 rows pushed back: [t_max*k][H] per route or [t_max][P][H] per rank */
    int rank, nranks, experts, local_experts, topk, t_max, hidden;
    int tile_rows, chunk_rows, capacity, sched_blocks;
    int set;               /* which x copy this forward reads */
    int combine_per_rank;  /* 0: one row per (token, k); 1: one partial per (token, rank) */
    int bulk_copies;       /* rows move through the bulk copy engine (cp.async.bulk) instead of warp loads/stores */
    long long timeout_cycles; /* spin-wait budget in clock64 cycles; 0: MOK_SPIN_TIMEOUT_CYCLES (about 10 s) */
    /* landing layout: a token's row lands once per rank in land[p][t] (own tokens stay in the window) and every
     * slot of that token reads it there, instead of a copy per slot in xin: local traffic drops from one row
     * per route to one per token. Warp copies only. */
    int landing;
    int push;              /* landing only: owners store their rows into the destinations' windows (NVLink stores
                            * need few SMs; loads need many bytes in flight) instead of destinations pulling */
    size_t off_land;       /* window: bf16 [P][t_max][H] landed rows, by source rank and token */
    int small_paths;       /* MOK_LSA_SMALL_*: which variants small problems take (to measure them side by side) */
    /* local device memory */
    uint64_t *epoch;       /* [0] forwards started, [1] combine blocks done, [2] push blocks done (reset by the last) */
    int32_t *all_tokens;   /* [P] */
    int32_t *all_ids;      /* [P][t_max*k] */
    float *all_w;          /* [P][t_max*k] */
    int32_t *rows;         /* [EL] */
    int32_t *offset;       /* [EL + 1] */
    int32_t *entry;        /* [capacity] packed (p << 25 | t << 5 | j), -1 padding */
    int32_t *route_slot;   /* [P][t_max*k] slot of each route into this rank, -1 if none */
    int32_t *block_off;    /* [P][sched_blocks][EL] schedule scratch */
    int32_t *chunk_target; /* [ceil(capacity / chunk_rows)] rows each chunk must receive */
    int32_t *ready;        /* same size: rows received so far (release after each row) */
    int32_t *status;       /* [4]: overflow flag, global expert, rows needed, capacity */
    uint16_t *xin;         /* [capacity][H]: dispatched rows, expert-major */
    const uint16_t *expert_out; /* [capacity][H]: rows combine sends back (xin when there is no compute) */
    const int32_t *my_ids; /* this rank's routing [T][k] and weights, T = my_tokens */
    const float *my_w;
    int my_tokens;
    uint16_t *y;           /* [my_tokens][H] */
    /* reduce=overlap (per rank, general path): the owner sums each chunk of reduce_chunk of its tokens as soon as
     * every peer flagged that chunk, inside the combine launch, instead of after every done flag */
    int reduce_overlap;
    int reduce_chunk;      /* owner tokens per chunk flag, >= MOK_LSA_REDUCE_CHUNK_MIN (0: mok_lsa_layout sets the
                              default) */
    size_t off_cflags;     /* window: uint64 [P][ceil(t_max / reduce_chunk)] epoch per (source, chunk) */
    const uint16_t *shared_y; /* [my_tokens][H] or NULL: the shared experts' output, added last by the owner's sum
                                 (the general per-route and per-rank sums only: the megakernel's) */
    size_t off_dr;         /* window: float [t_max*k]: each route's d_router, written by its expert's rank (the
                              fused backward) */
    float *d_router;       /* [my_tokens][k]: mok_lsa_grad_sum's copy of them */
};
/* reduce=overlap's chunk of owner tokens per flag: the default, and the smallest the window's flags are sized for.
 * Finer chunks let the owner's sum follow the combine more closely (less of it left after the last flag) but cost
 * a block barrier and a flag per chunk: measured best at 32 for 4096 DeepSeek-V3 tokens, 64 for 8192 (2 x H200,
 * results/h200x2/2026-11-30-lsa-comm-v4), hence a tuning parameter. */
#define MOK_LSA_REDUCE_CHUNK 64
#define MOK_LSA_REDUCE_CHUNK_MIN 16

/* Kernel 1: next epoch; my table into my window; flag every peer. */
int mok_lsa_publish(const struct mok_lsa_args *a, mok_stream_t stream);
/* Kernels 2-5: wait for every peer's table and pull it; build the schedule (deterministic); chunk targets. */
int mok_lsa_schedule(const struct mok_lsa_args *a, mok_stream_t stream);
/* Pull rows, blocks x 1024 threads (the SMs dispatch may use). With push, mok_lsa_push runs right after publish
 * (it needs no schedule) and this only waits for every source's rows and marks all chunks ready. */
int mok_lsa_dispatch(const struct mok_lsa_args *a, int blocks, mok_stream_t stream);
int mok_lsa_push(const struct mok_lsa_args *a, int blocks, mok_stream_t stream);
/* small_paths FUSED, push: the whole dispatch phase (publish, schedule, push, landed) in one cooperative launch of
 * blocks + 1 blocks. _fits: whether it applies (push, landing, <= 8192 routes of all ranks, the grid resident). */
int mok_lsa_dispatch_fused_fits(const struct mok_lsa_args *a, int blocks);
int mok_lsa_dispatch_fused(const struct mok_lsa_args *a, int blocks, mok_stream_t stream);
/* Push rows back and signal done (blocks x 1024 threads), then the owner's fixed-order weighted sum into y. */
int mok_lsa_combine(const struct mok_lsa_args *a, int blocks, mok_stream_t stream);
/* Only the owner's fixed-order sum (waits for every rank's done flag): the megakernel's stream-ordered epilogue. */
int mok_lsa_reduce(const struct mok_lsa_args *a, mok_stream_t stream);
/* The per-route combine's sends and done flag without the owner's sum (mok_lsa_combine is this, then
 * mok_lsa_reduce): the backward's dx rows, summed by mok_lsa_grad_sum. */
int mok_lsa_combine_routes(const struct mok_lsa_args *a, int blocks, mok_stream_t stream);
/* w[slot] = the route weight in each slot (all_w through the schedule's entries; 0 for padding), [capacity]. */
int mok_lsa_slot_weights(const struct mok_lsa_args *a, float *w, mok_stream_t stream);
/* Each slot's v[slot] into its route owner's window at off_dr + t * k + j (the backward's d_router), before the
 * combine whose done flag orders it for the owner. */
int mok_lsa_send_route_values(const struct mok_lsa_args *a, const float *v, mok_stream_t stream);
/* Columns [col0, col0 + cols) of each slot's row of rows [capacity][row_elems] (bf16) into its route owner's window
 * at off_comb, packed [t][k][cols] (cols <= hidden: the combine area holds t_max x topk rows of hidden). No flag:
 * the caller orders it with the owners (outside any timed run: the FP8 layers' export of h for the check). */
int mok_lsa_send_route_rows(const struct mok_lsa_args *a, const uint16_t *rows, int row_elems, int col0, int cols,
                            mok_stream_t stream);
/* The fused backward's owner sum (per route): waits for every rank's done flag, then dx (a.y) = the fixed-order
 * sum over k of the combine rows (unweighted: the router weight is in them) plus a.shared_y, and a.d_router = the
 * window's off_dr values. */
int mok_lsa_grad_sum(const struct mok_lsa_args *a, mok_stream_t stream);
/* small_paths FUSED: per rank and t_max <= 512, combine and sum in one cooperative launch whose first `blocks`
 * blocks combine and whose every block (up to one per token, as many as are resident) sums; else mok_lsa_combine. */
int mok_lsa_combine_small(const struct mok_lsa_args *a, int blocks, mok_stream_t stream);
/* reduce=overlap: blocks beside `blocks` combine blocks that sum as chunks arrive (one block per SM in all);
 * 0 if none fit (then the launch would fail: supports() rejects the config). */
int mok_lsa_overlap_reduce_blocks(int blocks);
/* copy=bulk with layout=landing (the push and the per-rank combine through per-warp bulk rings): whether one warp's
 * ring of rows of this hidden size fits in a block's shared memory. */
int mok_lsa_ring_fits(int hidden);

/* ---- FP8 quantization (kernels/util/quant.cu), bit for bit src/fp8.h's host reference ---------------------
 * Row-major bf16 [rows][k] into e4m3 q (same shape) and scales: mxfp8 one e8m0 byte per 32 K elements
 * (scale[rows][k / 32]), fp8_block (activations) one fp32 per 128 (scale[rows][k / 128]). A non-finite input sets
 * *status (device int32) to 1; the caller zeroes it first and treats 1 as refused input. */
int mok_quant_mxfp8_bf16(const uint16_t *x, int rows, int k, uint8_t *q, uint8_t *scale, int32_t *status,
                         mok_stream_t stream);
int mok_quant_fp8_block_bf16(const uint16_t *x, int rows, int k, uint8_t *q, float *scale, int32_t *status,
                             mok_stream_t stream);
/* The same over rows [0, min(*rows, max_rows)), rows a device int32: how many of lsa-layer's expert slots its
 * device-built schedule filled, which the host never learns (the grid is sized for max_rows; the rest untouched). */
int mok_quant_mxfp8_bf16_upto(const uint16_t *x, int max_rows, const int32_t *rows, int k, uint8_t *q, uint8_t *scale,
                              int32_t *status, mok_stream_t stream);
int mok_quant_fp8_block_bf16_upto(const uint16_t *x, int max_rows, const int32_t *rows, int k, uint8_t *q,
                                  float *scale, int32_t *status, mok_stream_t stream);
/* fp8_block weights: mats stacked bf16 matrices [mats][rows][k] (rows, k multiples of 128; w 16-byte and q 8-byte
 * aligned) into e4m3 q [mats][rows][k] and one fp32 scale per 128 x 128 block, scale[mats][rows / 128][k / 128]
 * (src/fp8.h's mok_quant_fp8_block_weights per matrix); status as above. */
int mok_quant_fp8_block_weights_bf16(const uint16_t *w, long long mats, int rows, int k, uint8_t *q, float *scale,
                                     int32_t *status, mok_stream_t stream);
/* mxfp8 back to bf16, exactly (e4m3 x 2^(e - 127) has 4 significant bits; bf16 holds it wherever the value is within
 * bf16's normal range): q [rows][k] e4m3 and scale [rows][k / 32] into out [rows][k]; k a multiple of 32, q 8-byte
 * and out 16-byte aligned. What an MX-emulating baseline runs before bf16 GEMMs (cublas-gemm's mxfp8). */
int mok_dequant_mxfp8_bf16(const uint8_t *q, const uint8_t *scale, long long rows, int k, uint16_t *out,
                           mok_stream_t stream);
/* The same values with K permuted within each 64-K block as mok's mxfp8 mx_scheme 3 reads its B (mok_mx_k64_pos in
 * kernels/gemm/mx_expand.h): q [rows][k] e4m3, scale [rows][k / 32], out [rows][k] bf16; k a multiple of 64, q and
 * out 4-byte aligned. Bits as mok's expansion gives them (mok_mx_expand4). */
int mok_expand_mxfp8_bf16_k64perm(const uint8_t *q, const uint8_t *scale, long long rows, int k, uint16_t *out,
                                  mok_stream_t stream);

/* ---- FP8 rows on the wire (kernels/util/fp8_rows.cu): a wire row is a token row's k e4m3 bytes, then its k / 32
 * bytes of scales (fp8_block: k / 128 fp32; mxfp8: k / 32 e8m0), padded to wire_bytes (a multiple of 16, >= k + k /
 * 32); k a multiple of 128, the values and the wire buffer 16-byte aligned, the scales 4-byte aligned. scatter:
 * route r in [route_begin, route_end) (token r / topk of q [tokens][k] and scale [tokens][k / 32 bytes]) to wire row
 * send_pos[r] of dst (send_pos NULL: wire row r); gather: wire row src_row[i] of src to row i of q [rows][k] and
 * scale [rows][k / 32 bytes]; unpack: wire row i to row i for i < min(*rows, max_rows), rows a device int32 (how many
 * of lsa-layer's expert slots its device-built schedule filled; the grid is sized for max_rows). */
int mok_fp8_rows_scatter(const uint8_t *q, const void *scale, int k, int topk, const int32_t *send_pos,
                         int route_begin, int route_end, uint8_t *dst, int wire_bytes, mok_stream_t stream);
int mok_fp8_rows_gather(const uint8_t *src, int wire_bytes, const int32_t *src_row, int rows, int k, uint8_t *q,
                        void *scale, mok_stream_t stream);
int mok_fp8_rows_unpack(const uint8_t *src, int wire_bytes, int max_rows, const int32_t *rows, int k, uint8_t *q,
                        void *scale, mok_stream_t stream);

/* ---- fp8_block scale layouts for cuBLASLt (kernels/util/scale_layout.cu; src/impl/gemm_cublaslt_fp8.c calls them)
 * From the layouts above (rows [rows][K / 128], weights [N / 128][K / 128]) into what cuBLASLt's block-scaled FP8
 * matmul reads (cuBLAS 13 docs, "Scaling factors layouts":
 * https://docs.nvidia.com/cuda/cublas/#scaling-factors-layouts).
 * cuBLASLt takes no leading dimension for a scale tensor, so the padding below is the stride it assumes.
 * VEC128_32F (1 x 128 rows): outer-dimension-major, dst[kb][ld] with dst[kb * ld + r] = src[r * kblocks + kb] for
 * r < rows, 0 for rows <= r < ld (ld rows of which rows are real); src any 4-byte alignment, dst 16-byte aligned. */
int mok_scale_vec128_lt(const float *src, int rows, int kblocks, int ld, float *dst, mok_stream_t stream);
/* BLK128x128_32F (128 x 128 weights): per 128 output rows the K blocks padded to a multiple of 4, dst[nb][ld4] with
 * ld4 = roundup(kblocks, 4): dst[nb * ld4 + kb] = src[nb * kblocks + kb], pads 0. nblocks counts 128-row blocks over
 * all stacked matrices (E experts of N rows: E * N / 128). dst 16-byte aligned. */
int mok_scale_blk128_lt(const float *src, long long nblocks, int kblocks, float *dst, mok_stream_t stream);
/* mxfp8 weight scales [mats * rows][k / 32] (mok_quant_mxfp8_bf16's layout) into the tile layout mok's GEMM kernel
 * reads (mok_gemm.h's b_mx_scale): dst[mats * rows / 64][k / 128][256], src/fp8.h's mok_mxfp8_scale_tiles byte for
 * byte (pair_halves for W13: its gate and up blocks interleaved). rows a multiple of 64 (128 with pair_halves), k of
 * 128, dst 16-byte aligned (TMA). */
int mok_scale_mx_tiles(const uint8_t *src, long long mats, int rows, int k, int pair_halves, uint8_t *dst,
                       mok_stream_t stream);

/* ---- probe (kernels/util/probe.cu): ceilings `mok-bench --probe` measures (src/probe.c) ---------------------- */
/* dst[i] = src[i] over bytes (a multiple of 16, both pointers 16-byte aligned) with uint4 loads and stores, 4
 * loads in flight per thread, grid-stride; dst or src may be a peer's memory (an LSA pointer), so one kernel
 * measures push (stores over NVLink) and pull (loads over NVLink). threads <= 1024. */
int mok_probe_copy(void *dst, const void *src, size_t bytes, int blocks, int threads, mok_stream_t stream);
/* Reads bytes (a multiple of 16, src 16-byte aligned) with uint4 loads, 4 in flight per thread, and folds them into
 * *sink (device): the DRAM read bandwidth a GEMM's operand stream can get. */
int mok_probe_read(const void *src, size_t bytes, int blocks, int threads, uint32_t *sink, mok_stream_t stream);
/* Reads bytes (a multiple of 16, src 16-byte aligned) with the bulk copy engine into shared memory: per block one
 * thread keeps `stages` chunks of chunk_bytes (a multiple of 16) in flight, chunks dealt round robin over the
 * blocks (how a GEMM's TMA operand stream reads). A lost completion (a wait past ~4 s) sets *timed_out (device,
 * zeroed by the caller) to 1 + the block and ends that block. SM90 and later; elsewhere the kernel does nothing. */
int mok_probe_read_bulk(const void *src, size_t bytes, int blocks, int chunk_bytes, int stages, int *timed_out,
                        mok_stream_t stream);
/* *out_dev_ptr_slot (a device void*) = ncclGetLsaPointer(window, 0, lsa_peer): the base of LSA peer lsa_peer's
 * part of the symmetric window (an ncclWindow_t), as an address this rank's kernels can use; the host copies
 * it back. */
int mok_probe_lsa_base(void *window, int lsa_peer, void **out_dev_ptr_slot, mok_stream_t stream);
/* This rank's index in the NCCL LSA team (ncclTeamLsa(comm).rank) of an ncclComm_t, to pick a peer in it. */
int mok_probe_lsa_rank(void *nccl_comm);

#ifdef __cplusplus
}
#endif
#endif
