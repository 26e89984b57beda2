/* comm/lsa_rank_sum: the owner's fixed-order per-rank sum, device pieces: each token's metadata read once per
 * block, its own partial, the peers' partials summed in rank order into y (reduce_tokens). Used by the per-rank
 * combines of kernels/comm/lsa_transfer.cu (lsa_reduce_kernel, the fused small paths) and by reduce=overlap
 * (kernels/comm/lsa_combine_overlap.cu), which sums chunk by chunk in the same order, so y is bitwise the same on
 * every path. */
#pragma once
#include "comm/lsa_device.cuh"

/* What the owner's per-rank sum needs of token t besides the rows, read once per token by one warp into shared
 * memory: the ranks it touches and its routes into my experts (own partial: weights and slots, ascending j,
 * compacted). Read per thread and vector instead (a chain of dependent loads per route, with a branch on each slot)
 * this was what bounded the sum: 157 us for 8192 DeepSeek-V3 tokens, ~2.2 TB/s. */
struct token_meta {
    unsigned touched;
    int n_own;
    float w_own[32];
    int slot_own[32];
};

/* Warp 0 of the block fills *m; the caller synchronizes the block before reading it (and before refilling). */
__device__ __forceinline__ void load_token_meta(const mok_lsa_args &a, int t, token_meta *m)
{
    if (threadIdx.x >= 32)
        return;
    int lane = threadIdx.x;
    bool route = lane < a.topk;
    int id = route ? a.my_ids[t * a.topk + lane] : 0;
    unsigned touched = __reduce_or_sync(0xffffffffu, route ? 1u << (id / a.local_experts) : 0u);
    size_t e = ((size_t)a.rank * a.t_max + t) * a.topk + lane;
    int slot = route ? a.route_slot[e] : -1;
    unsigned own = __ballot_sync(0xffffffffu, slot >= 0);
    if (slot >= 0) {
        int r = __popc(own & ((1u << lane) - 1));
        m->w_own[r] = a.all_w[e];
        m->slot_own[r] = slot;
    }
    if (lane == 0) {
        m->touched = touched;
        m->n_own = __popc(own);
    }
}

/* The landing layout's own partial from the token's own row vector (every own route reads that one row). */
__device__ __forceinline__ void weigh_own(uint4 raw, const token_meta &m, float part[8])
{
    vec8 in;
    in.v = raw;
    float x[8], acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 8; i++)
        x[i] = mok_bf16_to_f32(in.h[i]);
    for (int r = 0; r < m.n_own; r++)
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[i] += m.w_own[r] * x[i];
#pragma unroll
    for (int i = 0; i < 8; i++)
        part[i] = mok_bf16_to_f32(mok_f32_to_bf16(acc[i]));
}

/* Per rank, my own tokens: the partial sum of their routes into my experts, computed where the owner sums
 * rather than sent to myself by the combine (which would cost the few comm SMs a local read and write of every
 * token). The same operations in the same order as the combine's (ascending j, fp32 fma from 0, rounded to bf16),
 * so y is bitwise what it was when the combine wrote this partial. Landing: every route reads the one landed row,
 * loaded once. */
__device__ __forceinline__ void own_partial(const mok_lsa_args &a, const token_meta &m, int t, int v, float part[8])
{
    if (a.landing) {
        weigh_own(m.n_own > 0 ? landed_row(a, a.rank, t)[v] : make_uint4(0, 0, 0, 0), m, part);
        return;
    }
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int vecs = a.hidden / 8;
    for (int r = 0; r < m.n_own; r++) {
        vec8 in;
        in.v = ((const uint4 *)a.expert_out)[(size_t)m.slot_own[r] * vecs + v];
#pragma unroll
        for (int i = 0; i < 8; i++)
            acc[i] += m.w_own[r] * mok_bf16_to_f32(in.h[i]);
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
        part[i] = mok_bf16_to_f32(mok_f32_to_bf16(acc[i]));
}

/* The owner's fixed-order per-rank sum of token t's vector v into acc: over the ranks the token touches, in
 * ascending order, its own partial (bf16-rounded, in fp32) at its own rank and the peer's pushed partial elsewhere.
 * Every per-rank sum goes through here, so they are bitwise the same. */
__device__ __forceinline__ void add_rank_partials(const mok_lsa_args &a, const uint4 *comb, int t, int v, int vecs,
                                                  unsigned touched, const float (&own)[8], float (&acc)[8])
{
    for (int q = 0; q < a.nranks; q++)
        if (!(touched & (1u << q))) {
            continue;
        } else if (q == a.rank) {
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[i] += own[i];
        } else {
            vec8 in;
            in.v = comb[((size_t)t * a.nranks + q) * vecs + v];
#pragma unroll
            for (int i = 0; i < 8; i++)
                acc[i] += mok_bf16_to_f32(in.h[i]);
        }
}


/* y[t], vector v, of a per-rank sum whose own partial is already at hand. */
__device__ __forceinline__ void store_rank_sum(const mok_lsa_args &a, const uint4 *comb, int t, int v, int vecs,
                                               unsigned touched, const float (&own)[8])
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    add_rank_partials(a, comb, t, v, vecs, touched, own, acc);
    store_y(a, t, v, vecs, acc);
}

/* store_rank_sum for the U vectors per thread of token t whose own partials a block holds in registers (vector
 * threadIdx.x + u * blockDim.x in own[u]). */
template <int U>
__device__ __forceinline__ void store_rank_sums(const mok_lsa_args &a, const uint4 *comb, int t, int vecs,
                                                unsigned touched, const float (&own)[U][8])
{
#pragma unroll
    for (int u = 0; u < U; u++) {
        int v = threadIdx.x + u * blockDim.x;
        if (v < vecs)
            store_rank_sum(a, comb, t, v, vecs, touched, own[u]);
    }
}

/* The owner's fixed-order per-rank sum: one block per token (grid-stride). (Per route: kernels/comm/lsa_route_sum.cu.) */
__device__ __forceinline__ void reduce_tokens(const mok_lsa_args &a)
{
    int vecs = a.hidden / 8;
    const uint4 *comb = (const uint4 *)ncclGetLsaPointer((ncclWindow_t)a.window, a.off_comb, a.rank);
    __shared__ token_meta m;
    for (int t = blockIdx.x; t < a.my_tokens; t += gridDim.x) {
        __syncthreads(); /* the previous token's readers of m are done */
        load_token_meta(a, t, &m);
        __syncthreads();
        for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            float own[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            if (m.touched & (1u << a.rank))
                own_partial(a, m, t, v, own);
            add_rank_partials(a, comb, t, v, vecs, m.touched, own, acc);
            store_y_with_shared(a, t, v, vecs, acc);
        }
    }
}
